"""The target's decoder layers in ONE kernel call (kernels/layer.c: decoder_layers).

The CPU decoder's fused path ran each layer as one layer.c call: 30 Python calls of ~40 ctypes
arguments a forward, ~0.3-0.5 ms of a 1-row forward in the gguf format whose products take ~4 ms
(docs/performance.md, "The layer loop in one call"). Here the layers' fixed arguments (norms, packed
weights, kinds, scale) are built once per packing into an array of layer.c's LayerCall, each forward
sets the cache buffers and the captures, and one call runs every layer. It is the same decoder_layer
on the same arguments in the same order, so the outputs are the same bits as the per-layer calls
(tests/test_layer_loop.py).
"""
from __future__ import annotations

import ctypes

import torch

from . import kernels
from .kernels import attention


def _check(rc: int) -> None:
    """layer.c's return code: 0, -1 out of memory, else a product on blocks refused."""
    if rc != 0:
        raise MemoryError("layer.c: out of memory") if rc == -1 else RuntimeError("layer.c: qb_matmul refused")


def c_layer(h, n, D, H, G, d, inter, weights, cos, sin, k, v, start, mask, scale, xin=None, half=0) -> None:
    """One layer.c decoder_layer call: h (n, D) updated in place; k, v the layer's cache buffers
    (G heads, rows d apart), new entries written from row `start`; cos, sin (n, d) contiguous;
    mask (n, start + n) additive contiguous or None (causal); xin (n, K) the q/k/v product's input
    when the layer's input norm is not applied to h."""
    rc = kernels.library().decoder_layer(
        h.data_ptr(), n, D, H, G, d, inter, *weights, cos.data_ptr(), sin.data_ptr(), k.data_ptr(), v.data_ptr(),
        k.stride(-3), start, None if mask is None else mask.data_ptr(), float(scale), torch.get_num_threads(),
        None if xin is None else xin.data_ptr(), D if xin is None else xin.shape[1], int(half))
    _check(rc)


class LayerCall(ctypes.Structure):
    """layer.c's LayerCall, field for field."""
    _fields_ = [("ln1", ctypes.c_void_p), ("ln2", ctypes.c_void_p), ("eps1", ctypes.c_float), ("eps2", ctypes.c_float),
                ("scale", ctypes.c_float), ("kinds", ctypes.c_int), ("w", ctypes.c_void_p * 4),
                ("b", ctypes.c_void_p * 4), ("kbuf", ctypes.c_void_p), ("vbuf", ctypes.c_void_p),
                ("ldh", ctypes.c_int64), ("capture", ctypes.c_void_p)]


class LayerLoop:
    """One packing's layers (CpuDecoder's list: each with c_args, kinds and scaling) as LayerCalls."""

    def __init__(self, layers):
        self.layers = layers  # the list it was built from (a repack swaps the whole list)
        self.calls = (LayerCall * len(layers))()
        for c, L in zip(self.calls, layers):
            a = L.c_args  # (ln1, eps1, ln2, eps2, then packed weight and bias per product)
            c.ln1, c.eps1, c.ln2, c.eps2 = a[:4]
            c.w[:], c.b[:] = a[4::2], a[5::2]
            c.scale, c.kinds = L.scaling, L.kinds

    def run(self, h: torch.Tensor, dims: tuple, cache_layers, start: int, cos, sin, mask, want: dict) -> None:
        """Every layer on h (1, n, D) contiguous, in place; each layer's n new cache entries written from
        `start` into its buffers (reserved by the caller); the residual stream entering layer i copied
        into a new tensor want[i] for each i in `want`. dims: (D, H, G, d, inter)."""
        n, (D, H, G, d, inter) = h.shape[1], dims
        calls = self.calls
        for c, lc in zip(calls, cache_layers):
            kb, vb = lc._kbuf, lc._vbuf
            c.kbuf, c.vbuf, c.ldh = kb.data_ptr(), vb.data_ptr(), kb.stride(-3)
        for i in want:
            want[i] = torch.empty_like(h)
            calls[i].capture = want[i].data_ptr()
        try:
            rc = kernels.library().decoder_layers(
                h.data_ptr(), n, D, H, G, d, inter, calls, len(calls), cos.data_ptr(), sin.data_ptr(), start,
                None if mask is None else mask.data_ptr(), torch.get_num_threads())
        finally:
            for i in want:
                calls[i].capture = None
        _check(rc)


def loop_for(decoder, layers) -> LayerLoop:
    """The decoder's LayerLoop for `layers`, built again when a repack has swapped the list."""
    loop = getattr(decoder, "_layer_loop", None)
    if loop is None or loop.layers is not layers:
        loop = decoder._layer_loop = LayerLoop(layers)
    return loop


def fused_layers(decoder, layers, h, cache, mask, cos, sin, want) -> torch.Tensor:
    """CpuDecoder's layers through layer.c: h (1, n, D) -> the last layer's output (before the final
    norm); the residual stream entering layer i copied into want[i]. cos, sin (1, n, 1, d) as the
    decoder builds them; mask None (causal) or the engine's (1, 1, n, L) tree mask."""
    (n, D), (H, G, d) = h.shape[1:], (decoder.heads, decoder.kv_heads, decoder.head_dim)
    if mask is not None:
        mask = (attention.additive(mask[0, 0]) if mask.dtype == torch.bool else mask[0, 0].float()).contiguous()
    cos, sin = cos[0, :, 0].contiguous(), sin[0, :, 0].contiguous()  # (n, d)
    h = h.contiguous()
    like = torch.empty(1, G, 0, d)
    lcs = cache.layers[: len(layers)]
    starts = [lc.reserve(n, like, like) for lc in lcs]
    if len(set(starts)) == 1:  # every layer's entries from one position (as always in the engine): one call
        loop_for(decoder, layers).run(h, (D, H, G, d, decoder.inter), lcs, starts[0], cos, sin, mask, want)
    else:
        each_layer(layers, h, (D, H, G, d, decoder.inter), lcs, starts, cos, sin, mask, want)
    for lc, start in zip(lcs, starts):
        lc.commit(start + n)
    return h


def each_layer(layers, h, dims, cache_layers, starts, cos, sin, mask, want) -> None:
    """LayerLoop.run as one c_layer call a layer, layer i's entries written from starts[i] (the loop as it
    ran before decoder_layers; scripts/measure_layer_loop.py times the two against each other)."""
    (D, H, G, d, inter), n = dims, h.shape[1]
    for i, (L, lc, start) in enumerate(zip(layers, cache_layers, starts)):
        if i in want:
            want[i] = h.clone()
        c_layer(h, n, D, H, G, d, inter, L.c_args, cos, sin, lc._kbuf, lc._vbuf, start, mask, L.scaling, None,
                L.kinds)  # half=L.kinds: the products' storages (panels or blocks)
