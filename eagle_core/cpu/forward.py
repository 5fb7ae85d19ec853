"""The CPU decoder: the target's decoder forward on a CPU, the same arithmetic as transformers with less overhead.

Through transformers a decode step of the default model (30 layers) spends almost half its time outside
its products: Python per module, small tensor ops, 7 separate products per layer (docs/performance.md,
"The kernels' choices, measured"). This module runs the same decoder as one loop over the layers:

    RMSNorm -> ONE product [Wq; Wk; Wv] (+ Qwen2's biases) -> RoPE on q and k together, with cos/sin
    from the model's own rotary module -> the engine's cache (its per-layer `update`) -> the model's
    attention function (the engine's row-invariant kernel, SDPA beyond 64 rows) -> o_proj -> residual
    -> RMSNorm -> ONE product [Wgate; Wup] -> silu(gate) * up -> down_proj -> residual; final norm.

It changes nothing the model computes: the mask is transformers' own builder's with the model's
arguments, each small op is transformers', elementwise in the same order, and the fused products
run on the target's kernels (smallgemm: one accumulator per output in a fixed order, so stacking
changes no bit): these torch operations equal transformers bit for bit (tests/test_cpu_decoder.py).

On the engine's path (one sequence of at most 64 rows, its attention kernel and growing cache) each
layer is ONE call into kernels/layer.c, all of the above in C (a layer's ~25 torch operations and 5
kernel calls are a fifth to a third of a step at batch size 1). Its norm and silu are C's: equal to
transformers to float32 rounding, row invariant, so greedy EAGLE still reproduces vanilla exactly.
FastPath(passes="ops") keeps the torch operations; a long prefill always takes them. In the gguf
weight format the products are QuantLinear layers over the GGUF's own blocks (cpu/quant_linear.py),
q/k/v and gate/up stacked alike, which layer.c multiplies through qblocks.c (integer sums per block:
row invariant by construction); `forward_note` says which pass runs there.

`build(target)` decides once per model whether this applies (Llama / Qwen2 / Mistral, CPU float32,
the engine's kernels, no sliding window in effect, the expected modules, no hooks), else returns why;
each call checks what can change after load (`Target.stock_kernels()`, training, hooks, the cache
type, weights edited in place) and otherwise the target runs transformers for that call.
"""
from __future__ import annotations

import importlib
import threading

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.modules import module as _torch_module

from . import kernels
from .kernels import attention, ftuning
from .layer_loop import fused_layers
from .quant_linear import QuantLinear, blocks_in_layers, layer_kinds
from ..target.hf_compat import cache_kwarg
from ..kvcache import GrowingLayer

ARCHS = {"llama": "Llama", "qwen2": "Qwen2", "mistral": "Mistral"}  # model_type -> transformers class prefix
ATTENTIONS = (attention.NAME, "sdpa", "eager")  # attention implementations whose call this module can make


def c_weight_args(norms: tuple, prods: tuple) -> list | None:
    """layer.c's decoder_layer arguments for a layer's weights: (pointer or None, eps) per norm,
    then (packed weight, bias or None) per product; None if a norm or bias is not contiguous
    float32. The pointers stay valid while the layer's tensors and Products live."""
    tensors = [w for w, _ in norms if w is not None] + [p.bias for p in prods if p.bias is not None]
    if not all(t.is_contiguous() and t.dtype is torch.float32 for t in tensors):
        return None
    out = []
    for w, eps in norms:
        out += [None if w is None else w.data_ptr(), float(eps or 0.0)]
    for p in prods:  # a Product's packed panels, or a QuantLinear's packed blocks
        w = p.packed if isinstance(p, QuantLinear) else p.state[0]
        out += [w.data_ptr(), None if p.bias is None else p.bias.data_ptr()]
    return out


