"""Evaluating a head end to end: tau and per-depth acceptance on eval prompt sets.

tau here is the field's "mean accepted length": tokens committed per draft/verify cycle, the
bonus token included (vanilla = 1.00). The acceptance rate at depth d is the share of cycles
that accepted a draft at depth d among those that accepted everything up to depth d - 1 and
drafted at depth d.
"""
from __future__ import annotations

import json
import time
from collections import defaultdict

import torch

from ..config import DecodeSettings
from ..decode import Engine
from ..heads import load_default_head
from ..target import load_target


def load_eval_prompts(path: str, per_category: int | None = None) -> list[tuple[str, str]]:
    """(category, first turn) pairs; at most `per_category` from each category, in file order."""
    from ..bench import load_prompts

    return [(p.category, p.text) for p in load_prompts(path, per_category=per_category)]


def depth_acceptance(cycles) -> dict[int, float]:
    reached, accepted = defaultdict(int), defaultdict(int)
    for c in cycles:
        max_depth = max(n.depth for n in c.nodes)
        a = c.accepted_drafts
        for d in range(1, max_depth + 1):
            if a >= d - 1:
                reached[d] += 1
                accepted[d] += a >= d
    return {d: accepted[d] / reached[d] for d in sorted(reached) if reached[d]}


def summarize(runs) -> dict:
    cycles = [c for r in runs for c in r.cycles]
    n_cycles = len(cycles)
    return {
        "prompts": len(runs),
        "tau": sum(len(c.accepted) for c in cycles) / max(n_cycles, 1),
        "tokens_per_s": sum(r.summary.new_tokens for r in runs) / max(sum(r.summary.wall_s for r in runs), 1e-9),
        "acceptance_by_depth": depth_acceptance(cycles),
    }


def evaluate(engine: Engine, prompts, settings: DecodeSettings, log=print) -> dict:
    by_cat = defaultdict(list)
    t0 = time.time()
    for i, (cat, p) in enumerate(prompts):
        run = engine.run(p, settings)
        by_cat[cat].append(run)
        log(f"  [{i + 1}/{len(prompts)}] {cat}: tau {run.summary.tau:.2f}, {run.summary.tokens_per_s:.1f} tok/s "
            f"({time.time() - t0:.0f}s)")
    all_runs = [r for rs in by_cat.values() for r in rs]
    return {"overall": summarize(all_runs), "by_category": {c: summarize(rs) for c, rs in sorted(by_cat.items())}}


def run_eval(args):
    torch.set_num_threads(args.threads)
    target = load_target()
    head, vocab, name = load_default_head(target, args.head)
    if args.draft_vocab == "full":
        vocab = None
    engine = Engine(target, head, vocab, name)
    results = {"head": name, "draft_vocab": len(vocab) if vocab else "full", "runs": []}
    for tree in args.trees:
        total, depth, k = (int(x) for x in tree.split(","))
        for temp in args.temperatures:
            s = DecodeSettings(method="eagle2", total_tokens=total, depth=depth, tree_top_k=k, temperature=temp,
                               max_new_tokens=args.max_new_tokens, seed=0)
            for path in args.prompts:
                prompts = load_eval_prompts(path, args.per_category)[:args.limit]
                print(f"{path}: {len(prompts)} prompts, tree total={total} depth={depth} top_k={k}, T={temp}", flush=True)
                res = evaluate(engine, prompts, s, log=lambda m: print(m, flush=True))
                results["runs"].append({"prompts": path.split("/")[-1], "tree": [total, depth, k], "temperature": temp,
                                        "max_new_tokens": args.max_new_tokens, **res})
                o = res["overall"]
                acc = ", ".join(f"d{d} {a:.2f}" for d, a in o["acceptance_by_depth"].items())
                print(f"  => tau {o['tau']:.2f}, {o['tokens_per_s']:.1f} tok/s; acceptance {acc}", flush=True)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(results, f, indent=1)
    print(markdown(results))


def markdown(results) -> str:
    lines = ["| prompts | tree (total, depth, top_k) | T | category | n | tau | tok/s | acceptance d1 / d2 / ... |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results["runs"]:
        rows = [("**all**", r["overall"])] + list(r["by_category"].items())
        for cat, s in rows:
            by_depth = {int(d): a for d, a in s["acceptance_by_depth"].items()}  # JSON keys are strings
            acc = " / ".join(f"{by_depth[d]:.2f}" for d in sorted(by_depth))
            lines.append(f"| {r['prompts']} | {tuple(r['tree'])} | {r['temperature']} | {cat} | {s['prompts']} | "
                         f"{s['tau']:.2f} | {s['tokens_per_s']:.1f} | {acc} |")
    return "\n".join(lines)
