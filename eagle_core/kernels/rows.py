"""Per-row statistics of the target's logits for the acceptance walk (rows.c): max, argmax, log-sum-exp.

One call where torch makes two (`max`, then `logsumexp`); see rows.c for what it computes and why.
`row_stats` returns None where it cannot serve (another device or dtype, no compiled kernels, a row
with NaN or only -inf), and the caller computes the same with torch. EAGLE_ROW_KERNEL=0 in the
environment makes it always None (torch's max + logsumexp), to measure the two against each other.
"""
from __future__ import annotations

import torch

from .build import library, switched_off

ENV = "EAGLE_ROW_KERNEL"


def row_stats(rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """rows (n, V) float32 on the CPU -> (max (n,), argmax (n,) int64, logsumexp (n,)), or None."""
    lib = library()
    if (lib is None or switched_off(ENV) or rows.device.type != "cpu" or rows.dtype is not torch.float32
            or rows.dim() != 2 or rows.stride(1) != 1 or rows.shape[1] == 0):
        return None
    n, v = rows.shape
    mx, lse = torch.empty(n), torch.empty(n)
    arg = torch.empty(n, dtype=torch.int64)
    bad = lib.row_stats(rows.data_ptr(), n, v, rows.stride(0), mx.data_ptr(), arg.data_ptr(), lse.data_ptr(),
                        torch.get_num_threads())
    if bad:  # a row with NaN or no finite value: torch decides what those mean
        return None
    return mx, arg, lse
