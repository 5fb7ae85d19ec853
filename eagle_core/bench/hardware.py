"""The hardware lesson: why the best tree size depends on the machine, measured where it runs.

    python -m eagle_core.bench.hardware [--json-out F] [--png-out docs/img/hardware.png]
    python -m eagle_core.bench.hardware --from-json assets/learn/hardware_recorded.json --png-out docs/img/hardware.png
                                        (no measurement: the figure and table again from a recorded one)
    python -m eagle_core.bench.hardware --record   (on a quiet machine: tau per tree with the shipped head,
                                        then the timings; rewrites both files the page quotes, RECORD_COMMAND)

Measures, on this machine, the target's forward time t(k) for k = 1..64 new tokens (body with the
engine's tree mask + LM head on all k rows, costmodel.measure_forward) and the head's time per
drafting step for the frontier widths the trees use (head layer + draft LM head + top-k,
costmodel.measure_head_steps). With a table of tau per tree (measured with the shipped head,
assets/learn/tau_by_tree.json) it predicts, for each tree (depth, top-k, total):

    speedup = tau / c,   c = t(total + 1) / t(1)  +  drafting / t(1)

where drafting = one step over the catch-up tokens (the accepted path, ~tau of them) plus
depth - 1 steps over top-k frontier tokens (eagle_core/drafting/drafter.py). A second curve is a GPU
*illustration*, not measured: at batch size 1 a data-centre GPU is limited by reading the weights,
not by arithmetic, so (1) a k-token forward costs about t(1) up to k = 64, and (2) a drafting
step costs what reading the head's weights costs, as a share of reading the target's: the head
layer, its fc and its draft LM head rows against the whole target (SmolLM2-135M with the shipped
head: 8.9 M of 134.5 M weights, 0.066 t(1), about two of the target's 30 layers). So there
c = 1 + depth x share. Kernel-launch and Python overheads per step are left out of both.
Per-cycle bookkeeping (masks, cache compaction, acceptance) is left out: it is under 1% of a
cycle (docs/performance.md, "The cost model").
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

from ..config import TreeSetting
from .costmodel import measure_forward, measure_head_steps
from .prompts import MT_BENCH
from .report import machine_info

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TAU_TABLE = os.path.join(ROOT, "assets", "learn", "tau_by_tree.json")
RECORDED = os.path.join(ROOT, "assets", "learn", "hardware_recorded.json")
SPREAD = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)  # the k of the t(k)/t(1) table
CATCH_UP = (1, 2, 3, 4)  # tokens the first drafting step of a cycle processes: the accepted path
FORWARD, HEAD = "target forward, k = 1..64", "head, one drafting step per width"
# The recording: the sweep's trees plus every preset (read from config when it runs), tau on MT-bench's first
# turns, 2 per category, greedy, 128 new tokens; the page, the panel and the README quote what it writes.
SWEEP = ("1,1,1", "2,2,4", "3,2,6", "3,4,8", "4,4,12", "5,8,16", "5,8,24", "6,10,32")
RECORD_PRESETS = ("cpu", "explain", "gpu")
RECORD_PROMPTS = MT_BENCH  # the shipped MT-bench questions
RECORD_COMMAND = "python -m eagle_core.bench.hardware --record"


def tree_key(t: TreeSetting) -> str:
    return t.text


def load_tau_table(path: str = TAU_TABLE) -> dict:
    """{"trees": [TreeSetting], "tau": {tree text: tau}, ...the table's own fields (head, prompts, source)}."""
    with open(path, encoding="utf-8") as f:
        table = json.load(f)
    trees = [TreeSetting(*map(int, k.split(","))) for k in table["tau"]]
    table["trees"] = sorted(trees, key=lambda t: (t.total_tokens, t.depth))
    return table


def sizes_for(trees) -> list[int]:
    """The k to time: the spread of the table plus every tree's verification size (total + 1)."""
    return sorted(set(SPREAD) | {t.total_tokens + 1 for t in trees if t.total_tokens + 1 <= 64})


def widths_for(trees) -> list[int]:
    return sorted(set(CATCH_UP) | {t.width for t in trees})


def measure(target, head, draft_vocab, trees, ctx: int = 300, repeats: int = 3, head_repeats: int = 5,
            budget_s: float = 45.0, progress=None) -> dict:
    """Time this machine. `progress(fraction, text)` is called as the work advances.
    Rounds over all k (each visits every k; the median of the rounds is kept) stop at `repeats`,
    or earlier when another round would end past `budget_s` (a busy machine): at least one round.
    Returns {"forward_ms": {k: ms}, "step_ms": {m: ms}, "seconds", "rounds", "machine", ...}."""
    sizes, widths = sizes_for(trees), widths_for(trees)
    total = len(sizes) * repeats + len(widths)
    done = [0]

    def tick(what):
        done[0] += 1
        if progress is not None:
            progress(min(done[0] / total, 1.0), what)

    t0 = time.perf_counter()
    if progress is not None:
        progress(0.0, FORWARD)
    rounds = []
    while len(rounds) < repeats:
        r0 = time.perf_counter()
        rounds.append(measure_forward(target, ctx, sizes, 1, on_step=lambda: tick(FORWARD)))
        per_round = time.perf_counter() - r0
        if time.perf_counter() - t0 + per_round > budget_s * len(sizes) * repeats / total:
            done[0] = len(sizes) * repeats  # skip the remaining rounds' share of the bar
            break
    n_vocab = len(draft_vocab) if draft_vocab else None
    hs = measure_head_steps(target, head, ctx, widths, (n_vocab,), top_k=max(widths), repeats=head_repeats,
                            on_step=lambda: tick(HEAD))
    n_rows = n_vocab or target.lm_head.weight.shape[0]
    step = {m: hs["head_ms"][m] + hs["lm_ms"][(n_rows, m)] for m in widths}
    fwd = {k: statistics.median(r[k]["body_ms"] + r[k]["lm_head_ms"] for r in rounds) for k in sizes}
    return {"forward_ms": fwd, "step_ms": step, "seconds": time.perf_counter() - t0, "rounds": len(rounds),
            "weights": weights(target, head, n_rows),
            "machine": machine_info(target.device), "ctx": ctx, "device": str(target.device),
            "target": target.describe(), "draft_vocab": n_rows, "hardware": hardware_name(target.device),
            "date": time.strftime("%Y-%m-%d", time.gmtime())}


def weights(target, head, draft_rows: int) -> dict:
    """What one target forward and one drafting step read: {"target": the target's weights, "head_step":
    the head's (layer, fc) plus its draft LM head rows, "layers": the target's}. Counted, not timed (the
    GPU illustration)."""
    hidden = target.lm_head.weight.shape[1]
    return {"target": sum(p.numel() for p in target.model.parameters()),
            "head_step": sum(p.numel() for p in head.parameters()) + draft_rows * hidden,
            "layers": target.config.num_hidden_layers}


def gpu_head_share(measured: dict) -> float:
    """A drafting step's cost on a GPU as a share of t(1): the weights it reads over the target's."""
    w = measured["weights"]
    return w["head_step"] / w["target"]


def hardware_name(device) -> str:
    """The CPU model (as lscpu names it) or the GPU's name."""
    if str(device).startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    from ..cpu.kernels import cpu_model

    return cpu_model()


def interp(table: dict, x: float) -> float:
    """Linear interpolation in a {number: value} table (clamped at its ends)."""
    xs = sorted(table)
    if x <= xs[0]:
        return table[xs[0]]
    for a, b in zip(xs, xs[1:]):
        if x <= b:
            return table[a] + (table[b] - table[a]) * (x - a) / (b - a)
    return table[xs[-1]]


def predict(forward_ms: dict, step_ms: dict, taus: dict, trees, gpu_share: float | None = None) -> list[dict]:
    """One row per tree: tau, verify and draft cost in vanilla steps, c and the predicted speedup.
    gpu_share: the GPU illustration instead: verification costs t(1) whatever the tree size, and
    each of the depth drafting steps costs gpu_share x t(1) (reading the head's weights)."""
    t1 = forward_ms[1] if 1 in forward_ms else interp(forward_ms, 1)
    rows = []
    for t in trees:
        tau = taus[tree_key(t)]
        n = t.total_tokens + 1
        if gpu_share is not None:
            verify, draft = 1.0, t.depth * gpu_share
        else:
            verify = (forward_ms[n] if n in forward_ms else interp(forward_ms, n)) / t1
            draft = (interp(step_ms, max(1.0, min(tau, 4.0))) + (t.depth - 1) * interp(step_ms, t.width)) / t1
        c = verify + draft
        rows.append({"tree": tree_key(t), "nodes": n, "tau": tau, "verify": verify, "draft": draft,
                     "c": c, "speedup": tau / c})
    return rows


def best(rows: list[dict]) -> dict:
    return max(rows, key=lambda r: r["speedup"])


def lesson(measured: dict, table: dict) -> dict:
    """The measurement and the tau table combined: both predictions and their best trees."""
    fwd = {int(k): v for k, v in measured["forward_ms"].items()}
    step = {int(k): v for k, v in measured["step_ms"].items()}
    here = predict(fwd, step, table["tau"], table["trees"])
    share = gpu_head_share(measured)
    gpu = predict(fwd, step, table["tau"], table["trees"], gpu_share=share)
    return {"here": here, "gpu": gpu, "best_here": best(here), "best_gpu": best(gpu), "gpu_share": share,
            "ratios": {k: fwd[k] / fwd[1] for k in sorted(fwd) if k in SPREAD}}


def to_json(measured: dict) -> dict:
    return {**measured, "forward_ms": {str(k): v for k, v in measured["forward_ms"].items()},
            "step_ms": {str(k): v for k, v in measured["step_ms"].items()}}


def record_trees() -> list[TreeSetting]:
    """The recording's trees: SWEEP and the presets as config has them now, each once, by size."""
    from ..config import parse_tree

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


def load_recorded(path: str = RECORDED) -> dict:
    with open(path, encoding="utf-8") as f:
        m = json.load(f)
    m["forward_ms"] = {int(k): v for k, v in m["forward_ms"].items()}
    m["step_ms"] = {int(k): v for k, v in m["step_ms"].items()}
    return m


QUOTED_K = (8, 16, 64)  # the t(k)/t(1) the page quotes


def quoted(measured: dict | None = None, table: dict | None = None) -> dict[str, str]:
    """Every figure the page and the README quote from the recording, as text: machine, date, command,
    t(k)/t(1) for QUOTED_K, and per preset (cpu, explain, gpu as config has them now) its tree, tokens
    verified, tau, cost c in vanilla steps and predicted speedup here ("—" for a tree not recorded)."""
    m = measured or load_recorded()
    table = table or load_tau_table()
    res = lesson(m, table)
    rows = {r["tree"]: r for r in res["here"]}
    fwd = {int(k): v for k, v in m["forward_ms"].items()}
    q = {"machine": m.get("hardware", m.get("device", "?")), "date": m.get("date", "?"),
         "threads": str(m.get("threads", "?")), "command": m.get("command", RECORD_COMMAND),
         "tau_prompts": str(table.get("prompts", "?")), "t1_ms": f"{fwd[1]:.1f}"}
    for k in QUOTED_K:
        q[f"t{k}"] = f"{(fwd[k] if k in fwd else interp(fwd, k)) / fwd[1]:.2f}"
    for name in RECORD_PRESETS:
        tree = parse_preset(name)
        r = rows.get(tree)
        q[f"{name}_tree"], q[f"{name}_nodes"] = tree, str(int(tree.split(",")[2]) + 1)
        for field, fmt in (("tau", "{:.2f}"), ("verify", "{:.2f}"), ("c", "{:.2f}"), ("speedup", "{:.2f}")):
            q[f"{name}_{field}"] = fmt.format(r[field]) if r else "—"
    return q


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


def parse_preset(name: str) -> str:
    from ..config import parse_tree

    return parse_tree(name).text


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
        with open(a.from_json, encoding="utf-8") as f:
            m = json.load(f)
        m["forward_ms"] = {int(k): v for k, v in m["forward_ms"].items()}
        m["step_ms"] = {int(k): v for k, v in m["step_ms"].items()}
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
