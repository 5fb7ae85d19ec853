"""How this machine is timed: the clock helpers every measurement shares (the hardware panel's and
eagle_core/bench's), and the two probes the panel and the cost model both run.

Wall time is read with `time.perf_counter`; on CUDA the device is synchronised first, because
kernels run asynchronously and the clock would otherwise stop before the work does (`sync` is
eagle_core.clock's, which the engine's own clock uses too). `ForwardTiming` is the one way the
target's forward is timed (measure_forward here; bench's forward_costs and gpu_check): every tensor
it makes is on the target's device and the device is synchronised around each timed part.

  measure_forward      the target's forward on n new tokens (the engine's tree mask) and its LM head
  measure_head_steps   one drafting step: the head layer on m tokens, the draft LM head + top-k
"""
from __future__ import annotations

import statistics
import time

import torch

from ..clock import sync
from ..cpu.kernels import linear_of
from ..tree import tree_attention_mask, tree_positions


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

    def tree_step(self, n: int) -> tuple[float, float]:
        """`step` for n new tokens drafted as a binary tree of n nodes, under the engine's tree mask and
        positions, built inside the timing as the engine builds them each cycle (n = 1: no mask)."""
        parents = [-1] + [(i - 1) // 2 for i in range(1, n)]

        def prepare():
            ctx, dev = self.context, self.device
            mask = tree_attention_mask(parents, ctx, dtype=self.target.dtype, device=dev) if n > 1 else None
            return tree_positions(parents, ctx).to(dev)[None], mask

        return self.step(self.ids(n), prepare)


# -- the target's forward ----------------------------------------------------------------------
@torch.inference_mode()
def measure_forward(target, ctx: int = 300, sizes=range(1, 65), repeats: int = 5, on_step=None) -> dict:
    """{n: {"body_ms", "lm_head_ms"}}: median over `repeats` rounds; each round visits every n,
    so a drift in machine speed spreads over all sizes. `on_step()`, if given, is called after
    each timed forward (a progress bar)."""
    low = min(100, target.vocab_size // 2)  # ordinary token ids (a tiny test vocabulary has fewer than 100)
    timing = ForwardTiming(target, ctx, seed=0, low=low)  # every tensor on the target's device, synchronised
    times = {n: {"body": [], "lm": []} for n in sizes}
    first = next(iter(sizes))
    for _ in range(repeats):
        # untimed: the round's first size would otherwise follow the last round's largest forward, and ran
        # 15-25% slower there (t(1) after a 64-row forward, docs/app.md "Re-recording the shipped traces")
        timing.tree_step(first)
        for n in sizes:
            body, lm = timing.tree_step(n)
            times[n]["body"].append(body * 1e3)
            times[n]["lm"].append(lm * 1e3)
            if on_step is not None:
                on_step()
    return {n: {"body_ms": statistics.median(t["body"]), "lm_head_ms": statistics.median(t["lm"])}
            for n, t in times.items()}


# -- one drafting step ------------------------------------------------------------------------
@torch.inference_mode()
def measure_head_steps(target, head, ctx: int = 300, widths=(1, 2, 4, 8, 10), vocab_sizes=(None, 8192),
                       top_k: int = 8, repeats: int = 7, on_step=None) -> dict:
    """{"head_ms": {m: ms}, "lm_ms": {(N, m): ms}}: the head layer on m tokens over a ctx-token
    head cache, and the draft LM head + log-softmax + top-k over N vocabulary rows. `on_step()`,
    if given, is called after each width."""
    dev, H = target.device, target.hidden_size
    cache = head.new_cache(ctx + 64)
    cache.attend_with(target.fast.attend_cache)  # as the drafter's cache attends (drafting/drafter.py)
    feats = torch.randn(1, ctx, H, device=dev, dtype=target.dtype)
    emb = target.embed(torch.arange(ctx, device=dev) % target.vocab_size)[None].to(target.dtype)
    head(emb, feats, torch.arange(ctx, device=dev), cache=cache)
    w = target.lm_head_weight
    out = {"head_ms": {}, "lm_ms": {}}
    for m in widths:
        e, f, pos = emb[:, :m], feats[:, :m], torch.full((m,), ctx, device=dev)

        def step():
            head(e, f, pos, cache=cache)
            cache.crop(ctx)
            sync(dev)
        step()
        out["head_ms"][m] = 1e3 * median_s(step, repeats)
        for N in vocab_sizes:
            # the product the drafter runs (draft.Drafter: the kernel the target picks for this shape)
            wN = w[: (N or w.shape[0])].detach().clone()
            product = linear_of(wN, target.linear_backend(tuple(wN.shape)))
            x = torch.randn(m, H, device=dev, dtype=target.dtype)

            def lm():
                torch.log_softmax(product(x).float(), -1).topk(top_k, dim=-1)
                sync(dev)
            lm()
            out["lm_ms"][(N or w.shape[0], m)] = 1e3 * median_s(lm, repeats)
        if on_step is not None:
            on_step()
    return out
