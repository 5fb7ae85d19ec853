"""Choosing smallgemm.c's blocking per machine: from how many rows a float32 product takes the blocked
path (tiles over 32 outputs, k in blocks) and its tallest tile, by a short measurement on first use,
cached per CPU model, thread count and source.

Neither knob changes a bit of any output (every output is one accumulator updated by fma in k order
from 0 on either path: tests/test_kernels.py), so the choice follows speed alone, and speed differs
by CPU: on a Zen 5 one 12-row tile per pair of panels was the fastest way to verify up to 12 rows; on a
2-vCPU Xeon (family 6, model 167) 9-12 rows ran 5-10% faster blocked, in tiles of 6-8 rows
(docs/performance.md, "The float32 products' blocking, chosen per machine"). What decides is t(k) of
products reading their weights from memory, as a forward's do: half a forward of the default model's
shapes (15 layers' q/k/v, o, gate/up and down, then its LM head; 325 MB of float32 weights) at the row
counts where the knobs act (ROWS: the trees' verifications), each candidate's time relative to the best
candidate's at that row count, weighted;
the candidates interleaved round by round, each product's minimum over the rounds summed
(qtuning.compare's method); the compiled default stays unless another is PREFER better. About 2 s on a
2-core machine, once; nothing where the CPU has no AVX-512 (the knobs act on its tiles only).

EAGLE_F32_TUNING (eagle_core/environment.py): unset or "auto" as above; "off" keeps the compiled
defaults; "from=9,height=8" fixes the knobs by hand (the other: its default).

    ensure(lib, threads)   -> Blocking, applied to lib (measured, cached, or from the environment)
    describe(lib, threads) -> one line: the blocking and where it came from
    retune(lib, threads)   -> measured afresh, cached, applied
"""
from __future__ import annotations

import ctypes
import json
import os
import threading
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from ...environment import value
from .build import cache_dir
from .qtuning import cache_file, load_choice, save_choice, score, sum_of_minima

SOURCE = os.path.join(os.path.dirname(__file__), "smallgemm.c")
WIDE = 12  # smallgemm.c's WIDE: the compiled default blocks from WIDE + 1 rows in tiles of at most WIDE
TUNING_VERSION = 1  # in the cache key: a new way of choosing measures again
ROWS = {5: 1.0, 6: 1.0, 8: 1.0, 10: 1.0, 12: 1.0, 13: 1.0, 16: 0.5}
CANDIDATES = ((13, 12), (9, 12), (9, 8), (7, 8), (7, 6), (5, 8))  # (blocked_from, height)
# Half a forward of the default model (hidden 576, 3 KV heads of 64, MLP 1536, vocabulary 49152): each
# shape's products behave differently (few outputs share out to the threads badly, the LM head streams
# long), so the choice is measured on the mix a forward makes, each weight distinct (325 MB: past the
# caches, as a forward's 538 MB). Gate/up and down alone chose blocking from 5 rows, which the whole
# forward then ran 5% slower at 5-6 rows.
LAYER_SHAPES = ((960, 576), (576, 576), (3072, 576), (576, 1536))
SHAPES = LAYER_SHAPES * 15 + ((49152, 576),)
ROUNDS = 3
PREFER = 1.03  # another candidate's weighted relative time must be 3% below the default's


@dataclass(frozen=True)
class Blocking:
    blocked_from: int = WIDE + 1
    height: int = WIDE

    def text(self) -> str:
        return f"blocked from {self.blocked_from} rows, tiles of at most {self.height}"


_APPLIED: dict = {}  # (id(lib), threads) -> (Blocking, source)
_LOCK = threading.Lock()


def applies(lib) -> bool:
    """Do the knobs act here (the CPU has AVX-512)?"""
    return bool(lib.smallgemm_get_blocking((ctypes.c_int * 2)()))


def current(lib) -> Blocking:
    out = (ctypes.c_int * 2)()
    lib.smallgemm_get_blocking(out)
    return Blocking(out[0], out[1])


def set_blocking(lib, b: Blocking) -> None:
    if lib.smallgemm_set_blocking(b.blocked_from, b.height):
        raise ValueError(f"blocking out of range: {b.text()}")


def _cache_path(threads: int) -> str:
    return cache_file(cache_dir(), "ftuning", SOURCE, threads, TUNING_VERSION)


