"""Choosing qblocks.c's knobs per machine: the row tile, the prefetch distance and how threads share a
product, by a short measurement on first use, cached per CPU model, thread count and source.

No knob changes a bit of any output (each output's float operations are the same whatever they are:
tests/test_qblocks.py), so the choice is free to follow speed alone. What decides it is t(k) of
products that read their weights from memory, as a forward's do: a set of Q4_1 and Q8_0 weights
(COLD_BYTES in all, two thirds Q4_1 as in the default model's forward) multiplied at the row counts a
decode meets (ROWS: a vanilla step, the CPU and page trees' verifications, larger trees), each
candidate's time relative to the best candidate's at that row count, weighted. The search goes one
knob at a time (tile, then prefetch, then split), the candidates interleaved round by round and the
minimum over rounds kept for each product (then summed), so that a busy moment elsewhere hits every
candidate alike and spoils a few products, not a whole pass; the incumbent stays unless another is
PREFER better. About 4 s on a 2-core machine (docs/performance.md, "The blocks' knobs, chosen per machine").

`python -m eagle_core.bench.qblocks_curve --tune` measures again and replaces the cached choice (what
to run on a quiet machine: a choice measured while other work ran is cached too).

EAGLE_QB_TUNING (eagle_core/environment.py): unset or "auto" as above; "off" keeps qblocks.c's
compiled defaults and measures nothing; "tile=8,prefetch=1024,split=rows" fixes knobs by hand (the
rest: defaults). The choice is applied to a library with qb_set_tuning for the thread count asked, so
a caller of qb_matmul with tile 0 (qblocks.matmul, or C code linking the same library) gets it.

    ensure(lib, threads)   -> Tuning, applied to lib (measured, cached, or from the environment)
    describe(lib, threads) -> one line: the knobs and where they came from (for benchmark headers)
    retune(lib, threads)   -> measured afresh, cached, applied
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import os
import threading
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from ...environment import value
from .build import cache_dir, cpu_model

# qblocks.py imports this module (matmul's tile 0 asks ensure()), so this one talks to the library
# through ctypes alone and keeps the few facts of qblocks.c it needs here
SOURCE = os.path.join(os.path.dirname(__file__), "qblocks.c")
DEFAULT_TILE = 16  # qblocks.c's DEFAULT_TILE and QB_PREFETCH: the knobs until qb_set_tuning
DEFAULT_PREFETCH = 2048
SPLITS = {"groups": 0, "rows": 1}  # how threads share a product (qblocks.c's split)
Q4_1, Q8_0, PLAIN = 0, 1, 1  # qblocks.c's fmt values; its plain C path
GROUP_BLOCK_BYTES = {Q4_1: 320, Q8_0: 544}  # a group-block: 16 rows x 32 weights, packed

TUNING_VERSION = 2  # in the cache key: a new way of choosing measures again
ROWS = {1: 1.0, 4: 1.0, 5: 1.0, 8: 1.0, 13: 1.0, 16: 1.0, 32: 0.5}
TILES = (6, 8, 10, 12, 14, 16)
PREFETCHES = (0, 1024, 2048, 4096, 8192, 16384)
MAX_PREFETCH = 16384  # qblocks.c's MAX_PREFETCH: qb_set_tuning refuses more (or a distance not a multiple of 64)
COLD_BYTES = 128 << 20  # above the default model's 96 MB of blocks: products stream as a forward's do
ROUNDS = 3
PREFER = 1.03  # another candidate's weighted relative time must be 3% below the incumbent's


@dataclass(frozen=True)
class Tuning:
    tile: int = DEFAULT_TILE
    prefetch: int = DEFAULT_PREFETCH
    split: str = "groups"

    def text(self) -> str:
        return f"tile {self.tile}, prefetch {self.prefetch} B, split by {self.split}"


_APPLIED: dict = {}  # (id(lib), threads) -> (Tuning, source)
_LOCK = threading.Lock()  # two threads' first products measure once, not twice at the same time


def declared(lib):
    """`lib` (ctypes) with qblocks.c's functions' argument types declared: here, not in qblocks.py, so that
    ensure() can tune any library holding qblocks.c (another library compiled with it too)."""
    i64, vp, i32 = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
    lib.qb_matmul.argtypes = [i32, vp, i64, i64, vp, i64, vp, i64, i32, i32, i32]
    lib.qb_matmul.restype = i32
    lib.qb_pack.argtypes = [i32, vp, i64, i64, vp]
    lib.qb_paths.restype = i32
    lib.qb_best_path.restype = i32
    lib.qb_stream_read.argtypes = [vp, i64, i32]
    lib.qb_stream_read.restype = ctypes.c_uint64
    lib.qb_set_tuning.argtypes = [i32] * 4
    lib.qb_set_tuning.restype = i32
    lib.qb_get_tuning.argtypes = [i32, vp]
    lib.qb_get_tuning.restype = None
    return lib


def cache_file(folder: str, prefix: str, source: str, threads: int, version: int) -> str:
    """Where a kernel's measured choice is cached: keyed by CPU model, thread count, the kernel source's
    hash and the way of choosing (`version`). ftuning.py keeps smallgemm.c's blocking the same way."""
    with open(source, "rb") as f:
        src = hashlib.sha256(f.read()).hexdigest()[:8]
    key = f"{cpu_model()}|{threads}|{src}|{version}"
    return os.path.join(folder, f"{prefix}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json")


