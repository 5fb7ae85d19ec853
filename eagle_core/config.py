"""Decoding settings, their validation, and named presets.

One frozen dataclass holds everything a generation needs to know besides the prompt; the CLI,
the benchmark and the app all build one of these and call `validate()` before decoding, so a
bad value becomes one clear ValueError instead of a crash deep in the decode loop.
"""
from __future__ import annotations

import argparse
from dataclasses import asdict, dataclass, replace

METHODS = ("eagle2", "eagle3", "eagle1", "chain", "vanilla")
METHOD_LABELS = {
    "eagle2": "EAGLE-2 dynamic tree",
    "eagle3": "EAGLE-3 (fused target layers, dynamic tree)",
    "eagle1": "EAGLE-1 static tree",
    "chain": "chain (one draft per step)",
    "vanilla": "vanilla (no drafting)",
}

# EAGLE-1 static tree: each entry is a path of ranks among the parent's top-k draft tokens, e.g.
# (0, 1) = "the head's 2nd choice after its 1st choice". The official code's default tree
# (`mc_sim_7b_63` in its choices.py, which the EAGLE-1 paper uses): 25 draft nodes, 4/8/8/3/2 per
# depth, + the root = 26 tokens verified per cycle.
EAGLE1_TREE: tuple[tuple[int, ...], ...] = (
    (0,), (1,), (2,), (3,),
    (0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (2, 0), (2, 1), (3, 0),
    (0, 0, 0), (0, 0, 1), (0, 0, 2), (0, 1, 0), (0, 1, 1), (0, 2, 0), (0, 2, 1), (1, 0, 0),
    (0, 0, 0, 0), (0, 0, 0, 1), (0, 0, 0, 2),
    (0, 0, 0, 0, 0), (0, 0, 0, 0, 1),
)

# Sane ranges: wide enough for every published setting, narrow enough that a typo cannot ask
# the target to verify a 10,000-node tree.
MAX_DEPTH = 16
MAX_TREE_TOP_K = 32
MAX_TOTAL_TOKENS = 256
MAX_CHAIN = 16
MAX_SEED = 2 ** 63  # torch.Generator.manual_seed takes a 64-bit integer


@dataclass(frozen=True)
class DecodeSettings:
    method: str = "eagle2"  # one of METHODS
    max_new_tokens: int = 128  # stop after this many generated tokens
    # EAGLE-2 dynamic tree (arXiv:2406.16858; EAGLE-3 drafts the same tree): `depth` expansion steps, `tree_top_k` children per
    # node and frontier width, keep the best `total_tokens` draft nodes (root not counted).
    depth: int = 4
    tree_top_k: int = 4
    total_tokens: int = 12
    # chain drafting: `chain_length` tokens, one per head step
    chain_length: int = 4
    # EAGLE-1 static tree as rank paths
    static_tree: tuple[tuple[int, ...], ...] = EAGLE1_TREE
    # sampling; temperature 0 = greedy (then top_p / top_k are unused)
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0  # 0 = no top-k filter
    seed: int = 0
    chat_template: bool = True  # wrap the prompt as a user turn of the model's chat template

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def with_(self, **kw) -> "DecodeSettings":
        return replace(self, **kw)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["static_tree"] = [list(p) for p in self.static_tree]
        return d

    def validate(self, context_limit: int | None = None) -> "DecodeSettings":
        """Raise ValueError with a user-readable message if any setting is out of range."""
        if self.method not in METHODS:
            raise ValueError(f"unknown method {self.method!r}; choose one of {', '.join(METHODS)}")
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be an integer >= 1 (got {self.max_new_tokens!r})")
        if context_limit is not None and self.max_new_tokens > context_limit:
            raise ValueError(
                f"max_new_tokens={self.max_new_tokens} exceeds the model's context of {context_limit} tokens"
            )
        if not (1 <= self.depth <= MAX_DEPTH):
            raise ValueError(f"depth must be between 1 and {MAX_DEPTH} (got {self.depth})")
        if not (1 <= self.tree_top_k <= MAX_TREE_TOP_K):
            raise ValueError(f"tree top_k must be between 1 and {MAX_TREE_TOP_K} (got {self.tree_top_k})")
        if not (1 <= self.total_tokens <= MAX_TOTAL_TOKENS):
            raise ValueError(f"total_tokens must be between 1 and {MAX_TOTAL_TOKENS} (got {self.total_tokens})")
        if not (1 <= self.chain_length <= MAX_CHAIN):
            raise ValueError(f"chain_length must be between 1 and {MAX_CHAIN} (got {self.chain_length})")
        if not self.static_tree or len(self.static_tree) > MAX_TOTAL_TOKENS:
            raise ValueError(f"the static tree needs 1 to {MAX_TOTAL_TOKENS} paths")
        paths = set(map(tuple, self.static_tree))
        for path in paths:
            if any(r < 0 or r >= MAX_TREE_TOP_K for r in path) or len(path) > MAX_DEPTH:
                raise ValueError(f"static tree path {path} has a rank outside 0..{MAX_TREE_TOP_K - 1}")
            if len(path) > 1 and path[:-1] not in paths:
                raise ValueError(f"static tree path {path} has no parent path {path[:-1]}")
        if not (self.temperature >= 0.0) or self.temperature > 100:
            raise ValueError(f"temperature must be >= 0 (got {self.temperature})")
        if not (0.0 < self.top_p <= 1.0):
            raise ValueError(f"top_p must be in (0, 1] (got {self.top_p})")
        if not isinstance(self.top_k, int) or self.top_k < 0:
            raise ValueError(f"top_k must be an integer >= 0 (got {self.top_k!r}); 0 disables it")
        if not isinstance(self.seed, int) or not 0 <= self.seed < MAX_SEED:
            raise ValueError(f"seed must be an integer between 0 and 2^63 (got {self.seed!r})")
        return self


# Named presets. "cpu" is the tree a 2-core CPU decodes fastest among trees a person can read (7+
# drafts), for both shipped heads, and the one the page opens with there (docs/performance.md, "The
# page's default tree, rows past 12 and the CPU peer"); "explain" is a bigger tree to read; "gpu" is
# the published EAGLE-2 default (total_token=60: 59 drafts + the root, depth 6, top_k 10).
PRESETS: dict[str, dict] = {
    "cpu": dict(depth=4, tree_top_k=2, total_tokens=7),
    "explain": dict(depth=4, tree_top_k=4, total_tokens=12),
    "small": dict(depth=3, tree_top_k=4, total_tokens=8),
    "gpu": dict(depth=6, tree_top_k=10, total_tokens=59),  # official total_token=60: 59 drafts + the root
}


def preset(name: str, **overrides) -> DecodeSettings:
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
    return DecodeSettings(**{**PRESETS[name], **overrides})


def default_preset(device) -> str:
    """The tree preset a device decodes with unless told otherwise: "gpu" on CUDA, "cpu" elsewhere.
    The one default every command line uses (`--tree`)."""
    return "gpu" if str(device).startswith("cuda") else "cpu"


@dataclass(frozen=True)
class TreeSetting:
    """One EAGLE-2 tree shape, in the order DecodeSettings lists it: depth, width, total_tokens.
    `width` is DecodeSettings.tree_top_k (children per node and frontier width), not sampling's top_k."""

    depth: int
    width: int
    total_tokens: int  # draft nodes kept (root not counted): the target verifies total_tokens + 1

    @property
    def label(self) -> str:
        return f"d{self.depth}/k{self.width}/t{self.total_tokens}"

    @property
    def text(self) -> str:
        """"6,10,60": what parse_tree reads back."""
        return f"{self.depth},{self.width},{self.total_tokens}"

    def fields(self) -> dict:
        """This tree as DecodeSettings fields."""
        return dict(depth=self.depth, tree_top_k=self.width, total_tokens=self.total_tokens)

    def settings(self, method: str = "eagle2", **kw) -> DecodeSettings:
        """This tree for `method` (eagle2, or eagle3: the EAGLE-3 head drafting the same dynamic tree)."""
        return DecodeSettings(method=method, **self.fields(), **kw)


TREE_SYNTAX = f"depth,width,total_tokens (e.g. 6,10,60) or a preset name ({', '.join(PRESETS)})"


def parse_tree(text: str) -> TreeSetting:
    """"6,10,60" -> TreeSetting(depth=6, width=10, total_tokens=60), or a preset name ("cpu") ->
    that preset's tree: what every command line of this project reads for a tree (`--tree`)."""
    name = text.strip()
    if name in PRESETS:
        p = PRESETS[name]
        return TreeSetting(p["depth"], p["tree_top_k"], p["total_tokens"])
    parts = [p.strip() for p in name.split(",")]
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        raise ValueError(f"a tree is depth,top_k,total_tokens with top_k the tree's width (DecodeSettings.tree_top_k), "
                         f"e.g. 6,10,60, or a preset name ({', '.join(PRESETS)}) (got {text!r})")
    return TreeSetting(*map(int, parts))


def parse_trees(texts) -> tuple[TreeSetting, ...]:
    """Several trees, each as parse_tree reads it."""
    return tuple(parse_tree(t) for t in texts)


def default_tree(device) -> TreeSetting:
    """The tree of the device's default preset (default_preset)."""
    return parse_tree(default_preset(device))


def add_tree_argument(parser, multiple: bool = False, default=None) -> None:
    """The `--tree` flag of every command line: one tree (`--tree 2,2,4`), or with `multiple`
    several (`--tree 2,2,4 6,10,60`); each D,K,T or a preset name. `default` None: the device's
    default preset (the tool resolves it with default_tree once it knows the device)."""
    def tree_type(text):
        try:
            return parse_tree(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from None

    what = "EAGLE-2 trees (EAGLE-3 drafts the same), each" if multiple else "the EAGLE-2 tree (EAGLE-3 drafts the same):"
    dflt = "the device's preset: cpu on a CPU, gpu on CUDA" if default is None else \
        " ".join(t.text for t in (default if multiple else [default]))
    parser.add_argument("--tree", nargs="+" if multiple else None, type=tree_type, default=default, metavar="D,K,T",
                        # "%(default).0s" prints nothing: it keeps ArgumentDefaultsHelpFormatter from adding the repr
                        help=f"{what} {TREE_SYNTAX}; default: {dflt}%(default).0s")


def add_weights_argument(parser) -> None:
    """--weights auto|float32|gguf (FastPath.weights), shared by this CLI and the benchmark's."""
    parser.add_argument("--weights", default="auto", choices=("auto", "float32", "gguf"),
                        help="the target's products: auto (the default: gguf where the default model's file and "
                             "qblocks.c's AVX2 / VNNI path are here on a CPU, else float32; eagle_core/cpu/"
                             "auto_format.py), float32 (the GGUF converted once) or gguf (the file's own Q4_1 / "
                             "Q8_0 blocks, default model on a CPU only; greedy EAGLE equals greedy vanilla within a "
                             "format, not float32's tokens everywhere)")


def weights_from_args(a, device=None):
    """What --weights stands for here (eagle_core.cpu.auto_format.WeightsChoice): auto resolved with the
    command's --model, --dtype and `device` (the device it will load on), an explicit format as asked."""
    from .cpu.auto_format import resolve

    return resolve(getattr(a, "weights", "auto"), getattr(a, "model", None), device or getattr(a, "device", None),
                   getattr(a, "dtype", None))


def fast_from_args(a, choice=None):
    """The FastPath the --weights option asks for (None: the default, float32). `choice`: the
    weights_from_args answer already had (else resolved here)."""
    choice = choice or weights_from_args(a)
    if choice.weights == "float32":
        return None
    from .cpu.options import FastPath

    return replace(FastPath.default(), weights=choice.weights)  # ValueError on the portable path
