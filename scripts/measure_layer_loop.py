"""The target's layers in one layer.c call (eagle_core/cpu/layer_loop.py's decoder_layers) against one call a
layer (layer_loop.each_layer, the loop before it): the engine's whole forward (body + LM head) at k rows
under each, interleaved step by step in one process (compare_settings), on a quiet machine:

    python scripts/measure_layer_loop.py --weights gguf --rounds 30 [--json-out F]

The two give the same bits (tests/test_layer_loop.py); only the time around the calls differs.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--weights", choices=("float32", "gguf"), default="gguf")
    ap.add_argument("--rows", default="1,4,8,13,16")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)
    from eagle_core.bench.knob_compare import parse_rows

    rows = parse_rows(ap, args.rows, "--rows")
    if args.rounds < 1:
        ap.error(f"--rounds {args.rounds}: at least 1")
    import torch

    torch.set_num_threads(args.threads)
    from eagle_core.bench.knob_compare import compare_settings, render, target_in
    from eagle_core.bench.report import save_json
    from eagle_core.cpu import layer_loop

    one = layer_loop.loop_for

    class EachLayer:
        def __init__(self, decoder, layers):
            self.layers = layers

        def run(self, h, dims, lcs, start, cos, sin, mask, want):
            layer_loop.each_layer(self.layers, h, dims, lcs, [start] * len(lcs), cos, sin, mask, want)

    def use(f):
        return lambda: setattr(layer_loop, "loop_for", f)

    target = target_in(args.weights)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    res = compare_settings(target, {"a call a layer": use(EachLayer), "one call": use(one)}, use(one),
                           rows=rows, rounds=args.rounds)
    res["recorded"] = started
    print(f"{started}. " + render(res))
    return save_json(args.json_out, res)


if __name__ == "__main__":
    main()
