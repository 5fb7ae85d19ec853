"""The head pass: a drafting pass of the draft head on a CPU: the head's arithmetic in a few calls.

A drafting cycle runs the head twice (a catch-up on the accepted tokens, then one expansion per
tree depth), each on one or two rows. Through its modules most of a pass is not the head's eight
products but ~60 small tensor operations, module calls, SDPA's set-up and its copy of the cache's
keys and values to every query head (docs/performance.md, "The engine's CPU kernels"). This pass runs the same
layer as:

    (EAGLE-1/2) h = fc(cat(emb, f))  (EAGLE-3) x = cat(norm(emb), norm(h)), h or norm(h) as residual
    ONE product [Wq; Wk; Wv] -> RoPE on q and k together, from a table of the head's own cos/sin
    -> k, v written into the head cache -> the engine's attention kernel (kernels/attention.c: no
    copy per query head, masked keys skipped) -> o_proj -> residual -> RMSNorm -> ONE product
    [Wgate; Wup] -> silu(gate) * up -> down_proj -> residual

Every operation is the one the modules run, elementwise in the same order, and the fused products
go through smallgemm (one accumulator per output in a fixed order, so stacking changes no bit).
Drafting with a cache on a CPU in float32 takes this attention kernel in the modules too
(drafting/head_layers.py, AttentionBlock.attend), so these torch operations equal the module pass bit for bit
(tests/test_head_pass.py). Training never has a cache and keeps SDPA.

Where every product of a layer is on smallgemm (float32 or float16 panels), the layer from the
q/k/v product to the last residual is ONE call into kernels/layer.c, as in the target's CPU
forward (eagle_core/cpu/forward.py): the same trees, q values equal to float32 rounding (its norm and
silu are computed in C). FastPath(passes="ops") keeps the torch operations.

`build(head)` returns None, with the reason, when the pass does not apply (another device or
dtype, the head's products not on eagle_core.cpu.kernels, hooks, FastPath(passes="modules")); a call checks the few things
that can change after load and otherwise returns None so the drafter runs the modules.
"""
from __future__ import annotations

from types import SimpleNamespace

import torch
import torch.nn.functional as F

from . import kernels
from ..drafting.head import EagleHead
from ..drafting.head3 import Eagle3Head
from .kernels import attention
from .forward import Product, c_weight_args, has_hooks, own_product, stacked_product
from .layer_loop import c_layer
from .forward import rms_norm as _rms  # head_layers.RMSNorm on float32, op for op


def _product(installed, parts):
    """The product with the stacked weights (and biases) of `parts`: from float16 storage where
    every weight is a float16 (a head read from its float16 checkpoint: the same bits from half the
    bytes, kernels.SmallGemm16), else as the target's CPU decoder makes it."""
    w = torch.cat([p.weight.detach() for p in parts])
    if all(p.backend is kernels.SmallGemm8 for p in parts):  # int8 rows, quantized per row as in each part
        storage = kernels.SmallGemm8
    elif kernels.SmallGemm16.exact(w):
        storage = kernels.SmallGemm16
    else:
        return stacked_product(installed, parts) if len(parts) > 1 else own_product(parts[0])
    bias = torch.cat([p.bias.detach() for p in parts]) if parts[0].bias is not None else None
    return Product(storage, storage.prepare(w), bias, w.shape[0])


class _HeadLayer:
    """One decoder layer of a head in the head pass's form: fused products, norm weights, sizes."""

    __slots__ = ("pre", "pre_eps", "post", "eps", "qkv", "o", "gate_up", "down", "H", "G", "d", "inter", "c_args")

    def __init__(self, layer, installed):
        a, m = layer.self_attn, layer.mlp
        pre = getattr(layer, "input_layernorm", None)
        self.pre = None if pre is None else pre.weight.detach()  # (EAGLE-3's midlayer: HeadPass reads its own)
        self.pre_eps = None if pre is None else pre.eps
        self.post = layer.post_attention_layernorm.weight.detach()
        self.eps = layer.post_attention_layernorm.eps
        self.qkv = _product(installed, [a.q_proj, a.k_proj, a.v_proj])
        self.o, self.down = _product(installed, [a.o_proj]), _product(installed, [m.down_proj])
        self.gate_up = _product(installed, [m.gate_proj, m.up_proj])
        self.H, self.G, self.d, self.inter = layer.n_heads, layer.n_kv, layer.d, m.gate_proj.out_features
        self.c_args = self._c_args()

    def _c_args(self) -> tuple | None:
        """The layer as kernels/layer.c's decoder_layer reads it: its norms and the packed weights
        (all four float16 panels, all four float32 or all four int8), then the flag saying which
        (1, 0, 2); None if none of these."""
        prods = (self.qkv, self.o, self.gate_up, self.down)
        half = all(p.run is kernels.SmallGemm16.run for p in prods)
        int8 = all(p.run is kernels.SmallGemm8.run for p in prods)
        if not (half or int8 or all(p.packed for p in prods)):
            return None
        args = c_weight_args(((self.pre, self.pre_eps), (self.post, self.eps)), prods)
        return None if args is None else (args, 2 if int8 else int(half))


