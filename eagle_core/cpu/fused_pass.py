"""A drafting pass as ONE kernel call on a CPU (kernels/layer.c: head_pass, lm_top).

A drafting cycle on the CPU tree is two head passes and two draft LM heads. Through the head pass
(eagle_core/cpu/head_pass.py) each pass is still ~30 torch operations and five kernel calls, and they
run right after a verification has streamed the target's ~540 MB of weights through the caches:
every Python and torch step then meets its code and data cold. Here a pass is the embedding rows,
the head's input (EAGLE-1/2: cat and fc; EAGLE-3: fc over the captured layers on a catch-up, the
two input norms), the decoder layer, the draft LM head, its top k and the ids in one call, and the
root's top k a second. For EAGLE-1/2 every step is the operation the head pass makes, through the
same kernels, so the drafts and their q are the same bits; EAGLE-3's norms are computed in C, equal
to torch's to float32 rounding, as the head pass's layer.c already does for the layer's own norm
(tests/test_draft_fused.py). Only the cost changes (docs/performance.md).

It applies where the head pass runs a one-layer head as one layer.c call and the draft LM head is on
eagle_core.cpu.kernels' own storages; elsewhere (other devices, other backends, hooks, several layers)
`build` returns None and the drafter takes the head pass; so does FastPath(passes="layers").
"""
from __future__ import annotations

import ctypes

import torch

from . import kernels
from .forward import has_hooks

_KIND = {kernels.SmallGemm.run: 0, kernels.SmallGemm16.run: 1, kernels.SmallGemm8.run: 2}
_ERRORS = {-1: "out of memory", -2: "a token id outside the embedding table", -3: "a position outside the RoPE tables"}


class _HeadPassArgs(ctypes.Structure):
    """layer.c's HeadPass, field for field."""
    _fields_ = [("embed", ctypes.c_void_p), ("vocab", ctypes.c_int64), ("D", ctypes.c_int64), ("H", ctypes.c_int64),
                ("G", ctypes.c_int64), ("d", ctypes.c_int64), ("I", ctypes.c_int64), ("fc", ctypes.c_void_p),
                ("fc_bias", ctypes.c_void_p), ("ln1", ctypes.c_void_p), ("ln2", ctypes.c_void_p),
                ("eps1", ctypes.c_float), ("eps2", ctypes.c_float), ("scale", ctypes.c_float),
                ("fc_kind", ctypes.c_int), ("layer_kind", ctypes.c_int), ("lm_kind", ctypes.c_int),
                ("w", ctypes.c_void_p * 4), ("b", ctypes.c_void_p * 4), ("lm", ctypes.c_void_p),
                ("lm_n", ctypes.c_int64), ("vocab_map", ctypes.c_void_p), ("eagle3", ctypes.c_int),
                ("norm_before_residual", ctypes.c_int), ("emb_norm", ctypes.c_void_p), ("hidden_norm", ctypes.c_void_p),
                ("lm_norm", ctypes.c_void_p), ("emb_eps", ctypes.c_float), ("hidden_eps", ctypes.c_float),
                ("lm_eps", ctypes.c_float), ("fc_in", ctypes.c_int64)]


def _kind(product) -> int | None:
    """The storage layer.c's gemm reads for a head-pass product or a kernels.Linear, or None."""
    run = getattr(product, "run", None) or getattr(getattr(product, "backend", None), "run", None)
    return _KIND.get(run)


def _ptr(t) -> int | None:
    return None if t is None else t.data_ptr()