def workload(lib, shapes=SHAPES) -> list[tuple[torch.Tensor, int, int]]:
    """(packed panels, n, k) for each of `shapes`, each weight distinct."""
    g, out = torch.Generator().manual_seed(0), []
    for n, k in shapes:
        w = torch.randn(n, k, generator=g) / k ** 0.5
        packed = torch.empty(-(-n // 16) * 16 * k)
        lib.pack_weight(w.data_ptr(), n, k, packed.data_ptr())
        out.append((packed, n, k))
    return out


def _time(lib, work, xs, threads: int, rows: int, b: Blocking) -> np.ndarray:
    """Seconds of each product of one pass over `work` at `rows` rows with blocking `b`."""
    set_blocking(lib, b)
    y = torch.empty(rows, max(n for _, n, _ in work))
    stamps = [time.perf_counter()]
    for packed, n, k in work:
        lib.smallgemm(xs[(rows, k)].data_ptr(), rows, k, packed.data_ptr(), n, k, None, y.data_ptr(), n, threads)
        stamps.append(time.perf_counter())
    return np.diff(stamps)


def compare(lib, work, threads: int, candidates, rows, rounds: int) -> dict:
    """Blocking -> {rows: seconds}: each product's fastest over the rounds, summed; the candidates
    interleaved round by round (qtuning.compare's method, on these products)."""
    xs = {(r, k): torch.randn(r, k) for r in rows for k in {k for _, _, k in work}}
    for c in candidates:
        _time(lib, work[:2], xs, threads, max(rows), c)  # warm: code paths, OpenMP threads
    return sum_of_minima(candidates, rows, rounds, lambda c, r: _time(lib, work, xs, threads, r, c))


def measure(lib, threads: int, work=None, rounds: int = ROUNDS) -> tuple[Blocking, dict]:
    """-> (the choice, {candidate text: score}); the compiled default unless another scores PREFER better."""
    work = work if work is not None else workload(lib)
    was = current(lib)
    try:
        cands = [Blocking(f, h) for f, h in CANDIDATES]
        s = score(compare(lib, work, threads, cands, tuple(ROWS), rounds), ROWS)
    finally:
        set_blocking(lib, was)
    default, best = Blocking(), min(s, key=s.get)
    choice = best if s[best] * PREFER < s[default] else default
    return choice, {c.text(): round(v, 4) for c, v in sorted(s.items(), key=lambda kv: kv[1])}


def _load(path: str) -> Blocking | None:
    choice = load_choice(path)
    try:
        b = None if choice is None else Blocking(**choice)
    except TypeError:
        return None
    return b if b is not None and 2 <= b.blocked_from <= WIDE + 1 and 1 <= b.height <= WIDE else None


def ensure(lib, threads: int) -> Blocking:
    """The blocking for `threads` threads, applied to `lib` (measured once per library and thread count,
    then cached per CPU; the library holds one blocking, so the last count ensured is the one in use)."""
    key = (id(lib), threads)
    with _LOCK:
        if key not in _APPLIED:
            _APPLIED[key] = _choose(lib, threads)
        choice = _APPLIED[key][0]
        set_blocking(lib, choice)
        return choice


def _choose(lib, threads: int) -> tuple[Blocking, str]:
    env = value("EAGLE_F32_TUNING")
    if isinstance(env, dict):
        return Blocking(**{**asdict(Blocking()), **env}), "EAGLE_F32_TUNING"
    if env == "off" or not applies(lib):
        return Blocking(), "compiled defaults" + ("" if env == "off" else " (no AVX-512: the knobs do not act)")
    cached = _load(_cache_path(threads))
    if cached is not None:
        return cached, "cached"
    return _retune(lib, threads)


def _retune(lib, threads: int) -> tuple[Blocking, str]:
    t0 = time.perf_counter()
    choice, log = measure(lib, threads)
    seconds = time.perf_counter() - t0
    save_choice(_cache_path(threads), threads, asdict(choice), log, seconds, ROWS)
    return choice, f"measured in {seconds:.1f} s"


def retune(lib, threads: int) -> tuple[Blocking, dict]:
    """Measure afresh (the cache not read), save the choice, apply it. -> (choice, scores)."""
    with _LOCK:
        choice, source = _retune(lib, threads)
        _APPLIED[(id(lib), threads)] = (choice, source)
        set_blocking(lib, choice)
    with open(_cache_path(threads)) as f:
        return choice, json.load(f)["scores"]


def in_use() -> str:
    """The blocking the process's kernels library runs with, as text ("" where there is no library)."""
    from .build import library

    lib = library()
    return current(lib).text() if lib is not None else ""


def describe(lib, threads: int) -> str:
    """The blocking calls with `threads` threads use, and where it came from."""
    choice = ensure(lib, threads)
    return f"{choice.text()} ({_APPLIED[(id(lib), threads)][1]})"
