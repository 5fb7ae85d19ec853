"""A cost model of this hardware for EAGLE: what a cycle costs, and which tree pays off.

    python -m eagle_core.bench.costmodel --md-out costmodel.md --png-out docs/img/costmodel.png

Speculative decoding wins when  speedup = tau / c,  where tau is the mean tokens committed per
cycle and c the cost of one draft/verify cycle in units of one vanilla step (the analysis of
Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding").
On a 2-core CPU a tree of n nodes costs far more than one token (the target forward is not
free in n as on a GPU), so c grows with the tree and the best tree is a trade. Measured here:

  1. target forward: the model body on n = 1..64 new tokens over a ~300-token cache, with the
     engine's 4D tree mask (median of several repeats, sizes interleaved), and the LM head on n rows
  2. head step: the EAGLE head on m tokens (catch-up m = 1..4, expansion m = tree top-k), and
     the draft LM head + log-softmax + top-k over the full and a reduced draft vocabulary
     (1 and 2: eagle_core/machine/timing.py, the probes the app's hardware panel runs too)
  3. whole cycles: real engine runs per tree setting (random head: every tree is full size),
     giving cycle ms, its draft/verify split, and c = cycle ms / vanilla cycle ms
  4. a cProfile breakdown of one EAGLE cycle (cycle_profile.py)

`best_setting(taus, cycle_ms)` picks the tree that maximises tau / cycle time once tau per
setting is measured with the trained head (`--prompts FILE` measures it here).
"""
from __future__ import annotations

import argparse
import json

import torch

from ..config import DecodeSettings, TreeSetting, add_tree_argument
from ..decode import Engine
from ..machine.info import machine_info
from ..machine.timing import measure_forward, measure_head_steps
from .cost_report import forward_table, head_table, render_png, tree_rows, tree_table
from .cycle_profile import profile_cycles, profile_markdown
from .prompts import load_prompts
from .report import replace_block


DEFAULT_TREES = (TreeSetting(3, 4, 8), TreeSetting(4, 6, 12), TreeSetting(5, 8, 16), TreeSetting(5, 8, 24),
                 TreeSetting(6, 10, 32), TreeSetting(6, 10, 60))


def best_setting(taus: dict, cycle_ms: dict):
    """Pick the tree setting with the most tokens per second, tau / cycle time.

    taus: {setting: measured tau}; cycle_ms: {setting: measured ms per cycle}. Settings missing
    from either are skipped. Returns (setting, predicted tokens per second).
    """
    scored = {s: 1e3 * taus[s] / cycle_ms[s] for s in taus if s in cycle_ms and cycle_ms[s] > 0}
    if not scored:
        raise ValueError("no setting has both a tau and a cycle cost")
    best = max(scored, key=scored.get)
    return best, scored[best]