def _layers(head) -> list:
    return list(head.layers) if isinstance(head, EagleHead) else [head.midlayer]


def products(head) -> list:
    """The head's products, each an nn.Linear or kernels.Linear: fc, then each layer's seven."""
    mods = [head.fc]  # EAGLE-1/2: cat(emb, f) -> H; EAGLE-3: the captured target layers (3H) -> H
    for L in _layers(head):
        a, m = L.self_attn, L.mlp
        mods += [a.q_proj, a.k_proj, a.v_proj, a.o_proj, m.gate_proj, m.up_proj, m.down_proj]
    return mods


def unsupported(head, fast) -> str | None:
    """Why the head pass cannot run this head under the options `fast` (None: it can)."""
    if not isinstance(head, (EagleHead, Eagle3Head)):
        return f"head type {type(head).__name__}"
    if kernels.library() is None:
        return "eagle_core.cpu.kernels not built"
    params = list(head.parameters())
    if any(p.device.type != "cpu" or p.dtype is not torch.float32 for p in params):
        return "head pass: CPU float32 only"
    prods = products(head)
    if not all(isinstance(p, kernels.Linear) for p in prods):  # (the pass packs its own smallgemm panels)
        return "the head's products are not on eagle_core.cpu.kernels (smallgemm)"
    for L in _layers(head):
        a = L.self_attn
        if len({p.bias is None for p in (a.q_proj, a.k_proj, a.v_proj)}) > 1 or L.d % 8 or L.n_heads % L.n_kv:
            return "unexpected head layer shapes"
    if any(has_hooks(m) or "forward" in m.__dict__ for m in head.modules()):
        return "forward hooks or patched forwards on the head"
    if not fast.allows("ops"):
        return f"FastPath(passes={fast.passes!r})"
    return None


