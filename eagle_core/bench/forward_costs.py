"""What a verification costs against one ordinary step: the target's whole forward, per kernel.

    python -m eagle_core.bench.kernels --forward --threads 2 [--update-doc docs/performance.md]

For each CPU linear-layer backend of eagle_core.cpu.kernels (and the one the engine chose), time one
forward of k new tokens through the model body and the LM head (logits for all k rows, as a
verification needs) on a cache of `context` tokens, for k = 1 (a vanilla step) up to 64 (a large
tree). With the CPU decoder (eagle_core/cpu/forward.py) the chosen kernels are timed twice, through it
and through transformers' modules; the other backends run through transformers. Reported as ms
and as t(k)/t(1). t(1) is set against the streaming bound: the fp32 weights
a step must read once, divided by the read bandwidth measured in the same process.
"""
from __future__ import annotations

import contextlib
import statistics

import torch

from ..cpu import kernels
from ..machine.timing import ForwardTiming

ROWS = (1, 2, 4, 5, 8, 12, 16, 24, 32, 64)


def weight_bytes(model) -> int:
    """Bytes of distinct parameters a forward reads (tied embedding / LM head counted once)."""
    seen, total = set(), 0
    for p in model.parameters():
        if p.data_ptr() not in seen:
            seen.add(p.data_ptr())
            total += p.numel() * p.element_size()
    return total


def time_forward(target, rows=ROWS, context: int = 300, repeats: int = 7, seed: int = 0,
                 bandwidth: list | None = None) -> dict[int, float]:
    """k -> median seconds of one forward of k new tokens (chain positions) plus logits for all k.
    The row counts are interleaved (one forward of each k per round, after two untimed rounds), so
    a drift in the machine's speed during the run, which on these shared virtual CPUs can exceed
    20%, moves every t(k) alike and not only the ratio's numerator. `bandwidth`: a list to append
    the read bandwidth (GB/s) measured in each timed round, beside the forwards it bounds (it moves
    within minutes: docs/performance.md, "What holds now"), followed by an untimed forward."""
    timing = ForwardTiming(target, context, seed)  # every tensor on the target's device, the device synchronised
    steps = {}
    for k in rows:
        x = timing.ids(k)

        def step(x=x):
            body, lm = timing.step(x)
            return body + lm

        steps[k] = step
    times = {k: [] for k in rows}
    for r in range(repeats + 2):
        for k, step in steps.items():
            t = step()
            if r >= 2:
                times[k].append(t)
        if bandwidth is not None and r >= 2:
            bandwidth.append(kernels.stream_bandwidth(reps=1))
            # one untimed forward after the 256 MB read, so the next round's first k (1) runs after a
            # forward like every other k does: straight after the read its data come back colder and
            # t(1) came out slower than t(2) (docs/performance.md, "The kernels' choices, measured")
            steps[rows[0]]()
    return {k: statistics.median(ts) for k, ts in times.items()}


def measure(target, backends=None, rows=ROWS, context: int = 300, repeats: int = 7) -> dict:
    """{"bandwidth_gbs", "weight_mb", "bound_ms", "by_backend": {name: {k: ms}}, "chosen": describe}."""
    installed = target.kernels
    chosen = installed.describe() if installed is not None else "stock"
    names = backends or [b for b in kernels.AUTO_CANDIDATES if kernels.BACKENDS[b].available()]
    by_backend, bws = {}, []
    with torch.inference_mode():
        if installed is not None and installed.swaps:
            decoder = getattr(target, "cpu_decoder", None)
            c_layers = decoder is not None and decoder.c_layers and kernels.library() is not None
            name = f"chosen: {chosen}" + (", layer.c per layer" if c_layers else "")
            by_backend[name] = time_forward(target, rows, context, repeats, bandwidth=bws)
            if c_layers:  # the CPU decoder's torch operations, on the same packed weights
                decoder.c_layers = False
                try:
                    by_backend["chosen kernels, CPU decoder's torch operations"] = time_forward(target, rows, context, repeats)
                finally:
                    decoder.c_layers = True
            if decoder is not None:  # the same kernels through transformers' modules
                target.cpu_decoder = None
                try:
                    by_backend["chosen kernels, transformers forward"] = time_forward(target, rows, context, repeats)
                finally:
                    target.cpu_decoder = decoder
        for name in names:
            with installed.stock() if installed is not None else contextlib.nullcontext():
                probe = kernels.install(target.model, name)
                try:
                    by_backend[name] = time_forward(target, rows, context, repeats)
                finally:
                    for parent, attr, orig, _ in probe.swaps:
                        setattr(parent, attr, orig)
    bw = statistics.median(bws) if bws else kernels.stream_bandwidth()  # during the chosen path's rounds
    mb = weight_bytes(target.model) / 1e6
    return {"bandwidth_gbs": bw, "weight_mb": mb, "bound_ms": mb / bw, "context": context,
            "by_backend": {n: {k: 1e3 * t for k, t in ts.items()} for n, ts in by_backend.items()}}


def render_markdown(res: dict, threads: int) -> str:
    rows = sorted(next(iter(res["by_backend"].values())))
    lines = [f"CPU: {kernels.cpu_model()}, {threads} threads, torch {torch.__version__}. One forward of k new "
             f"tokens (body + LM head for all k rows) on a {res['context']}-token cache, median ms, and t(k)/t(1). "
             f"Streaming bound for t(1): {res['weight_mb']:.0f} MB of fp32 weights / {res['bandwidth_gbs']:.1f} GB/s "
             f"read bandwidth (median of one read of 256 MB per round, between the chosen path's forwards) = {res['bound_ms']:.1f} ms.", "",
             "| backend | t(1) ms | t(1) / bound | " + " | ".join(f"k={k}" for k in rows[1:]) + " |",
             "|---|---|---|" + "---|" * (len(rows) - 1)]
    for name, ts in res["by_backend"].items():
        t1 = ts[rows[0]]
        cells = " | ".join(f"{ts[k]:.1f} ({ts[k] / t1:.2f}x)" for k in rows[1:])
        lines.append(f"| {name} | {t1:.1f} | {t1 / res['bound_ms']:.2f} | {cells} |")
    return "\n".join(lines)