def rms_norm(h: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """The Llama RMSNorm of transformers, op for op (float32 in, so its dtype casts are no-ops)."""
    var = h.pow(2).mean(-1, keepdim=True)
    return weight * (h * torch.rsqrt(var + eps))


class Product:
    """y = x W^T (+ b) through one eagle_core.cpu.kernels backend, on a weight prepared once."""

    __slots__ = ("run", "state", "bias", "out_features", "packed")

    def __init__(self, backend, state, bias, out_features: int):
        self.run, self.state, self.bias, self.out_features = backend.run, state, bias, out_features
        self.packed = backend is kernels.SmallGemm  # float32 panels layer.c can read

    def __call__(self, x: torch.Tensor) -> torch.Tensor:  # x (m, K) -> (m, N)
        return self.run(self.state, x if x.is_contiguous() else x.contiguous(), self.bias)


def _fused_backend(installed, parts: list[kernels.Linear], shape: tuple[int, int], own: bool = False) -> str:
    """The backend for the product of the stacked weights of `parts`. smallgemm when they all use
    it (one accumulator per output: stacking changes no bit, and no new calibration) or when `own`
    (the layer runs as one layer.c call, which reads smallgemm's panels); the backend asked for by
    name when the policy names one; else the per-shape choice, measured once."""
    names = {p.backend.name for p in parts}
    if names == {"smallgemm"} or own:
        return "smallgemm"
    if installed.policy in kernels.BACKENDS:
        return installed.policy
    return kernels.choose([shape])[shape]


def stacked_product(installed, parts: list, own: bool = False):
    """One product over the stacked weights of `parts`: a Product, or for QuantLinear parts (the gguf
    format) a QuantLinear over their stacked blocks, called the same way (x (m, K) -> (m, N))."""
    if isinstance(parts[0], QuantLinear):
        return QuantLinear.stacked_modules(parts)
    w = torch.cat([p.weight.detach() for p in parts])  # (sum N, K)
    bias = torch.cat([p.bias.detach() for p in parts]) if parts[0].bias is not None else None
    lin = kernels.linear_of(w, _fused_backend(installed, parts, tuple(w.shape), own))
    lin.prepare()
    return Product(lin.backend, lin._state, bias, w.shape[0])


def own_product(lin, own: bool = False):
    """An unfused product (o_proj, down_proj) on the Linear's own prepared weight (`own`: packed
    for smallgemm, in a copy of its own if the Linear was given another backend); a QuantLinear's
    own blocks."""
    if isinstance(lin, QuantLinear):
        return lin
    if own and lin.backend is not kernels.SmallGemm:
        lin._state, lin._version = None, None  # not read by the CPU decoder: repacked on first use
        return stacked_product(None, [lin], own=True)
    if lin._state is None or lin._version != kernels.weight_version(lin.weight):
        lin.prepare()
    return Product(lin.backend, lin._state, None if lin.bias is None else lin.bias.detach(), lin.out_features)


class _Layer:
    """One decoder layer's weights in the form the CPU decoder uses."""

    __slots__ = ("attn", "ln1", "eps1", "ln2", "eps2", "qkv", "o", "gate_up", "down", "scaling", "c_args", "kinds",
                 "keep")

    def __init__(self, block, installed, own: bool = False, blocks: bool = False):
        a, m = block.self_attn, block.mlp
        self.attn = a  # passed to the attention function (it reads is_causal, GQA groups, training)
        self.ln1, self.eps1 = block.input_layernorm.weight.detach(), block.input_layernorm.variance_epsilon
        self.ln2, self.eps2 = block.post_attention_layernorm.weight.detach(), block.post_attention_layernorm.variance_epsilon
        self.qkv = stacked_product(installed, [a.q_proj, a.k_proj, a.v_proj], own)
        self.o = own_product(a.o_proj, own)
        self.gate_up = stacked_product(installed, [m.gate_proj, m.up_proj], own)
        self.down = own_product(m.down_proj, own)
        self.scaling = a.scaling
        self.kinds, self.keep = 0, ()
        self.c_args = self._c_args(blocks)

    def _c_args(self, blocks: bool) -> list | None:
        """The layer's weights as layer.c's decoder_layer reads them, their storage kinds into `kinds`
        (None: neither all on smallgemm nor, with `blocks`, all on blocks)."""
        prods = (self.qkv, self.o, self.gate_up, self.down)
        if blocks and all(isinstance(p, QuantLinear) and p.packed is not None for p in prods):
            self.kinds, self.keep = layer_kinds(prods), tuple(p.packed for p in prods)  # kept: layer.c reads them
        elif not all(isinstance(p, Product) and p.packed for p in prods):
            return None
        return c_weight_args(((self.ln1, self.eps1), (self.ln2, self.eps2)), prods)


def _projections(block) -> list[nn.Module]:
    a, m = block.self_attn, block.mlp
    return [a.q_proj, a.k_proj, a.v_proj, a.o_proj, m.gate_proj, m.up_proj, m.down_proj]


def has_hooks(mod: nn.Module) -> bool:
    return bool(mod._forward_hooks or mod._forward_pre_hooks)


def _global_hooks() -> bool:
    return bool(getattr(_torch_module, "_global_forward_hooks", None)
                or getattr(_torch_module, "_global_forward_pre_hooks", None))


def unsupported(target) -> str | None:
    """Why the CPU decoder cannot run this target (None: it can)."""
    if not str(target.device).startswith("cpu") or target.dtype is not torch.float32:
        return f"{target.device} {str(target.dtype).replace('torch.', '')} (the CPU decoder: CPU float32 only)"
    fast = target.fast
    if not target.on_kernels:
        return "eagle_core.cpu.kernels not installed"
    if not fast.allows("ops"):
        return f"FastPath(passes={fast.passes!r})"
    cfg, body = target.config, target.body
    prefix = ARCHS.get(getattr(cfg, "model_type", None))
    if prefix is None:
        return f"model type {getattr(cfg, 'model_type', '?')!r}"
    mod = importlib.import_module(f"transformers.models.{cfg.model_type}.modeling_{cfg.model_type}")
    cls = {k: getattr(mod, prefix + k, None) for k in ("Model", "DecoderLayer", "Attention", "MLP", "RMSNorm")}
    if type(body) is not cls["Model"] or type(body.norm) is not cls["RMSNorm"]:
        return f"unexpected module structure ({type(body).__name__})"
    if not isinstance(body.embed_tokens, nn.Embedding) or not hasattr(body, "rotary_emb"):
        return "unexpected module structure (embedding / rotary)"
    if getattr(cfg, "hidden_act", None) != "silu" or not getattr(cfg, "is_causal", True):
        return f"activation {getattr(cfg, 'hidden_act', '?')!r} / non-causal"
    if any(t != "full_attention" for t in (getattr(cfg, "layer_types", None) or ())):
        return "sliding-window (or other non-full) attention layers"
    window = getattr(cfg, "sliding_window", None) if cfg.model_type == "mistral" else None
    if window is not None and window < target.context_limit:
        return f"sliding window {window} in effect (context {target.context_limit})"
    from transformers.activations import SiLUActivation

    for i, block in enumerate(body.layers[: cfg.num_hidden_layers]):
        if (type(block) is not cls["DecoderLayer"] or type(block.self_attn) is not cls["Attention"]
                or type(block.mlp) is not cls["MLP"] or type(block.mlp.act_fn) not in (SiLUActivation, nn.SiLU)
                or type(block.input_layernorm) is not cls["RMSNorm"]
                or type(block.post_attention_layernorm) is not cls["RMSNorm"]):
            return f"unexpected module structure in layer {i}"
        projs = _projections(block)
        if not all(isinstance(p, (kernels.Linear, QuantLinear)) for p in projs):
            return f"layer {i}: a projection does not run on eagle_core.cpu.kernels"
        for group in (projs[:3], projs[4:6]):  # stacked into one product: one kind, one format
            if len({(type(p), getattr(p, "fmt", None)) for p in group}) > 1:
                return f"layer {i}: q/k/v or gate/up in different weight formats"
        if len({p.bias is None for p in projs[:3]}) > 1 or len({p.bias is None for p in projs[4:6]}) > 1:
            return f"layer {i}: biases on only some of q/k/v or gate/up"
        a = block.self_attn
        H, G, d = cfg.num_attention_heads, cfg.num_key_value_heads, a.head_dim
        if (a.q_proj.out_features != H * d or a.k_proj.out_features != G * d or a.v_proj.out_features != G * d
                or a.o_proj.in_features != H * d or H % G or d % 2
                or block.mlp.gate_proj.out_features != block.mlp.up_proj.out_features):
            return f"layer {i}: unexpected projection shapes"
    if any(has_hooks(m) or "forward" in m.__dict__ for m in body.modules()) or _global_hooks():
        return "forward hooks or patched forwards on the model"
    return None


class CpuDecoder:
    """The CPU decoder of one target's decoder body (see the module docstring)."""

    def __init__(self, target):
        self.body, self.config, self.installed = target.body, target.config, target.kernels
        cfg = self.config
        self.blocks = list(self.body.layers[: cfg.num_hidden_layers])
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = self.blocks[0].self_attn.head_dim
        self.inter = self.blocks[0].mlp.gate_proj.out_features
        if cfg.model_type == "mistral" and getattr(cfg, "sliding_window", None) is not None:
            from transformers.masking_utils import create_sliding_window_causal_mask as mask_fn
        else:
            from transformers.masking_utils import create_causal_mask as mask_fn
        self.mask_fn = mask_fn  # the mask builder the model's own forward calls
        mod = importlib.import_module(f"transformers.models.{cfg.model_type}.modeling_{cfg.model_type}")
        self.eager = mod.eager_attention_forward  # the model's default attention function
        from transformers import DynamicCache
        from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

        self._cache_type, self._attention_functions = DynamicCache, ALL_ATTENTION_FUNCTIONS
        # What a call checks: one swapped module (stock_kernels() puts nn.Linear back), hooks added after load.
        self._probe = (self.blocks[0].self_attn, self.blocks[0].self_attn.q_proj)
        self._watched = [self.body, self.body.embed_tokens, self.body.rotary_emb, self.body.norm, *self.blocks]
        # The weights copied into the fused products, repacked when edited (QuantLinear's blocks: read-only).
        self._sources = [t for b in self.blocks for p in _projections(b) if isinstance(p, kernels.Linear)
                         for t in (p.weight, p.bias) if t is not None]
        self._inference = any(t.is_inference() for t in self._sources)  # (no version counter: storage only)
        self._lock = threading.Lock()
        self.c_layers, self.gguf = target.fast.allows("layers"), target.weight_format == "gguf"
        self.c_calls = 0  # forwards run as layer.c calls (tests read it to see which path ran)
        self._pack()
        for b in self.blocks:  # the separate packed forms of q/k/v/gate/up are not read here any more:
            for p in _projections(b)[:3] + _projections(b)[4:6]:  # free them; a transformers-path call
                if isinstance(p, QuantLinear):  # repacks one on first use (kernels.Linear / QuantLinear.forward)
                    p.release()
                else:
                    p._state, p._version = None, None

    @property
    def passes(self) -> str:
        """"layers" (one layer.c call per layer where `_fused_applies`) or "ops" (the torch operations)."""
        return "layers" if self.c_layers and all(L.c_args is not None for L in self.layers) else "ops"

    def _fingerprint(self) -> list:
        """What changes when a source weight is edited in place or given new storage (once per call)."""
        if self._inference:
            return [kernels.weight_version(t) for t in self._sources]
        return [(t.data_ptr(), t._version) for t in self._sources]

    def _pack(self) -> None:
        seen = self._fingerprint()
        own = self.c_layers and kernels.library() is not None and self.installed.policy in ("auto", "smallgemm")
        if own and not self.gguf:  # the float32 products' blocking for this machine (measured once, cached)
            ftuning.ensure(kernels.library(), torch.get_num_threads())
        blocks = self.c_layers and self.gguf and blocks_in_layers()  # layer.c reads the blocks too
        self.layers = [_Layer(b, self.installed, own, blocks) for b in self.blocks]
        self._seen = seen  # last: a concurrent call sees the old fingerprint until the new layers are in

    def _refresh(self) -> None:
        if self._fingerprint() != self._seen:
            with self._lock:
                if self._fingerprint() != self._seen:
                    self._pack()

    def applies(self, input_ids, cache, attention_mask) -> bool:
        """Can this call take the CPU decoder? (Else the target runs transformers for it.)"""
        attn, q = self._probe
        return (attn.q_proj is q and not self.body.training
                and self.config._attn_implementation in ATTENTIONS
                and isinstance(input_ids, torch.Tensor) and input_ids.device.type == "cpu"
                and (cache is None or (isinstance(cache, self._cache_type) and not cache.offloading))
                and (attention_mask is None or (isinstance(attention_mask, torch.Tensor) and attention_mask.dim() in (2, 4)))
                and not any(has_hooks(m) for m in self._watched) and not _global_hooks())

    def forward(self, input_ids, cache=None, position_ids=None, attention_mask=None, capture: tuple[int, ...] = ()):
        """input_ids (B, n) -> (last hidden states after the final norm (B, n, D), [the residual
        stream entering each layer in `capture`, in that order, each (B, n, D)]). Appends n entries
        per layer to `cache` (None: a plain forward without a cache, as for teacher forcing)."""
        self._refresh()
        body, cfg, layers = self.body, self.config, self.layers  # one read: a repack swaps the whole list
        nl = len(layers)
        want = {(i + nl if i < 0 else i): None for i in capture}
        if any(not 0 <= i < nl for i in want):
            raise IndexError(f"capture layers {capture} out of range for {nl} layers")
        h = body.embed_tokens(input_ids)  # (B, n, D)
        B, n, D = h.shape
        if position_ids is None:
            past = cache.get_seq_length() if cache is not None else 0
            position_ids = (torch.arange(n, device=h.device) + past).unsqueeze(0)
        mask = self.mask_fn(config=cfg, inputs_embeds=h, attention_mask=attention_mask, **cache_kwarg(cache),
                            position_ids=position_ids)
        cos, sin = body.rotary_emb(h, position_ids=position_ids)  # (B, n, d) each
        H, G, d, inter = self.heads, self.kv_heads, self.head_dim, self.inter
        half = d // 2
        # rotate_half(x) * sin == roll(x, d/2) * [-sin_lo, sin_hi], exactly: (-a) * b == a * (-b)
        cos = cos.unsqueeze(2)  # (B, n, 1, d): broadcasts over the q and k heads
        sin = torch.cat((-sin[..., :half], sin[..., half:]), dim=-1).unsqueeze(2)
        if self._fused_applies(layers, B, n, cache, mask, want):
            h = self._fused(layers, h, cache, mask, cos, sin, want)
            h = rms_norm(h, body.norm.weight.detach(), body.norm.variance_epsilon)
            return h, [want[i + nl if i < 0 else i] for i in capture]
        attend = self._attention_functions.get_interface(cfg._attn_implementation, self.eager)
        m = B * n
        for i, L in enumerate(layers):
            if i in want:
                want[i] = h
            x = rms_norm(h, L.ln1, L.eps1).view(m, D)
            qkv = L.qkv(x).view(B, n, H + 2 * G, d)
            qk = qkv[:, :, : H + G]
            qk = qk * cos + qk.roll(half, dims=-1) * sin  # RoPE on q and k at once, (B, n, H + G, d)
            q = qk[:, :, :H].transpose(1, 2)  # (B, H, n, d)
            k = qk[:, :, H:].transpose(1, 2)  # (B, G, n, d)
            v = qkv[:, :, H + G:].transpose(1, 2)
            if cache is not None:
                k, v = cache.update(k, v, i)  # the engine's GrowingLayer: (B, G, L, d) views
            out, _ = attend(L.attn, q, k, v, mask, dropout=0.0, scaling=L.scaling)  # (B, n, H, d)
            h = h + L.o(out.reshape(m, H * d)).view(B, n, D)
            x = rms_norm(h, L.ln2, L.eps2).view(m, D)
            gu = L.gate_up(x)  # (m, 2I): [gate | up]
            h = h + L.down(F.silu(gu[:, :inter]) * gu[:, inter:]).view(B, n, D)
        h = rms_norm(h, body.norm.weight.detach(), body.norm.variance_epsilon)
        return h, [want[i + nl if i < 0 else i] for i in capture]

    def _fused_applies(self, layers, B, n, cache, mask, want) -> bool:
        """Can this call run each layer as one layer.c call? One sequence of at most attention.MAX_ROWS
        rows (not a long prefill), the engine's attention and growing cache, a mask layer.c reads (none:
        causal, or the engine's (1, 1, n, L) tree mask), every layer's products on smallgemm or blocks."""
        if (B != 1 or n > attention.MAX_ROWS or cache is None or not self.c_layers
                or self.config._attn_implementation != attention.NAME or kernels.library() is None):
            return False
        if any(type(lc) is not GrowingLayer for lc in cache.layers[: len(layers)]):
            return False
        if mask is not None and not (isinstance(mask, torch.Tensor) and mask.dim() == 4
                                     and mask.shape[:3] == (1, 1, n) and mask.shape[3] == cache.get_seq_length() + n):
            return False
        return all(L.c_args is not None for L in layers)

    def _fused(self, layers, h, cache, mask, cos, sin, want) -> torch.Tensor:
        """The layers through layer.c (layer_loop.fused_layers): h (1, n, D) -> the last layer's output
        (before the final norm); the residual stream entering layer i copied into want[i]."""
        self.c_calls += 1
        return fused_layers(self, layers, h, cache, mask, cos, sin, want)


def build(target) -> tuple[CpuDecoder | None, str, str]:
    """-> (the CPU decoder or None, "cpu" or "transformers", why the transformers path)."""
    reason = unsupported(target)
    if reason is not None:
        return None, "transformers", reason
    decoder = CpuDecoder(target)  # forward_note: in the gguf format, the pass that runs ("" in float32)
    note = {"layers": "one layer.c call per layer, products from the blocks", "ops": "ops pass"}[decoder.passes]
    return decoder, "cpu", note if target.weight_format == "gguf" else ""
