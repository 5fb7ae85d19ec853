"""Held-out top-1 and tau of the head lineages against cumulative training hours (issue 30).

The curated file (docs/data/training_curves.json) lists each family's runs in order: its log,
which held-out key to read, and what the logs do not hold (machine, held-out set, tau with its
source). Hours are read from the logs: a run starts where the earlier runs of its family ended
(the sum of their last elapsed_s) and each held-out evaluation sits at start + elapsed_s / 3600.
A run's tau points sit at its end. `--extra-log3` adds log3.jsonl files of the EAGLE-3 run that
continues the lineage: their elapsed_s is cumulative within that run, after the last listed run.
"""
from __future__ import annotations

import json
import os

DEFAULT_DATA = os.path.join("docs", "data", "training_curves.json")
TREES_SHOWN = ("2,2,4", "6,10,60")  # the CPU tree and the published one; the JSON also holds 5,8,16


def read_log(path: str) -> list[dict]:
    """The JSON lines of a training log; console lines (progress bars, "training done") are skipped."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
    return out


def log_summary(records: list[dict], top1_key: str = "top1") -> dict:
    """steps and elapsed_s at the log's end, and the held-out evaluations as [step, elapsed_s, top1]."""
    timed = [r for r in records if "elapsed_s" in r]
    evals = [[r.get("step", 0), r["elapsed_s"], r[top1_key]] for r in timed if top1_key in r]
    return {"steps": max((r.get("step", 0) for r in timed), default=0),
            "elapsed_s": max((r["elapsed_s"] for r in timed), default=0.0),
            "evals": evals}


def derive(data: dict, root: str = ".") -> dict:
    """Fill every run's `derived` from its log: steps, elapsed_s, hours at start and end, and the
    held-out top-1 per evaluation as [step, hours, top1] (hours cumulative within the family)."""
    for fam in data["families"].values():
        hours = 0.0
        for run in fam["runs"]:
            s = log_summary(read_log(os.path.join(root, run["log"])), run.get("top1_key", "top1"))
            start = hours
            hours = start + s["elapsed_s"] / 3600
            run["derived"] = {"steps": s["steps"], "elapsed_s": s["elapsed_s"], "hours_start": round(start, 4),
                              "hours_end": round(hours, 4),
                              "top1": [[st, round(start + e / 3600, 4), round(v, 4)] for st, e, v in s["evals"]]}
    return data


def family_end_hours(fam: dict) -> float:
    return fam["runs"][-1]["derived"]["hours_end"] if fam["runs"] else 0.0


def extra_segments(paths, base_hours: float) -> list[list[tuple[float, float]]]:
    """One [(hours, top1), ...] per extra log3.jsonl: hours = base_hours + elapsed_s / 3600."""
    segs = []
    for p in paths or ():
        s = log_summary(read_log(p))
        segs.append([(round(base_hours + e / 3600, 4), v) for _, e, v in s["evals"]])
    return segs


def build_curves(data: dict, root: str = ".", extra_log3=()) -> dict:
    """-> {family: {"label", "top1": [[(hours, top1), ...] per run], "tau": {tree: [(hours, tau), ...]},
    "ends": [(hours, head number, top1) of each head's last evaluation], "extra": [[(hours, top1), ...] per extra log]}}."""
    derive(data, root)
    out = {}
    for name, fam in data["families"].items():
        tau = {}
        for run in fam["runs"]:
            for t in run.get("tau", []):
                tau.setdefault(t["tree"], []).append((run["derived"]["hours_end"], t["tau"]))
        out[name] = {"label": fam["label"],
                     "top1": [[(h, v) for _, h, v in run["derived"]["top1"]] for run in fam["runs"]],
                     "tau": tau,
                     "ends": [(run["derived"]["top1"][-1][1], run["head"], run["derived"]["top1"][-1][2])
                              for run in fam["runs"] if run.get("head") and run["derived"]["top1"]],
                     "extra": []}
    if extra_log3:
        out["eagle3"]["extra"] = extra_segments(extra_log3, family_end_hours(data["families"]["eagle3"]))
    return out


