"""The clock helpers every measurement in this package shares.

Wall time is read with `time.perf_counter`; on CUDA the device is synchronised first, because
kernels run asynchronously and the clock would otherwise stop before the work does (`sync` is
eagle_core.clock's, which the engine's own clock uses too).
"""
from __future__ import annotations

import statistics
import time

from ..clock import sync  # noqa: F401  (re-exported: the measurements' one sync)


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
