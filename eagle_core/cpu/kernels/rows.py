"""Per-row statistics of logits in one C call each (rows.c).

`row_stats`: max, argmax and log-sum-exp of the target's logits for the acceptance walk, where torch
makes two calls (`max`, then `logsumexp`). `row_topk`: the drafter's k best tokens of each row as
log-softmax values, where torch makes three (log_softmax over the row, topk, then exp on the host
side). See rows.c for what they compute and why. Each returns None where it cannot serve (another
device or dtype, no compiled kernels, a row with NaN or too few finite values), and the caller
computes the same with torch. Called only through FastPath (eagle_core/cpu/options.py), which the
portable path answers without calling them.
"""
from __future__ import annotations

import torch

from .build import library


def _library_for(rows: torch.Tensor):
    """The kernels' library if rows.c can read `rows` ((n, V) float32 on the CPU, rows contiguous,
    V > 0), else None. The tensor is looked at first: rows on a GPU never build the CPU library."""
    if (rows.device.type != "cpu" or rows.dtype is not torch.float32
            or rows.dim() != 2 or rows.stride(1) != 1 or rows.shape[1] == 0):
        return None
    return library()


def row_stats(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """rows (n, V) float32 on the CPU -> (max (n,), argmax (n,) int64, logsumexp (n,)), or None."""
    lib = _library_for(rows)
    if lib is None:
        return None
    n, v = rows.shape
    mx, lse = torch.empty(n), torch.empty(n)
    arg = torch.empty(n, dtype=torch.int64)
    bad = lib.row_stats(rows.data_ptr(), n, v, rows.stride(0), mx.data_ptr(), arg.data_ptr(), lse.data_ptr(),
                        torch.get_num_threads())
    if bad:  # a row with NaN or no finite value: torch decides what those mean
        return None
    return mx, arg, lse


def row_topk(rows: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """rows (n, V) float32 on the CPU -> (log-softmax values (n, k) descending, their indices (n, k)
    int64; on ties the smaller index first), or None. The values equal torch.log_softmax's up to
    float32 rounding (the sum of exponentials is taken in another order)."""
    lib = _library_for(rows)
    if lib is None or not 0 < k <= min(64, rows.shape[1]):
        return None
    n, v = rows.shape
    val, idx = torch.empty(n, k), torch.empty(n, k, dtype=torch.int64)
    if lib.row_topk(rows.data_ptr(), n, v, rows.stride(0), k, val.data_ptr(), idx.data_ptr()):
        return None
    return val, idx
