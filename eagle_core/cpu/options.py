"""How an engine uses the CPU fast path: one options object, decided once when the target loads.

    load_engine(fast=FastPath(...))   load_target(..., fast=...)   from_model(..., fast=...)

The defaults are what ships. The other values exist for the equality tests, which run one model
down two paths and compare the bits, and for A/B timing (docs/performance.md, "The engine's CPU kernels").
`EAGLE_PORTABLE=1` in the environment is the one switch left: the portable path everywhere (stock
torch modules, no C kernel at all), as on a GPU, to rule the fast path in or out while debugging.
"""
from __future__ import annotations

from dataclasses import dataclass

from .kernels import attention as _attention, compact as _compact, rows as _rows
from .kernels.build import PORTABLE_ENV, library as _library, portable_forced

PASSES = ("fused", "layers", "ops", "modules")  # deepest first
DRAFT_ROWS = ("int8", "float16", "float32")
HEAD_WEIGHTS = ("int8", "as loaded")
WEIGHTS = ("float32", "gguf")


@dataclass(frozen=True)
class FastPath:
    """kernels       the target's (and heads') float32 linear layers: "auto" (a batch-invariant backend
                  measured per shape, cached per machine), a backend name (smallgemm, onednn, openblas,
                  mkl), or "stock" (nn.Linear as loaded: the portable path, and nothing below applies)
    passes        how far the passes are fused: "fused" (a drafting pass is one kernel call),
                  "layers" (one layer.c call per decoder layer), "ops" (the same arithmetic as a few
                  torch operations per layer), "modules" (transformers and the head's own modules)
    draft_rows    a reduced draft vocabulary's LM-head rows: "int8" (a scale per row), "float16", "float32"
    head_weights  the head's own products: "int8" (a scale per row) or "as loaded"
    weights       the target's products: "float32" (the GGUF converted once, as the engine always ran) or
                  "gguf" (the file's own Q4_1 / Q8_0 blocks through kernels/qblocks.c, cpu/quant_linear.py;
                  greedy EAGLE equals greedy vanilla in that format, not float32's tokens everywhere).
                  The target's decoder runs the passes asked in both (layer.c multiplies from the blocks
                  through qblocks.c); the draft head's products stay float32 or int8 rows
    Verification reads the target's own weights on every path, so the output never depends on these;
    int8 rows move the draft's q by their rounding (docs/performance.md, "Drafting from int8 weights")."""

    kernels: str = "auto"
    passes: str = "fused"
    draft_rows: str = "int8"
    head_weights: str = "int8"
    weights: str = "float32"

    def __post_init__(self):
        for name, allowed in (("passes", PASSES), ("draft_rows", DRAFT_ROWS), ("head_weights", HEAD_WEIGHTS),
                              ("weights", WEIGHTS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"FastPath.{name} must be one of {', '.join(allowed)}; got {getattr(self, name)!r}")
        if self.weights == "gguf" and not self.calls_library:
            raise ValueError("the gguf weight format multiplies through the engine's C kernels (qblocks.c); the "
                             "portable path (FastPath(kernels=\"stock\"), EAGLE_PORTABLE=1) has none: use float32")

    @classmethod
    def default(cls) -> "FastPath":
        """What an engine gets when no options are given: the shipped defaults, or the portable path
        where EAGLE_PORTABLE=1."""
        return cls.portable() if portable_forced() else cls()

    @classmethod
    def portable(cls) -> "FastPath":
        return cls(kernels="stock", passes="modules", draft_rows="float32", head_weights="as loaded")

    @property
    def calls_library(self) -> bool:
        """May this path call the C library at all? Never on the portable path (kernels="stock"), whatever
        the library's state: a target on another device gets the portable path (target/model.py)."""
        return self.kernels != "stock"

    def library(self):
        """The C library as this path sees it: None on the portable path (never built nor loaded there),
        else the compiled library or None (the reason in kernels.library_error())."""
        return _library() if self.calls_library else None

    # -- the cycle's small C calls, made only through here. Each answers None (False) where it does not
    # serve (the portable path, another device or dtype, no library) and the caller computes the same
    # with torch. The kernels look at the tensors' device before they look for the library.
    def row_stats(self, rows):
        """The acceptance walk's max, argmax and logsumexp per row (kernels/rows.c), or None."""
        return _rows.row_stats(rows) if self.calls_library else None

    def row_topk(self, rows, k: int):
        """The drafter's k best log-softmax values per row and their indices (kernels/rows.c), or None."""
        return _rows.row_topk(rows, k) if self.calls_library else None

    def move_rows(self, layers, context: int, keep: list[int]) -> bool:
        """The target's KV cache compacted to the accepted path in one call (kernels/compact.c); False:
        nothing moved."""
        return self.calls_library and _compact.move_rows(layers, context, keep)

    def attend_cache(self, q, cache, length: int, mask):
        """A draft head's attention through its cache (kernels/attention.c): q (1, H, n, d) -> (1, H, n,
        d), or None. `cache`: the head's LayerCache, `length` entries valid."""
        if not (self.calls_library and _attention.serves_cache(q, cache.k, mask)):
            return None
        return _attention.attend_cache(q[0].contiguous(), cache.k[0], cache.v[0], length, mask).transpose(0, 1)[None]

    def allows(self, passes: str) -> bool:
        """Whether the passes may go as far as `passes` ("fused", "layers", "ops")."""
        return self.kernels != "stock" and PASSES.index(self.passes) <= PASSES.index(passes)


__all__ = ["FastPath", "PASSES", "PORTABLE_ENV", "WEIGHTS"]
