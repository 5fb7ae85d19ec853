"""Evaluating a head end to end: tau and per-depth acceptance on eval prompt sets.

Both metrics are the trace's (`eagle_core.trace.tau` and `acceptance_rates`, defined there
once): tau is the field's "mean accepted length", tokens per draft/verify cycle, the bonus
token included (vanilla = 1.00); the acceptance rate at depth d is the share of cycles that
accepted a draft at depth d among those that drafted at depth d and accepted everything up to
depth d - 1. Prompts are read by `eagle_core.bench.prompts`, the project's one prompt reader.
"""
from __future__ import annotations

import os
import time
from collections import defaultdict

import torch

from ..bench.prompts import load_prompts
from ..config import DecodeSettings, default_tree
from ..decode import Engine
from ..engine_loading import load_engine
from ..target import load_target
from ..trace import acceptance_rates, tau
from .ids import write_manifest  # the project's atomic JSON write


def load_eval_prompts(path: str, per_category: int | None = None) -> list[tuple[str, str]]:
    """(category, first turn) pairs; at most `per_category` from each category, in file order."""
    return [(p.category, p.text) for p in load_prompts(path, per_category=per_category)]


def summarize(runs) -> dict:
    """tau, tokens/s and acceptance by depth over all cycles of `runs` pooled."""
    cycles = [c for r in runs for c in r.cycles]
    return {
        "prompts": len(runs),
        "tau": tau(cycles),
        "tokens_per_s": sum(r.summary.new_tokens for r in runs) / max(sum(r.summary.wall_s for r in runs), 1e-9),
        "acceptance_by_depth": acceptance_rates(cycles),
    }


def evaluate_prompts(engine: Engine, prompts, settings: DecodeSettings, log=print) -> dict:
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
    method = getattr(args, "method", "eagle2")
    eagle3 = method == "eagle3"  # --head names the head of the method evaluated
    engine = load_engine(load_target(), head=None if eagle3 else args.head, head3=args.head if eagle3 else None,
                         methods=(method,), full_vocab=args.draft_vocab == "full")
    if eagle3:
        name, draft_vocab = engine.head3_name, engine.drafter3.head.config.draft_vocab_size
    else:
        name, draft_vocab = engine.head_name, len(engine.draft_vocab) if engine.draft_vocab else "full"
    results = {"head": name, "method": method, "draft_vocab": draft_vocab, "runs": []}
    for tree in args.tree or [default_tree(engine.target.device)]:  # TreeSettings (parsed by the command line)
        for temp in args.temperatures:
            s = tree.settings(method, temperature=temp, max_new_tokens=args.max_new_tokens, seed=0)
            for path in args.prompts:
                prompts = load_eval_prompts(path, args.per_category)[:args.limit]
                print(f"{path}: {len(prompts)} prompts, tree depth={tree.depth} top_k={tree.width} "
                      f"total={tree.total_tokens}, T={temp}", flush=True)
                res = evaluate_prompts(engine, prompts, s, log=lambda m: print(m, flush=True))
                results["runs"].append({"prompts": path.split("/")[-1],
                                        "tree": [tree.depth, tree.width, tree.total_tokens], "temperature": temp,
                                        "max_new_tokens": args.max_new_tokens, **res})
                o = res["overall"]
                acc = ", ".join(f"d{d} {a:.2f}" for d, a in o["acceptance_by_depth"].items())
                print(f"  => tau {o['tau']:.2f}, {o['tokens_per_s']:.1f} tok/s; acceptance {acc}", flush=True)
                if args.json_out:  # after every set, so that a long evaluation cut short keeps what it measured
                    write_manifest(os.path.dirname(args.json_out) or ".", results, os.path.basename(args.json_out))
    print(markdown(results))


def markdown(results) -> str:
    lines = ["| prompts | tree (depth, top_k, total) | T | category | n | tau | tok/s | acceptance d1 / d2 / ... |",
             "|---|---|---|---|---|---|---|---|"]
    for r in results["runs"]:
        rows = [("**all**", r["overall"])] + list(r["by_category"].items())
        for cat, s in rows:
            by_depth = {int(d): a for d, a in s["acceptance_by_depth"].items()}  # JSON keys are strings
            acc = " / ".join(f"{by_depth[d]:.2f}" for d in sorted(by_depth))
            lines.append(f"| {r['prompts']} | {tuple(r['tree'])} | {r['temperature']} | {cat} | {s['prompts']} | "
                         f"{s['tau']:.2f} | {s['tokens_per_s']:.1f} | {acc} |")
    return "\n".join(lines)