class HeadPass:
    """The drafting pass of one head on a CPU (see the module docstring). What a call reads (the packed
    weights, the RoPE tables) is replaced whole, never edited, so a call running beside a repack
    sees one consistent version."""

    def __init__(self, head, c_layers: bool = True):
        self.head = head
        self.eagle3 = isinstance(head, Eagle3Head)
        self.installed = kernels.Installed([], {}, "smallgemm")  # what forward.stacked_product reads: the policy
        self._sources = [t for p in products(head) for t in (p.weight, p.bias) if t is not None]
        self._modules = tuple(head.modules())  # whose hooks a call checks (kept: walking the tree each call costs more)
        self._packed, self._seen = self._pack(), self._fingerprint()
        self._rope = None  # (cos, sin) tables by position, grown on demand (rope_rows)
        self.c_layers = c_layers  # each layer as one layer.c call where it can be
        self.c_calls = 0  # layers run as layer.c calls (tests read it to see which path ran)

    def _fingerprint(self) -> list:
        return [kernels.weight_version(t) for t in self._sources]

    def _pack(self) -> SimpleNamespace:
        head, inst = self.head, self.installed
        packed = SimpleNamespace(layers=[_HeadLayer(L, inst) for L in _layers(head)], fc=_product(inst, [head.fc]))
        if self.eagle3:
            m = head.midlayer
            packed.emb_norm = (m.input_layernorm.weight.detach(), m.input_layernorm.eps)
            packed.hidden_norm = (m.hidden_norm.weight.detach(), m.hidden_norm.eps)
            packed.norm_before_residual = m.norm_before_residual
        return packed

    def packed(self) -> SimpleNamespace:
        """The packed weights, repacked first if a source weight was edited in place or replaced."""
        seen = self._fingerprint()
        if seen != self._seen:
            self._packed, self._seen = self._pack(), seen
        return self._packed

    @property
    def layers(self) -> list:
        return self.packed().layers

    @property
    def fc(self):
        return self.packed().fc

    def rope_rows(self, positions: torch.Tensor, capacity: int) -> tuple[torch.Tensor, torch.Tensor]:
        """cos (n, 1, d) and sin with its first half negated (n, 1, d), rows of tables made by the
        head's own `rope` (each row has the bits head.rope gives for that position alone). The
        tables cover twice the head cache's capacity: a committed row sits below it and a draft
        node at most a tree depth above the committed ones, so no position is read to the host."""
        cos, sin = self.rope_tables(capacity)
        return cos[positions][:, None], sin[positions][:, None]

    def rope_tables(self, capacity: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The whole tables rope_rows reads from: cos and sin' (N, d), N >= 2 * capacity, contiguous."""
        rope = self._rope
        if rope is None or rope[0].shape[0] < 2 * capacity:
            cos, sin = self.head.rope(torch.arange(2 * capacity), torch.float32, torch.device("cpu"))
            half = cos.shape[-1] // 2
            rope = self._rope = (cos.contiguous(), torch.cat((-sin[:, :half], sin[:, half:]), dim=-1).contiguous())
        return rope

    def fuse(self, feats: torch.Tensor) -> torch.Tensor:
        """EAGLE-3: (m, 3H) the target's captured layer inputs -> (m, H), as head.fuse."""
        return self.packed().fc(feats)

    def applies(self, x: torch.Tensor) -> bool:
        return (x.device.type == "cpu" and x.dtype is torch.float32 and not self.head.training
                and not torch.is_grad_enabled()
                and not any(has_hooks(m) for m in self._modules))

    def __call__(self, emb, feats, positions, cache, mask=None) -> torch.Tensor:
        """emb (n, H) token embeddings; feats (n, H) features (EAGLE-3: fused or its own output);
        positions (n,); cache: the head's HeadCache; mask (n, cache.length + n) bool or None
        (causal). -> (n, H), what the head's forward returns for these rows."""
        p = self.packed()
        cos, sin = self.rope_rows(positions, cache.layers[0].k.shape[2])
        if self.eagle3:
            hn = _rms(feats, *p.hidden_norm)
            x = torch.cat((_rms(emb, *p.emb_norm), hn), dim=-1)
            res = hn if p.norm_before_residual else feats
            own = res if p.norm_before_residual else res.clone()  # (layer.c updates it in place; feats is the caller's)
            out = self._c_layer(p.layers[0], own.contiguous(), x, cos, sin, cache.layers[0], mask)
            return out if out is not None else self._layer(p.layers[0], res, x, cos, sin, cache.layers[0], mask)
        h = p.fc(torch.cat((emb, feats), dim=-1))
        for i, L in enumerate(p.layers):
            out = self._c_layer(L, h.contiguous(), None, cos, sin, cache.layers[i], mask)
            if out is None:
                x = h if L.pre is None else _rms(h, L.pre, L.pre_eps)
                out = self._layer(L, h, x, cos, sin, cache.layers[i], mask)
            h = out
        return h

    def _c_layer(self, L: _HeadLayer, h, x, cos, sin, lc, mask) -> torch.Tensor | None:
        """The layer as one layer.c call (None: not on this path). h (n, H) is the residual and is
        updated in place (the caller passes a tensor of its own); x None: the layer's input norm of h
        (or h itself without one), else the (n, K) input of the q/k/v product."""
        if L.c_args is None or not self.c_layers or kernels.library() is None:
            return None
        (args, half), (n, D) = L.c_args, h.shape
        if x is not None:  # the input is given (EAGLE-3: its midlayer's input norm is read outside)
            args = [None, 0.0, *args[2:]]
        start, cap = lc.length, lc.k.shape[2]
        if start + n > cap:
            raise ValueError(f"head cache full ({cap} positions)")
        if mask is not None:
            mask = attention.additive(mask).contiguous()
        cos, sin = cos.reshape(n, -1).contiguous(), sin.reshape(n, -1).contiguous()
        c_layer(h, n, D, L.H, L.G, L.d, L.inter, args, cos, sin, lc.k, lc.v, start, mask, L.d ** -0.5,
                None if x is None else x.contiguous(), half)
        lc.length = start + n
        self.c_calls += 1
        return h

    @staticmethod
    def _layer(L: _HeadLayer, h, x, cos, sin, lc, mask) -> torch.Tensor:
        """h (n, H) the residual, x (n, K) the product input -> the layer's output (n, H)."""
        n, H, G, d = x.shape[0], L.H, L.G, L.d
        qkv = L.qkv(x).view(n, H + 2 * G, d)
        qk = qkv[:, : H + G]
        qk = qk * cos + qk.roll(d // 2, dims=-1) * sin  # RoPE on q and k at once: (n, H + G, d)
        start = lc.length
        lc.append(qk[:, H:].transpose(0, 1)[None], qkv[:, H + G:].transpose(0, 1)[None])
        q = qk[:, :H].transpose(0, 1).contiguous()  # (H, n, d)
        out = attention.attend_cache(q, lc.k[0], lc.v[0], start + n, mask)  # (n, H, d)
        h = h + L.o(out.view(n, H * d))
        gu = L.gate_up(_rms(h, L.post, L.eps))
        return h + L.down(F.silu(gu[:, : L.inter]) * gu[:, L.inter:])


def build(head, fast) -> tuple[HeadPass | None, str]:
    """-> (the head pass or None, why not), under the options `fast` (cpu/options.py)."""
    reason = unsupported(head, fast)
    return (None, reason) if reason is not None else (HeadPass(head, fast.allows("layers")), "")