class FusedPass:
    """The drafter's passes as kernel calls. What the call reads is rebuilt whenever the head pass
    repacks or the LM head's storage is prepared again, and the tensors it points into are kept."""

    def __init__(self, drafter):
        self.drafter = drafter
        self._key, self._current_args = None, None

    def _current(self) -> tuple[_HeadPassArgs, tuple]:
        """(the call's constant part, the tensors it points into: the caller holds them for the call,
        so a rebuild by another thread cannot free them under it)."""
        d = self.drafter
        hp, lm = d.head_pass, d.lm
        packed = hp.packed()
        if lm._version != kernels.weight_version(lm.weight):
            lm.prepare()
        key = (id(packed), id(lm._state))
        current = self._current_args
        if key != self._key:
            current = self._current_args = self._build(packed, lm)
            self._key = key
        return current

    def _build(self, packed, lm):
        d = self.drafter
        (L,), fc = packed.layers, packed.fc
        (args, half) = L.c_args
        emb = d.embed.weight.detach()
        vmap = d.vocab_map
        a = _HeadPassArgs(embed=emb.data_ptr(), vocab=emb.shape[0], D=emb.shape[1], H=L.H, G=L.G, d=L.d, I=L.inter,
                          fc=fc.state[0].data_ptr(), fc_bias=_ptr(fc.bias), ln1=args[0], ln2=args[2],
                          eps1=args[1], eps2=args[3], scale=L.d ** -0.5, fc_kind=_kind(fc), layer_kind=half,
                          lm_kind=_kind(lm), lm=lm._state[0].data_ptr(), lm_n=lm.out_features,
                          vocab_map=_ptr(vmap))
        a.w[:], a.b[:] = args[4::2], args[5::2]
        a.fc_in = d.head.fc.weight.shape[1]
        norms = ()
        if d.head_pass.eagle3:  # the midlayer's two input norms, the residual's choice, the head's final norm
            (en, a.emb_eps), (hn, a.hidden_eps), final = packed.emb_norm, packed.hidden_norm, d.head.norm
            norms = tuple(t.detach().contiguous() for t in (en, hn, final.weight))
            a.eagle3, a.norm_before_residual = 1, int(packed.norm_before_residual)
            a.emb_norm, a.hidden_norm, a.lm_norm = (t.data_ptr() for t in norms)
            a.lm_eps, a.ln1, a.eps1 = final.eps, None, 0.0  # the layer reads the normed cat, not a norm of h
        return a, (packed, lm._state, emb, vmap, norms)

    def applies(self, feats: torch.Tensor) -> bool:
        d = self.drafter
        return (d.head_pass is not None and d.head_pass.c_layers and d.head_pass.applies(feats)
                and not has_hooks(d.embed) and _kind(d.lm) is not None and kernels.library() is not None)

    def run(self, tokens, feats: list[torch.Tensor], pos0: int, pos_step: int, cache, mask: bytes | None,
            k: int = 0, top_from: int = 0, fuse: bool = False):
        """The head on n rows (tokens: a list or a CPU tensor of ids; feats: each row's float32
        feature, contiguous) at head positions pos0 + r * pos_step. mask: n rows of cache.length + n
        bytes (1 = may attend), or None for causal. fuse (EAGLE-3's catch-up): the features are the
        target's captured layers, fused by the head's fc first. -> (h (n, H), and with k > 0 the
        top k of rows top_from.. as (values, target ids) host lists, or None where the kernel could
        not serve them: the caller computes them)."""
        (a, keep), hp = self._current(), self.drafter.head_pass
        width = a.fc_in if fuse and a.eagle3 else a.D
        if any(f.numel() != width or f.dtype is not torch.float32 or not f.is_contiguous() for f in feats):
            raise ValueError(f"drafting pass: each feature must be {width} contiguous float32 values")
        if isinstance(tokens, torch.Tensor):  # read in place (no transfer to the host's lists)
            tokens = tokens.to(torch.int64).contiguous()
            ids = ctypes.c_void_p(tokens.data_ptr())
        else:
            ids = (ctypes.c_int64 * len(tokens))(*tokens)
        n, lc = len(tokens), cache.layers[0]
        start, cap = lc.length, lc.k.shape[2]
        if start + n > cap:
            raise ValueError(f"head cache full ({cap} positions)")
        cos, sin = hp.rope_tables(cap)
        h = torch.empty(n, a.D)
        rows = n - top_from if k > 0 else 0
        top_v, top_i = (ctypes.c_float * (rows * k))(), (ctypes.c_int64 * (rows * k))()
        rc = kernels.library().head_pass(
            ctypes.byref(a), ids, (ctypes.c_void_p * n)(*[f.data_ptr() for f in feats]), n,
            int(fuse), pos0, pos_step, cos.data_ptr(), sin.data_ptr(), cos.shape[0], lc.k.data_ptr(), lc.v.data_ptr(),
            lc.k.stride(-3), start, mask, h.data_ptr(), top_from, k, top_v, top_i, torch.get_num_threads())
        del keep  # (held through the call)
        if rc < 0:
            raise RuntimeError(f"drafting pass kernel: {_ERRORS.get(rc, rc)}")
        lc.length = start + n
        hp.c_calls += 1
        return h, (_rows(top_v, top_i, rows, k) if k > 0 and rc == 0 else None)

    def top(self, feats: torch.Tensor, k: int):
        """(m, H) contiguous float32 features -> their top k as (values, target ids) host lists, or None."""
        a, keep = self._current()
        m = feats.shape[0]
        top_v, top_i = (ctypes.c_float * (m * k))(), (ctypes.c_int64 * (m * k))()
        rc = kernels.library().lm_top(ctypes.byref(a), feats.data_ptr(), m, k, top_v, top_i, torch.get_num_threads())
        del keep
        if rc < 0:
            raise RuntimeError(f"draft LM head kernel: {_ERRORS.get(rc, rc)}")
        return _rows(top_v, top_i, m, k) if rc == 0 else None


def _rows(top_v, top_i, m: int, k: int):
    v, i = list(top_v), list(top_i)
    return [v[r * k:(r + 1) * k] for r in range(m)], [i[r * k:(r + 1) * k] for r in range(m)]


def build(drafter, fast) -> tuple[FusedPass | None, str]:
    """-> (the fused pass or None, why not), decided once per drafter (`drafter`: its CpuDrafting,
    cpu/drafting.py) under the options `fast`; a call checks `applies`."""
    hp = drafter.head_pass
    if not fast.allows("fused"):
        return None, f"FastPath(passes={fast.passes!r})"
    if hp is None:
        return None, "no head pass"
    layers = hp.packed().layers
    if len(layers) != 1 or layers[0].c_args is None or not hp.c_layers:
        return None, "the head is not one layer.c layer"
    if _kind(hp.packed().fc) is None or _kind(drafter.lm) is None:
        return None, "fc or the draft LM head not on eagle_core.cpu.kernels' storages"
    emb = getattr(drafter.embed, "weight", None)
    if (not isinstance(drafter.embed, torch.nn.Embedding) or emb.dtype is not torch.float32
            or emb.device.type != "cpu" or not emb.is_contiguous() or emb.shape[1] != drafter.head.config.hidden_size):
        return None, "the target's embedding is not a float32 CPU table"
    if drafter.vocab_map is not None and not drafter.vocab_map.is_contiguous():
        return None, "draft vocabulary map not contiguous"
    return FusedPass(drafter), ""