def load_choice(path: str) -> dict | None:
    """The "choice" a cache file holds (None: no file, or not one of ours)."""
    try:
        with open(path) as f:
            choice = json.load(f)["choice"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return choice if isinstance(choice, dict) else None


def save_choice(path: str, threads: int, choice: dict, log: dict, seconds: float, rows: dict) -> None:
    """Writes a measured choice with its scores (aside, then moved: a reader never sees half a file)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump({"cpu": cpu_model(), "threads": threads, "choice": choice, "scores": log,
                   "seconds": round(seconds, 2), "rows": rows}, f, indent=1)
    os.replace(tmp, path)


def _cache_path(threads: int) -> str:
    return cache_file(cache_dir(), "qtuning", SOURCE, threads, TUNING_VERSION)


def set_tuning(lib, threads: int, tuning: Tuning) -> None:
    if lib.qb_set_tuning(threads, tuning.tile, tuning.prefetch, SPLITS[tuning.split]):
        raise ValueError(f"tuning out of range: {tuning.text()}")


def _packed(lib, fmt: int, n: int, k: int, rng) -> torch.Tensor:
    """Blocks like a quantizer's (finite scales of a decoder's size: no subnormal slows the floats),
    packed into qblocks.c's groups."""
    nb = k // 32
    d = rng.uniform(0.001, 0.02, (n, nb)).astype(np.float16).view(np.uint8).reshape(n, nb, 2)
    if fmt == Q4_1:
        m = rng.uniform(-0.15, 0.05, (n, nb)).astype(np.float16).view(np.uint8).reshape(n, nb, 2)
        body = [d, m, rng.integers(0, 256, (n, nb, 16), dtype=np.uint8)]
    else:
        body = [d, rng.integers(0, 256, (n, nb, 32), dtype=np.uint8)]
    raw = np.ascontiguousarray(np.concatenate(body, axis=-1).reshape(n, -1))
    out = torch.empty(-(-n // 16) * nb * GROUP_BLOCK_BYTES[fmt], dtype=torch.uint8)
    lib.qb_pack(fmt, raw.ctypes.data, n, k, out.data_ptr())
    return out


def workload(lib, cold_bytes: int | None = None) -> list[tuple[int, torch.Tensor, int, int]]:
    """(fmt, packed, n, k) products: copies of a gate/up-sized Q4_1 weight (3072 x 576) and of 4096 rows
    of an LM-head-sized Q8_0 one, cold_bytes in all (2/3 Q4_1), so each product reads from memory."""
    rng, out, cold_bytes = np.random.default_rng(0), [], cold_bytes or COLD_BYTES
    for fmt, n, k, share in ((Q4_1, 3072, 576, 2 / 3), (Q8_0, 4096, 576, 1 / 3)):
        packed = _packed(lib, fmt, n, k, rng)
        copies = max(1, int(cold_bytes * share) // packed.numel())
        out += [(fmt, packed if i == 0 else packed.clone(), n, k) for i in range(copies)]
    return out


def _time(lib, work, xs, threads: int, rows: int, tuning: Tuning) -> np.ndarray:
    """Seconds of each product of one pass over `work` at `rows` rows with `tuning` applied."""
    set_tuning(lib, threads, tuning)
    x = xs[rows]
    y = torch.empty(rows, max(n for _, _, n, _ in work))
    stamps = [time.perf_counter()]
    for fmt, packed, n, k in work:
        lib.qb_matmul(fmt, x.data_ptr(), rows, k, packed.data_ptr(), n, y.data_ptr(), n, threads, 0, 0)
        stamps.append(time.perf_counter())
    return np.diff(stamps)


def compare(lib, work, threads: int, candidates, rows, rounds: int) -> dict:
    """Tuning -> {rows: seconds}, the candidates interleaved round by round: each product's fastest
    over the rounds, summed (a product is a fraction of a millisecond, so a burst of other work spoils
    a few products of a round, not the round: the sum of minima survives a machine busier than a
    minimum of whole passes would)."""
    xs = {r: torch.randn(r, work[0][3]) for r in rows}
    for c in candidates:
        _time(lib, work[:1], xs, threads, max(rows), c)  # warm: code paths, OpenMP threads
    return sum_of_minima(candidates, rows, rounds, lambda c, r: _time(lib, work, xs, threads, r, c))


def sum_of_minima(candidates, rows, rounds: int, run) -> dict:
    """Candidate -> {rows: seconds}: run(candidate, rows) -> each product's seconds (an array), called
    round by round for every candidate and row count in turn; each product's fastest over the rounds,
    summed (compare's method; ftuning.compare's too)."""
    best = {c: {r: None for r in rows} for c in candidates}
    for _ in range(rounds):
        for c in candidates:
            for r in rows:
                t = run(c, r)
                best[c][r] = t if best[c][r] is None else np.minimum(best[c][r], t)
    return {c: {r: float(t.sum()) for r, t in ts.items()} for c, ts in best.items()}


def score(times: dict, weights: dict) -> dict:
    """Tuning -> sum over rows of weight * t / (the best candidate's t at those rows): 1.0 per unit of
    weight is the best everywhere."""
    low = {r: min(t[r] for t in times.values()) for r in weights}
    return {c: sum(w * t[r] / low[r] for r, w in weights.items()) for c, t in times.items()}


def measure(lib, threads: int, work=None) -> tuple[Tuning, dict]:
    """The knobs, one at a time (tile, prefetch, split), each stage's candidates measured together.
    -> (choice, {stage: {candidate text: score}})."""
    work = work if work is not None else workload(lib)
    cur, log = Tuning(), {}
    stages = [("tile", [Tuning(t, cur.prefetch, cur.split) for t in TILES])]
    stages.append(("prefetch", None))
    if threads > 1:
        stages.append(("split", None))
    for name, cands in stages:
        if cands is None:
            cands = [Tuning(cur.tile, p, cur.split) for p in PREFETCHES] if name == "prefetch" else \
                [Tuning(cur.tile, cur.prefetch, s) for s in SPLITS]
        if cur not in cands:
            cands.append(cur)
        s = score(compare(lib, work, threads, cands, tuple(ROWS), ROUNDS), ROWS)
        log[name] = {c.text(): round(v, 4) for c, v in s.items()}
        best = min(s, key=s.get)
        if s[best] * PREFER < s[cur]:
            cur = best
    return cur, log


def _load(path: str) -> Tuning | None:
    choice = load_choice(path)
    try:
        return None if choice is None else Tuning(**choice)
    except TypeError:
        return None


def ensure(lib, threads: int) -> Tuning:
    """The knobs for `threads`, applied to `lib` (once per library and thread count)."""
    key = (id(lib), threads)
    if key in _APPLIED:
        return _APPLIED[key][0]
    with _LOCK:
        return _APPLIED[key][0] if key in _APPLIED else _choose(lib, threads)


def _choose(lib, threads: int) -> Tuning:
    key = (id(lib), threads)
    if lib.qb_set_tuning.argtypes is None:
        declared(lib)
    env = value("EAGLE_QB_TUNING")
    if isinstance(env, dict):
        choice, source = Tuning(**{**asdict(Tuning()), **env}), "EAGLE_QB_TUNING"
    elif env == "off" or lib.qb_best_path() == PLAIN:
        choice, source = Tuning(), "compiled defaults" + (" (plain C path)" if env != "off" else "")
    else:
        choice, source = _load(_cache_path(threads)), "cached"
        if choice is None:
            return retune(lib, threads)[0]
    set_tuning(lib, threads, choice)
    _APPLIED[key] = (choice, source)
    return choice


def retune(lib, threads: int) -> tuple[Tuning, dict]:
    """Measure afresh (the cache not read), save the choice in the cache, apply it. -> (choice, scores)."""
    t0 = time.perf_counter()
    choice, log = measure(lib, threads)
    seconds = time.perf_counter() - t0
    save_choice(_cache_path(threads), threads, asdict(choice), log, seconds, ROWS)
    set_tuning(lib, threads, choice)
    _APPLIED[(id(lib), threads)] = (choice, f"measured in {seconds:.1f} s")
    return choice, log


def describe(lib, threads: int) -> str:
    """The knobs calls with `threads` threads use, and where they came from."""
    choice = ensure(lib, threads)
    return f"{choice.text()} ({_APPLIED[(id(lib), threads)][1]})"