COLORS = {"eagle2": "tab:blue", "eagle3": "tab:orange"}
NOTE = ("All points measured. Held-out sets differ between runs (53 to 319 sequences of the target's own answers); "
        "where a run logged a step-0 evaluation, its first point is\n"
        "the previous head on that run's set, so a jump at a run boundary is a change of set, not of head. "
        "Hours: wall-clock elapsed_s of each run's log, summed along the lineage\n"
        "(EAGLE-2 from the first head's 3-epoch pilot), on different 2-vCPU machines (AMD EPYC, Zen 4, Zen 5, Intel Xeon), "
        "1-2 threads; every run read cached target features but the third EAGLE-3 head's two epochs (a target forward per step).\n"
        "tau: 16 MT-bench prompts (2 per category), greedy, 128 new tokens, at the end of the run that made the head. "
        "Data and sources: docs/data/training_curves.json")


def _plot_top1(ax, curves: dict) -> None:
    for name, c in curves.items():
        col = COLORS.get(name, None)
        for i, seg in enumerate(c["top1"]):
            if seg:
                xs, ys = zip(*seg)
                ax.plot(xs, ys, "o-", color=col, ms=4, lw=1.5,
                        label=f"{c['label']}, measured" if i == 0 else None)
        for j, seg in enumerate(c["extra"]):
            if seg:
                xs, ys = zip(*seg)
                ax.plot(xs, ys, "s:", color=col, mfc="white", ms=4,
                        label=f"{c['label']}, continuing run (--extra-log3), measured" if j == 0 else None)
        for h, head, v in c["ends"]:
            ax.annotate(str(head), (h, v), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8,
                        color=col)
    ax.set_xlabel("cumulative training hours (wall clock)")
    ax.set_ylabel("held-out top-1 (draft = target argmax)")
    ax.set_title("Held-out top-1; numbers: the head at the end of each run", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")


def _plot_tau(ax, curves: dict) -> None:
    styles = {"2,2,4": ("o-", "CPU tree 2,2,4"), "6,10,60": ("^--", "tree 6,10,60")}
    for name, c in curves.items():
        for tree in TREES_SHOWN:
            pts = c["tau"].get(tree)
            if pts:
                xs, ys = zip(*sorted(pts))
                style, what = styles[tree]
                ax.plot(xs, ys, style, color=COLORS.get(name), ms=5, label=f"{c['label']}, {what}, measured")
    ax.set_xlabel("cumulative training hours (wall clock)")
    ax.set_ylabel("tau (tokens per cycle, MT-bench 16 prompts, greedy)")
    ax.set_title("tau of each head", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")


def plot_curves(curves: dict, out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(13, 5.8))
    _plot_top1(a, curves)
    _plot_tau(b, curves)
    fig.suptitle("EAGLE heads for SmolLM2-135M-Instruct: accuracy and tau against training hours on CPUs")
    fig.text(0.01, 0.01, NOTE, fontsize=8, va="bottom", ha="left")
    fig.tight_layout(rect=(0, 0.13, 1, 1))
    os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def run_curves(args) -> None:
    with open(args.data, encoding="utf-8") as f:
        data = json.load(f)
    curves = build_curves(data, args.root, args.extra_log3)
    if args.refresh_data:
        with open(args.data, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
            f.write("\n")
        print(f"wrote {args.data}")
    for name, c in curves.items():
        last = [seg[-1] for seg in c["top1"] + c["extra"] if seg]
        if last:
            h, v = max(last)
            print(f"{c['label']}: {h:.2f} h, held-out top-1 {v:.3f} (last evaluation)")
    plot_curves(curves, args.out)
    print(f"wrote {args.out}")
