"""The README's rows that quote a shipped record (the example trace the page opens on, tau by language),
built from the files themselves, so that the README and the records cannot disagree (tests/test_docs.py), and
written in place by the recorder (scripts/record_traces.py)."""
from __future__ import annotations

import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README_EXAMPLE = "the page's opening example"  # marks of the README rows the recorder writes
README_LANGUAGES = "τ by language"

def example_row(path: str) -> str:
    """The README's row of the example trace the page opens on, from the file."""
    from viz.traces import load_bundle, speedup

    eagle, vanilla, rec, _ = load_bundle(path)
    s = eagle.summary.settings
    rec = rec or {}
    return (f"| {rec.get('cpu', '?')}, {rec.get('date', '?')} | {README_EXAMPLE} (`assets/traces/{os.path.basename(path)}`): "
            f"EAGLE-2 vs vanilla, tree {s['depth']},{s['tree_top_k']},{s['total_tokens']}, {eagle.summary.new_tokens} "
            f"tokens | **{speedup(eagle, vanilla):.2f}x** (τ {eagle.summary.tau:.2f}) |")


def languages_row(path: str) -> str:
    """The README's row of tau by language (MT-bench English / Chinese, each head), from per_language.json."""
    with open(path, encoding="utf-8") as f:
        results = json.load(f)
    rec = results[0].get("recorded") or {}
    cells, tree = [], "?"
    for res in results:
        runs = {r["prompts"]: r for r in res["runs"]}
        en, zh = runs.get("mt_bench_question.jsonl"), runs.get("mt_bench_zh_question.jsonl")
        if en and zh:
            tree = ",".join(map(str, en["tree"]))
            cells.append((res.get("method", "eagle2").replace("eagle", "EAGLE-"), en, zh))
    return (f"| {rec.get('cpu', '?')}, {rec.get('date', '?')} | {README_LANGUAGES}: MT-bench English / Chinese, "
            f"{cells[0][1]['overall']['prompts']} prompts each, tree {tree}, "
            f"{' / '.join(c[0] for c in cells)} (`assets/learn/per_language.json`) | "
            + "; ".join(f"{c[1]['overall']['tau']:.2f} / {c[2]['overall']['tau']:.2f}" for c in cells) + " |")


def readme_rows(root: str = ROOT) -> dict[str, str]:
    """{mark: row} of the README rows this command writes, from the shipped files."""
    from viz.examples import EXAMPLES

    return {README_EXAMPLE: example_row(os.path.join(root, "assets", "traces", EXAMPLES[0].file)),
            README_LANGUAGES: languages_row(os.path.join(root, "assets", "learn", "per_language.json"))}


def write_readme_rows(after: str, path: str = os.path.join(ROOT, "README.md"), rows: dict[str, str] | None = None) -> None:
    """Each row in place of the README's row with its mark (or after the row marked `after`, the hardware
    panel's)."""
    rows = rows or readme_rows()
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for mark, row in rows.items():
        at = [i for i, line in enumerate(lines) if line.startswith("|") and mark in line]
        if at:
            lines[at[0]] = row
        else:
            lines.insert(next(i for i, line in enumerate(lines) if line.startswith("|") and after in line) + 1,
                         row)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))
