"""What one depth level of drafting costs, as a share of a vanilla step: EAGLE-2 trees of depth 1..5
and width 1..4 on one MT-bench prompt per category, each tree's drafting time per cycle (the head's
catch-up, then depth - 1 expansions of `width` rows, each with its draft LM head and top k), and the
slope per level fitted over the depths. Every run is checked identical to vanilla. Run on a quiet
machine (docs/performance.md, "Drafting per depth level").

    python scripts/measure_draft_levels.py [--max-new-tokens 64] [--json-out F]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def slope(xs, ys) -> float:
    """Least-squares slope of ys against xs."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--depths", default="1,2,3,4,5")
    ap.add_argument("--widths", default="1,2,3,4")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json-out", default=None)
    a = ap.parse_args(argv)
    # after the arguments, so that --help loads nothing
    import torch
    from eagle_core import DecodeSettings, load_engine
    from eagle_core.bench.prompts import MT_BENCH, load_prompts
    from eagle_core.machine import machine_info

    torch.set_num_threads(a.threads)
    engine = load_engine()
    prompts = [p.text for p in load_prompts(MT_BENCH, per_category=1)]
    base = DecodeSettings(method="vanilla", max_new_tokens=a.max_new_tokens)
    engine.run(prompts[0], base.with_(max_new_tokens=8))
    depths, widths = [int(d) for d in a.depths.split(",")], [int(w) for w in a.widths.split(",")]
    draft = {(d, w): [0.0, 0] for d in depths for w in widths}
    step, identical = [0.0, 0], True
    for p in prompts:  # per prompt: vanilla, then every tree, so a drift hits them alike
        v = engine.run(p, base).summary
        step[0] += v.verify_s
        step[1] += v.cycles
        for d in depths:
            for w in widths:
                s = base.with_(method="eagle2", depth=d, tree_top_k=w, total_tokens=d * w)
                r = engine.run(p, s).summary
                identical &= r.token_ids == v.token_ids
                draft[(d, w)][0] += r.draft_s
                draft[(d, w)][1] += r.cycles
    step_ms = 1e3 * step[0] / step[1]
    ms = {k: 1e3 * t / n for k, (t, n) in draft.items()}
    per_level = {w: slope(depths, [ms[(d, w)] for d in depths]) for w in widths}
    print(f"{machine_info('cpu')['cpu']}, {a.threads} threads; vanilla step {step_ms:.2f} ms; "
          f"{len(prompts)} prompts x {a.max_new_tokens} new tokens; identical to vanilla: {identical}\n")
    print("| width | " + " | ".join(f"depth {d}" for d in depths) + " | per level (ms) | per level / vanilla step |")
    print("|---|" + "---|" * (len(depths) + 2))
    for w in widths:
        cells = " | ".join(f"{ms[(d, w)]:.2f}" for d in depths)
        print(f"| {w} | {cells} | {per_level[w]:.3f} | {per_level[w] / step_ms:.3f} |")
    out = {"machine": machine_info("cpu"), "step_ms": step_ms, "draft_ms": {f"{d},{w}": v for (d, w), v in ms.items()},
           "per_level_ms": per_level, "identical": identical, "max_new_tokens": a.max_new_tokens}
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(out, f, indent=1)
    return out


if __name__ == "__main__":
    main()
