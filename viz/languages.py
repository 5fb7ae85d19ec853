"""tau per language: the same benchmark asked in English and in Chinese (the Learn tab's figure).

The numbers come from `python -m eagle_core.train eval --json-out ...` over the paired prompt
sets (MGSM en/zh, MT-bench en/zh); the shipped copy is assets/learn/per_language.json, a list of
such results (one per head). Nothing here runs a model.
"""
from __future__ import annotations

import json
import os

import plotly.graph_objects as go

from .i18n import FIGURE_TEXT
from .style import BLUE, ORANGE, base_layout, empty_figure

PER_LANGUAGE_FILE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "assets", "learn",
                                 "per_language.json")

# prompt file -> (benchmark, language)
PAIRS = {
    "mgsm_en.jsonl": ("MGSM", "English"), "mgsm_zh.jsonl": ("MGSM", "Chinese"),
    "mt_bench_question.jsonl": ("MT-bench", "English"), "mt_bench_zh_question.jsonl": ("MT-bench", "Chinese"),
}
LANG_STYLE = {"English": (BLUE, ""), "Chinese": (ORANGE, "/")}  # colour and hatching: not told by colour alone


def language_rows(results: list[dict]) -> list[dict]:
    """One row per (head, tree, temperature, benchmark, language) from eval results."""
    rows = []
    for res in results:
        method = "EAGLE-3" if res.get("method") == "eagle3" else "EAGLE-2"
        for run in res["runs"]:
            if run["prompts"] not in PAIRS:
                continue
            bench, lang = PAIRS[run["prompts"]]
            o = run["overall"]
            rows.append({"method": method, "tree": tuple(run["tree"]), "temperature": run["temperature"],
                         "benchmark": bench, "language": lang, "prompts": o["prompts"], "tau": o["tau"],
                         "tokens_per_s": o["tokens_per_s"], "by_depth": o.get("acceptance_by_depth") or {}})
    return rows


def load_language_rows(path: str = PER_LANGUAGE_FILE) -> list[dict]:
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return language_rows(json.load(f))


def language_table(rows: list[dict], lang: str = "en") -> str:
    """Markdown: tau in English and Chinese side by side, their ratio, and acceptance per depth itself (of the
    cycles whose accepted path reached depth d - 1, the share that accepted a draft at depth d): tau sums the
    depths up, the per-depth rates show where the guesses stop being accepted."""
    if not rows:
        return ""
    by = {(r["method"], r["tree"], r["temperature"], r["benchmark"], r["language"]): r for r in rows}
    keys = sorted({k[:4] for k in by}, key=lambda k: (k[0], k[3], k[1], k[2]))
    lines = [FIGURE_TEXT("lang.header", lang), "|---|---|---|---|---|---|---|---|"]
    for k in keys:
        en, zh = by.get((*k, "English")), by.get((*k, "Chinese"))
        cell = lambda r: f"{r['tau']:.2f} ({r['prompts']})" if r else "–"
        ratio = f"{zh['tau'] / en['tau']:.2f}" if en and zh else "–"
        tree = ",".join(map(str, k[1])) + (f", T {k[2]:g}" if k[2] else "")  # sampled rows name their temperature
        lines.append(f"| {k[0]} | {k[3]} | {tree} | {cell(en)} | {cell(zh)} | {ratio} | {depths(en)} | {depths(zh)} |")
    return "\n".join(lines)


def depths(r: dict | None) -> str:
    """Acceptance at depths 1 and 2 of a row, as percentages ("–" without them)."""
    if not r or not r.get("by_depth"):
        return "–"
    return " / ".join(f"{100 * r['by_depth'][d]:.0f}%" for d in sorted(r["by_depth"], key=int)[:2])


def language_figure(rows: list[dict], lang: str = "en") -> go.Figure:
    """Grouped bars: tau per benchmark and head, English beside Chinese (first tree, T=0 if present)."""
    if not rows:
        return empty_figure(FIGURE_TEXT("lang.none", lang), height=300)
    tree = rows[0]["tree"]
    temp = min(r["temperature"] for r in rows)
    sel = [r for r in rows if r["tree"] == tree and r["temperature"] == temp]
    groups = sorted({(r["method"], r["benchmark"]) for r in sel})
    fig = go.Figure()
    for language, (colour, hatch) in LANG_STYLE.items():
        vals = {(r["method"], r["benchmark"]): r for r in sel if r["language"] == language}
        name = FIGURE_TEXT(f"lang.{language}", lang)
        fig.add_trace(go.Bar(
            x=[f"{b}<br>{m}" for m, b in groups], y=[vals[g]["tau"] if g in vals else None for g in groups],
            name=name, marker=dict(color=colour, pattern=dict(shape=hatch)),
            text=[f"{vals[g]['tau']:.2f}" if g in vals else "" for g in groups], textposition="outside",
            cliponaxis=False, hovertemplate=f"{name}: tau %{{y:.2f}}<extra></extra>"))
    base_layout(fig, FIGURE_TEXT("lang.title", lang, a=tree[0], b=tree[1], c=tree[2], t=temp), height=340)
    fig.update_layout(barmode="group")
    top = max(r["tau"] for r in sel)
    fig.update_yaxes(range=[0, top * 1.25], title=FIGURE_TEXT("lang.y", lang), gridcolor="#eee")
    return fig


def merge_results(results: list[dict]) -> list[dict]:
    """eval results of one head split over several invocations -> one result per (head, method)."""
    out: dict[tuple[str, str], dict] = {}
    for res in results:
        key = (res.get("head", ""), res.get("method", "eagle2"))
        if key not in out:
            out[key] = {**res, "runs": []}
        out[key]["runs"].extend(res["runs"])
    return list(out.values())


def main(argv=None) -> str:
    """python -m viz.languages EVAL.json ... [--out assets/learn/per_language.json]: merge eval
    results of the paired prompt sets into the file the Learn tab reads; print the table."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m viz.languages", description=main.__doc__.split(":")[0])
    ap.add_argument("results", nargs="+", help="JSON files written by `python -m eagle_core.train eval --json-out`")
    ap.add_argument("--out", default=None, help=f"write the merged list here (the app reads {PER_LANGUAGE_FILE})")
    args = ap.parse_args(argv)
    results = []
    for p in args.results:
        with open(p, encoding="utf-8") as f:
            r = json.load(f)
        results.extend(r if isinstance(r, list) else [r])
    merged = merge_results(results)
    if args.out:
        os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(merged, f, indent=1)
    md = language_table(language_rows(merged))
    print(md)
    return md


if __name__ == "__main__":
    main()
