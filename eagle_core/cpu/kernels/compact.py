"""The target's KV cache compacted to the accepted path in one C call for all layers (compact.c).

`move_rows(layers, context, keep)` moves, in every layer's keys and values, entry context + keep[j]
to context + j; it returns False, having moved nothing, where it cannot serve (no compiled kernels,
a tensor off the CPU, a batch of more than one, rows not contiguous), and the caller does the same
with torch. Called only through FastPath.move_rows (eagle_core/cpu/options.py).
"""
from __future__ import annotations

import ctypes

from .build import library


def move_rows(layers, context: int, keep: list[int]) -> bool:
    """keep: tree offsets with keep[j] >= j (a path through a tree listed parents first is one), so
    moving rows in order of j never overwrites one still to be read."""
    if any(keep[j] < j for j in range(len(keep))):
        return False
    ptrs, heads, hs, rs, rb = [], [], [], [], []
    for layer in layers:  # the tensors first: a cache on a GPU never builds the CPU library
        for t in (layer.keys, layer.values):
            if t.device.type != "cpu" or t.dim() != 4 or t.shape[0] != 1 or t.stride(3) != 1:
                return False
            if t.shape[2] < context + keep[-1] + 1:
                return False
            e = t.element_size()
            ptrs.append(t.data_ptr()); heads.append(t.shape[1])
            hs.append(t.stride(1) * e); rs.append(t.stride(2) * e); rb.append(t.shape[3] * e)
    lib = library()
    if lib is None:
        return False
    n = len(ptrs)
    i64 = ctypes.c_int64 * n
    lib.move_rows((ctypes.c_void_p * n)(*ptrs), i64(*heads), i64(*hs), i64(*rs), i64(*rb), n, context,
                  (ctypes.c_int64 * len(keep))(*keep), len(keep))
    return True
