"""The hardware lesson's command line: time this machine, or record what the app quotes.

    python -m eagle_core.bench.hardware [--json-out F] [--png-out docs/img/hardware.png]
    python -m eagle_core.bench.hardware --from-json assets/learn/hardware_recorded.json --png-out docs/img/hardware.png
                                        (no measurement: the figure and table again from a recorded one)
    python -m eagle_core.bench.hardware --record   (on a quiet machine: tau per tree with the shipped head,
                                        then the timings; rewrites both files the page quotes, RECORD_COMMAND)

The measurement and the prediction (measure, predict, lesson, quoted, the recording's files) are
eagle_core/machine/hardware.py, which the app imports without this package; this file adds the
recording's trees and prompts, `record` (tau per tree, then the timings), the README's row of the
recording, and the table and figure (hardware_png.py) for the docs.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

from ..config import TreeSetting, parse_tree
from ..machine.hardware import (RECORD_COMMAND, RECORD_PRESETS, RECORDED, ROOT, TAU_TABLE, lesson, load_recorded,
                                load_tau_table, measure, parse_preset, quoted, to_json)
from ..machine.info import hardware_name
from .prompts import MT_BENCH

# The recording: the sweep's trees plus every preset (read from config when it runs), tau on MT-bench's first
# turns, 2 per category, greedy, 128 new tokens; the page, the panel and the README quote what it writes.
SWEEP = ("1,1,1", "2,2,4", "3,2,6", "3,4,8", "4,4,12", "5,8,16", "5,8,24", "6,10,32")
RECORD_PROMPTS = MT_BENCH  # the shipped MT-bench questions


def record_trees() -> list[TreeSetting]:
    """The recording's trees: SWEEP and the presets as config has them now, each once, by size."""
    trees = {t.text: t for t in map(parse_tree, SWEEP + RECORD_PRESETS)}
    return sorted(trees.values(), key=lambda t: (t.total_tokens, t.depth))


def record(engine, prompts_path: str = RECORD_PROMPTS, per_category: int = 2, max_new_tokens: int = 128,
           repeats: int = 5, tau_path: str = TAU_TABLE, recorded_path: str = RECORDED, log=print) -> tuple[dict, dict]:
    """Tau per tree (record_trees) on the prompts, then this machine's timings; writes both files, each
    with its machine, date and RECORD_COMMAND. -> (tau table, measurement)."""
    from ..train.evaluate import evaluate_prompts, load_eval_prompts

    trees, prompts = record_trees(), load_eval_prompts(prompts_path, per_category)
    taus = {}
    for t in trees:
        log(f"tau of tree {t.text} on {len(prompts)} prompts")
        res = evaluate_prompts(engine, prompts, t.settings("eagle2", temperature=0.0, max_new_tokens=max_new_tokens,
                                                            seed=0), log=lambda _: None)
        taus[t.text] = round(res["overall"]["tau"], 4)
    date = time.strftime("%Y-%m-%d", time.gmtime())
    machine = hardware_name(engine.target.device)
    table = {"source": RECORD_COMMAND, "head": engine.head_name, "method": "eagle2",
             "draft_vocab": len(engine.draft_vocab) if engine.draft_vocab else "full",
             "prompts": f"MT-bench first turns, {per_category} per category = {len(prompts)} prompts "
                        f"({os.path.basename(prompts_path)})",
             "per_category": per_category, "n_prompts": len(prompts), "max_new_tokens": max_new_tokens, "temperature": 0.0, "presets": {n: parse_preset(n) for n in RECORD_PRESETS},
             "machine": f"{machine}; tau does not depend on the machine", "date": date, "tau": taus}
    with open(tau_path, "w", encoding="utf-8") as f:
        json.dump(table, f, indent=1)
    log("timing the machine")
    m = measure(engine.target, engine.drafter.head, engine.draft_vocab, trees, repeats=repeats,
                progress=lambda f, what: log(f"  {100 * f:3.0f}%  {what}"))
    m.update(threads=torch.get_num_threads(), command=RECORD_COMMAND)
    with open(recorded_path, "w", encoding="utf-8") as f:
        json.dump(to_json(m), f, indent=1)
    return table, m


README_MARK = "the hardware panel's recording"


