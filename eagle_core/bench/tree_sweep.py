"""Which EAGLE-2 tree decodes fastest here: vanilla and several trees, interleaved per prompt.

    python -m eagle_core.bench.tree_sweep --limit 12 --tree 2,2,4 3,3,6 3,4,8 4,4,10 4,6,12 5,6,16 5,8,24 --threads 2 [--methods eagle2,eagle3]

Each prompt is decoded by vanilla and by EAGLE-2 (and with --methods eagle2,eagle3 also EAGLE-3,
which drafts the same kind of tree) with every tree (depth,width,total_tokens, the
order of config.parse_tree) one after another, so a drift in machine speed hits all settings
alike; the table gives tokens/s, tau and the speedup over vanilla summed over all prompts, and
whether every greedy output equals vanilla's. The winner is what the `cpu` preset should be.
"""
from __future__ import annotations

import argparse
import json
import time

import torch

from ..config import DecodeSettings, add_tree_argument, parse_trees
from ..machine.info import machine_info
from .prompts import MT_BENCH, load_prompts

SWEEP = parse_trees(["2,2,4", "3,3,6", "3,4,8", "4,4,10", "4,6,12", "5,6,16", "5,8,24"])  # the default trees swept


def sweep(engine, prompts, trees, max_new_tokens: int = 128, log=print, methods=("eagle2",)) -> dict:
    """{"vanilla": {...}, "d,k,t": {...}}: tokens, seconds, cycles, tau and identical-output counts
    (with more than EAGLE-2 in `methods`, keys "eagle2 d,k,t", "eagle3 d,k,t")."""
    base = DecodeSettings(method="vanilla", max_new_tokens=max_new_tokens)
    settings = {"vanilla": base}
    label = (lambda m, t: t.text) if tuple(methods) == ("eagle2",) else (lambda m, t: f"{m} {t.text}")
    settings.update({label(m, t): base.with_(method=m, **t.fields()) for t in trees for m in methods})
    engine.run(prompts[0].text, base.with_(max_new_tokens=8))  # warm-up
    stats = {name: dict(tokens=0, seconds=0.0, cycles=0, committed=0.0, identical=0, prompts=0) for name in settings}
    for p in prompts:
        vanilla_ids = None
        for name, s in settings.items():
            t0 = time.perf_counter()
            r = engine.run(p.text, s).summary
            wall = time.perf_counter() - t0
            st = stats[name]
            st["tokens"] += r.new_tokens
            st["seconds"] += wall
            st["cycles"] += r.cycles
            st["committed"] += r.tau * r.cycles  # trace.tau's count, before the stop cut
            st["prompts"] += 1
            if name == "vanilla":
                vanilla_ids = list(r.token_ids)
            st["identical"] += int(list(r.token_ids) == vanilla_ids)
        log(f"prompt {p.index}: " + ", ".join(f"{n} {stats[n]['tokens'] / stats[n]['seconds']:.1f}" for n in stats))
    for st in stats.values():
        st["tokens_per_s"] = st["tokens"] / st["seconds"]
        st["tau"] = st["committed"] / max(st["cycles"], 1)
    v = stats["vanilla"]["tokens"] / stats["vanilla"]["seconds"]
    for st in stats.values():
        st["speedup"] = st["tokens_per_s"] / v
    return stats


def render_markdown(stats: dict, info: dict) -> str:
    lines = [f"CPU: {info.get('cpu', '?')}, {info.get('threads')} threads, {stats['vanilla']['prompts']} prompts.", "",
             "| setting (depth,top_k,total) | tokens/s | tau | speedup over vanilla | greedy identical |",
             "|---|---|---|---|---|"]
    for name, st in stats.items():
        lines.append(f"| {name} | {st['tokens_per_s']:.1f} | {st['tau']:.2f} | {st['speedup']:.2f}x | "
                     f"{st['identical']}/{st['prompts']} |")
    return "\n".join(lines)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m eagle_core.bench.tree_sweep", description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", default=MT_BENCH, help="JSONL prompts (default: the shipped MT-bench)")
    ap.add_argument("--limit", type=int, default=12)
    ap.add_argument("--per-category", type=int, default=None, help="at most N prompts per category (before --limit)")
    ap.add_argument("--head", default=None, help="EAGLE-1/2 head directory (default: the shipped head)")
    add_tree_argument(ap, multiple=True, default=SWEEP)
    ap.add_argument("--methods", default="eagle2", help="comma list of eagle2, eagle3 (each tree with each)")
    ap.add_argument("--head3", default=None, help="EAGLE-3 head directory (default: the shipped EAGLE-3 head)")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    from ..engine_loading import load_engine

    trees, methods = list(args.tree), tuple(m for m in args.methods.split(",") if m)
    if not methods or set(methods) - {"eagle2", "eagle3"}:
        ap.error(f"--methods takes eagle2 and/or eagle3 (got {args.methods!r})")
    engine = load_engine(head=args.head, head3=args.head3, methods=methods)
    target, name = engine.target, engine.head_name
    prompts = load_prompts(args.prompts, per_category=args.per_category)[:args.limit]
    stats = sweep(engine, prompts, trees, args.max_new_tokens, methods=methods)
    info = {**machine_info(target.device), "kernels": target.describe(), "head": name}
    md = render_markdown(stats, info)
    print(md)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"machine": info, "args": {**vars(args), "tree": [t.text for t in trees]}, "stats": stats}, f, indent=1)
    return stats


if __name__ == "__main__":
    main()
