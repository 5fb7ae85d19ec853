"""The draft LM head's product in each storage of its rows, as a decode cycle meets it: right after a
target forward of 4 tokens plus its LM head (which streams ~540 MB of weights through the caches),
one 1-row product (the root's draft), then a 2-row product (the next depth's). The storages
alternate round by round in one process, so a change in the machine's speed hits them alike.
Run on a quiet machine (docs/data/journal/performance-2026-12.md, 2026-12-06):

    python scripts/measure_draft_rows.py --json-out docs/data/bench/draft_rows_intel167.json

  int8     the engine's default since 2026-12-06: int8 rows with a scale per row (kernels/gemv8.c)
  float16  the rows rounded to float16 values, read as float16 by smallgemm (the default before)
  float32  the target's float32 rows through smallgemm

--head-pass times the head's own pass instead (its catch-up on 2 rows after a target forward, then
the same pass again right after), with its products from int8 rows (the default since 2026-12-06)
and from their float16 values, alternating:

    python scripts/measure_draft_rows.py --head-pass --json-out docs/data/bench/head_pass_intel167.json
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from eagle_core import kernels, lean_head, load_engine  # noqa: E402
from eagle_core.bench.report import save_json  # noqa: E402
from eagle_core.machine import machine_info  # noqa: E402


def products(rows: torch.Tensor) -> dict:
    """storage name -> the product module the drafter would use for it."""
    return {"int8": kernels.linear_of(kernels.SmallGemm8.rounded(rows), kernels.SmallGemm8.name),
            "float16": kernels.linear_of(rows.half().float(), kernels.SmallGemm16.name),
            "float32": kernels.linear_of(rows.clone(), "smallgemm")}


def head_passes(eng, rounds: int) -> dict:
    """storage -> median microseconds of a 2-row head pass after a target forward, and of a second."""
    d, tgt = eng.drafter_for("eagle2"), eng.target
    leans = {}
    for name, on in (("int8", True), ("float16", False)):
        d._head_int8(d.head, on)
        leans[name] = lean_head.build(d.head)[0]
    d._head_int8(d.head, True)
    h = tgt.hidden_size
    times = {name: {"after a target forward": [], "then again": []} for name in leans}
    with torch.inference_mode():
        tc, hc = tgt.new_cache(), d.new_cache(2048)
        tgt.forward(torch.randint(0, 1000, (1, 300)), tc)
        d.catch_up(hc, torch.randn(300, h), torch.randint(0, 1000, (300,)), 0)
        feats, toks, pos = torch.randn(2, h), torch.tensor([5, 6]), torch.tensor([300, 301])
        for _ in range(rounds):
            for name, lean in leans.items():
                d.lean = lean
                f = tgt.forward(torch.tensor([[5, 6, 7, 8]]), tc, torch.tensor([[300, 301, 302, 303]]))
                tgt.logits(f[0])
                tc.crop(-4)
                for key in times[name]:
                    t0 = time.perf_counter()
                    d._run(toks, feats, pos, hc)
                    times[name][key].append((time.perf_counter() - t0) * 1e6)
                    hc.crop(300)
    d.lean = leans["int8"]
    return {name: {k: round(statistics.median(v), 1) for k, v in t.items()} for name, t in times.items()}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--head-pass", action="store_true", help="time the head's pass, int8 against float16")
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    eng = load_engine()
    if kernels.library() is None:
        sys.exit("the CPU kernels are not built here: nothing to measure")
    if args.head_pass:
        med = head_passes(eng, args.rounds)
        for name, v in med.items():
            print(f"{name:8s} head pass, 2 rows: " + ", ".join(f"{k} {us:.0f} us" for k, us in v.items()))
        return save_json(args.json_out, {"machine": machine_info("cpu"), "rounds": args.rounds,
                                         "head pass, microseconds (median)": med})
    d, tgt = eng.drafter_for("eagle2"), eng.target
    rows = tgt.lm_head.weight[d.vocab_map].detach()
    mods = products(rows)
    h = rows.shape[1]
    x1, x2 = torch.randn(1, h), torch.randn(2, h)
    times = {name: {"1 row after a target forward": [], "then 2 rows": []} for name in mods}
    with torch.inference_mode():
        tc = tgt.new_cache()
        tgt.forward(torch.randint(0, 1000, (1, 300)), tc)
        for m in mods.values():
            m(x1)  # packed, quantized
        for _ in range(args.rounds):
            for name, m in mods.items():
                f = tgt.forward(torch.tensor([[5, 6, 7, 8]]), tc, torch.tensor([[300, 301, 302, 303]]))
                tgt.logits(f[0])
                tc.crop(-4)
                t0 = time.perf_counter()
                m(x1)
                t1 = time.perf_counter()
                m(x2)
                t2 = time.perf_counter()
                times[name]["1 row after a target forward"].append((t1 - t0) * 1e6)
                times[name]["then 2 rows"].append((t2 - t1) * 1e6)
    med = {name: {k: round(statistics.median(v), 1) for k, v in t.items()} for name, t in times.items()}
    for name, v in med.items():
        mb = {"int8": 1, "float16": 2, "float32": 4}[name] * rows.numel() / 1e6
        print(f"{name:8s} ({mb:5.1f} MB): " + ", ".join(f"{k} {us:.0f} us" for k, us in v.items()))
    return save_json(args.json_out, {"machine": machine_info("cpu"), "rounds": args.rounds, "rows": list(rows.shape),
                                     "microseconds (median)": med})


if __name__ == "__main__":
    main()