def readme_row(q: dict[str, str]) -> str:
    """The README's row of the recording ("Current numbers"); tests check the README carries exactly this."""
    x = lambda name: f"{q[name + '_speedup']}x" if q[name + "_tau"] != "—" else "not recorded"  # noqa: E731
    return (f"| {q['machine']}, {q['date']} | {README_MARK}: t(8), t(16), t(64) over t(1); predicted for "
            f"cpu / explain / gpu | {q['t8']}, {q['t16']}, {q['t64']}; {x('cpu')} / {x('explain')} / {x('gpu')} |")


def write_readme_row(path: str = os.path.join(ROOT, "README.md")) -> None:
    """Put readme_row() in the README's table, in place of the row it had (the recording's one command)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = next(i for i, line in enumerate(lines) if README_MARK in line and line.startswith("|"))
    lines[i] = readme_row(quoted())
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def main(argv=None) -> dict:
    from ..engine_loading import load_engine

    ap = argparse.ArgumentParser(prog="python -m eagle_core.bench.hardware", description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3, help="rounds over all k (median)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default=None)
    ap.add_argument("--tau-table", default=TAU_TABLE)
    ap.add_argument("--json-out", default=None, help="the measurement as JSON (the app shows it before a run)")
    ap.add_argument("--png-out", default=None, help="the figure as PNG (matplotlib; for the docs)")
    ap.add_argument("--from-json", default=None, help="no measurement: report and draw a recorded one (--json-out's file)")
    ap.add_argument("--record", action="store_true",
                    help="tau per tree (the sweep and every preset) and the timings, written to the files the page "
                         "reads (assets/learn/tau_by_tree.json, hardware_recorded.json) and docs/img/hardware.png; "
                         "2 threads unless --threads; run on a quiet machine")
    ap.add_argument("--prompts", default=RECORD_PROMPTS, help="--record's prompts (MT-bench's question file)")
    a = ap.parse_args(argv)
    if a.record:
        torch.set_num_threads(a.threads or 2)
        engine = load_engine(device=a.device, methods=("eagle2",))
        record(engine, a.prompts, repeats=max(a.repeats, 5), log=lambda s: print(s, file=sys.stderr, flush=True))
        a.png_out = a.png_out or os.path.join(ROOT, "docs", "img", "hardware.png")
        a.tau_table, a.json_out = TAU_TABLE, None
    elif a.threads:
        torch.set_num_threads(a.threads)
    table = load_tau_table(a.tau_table)
    if a.record:
        m = load_recorded()
        write_readme_row()
    elif a.from_json:
        m = load_recorded(a.from_json)
    else:
        engine = load_engine(device=a.device, methods=("eagle2",))
        log = lambda f, what: print(f"  {100 * f:3.0f}%  {what}", file=sys.stderr, flush=True)  # noqa: E731
        m = measure(engine.target, engine.drafter.head, engine.draft_vocab, table["trees"], repeats=a.repeats,
                    progress=log)
        m["threads"] = torch.get_num_threads()
    res = lesson(m, table)
    print(f"measured in {m['seconds']:.1f} s ({m['rounds']} round(s) over k) on {m['hardware']}, {m['machine']}")
    print("k     " + " ".join(f"{k:>6}" for k in res["ratios"]))
    print("t(k)/t(1) " + " ".join(f"{v:6.2f}" for v in res["ratios"].values()))
    print(f"t(1) = {m['forward_ms'][1]:.1f} ms; head step ms: " + ", ".join(f"m={k} {v:.1f}" for k, v in m["step_ms"].items()))
    print("| tree | tau | verify (steps) | draft (steps) | c | speedup here | speedup, GPU illustration |")
    for h, g in zip(res["here"], res["gpu"]):
        print(f"| {h['tree']} | {h['tau']:.2f} | {h['verify']:.2f} | {h['draft']:.2f} | {h['c']:.2f} | "
              f"{h['speedup']:.2f}x | {g['speedup']:.2f}x |")
    print(f"best here: {res['best_here']['tree']}; best in the GPU illustration (flat verification, a head step "
          f"{res['gpu_share']:.3f} t(1)): {res['best_gpu']['tree']}")
    if a.json_out and not a.from_json:
        with open(a.json_out, "w", encoding="utf-8") as f:
            json.dump(to_json(m), f, indent=1)
    if a.png_out:
        from .hardware_png import render_png

        render_png(m, table, res, a.png_out)
    return res


if __name__ == "__main__":
    main()
