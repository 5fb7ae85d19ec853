"""The engine's whole forward under settings that change no bit, only speed: interleaved in one process,
round by round, because separate runs on these VMs differ by more than such knobs do.

    python -m eagle_core.bench.kernels --compare-blocking 13:12,7:6 [--forward-rows 1,8,13]   (float32)

The blocking: smallgemm.c's, from how many rows its products run blocked and their tallest tile (ftuning.py).
"""
from __future__ import annotations

import json

import torch

from ..cpu import kernels


def compare_settings(target, settings: dict, restore, rows=(1, 4, 6, 8, 10, 12, 13, 16), rounds: int = 7,
                     context: int = 300) -> dict:
    """The engine's forward (body + LM head) under each of `settings` (name -> a function applying it), in
    one process, interleaved round by round (separate runs differ by more than such knobs do), `restore()`
    after: -> {"t_ms": {name: {k: median ms}}, ...}."""
    import statistics

    from .forward_costs import ForwardTiming

    timing, times = ForwardTiming(target, context, 0), {(n, k): [] for n in settings for k in rows}
    try:
        with torch.inference_mode():
            xs = {k: timing.ids(k) for k in rows}
            for r in range(rounds + 1):  # round 0 untimed: code, caches, OpenMP threads
                for k in rows:
                    for name, apply in settings.items():
                        apply()
                        body, lm = timing.step(xs[k])
                        if r:
                            times[(name, k)].append(1e3 * (body + lm))
    finally:
        restore()
    return {"cpu": kernels.cpu_model(), "threads": torch.get_num_threads(), "context": context, "rounds": rounds,
            "weights": getattr(target, "weight_format", "float32"),
            "t_ms": {n: {k: statistics.median(times[(n, k)]) for k in rows} for n in settings}}


def compare_blocking(target, blockings, rows=(1, 4, 6, 8, 10, 12, 13, 16), rounds: int = 7, context: int = 300) -> dict:
    """compare_settings over smallgemm blockings (ftuning.Blocking); the library's blocking put back after."""
    from ..cpu.kernels import ftuning

    lib = kernels.library()
    was = ftuning.current(lib)
    settings = {b.text(): (lambda b=b: ftuning.set_blocking(lib, b)) for b in blockings}
    return compare_settings(target, settings, lambda: ftuning.set_blocking(lib, was), rows, rounds, context)


def render(res: dict) -> str:
    names = list(res["t_ms"])
    rows = list(res["t_ms"][names[0]])
    out = [f"CPU: {res['cpu']}, {res['threads']} threads. The engine's {res.get('weights', 'float32')} forward of k new "
           f"tokens (body + LM head, {res['context']}-token cache) under each setting, median ms of {res['rounds']} "
           f"interleaved rounds (against the first: in brackets).", "",
           "| k | " + " | ".join(names) + " |", "|---" * (len(names) + 1) + "|"]
    for k in rows:
        base = res["t_ms"][names[0]][k]
        out.append(f"| {k} | " + " | ".join(f"{res['t_ms'][n][k]:.2f}" + ("" if i == 0 else f" ({res['t_ms'][n][k] / base:.2f})")
                                           for i, n in enumerate(names)) + " |")
    return "\n".join(out)


def target_in(weights: str):
    """The default target in that weight format."""
    from ..target import load_target

    if weights != "gguf":
        return load_target()
    from dataclasses import replace

    from ..cpu.options import FastPath

    return load_target(fast=replace(FastPath.default(), weights="gguf"))


def parse_rows(ap, text: str, option: str) -> tuple[int, ...]:
    """A comma list of row counts (each 1..64), or one line naming `option` (ap.error)."""
    try:
        rows = tuple(int(k) for k in text.split(","))
        if not rows or not all(1 <= k <= 64 for k in rows):
            raise ValueError
    except ValueError:
        ap.error(f"{option} {text!r}: row counts 1..64, comma-separated, like 1,8,13")
    return rows


def parse_blockings(ap, text: str, option: str) -> list:
    """A comma list of smallgemm blockings F:H (ftuning.Blocking), or one line naming `option` (ap.error)."""
    from ..cpu.kernels import ftuning

    try:
        pairs = [b.split(":") for b in text.split(",")]
        blockings = [ftuning.Blocking(int(f), int(h)) for f, h in pairs]  # ValueError: not two whole numbers
        if not all(2 <= b.blocked_from <= 13 and 1 <= b.height <= 12 for b in blockings):
            raise ValueError
    except (TypeError, ValueError):
        ap.error(f"{option} {text!r}: blockings F:H like 13:12,7:6, F (blocked from) 2..13 rows, H (tallest tile) 1..12")
    return blockings


def compare_cli(ap, args) -> str:
    """kernels' --compare-blocking."""
    blockings = parse_blockings(ap, args.compare_blocking, "--compare-blocking")
    rows = parse_rows(ap, args.forward_rows, "--forward-rows")
    return _print_compare(compare_blocking(target_in("float32"), blockings, rows, rounds=args.repeats), args)


def _print_compare(res: dict, args) -> str:
    md = render(res)
    print(md)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(res, f, indent=1)
    return md
