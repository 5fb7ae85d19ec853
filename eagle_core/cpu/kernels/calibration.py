"""Choosing a linear-layer backend per weight shape, once per machine (backends.py holds the backends).

Only backends that are batch invariant on this machine are eligible (a row alone and inside
5/16/24-row batches must be equal bit for bit), so a greedy EAGLE run reproduces the vanilla run
exactly by construction, not only by argmax luck; the fastest of them, its times at the rows a decode
meets weighted, is taken. Where none passes (no C compiler or no AVX2, and torch's own products not
invariant here), the choice is `rowwise`, invariant by construction. The plan is cached as JSON per
CPU model, thread count, library versions and the backends available (so a process without the C
library never reads a plan that names it).
"""
from __future__ import annotations

import hashlib
import json
import os
import time

import numpy as np
import torch

from .backends import BACKENDS, RowWise
from .build import cache_dir, cpu_model, library, source_bytes

# The row counts a decode meets, with their weight in the choice: a vanilla step (1 row), the CPU
# tree's verification (5), larger trees (16, weighted less). Summed unweighted, the 8- and 16-row
# products (arithmetic-bound, slowest) outweighed the 1-row step and could pick a backend that is
# faster at 16 rows but slower per decode step (docs/performance.md, "The engine's CPU kernels").
CALIBRATION_ROWS = {1: 1.0, 5: 1.0, 16: 0.25}
COLD_BYTES = 64 << 20  # calibration cycles through copies of the weight filling this many bytes ...
MAX_COPIES = 128  # ... (at most this many), so each product reads its weight from memory, as in a forward
PLAN_VERSION = 3  # in the cached plan's key: a new way of choosing calibrates again
INVARIANCE_ROWS = (1, 5, 16, 24)
PREFER_OWN = 1.10  # another backend must be >10% faster in calibration to replace smallgemm
# What "auto" measures and may choose. Not OpenBLAS: numpy's OpenBLAS keeps a thread pool of its
# own that spins after each call, so on a 2-core machine it stalls torch's OpenMP threads (and
# every measurement after it) until it goes to sleep; it is measured only when asked by name.
AUTO_CANDIDATES = ("smallgemm", "onednn", "mkl")


def batch_invariant(backend, n: int, k: int, seed: int = 0) -> bool:
    """Is each row's result the same, bit for bit, alone and inside batches of 5/16/24 rows?"""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(n, k, generator=g) / k ** 0.5
    x = torch.randn(max(INVARIANCE_ROWS), k, generator=g)
    st = backend.prepare(w)
    full = backend.run(st, x, None)
    return all(torch.equal(backend.run(st, x[:m].contiguous(), None), full[:m]) for m in INVARIANCE_ROWS)


def time_backends(backends, n: int, k: int, rows=tuple(CALIBRATION_ROWS),
                  rounds: int = 5) -> dict[str, dict[int, float]]:
    """name -> {rows: seconds}: the fastest of `rounds` products on a random weight of the shape,
    read from memory as in a forward (each timing is a pass over enough copies of the weight to
    leave the caches, divided by the copies), the backends interleaved round by round, so that a
    burst of load elsewhere on the machine hits them alike and the minimum survives it."""
    copies = max(1, min(MAX_COPIES, -(-COLD_BYTES // (4 * n * k))))
    ws = [torch.randn(n, k) / k ** 0.5 for _ in range(copies)]
    xs = {m: torch.randn(m, k) for m in rows}
    states = {b.name: [b.prepare(w) for w in ws] for b in backends}
    for b in backends:
        for m in rows:
            b.run(states[b.name][0], xs[m], None)  # lazily built kernels and buffers
    best = {b.name: {m: float("inf") for m in rows} for b in backends}
    for _ in range(rounds):
        for b in backends:
            for m in rows:
                t0 = time.perf_counter()
                for st in states[b.name]:
                    b.run(st, xs[m], None)
                best[b.name][m] = min(best[b.name][m], (time.perf_counter() - t0) / copies)
    return best


# (N, K) -> the candidates that failed the batch-invariance check for that shape (the fallback line
# names a rejected smallgemm: eagle_core/cpu/status.py)
REJECTED: dict[tuple[int, int], tuple[str, ...]] = {}


def available() -> tuple[str, ...]:
    """The AUTO_CANDIDATES that can run in this process now (smallgemm only with the C library)."""
    return tuple(b for b in AUTO_CANDIDATES if BACKENDS[b].available())


def _plan_path(threads: int, candidates: tuple[str, ...]) -> str:
    src = hashlib.sha256(source_bytes()).hexdigest()[:8]
    key = f"{cpu_model()}|{torch.__version__}|{np.__version__}|{threads}|{src}|{PLAN_VERSION}|{','.join(candidates)}"
    return os.path.join(cache_dir(), f"plan-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json")


def choose(shapes, threads: int | None = None) -> dict[tuple[int, int], str]:
    """(N, K) -> backend name: the fastest batch-invariant backend, its times at CALIBRATION_ROWS weighted
    (rowwise where none is). Measured once per machine, thread count, library versions and available
    backends; cached as JSON."""
    threads = threads or torch.get_num_threads()
    candidates = available()
    path = _plan_path(threads, candidates)
    shape_of = lambda key: tuple(map(int, key.split("x")))
    try:
        with open(path) as f:
            plan = json.load(f)
        known = {shape_of(s): v for s, v in plan["choice"].items()}
        REJECTED.update({shape_of(s): tuple(v) for s, v in plan.get("rejected", {}).items()})
    except (OSError, ValueError, KeyError, TypeError):
        known = {}
    # a plan naming a backend this process cannot run (the library's state changed since) is measured again
    known = {s: v for s, v in known.items() if v in BACKENDS and (v == RowWise.name or v in candidates)}
    todo = [s for s in dict.fromkeys(shapes) if s not in known]
    if todo:
        for n, k in todo:
            eligible = [BACKENDS[b] for b in candidates if batch_invariant(BACKENDS[b], n, k)]
            REJECTED[(n, k)] = tuple(b for b in candidates if BACKENDS[b] not in eligible)
            times = {name: sum(CALIBRATION_ROWS[m] * t for m, t in ts.items())
                     for name, ts in time_backends(eligible, n, k).items()}
            # our kernel unless another is clearly faster: calibration is short and a busy machine is noisy
            if "smallgemm" in times:
                times["smallgemm"] /= PREFER_OWN
            # none invariant: the per-row product, invariant by construction (never an unchecked one)
            known[(n, k)] = min(times, key=times.get) if times else RowWise.name
        os.makedirs(cache_dir(), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump({"cpu": cpu_model(), "threads": threads, "torch": torch.__version__,
                       "choice": {f"{n}x{k}": v for (n, k), v in sorted(known.items())},
                       "rejected": {f"{n}x{k}": list(REJECTED[(n, k)]) for n, k in sorted(known) if REJECTED.get((n, k))}},
                      f, indent=1)
        os.replace(tmp, path)
    return {s: known[s] for s in shapes}


def stream_bandwidth(mb: int = 256, threads: int | None = None, reps: int = 5) -> float:
    """GB/s reading a buffer far beyond the caches with all threads (the smallgemm library's AVX2
    loop where available, else torch.sum): the bound a weight-streaming step cannot beat."""
    a = torch.ones(mb * 2 ** 20 // 4)
    threads = threads or torch.get_num_threads()
    lib = library()
    f = (lambda: lib.stream_read(a.data_ptr(), a.numel(), threads)) if lib is not None else (lambda: a.sum())
    f()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return a.numel() * 4 / 1e9 / best
