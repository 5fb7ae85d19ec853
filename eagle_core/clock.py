"""The one clock the engine and its measurements read.

On CUDA, kernels run asynchronously: a clock read without waiting for the device stops before the
work it times does. `clock(device)` waits for the device first (a no-op on a CPU), so every time
the engine reports (draft, verify, prefill, wall) is the time the work took.
"""
from __future__ import annotations

import time

import torch


def sync(device) -> None:
    """Wait for queued CUDA work on `device` (a no-op on a CPU)."""
    if str(device).startswith("cuda"):
        torch.cuda.synchronize(device)


def clock(device) -> float:
    """time.perf_counter() once `device` has finished its queued work."""
    sync(device)
    return time.perf_counter()
