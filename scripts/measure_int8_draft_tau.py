"""What 8-bit draft weights would cost in tau, before anyone writes an int8 kernel for them: the
shipped EAGLE-2 head's products (fc, q/k/v/o, gate/up/down) and its draft LM head rows rounded to
int8 with one scale per output row (symmetric, scale = max |w| / 127), then back to float16 values
so the engine's kernels run them unchanged. tau on 2 MT-bench prompts per category, greedy, 128 new
tokens, for each tree, as shipped and quantised; the outputs must be identical (verification never
reads the draft's weights). The draft rows start from float16 storage, as shipped when this was
measured (the engine has read them as int8 since 2026-12-06: kernels/gemv8.c). Run on any machine
(timing is not measured):

    python scripts/measure_int8_draft_tau.py --json-out docs/data/bench/int8_draft_tau.json
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from eagle_core import load_engine  # noqa: E402
from eagle_core.bench.prompts import load_prompts  # noqa: E402
from eagle_core.bench.report import save_json  # noqa: E402
from eagle_core.machine import machine_info  # noqa: E402
from eagle_core.config import preset  # noqa: E402
from eagle_core.drafting.drafter import Drafter  # noqa: E402

from eagle_core.bench.prompts import MT_BENCH as PROMPTS  # noqa: E402  (the shipped MT-bench)


def int8_rows(w: torch.Tensor) -> torch.Tensor:
    """w (N, K) -> the nearest values of the form q * s_n, q an integer in [-127, 127], per row n."""
    s = w.abs().amax(dim=1, keepdim=True).clamp_min(1e-12) / 127
    return (w / s).round().clamp(-127, 127) * s


def quantise_draft(d) -> int:
    """Round the drafter's product weights and draft rows in place; returns how many it rounded."""
    n = 0
    with torch.no_grad():
        d.lm_weight.copy_(int8_rows(d.lm_weight).half().float())
        for name, prm in d.head.named_parameters():
            if prm.dim() == 2 and "embed" not in name:
                prm.copy_(int8_rows(prm.float()).half().to(prm.dtype))
                n += 1
    return n + 1


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", default=PROMPTS)
    ap.add_argument("--per-category", type=int, default=2)
    ap.add_argument("--tree", nargs="+", default=["2,2,3", "2,2,4"])
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)
    prompts = [p.text for p in load_prompts(args.prompts, per_category=args.per_category)]
    Drafter.DRAFT_ROWS = "float16"  # the baseline of the recorded run (see the docstring)
    eng = load_engine()
    out = {"machine": machine_info("cpu"), "prompts": len(prompts), "runs": []}
    ids = {}
    for weights in ("float16 (shipped)", "int8 per row"):
        if weights.startswith("int8"):
            out["rounded_weights"] = quantise_draft(eng.drafter_for("eagle2"))
        for tree in args.tree:
            dd, k, t = (int(x) for x in tree.split(","))
            s = preset("cpu", method="eagle2", max_new_tokens=128, depth=dd, tree_top_k=k, total_tokens=t)
            runs = [eng.run(p, s) for p in prompts]
            ids[(weights, tree)] = [r.summary.token_ids for r in runs]
            tau = sum(len(r.summary.token_ids) for r in runs) / sum(len(r.cycles) for r in runs)
            out["runs"].append({"weights": weights, "tree": tree, "tau": round(tau, 4)})
            print(weights, tree, f"tau {tau:.4f}")
    out["identical"] = all(ids[("float16 (shipped)", t)] == ids[("int8 per row", t)] for t in args.tree)
    print("identical outputs:", out["identical"])
    return save_json(args.json_out, out)


if __name__ == "__main__":
    main()
