"""The clock helpers every measurement in this package shares.

Wall time is read with `time.perf_counter`; on CUDA the device is synchronised first, because
kernels run asynchronously and the clock would otherwise stop before the work does (`sync` is
eagle_core.clock's, which the engine's own clock uses too). `ForwardTiming` is the one way the
target's forward is timed (costmodel, forward_costs, gpu_check): every tensor it makes is on the
target's device and the device is synchronised around each timed part.
"""
from __future__ import annotations

import statistics
import time

import torch

from ..clock import sync


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


class ForwardTiming:
    """A target with `context` random committed tokens in its cache, and timed forwards of n new
    tokens on top of it. Every tensor is made on the target's device; each timed part starts and
    ends with a device synchronisation. `low`: the smallest token id drawn."""

    def __init__(self, target, context: int = 300, seed: int = 0, low: int = 0):
        self.target, self.device, self.context, self.low = target, target.device, context, low
        self.generator = torch.Generator().manual_seed(seed)
        self.cache = target.new_cache()
        target.forward(self.ids(context), self.cache)
        sync(self.device)

    def ids(self, n: int) -> torch.Tensor:
        """(1, n) random token ids on the target's device."""
        return torch.randint(self.low, self.target.vocab_size, (1, n), generator=self.generator).to(self.device)

    def chain_positions(self, n: int) -> torch.Tensor:
        return torch.arange(self.context, self.context + n, device=self.device)[None]

    def step(self, ids: torch.Tensor, prepare=None) -> tuple[float, float]:
        """One forward of `ids` on the cache plus logits for all its rows, the n new cache entries
        dropped again. `prepare()` -> (position ids, 4D mask or None) runs inside the body's timing
        (the engine builds them each cycle too); default: chain positions, no mask.
        -> (body seconds, LM head seconds)."""
        n, target = ids.shape[1], self.target
        sync(self.device)
        t0 = time.perf_counter()
        pos, mask = prepare() if prepare is not None else (self.chain_positions(n), None)
        if mask is None:
            feats = target.forward(ids, self.cache, position_ids=pos)
        else:
            feats = target.forward(ids, self.cache, pos, mask)
        sync(self.device)
        t1 = time.perf_counter()
        target.logits(feats)
        sync(self.device)
        t2 = time.perf_counter()
        self.cache.crop(-n)
        return t1 - t0, t2 - t1