# -- 3. whole cycles --------------------------------------------------------------------------
def context_prompt(target, ctx: int) -> str:
    """A prompt text whose chat-template encoding is about `ctx` tokens."""
    para = ("The history of computing is a story of ideas about speed: how to do more work with the same "
            "machine, how to wait less for memory, and how to guess what will be needed next. ")
    ids = target.tokenizer(para * (ctx // 20 + 2), add_special_tokens=False)["input_ids"]
    extra = len(target.encode_prompt("", True)) if getattr(target.tokenizer, "chat_template", None) else 0
    return target.decode(ids[: max(ctx - extra, 8)]) + "\nSummarise the text above."


def measure_cycles(target, head, trees, vocabs: dict, prompt: str, new_tokens: int = 32) -> dict:
    """Engine runs: {"vanilla": row, (vocab_name, setting): row}, row = {"cycle_ms", "draft_ms",
    "verify_ms", "tau", "cycles"}. Per-cycle times exclude the prefill."""
    def row(engine, s):
        r = engine.run(prompt, s).summary
        n = max(r.cycles, 1)
        return {"cycle_ms": (r.wall_s * 1e3 - r.prefill_ms) / n, "draft_ms": r.draft_s * 1e3 / n,
                "verify_ms": r.verify_s * 1e3 / n, "tau": r.tau, "cycles": r.cycles}

    out = {}
    van = Engine(target)
    van.run(prompt, DecodeSettings(method="vanilla", max_new_tokens=4))  # warm-up
    out["vanilla"] = row(van, DecodeSettings(method="vanilla", max_new_tokens=new_tokens))
    for vname, vocab in vocabs.items():
        eng = Engine(target, head, vocab, "costmodel")
        eng.run(prompt, trees[0].settings(max_new_tokens=4))  # warm-up
        for t in trees:
            out[(vname, t)] = row(eng, t.settings(max_new_tokens=new_tokens))
    return out


def measure_taus(engine, prompts: list[str], trees, new_tokens: int) -> dict:
    """Mean tau per tree setting with the given (trained) head: {setting: tau}."""
    taus = {}
    for t in trees:
        runs = [engine.run(p, t.settings(max_new_tokens=new_tokens)).summary for p in prompts]
        cyc = sum(r.cycles for r in runs)
        taus[t] = sum(r.tau * r.cycles for r in runs) / cyc if cyc else 1.0
    return taus


# -- CLI --------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m eagle_core.bench.costmodel", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--ctx", type=int, default=300, help="committed context (cache) length")
    ap.add_argument("--max-n", type=int, default=64, help="forward sizes 1..MAX_N")
    ap.add_argument("--repeats", type=int, default=5)
    add_tree_argument(ap, multiple=True, default=DEFAULT_TREES)
    ap.add_argument("--draft-vocab", type=int, default=8192, help="reduced draft vocabulary size to compare (0: skip)")
    ap.add_argument("--cycle-tokens", type=int, default=32, help="new tokens per engine run for cycle costs")
    ap.add_argument("--head", default=None, help="head directory (default: shipped head, else random)")
    ap.add_argument("--prompts", default=None, help="JSONL prompts: measure tau per tree with the head")
    ap.add_argument("--limit", type=int, default=4, help="prompts used for tau")
    ap.add_argument("--tau-tokens", type=int, default=128, help="new tokens per prompt for tau")
    ap.add_argument("--no-profile", action="store_true")
    ap.add_argument("--quick", action="store_true", help="a seconds-long smoke run (few sizes, 2 trees)")
    ap.add_argument("--model", default=None)
    ap.add_argument("--device", default=None)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--md-out", default=None)
    ap.add_argument("--png-out", default=None)
    ap.add_argument("--json-out", default=None)
    ap.add_argument("--update-doc", default=None, metavar="MD",
                    help="write the tables into MD between <!-- costmodel:begin/end --> markers")
    return ap


def main(argv=None) -> dict:
    import sys

    from ..engine_loading import load_engine

    a = build_parser().parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    trees = tuple(a.tree)
    sizes = list(range(1, a.max_n + 1))
    if a.quick:
        sizes, trees, a.repeats, a.cycle_tokens = [1, 4, 16], trees[:2], 2, 8
    engine = load_engine(a.model, a.head, device=a.device, methods=("eagle2",))
    target, head, vocab, head_name = engine.target, engine.drafter.head, engine.draft_vocab, engine.head_name
    log(f"target {target.describe()}; head {head_name}; machine {machine_info(target.device)}")

    log("1/4 target forward ...")
    fwd = measure_forward(target, a.ctx, sizes, a.repeats)
    log("2/4 head steps ...")
    widths = sorted({1, 2, 4} | {t.width for t in trees})
    vocab_sizes = (None,) + ((a.draft_vocab,) if a.draft_vocab else ())
    hs = measure_head_steps(target, head, a.ctx, widths, vocab_sizes, repeats=max(a.repeats, 3))
    log("3/4 whole cycles per tree ...")
    prompt = context_prompt(target, a.ctx)
    vocabs = {f"{len(vocab)} (head's)" if vocab else f"{target.vocab_size} (full)": vocab}
    if a.draft_vocab and not vocab:
        vocabs[str(a.draft_vocab)] = list(range(a.draft_vocab))  # which ids does not matter for timing
    cycles = measure_cycles(target, head, trees, vocabs, prompt, a.cycle_tokens)
    taus = None
    if a.prompts:
        ps = [p.text for p in load_prompts(a.prompts, a.limit)]
        taus = measure_taus(engine, ps, trees, a.tau_tokens)
    prof = None
    if not a.no_profile:
        log("4/4 profile one EAGLE configuration ...")
        t = trees[min(len(trees) - 1, 3)] if not a.quick else trees[0]
        prof = profile_cycles(engine, prompt, t.settings(max_new_tokens=a.cycle_tokens))
        prof["setting"] = t.label

    parts = [f"Measured on {target.describe()}, {torch.get_num_threads()} threads, cache {a.ctx} tokens, "
             f"head `{head_name}`, median of {a.repeats}. Machine: {machine_info(target.device)}.",
             "", "**Target forward** (engine's 4D tree mask; LM head on all n rows):", "", forward_table(fwd),
             "", "**One head step** (the head layer on m tokens; draft LM head + log-softmax + top-k):", "",
             head_table(hs), "", "**Whole cycles per tree** (engine runs, prefill excluded; c = cycle / vanilla "
             "cycle; speedup = τ / c):", "", tree_table(cycles, taus)]
    if taus:
        cyc_ms = {t: r["cycle_ms"] for (v, t), r in cycles.items() if v == next(iter(vocabs))} if cycles else {}
        best, tps = best_setting(taus, cyc_ms)
        parts += ["", f"Best tree for the measured τ: **{best.label}**, predicted {tps:.1f} tok/s "
                      f"({tps * cycles['vanilla']['cycle_ms'] / 1e3:.2f}× vanilla)."]
    if prof:
        parts += ["", f"**Profile of one EAGLE cycle** (tree {prof['setting']}, cProfile):", "", profile_markdown(prof)]
    md = "\n".join(parts)
    print(md)
    result = {
        "machine": machine_info(target.device), "ctx": a.ctx, "head": head_name,
        "forward": {str(n): v for n, v in fwd.items()},
        "head_steps": {"head_ms": {str(m): v for m, v in hs["head_ms"].items()},
                       "lm_ms": {f"{N}x{m}": v for (N, m), v in hs["lm_ms"].items()}},
        "vanilla_cycle_ms": cycles["vanilla"]["cycle_ms"], "trees": tree_rows(cycles, taus),
        "profile": prof,
    }
    if a.md_out:
        with open(a.md_out, "w", encoding="utf-8") as f:
            f.write(md + "\n")
    if a.update_doc:
        replace_block(a.update_doc, "costmodel", md)
    if a.json_out:
        with open(a.json_out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    if a.png_out:
        render_png(fwd, hs, cycles, a.png_out, title=f"{target.describe()}, {torch.get_num_threads()} threads")
    return result


if __name__ == "__main__":
    main()
