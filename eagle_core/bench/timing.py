"""The clock helpers every measurement in this package shares.

Wall time is read with `time.perf_counter`; on CUDA the device is synchronised first, because
kernels run asynchronously and the clock would otherwise stop before the work does. The engine
itself never synchronises: only measurement code calls `sync`.
"""
from __future__ import annotations

import statistics
import time

import torch


def sync(device) -> None:
    """Wait for queued CUDA work on `device` (a no-op on a CPU)."""
    if str(device).startswith("cuda"):
        torch.cuda.synchronize()


def median_s(fn, repeats: int, warmup: int = 0) -> float:
    """Median wall time of `fn()` in seconds over `repeats` calls, after `warmup` untimed calls."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)
