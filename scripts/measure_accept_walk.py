"""The acceptance walk's own time per cycle with the row kernel (kernels/rows.c) and without it
(EAGLE_ROW_KERNEL=0: torch's max + logsumexp), alternating per prompt in one process so that both
see the same machine. The walk includes the target's LM head over the tree's rows. Every prompt's
tokens must be the same both ways. Run on a quiet machine (docs/data/journal/performance-2026-12.md, 2026-12-05):

    python scripts/measure_accept_walk.py --json-out docs/data/bench/accept_walk_zen5.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from eagle_core import load_engine  # noqa: E402
from eagle_core.config import preset  # noqa: E402
from eagle_core.bench.report import save_json  # noqa: E402
from eagle_core.machine import machine_info  # noqa: E402
from eagle_core.decode import Generation  # noqa: E402
from eagle_core.cpu.kernels.rows import ENV  # noqa: E402

from eagle_core.bench.prompts import MT_BENCH as PROMPTS  # noqa: E402  (the shipped MT-bench)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", default=PROMPTS)
    ap.add_argument("--every", type=int, default=10, help="every N-th prompt of the file (default 10: 8 of MT-bench)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    eng = load_engine()
    walk = Generation._accept
    times = {"on": [], "off": []}

    def timed_walk(self, tree, feats, gen):
        t = time.perf_counter()
        v = walk(self, tree, feats, gen)
        times["off" if os.environ.get(ENV) == "0" else "on"].append(time.perf_counter() - t)
        return v

    Generation._accept = timed_walk
    with open(args.prompts, encoding="utf-8") as f:
        qs = [json.loads(line)["turns"][0] for line in f if line.strip()][::args.every]
    s = preset("cpu", method="eagle2", max_new_tokens=128)
    tokens = {}
    for rep in range(2):
        for q in qs:
            for k in (("on", "off") if rep == 0 else ("off", "on")):
                os.environ[ENV] = "0" if k == "off" else "1"
                tokens.setdefault(k, []).append(eng.run(q, s).summary.token_ids)
    Generation._accept = walk
    os.environ.pop(ENV, None)
    out = {"machine": machine_info("cpu"), "prompts": len(qs), "repeats": 2,
           "identical": tokens["on"] == tokens["off"],
           "ms per cycle (median / mean)": {k: [round(statistics.median(v) * 1e3, 3), round(statistics.mean(v) * 1e3, 3)]
                                           for k, v in times.items()},
           "cycles": {k: len(v) for k, v in times.items()}}
    print(json.dumps(out["ms per cycle (median / mean)"]), "identical:", out["identical"])
    return save_json(args.json_out, out)


if __name__ == "__main__":
    main()
