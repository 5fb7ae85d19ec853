"""The engine's forward of k rows in a loop, to profile: where a verification's time goes.

    perf record -e cpu-clock -F 2000 -D 15000 -o forward13.data -- \
        python scripts/profile_forward.py --weights gguf --rows 13 --seconds 30
    perf report -i forward13.data --no-children --sort pid,dso,sym --stdio

Loads the default target in the given weight format, warms up for --warm seconds (model load and warm-up
fall before perf's -D delay), then runs ForwardTiming.step (body + LM head of k chain rows over a
300-token cache, as `python -m eagle_core.bench.kernels --curve` times it) for --seconds and prints the
forwards run and the mean ms a forward (perf slows it: compare with the curve's unprofiled t(k)).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--weights", choices=("float32", "gguf"), default="float32")
    ap.add_argument("--rows", type=int, default=13)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--warm", type=float, default=5.0, help="seconds of forwards before the measured loop")
    ap.add_argument("--seconds", type=float, default=30.0)
    args = ap.parse_args(argv)
    if args.rows < 1 or args.seconds <= 0 or args.warm < 0:
        ap.error("--rows must be >= 1, --seconds > 0, --warm >= 0")
    import torch

    torch.set_num_threads(args.threads)
    from eagle_core.bench.forward_costs import ForwardTiming
    from eagle_core.cpu.options import FastPath
    from eagle_core.target import load_target

    target = load_target(fast=replace(FastPath.default(), weights=args.weights))
    timing = ForwardTiming(target, 300, 0)
    with torch.inference_mode():
        x = timing.ids(args.rows)
        end = time.perf_counter() + args.warm
        while time.perf_counter() < end:
            timing.step(x)
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < args.seconds:
            timing.step(x)
            n += 1
    print(f"{n} forwards of {args.rows} rows ({args.weights}), {1e3 * (time.perf_counter() - t0) / n:.2f} ms each")


if __name__ == "__main__":
    main()
