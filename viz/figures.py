"""Every measured figure the page quotes, read from the files that hold it (none typed in the text):
the hardware recording and tau per tree (eagle_core.machine.quoted: machine, date, command,
t(k)/t(1), each preset's tau, cost and predicted speedup), tau per language and category
(assets/learn/per_language.json) and the shipped head's draft vocabulary (its config.json).
The Learn tab's text holds {name} fields that `fill` replaces with these."""
from __future__ import annotations

import functools
import json
import os
import re

from eagle_core.machine import quoted

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAD_CONFIG = os.path.join(ROOT, "assets", "head-smollm2-135m", "config.json")
FIELD = re.compile(r"\{(\w+)\}")


def language_figures(path: str | None = None) -> dict[str, str]:
    """tau in English and Chinese: MGSM and MT-bench overall, MT-bench's humanities and STEM."""
    from .languages import PER_LANGUAGE_FILE

    with open(path or PER_LANGUAGE_FILE, encoding="utf-8") as f:
        results = json.load(f)
    runs = {r["prompts"].split(".")[0]: r for res in results[:1] for r in res["runs"]}
    out = {}
    for key, name in (("mgsm_en", "mgsm_en"), ("mgsm_zh", "mgsm_zh"), ("mt_en", "mt_bench_question"),
                      ("mt_zh", "mt_bench_zh_question")):
        out[key] = f"{runs[name]['overall']['tau']:.2f}"
    for cat in ("humanities", "stem"):
        out[f"{cat[:4]}_en"] = f"{runs['mt_bench_question']['by_category'][cat]['tau']:.2f}"
        out[f"{cat[:4]}_zh"] = f"{runs['mt_bench_zh_question']['by_category'][cat]['tau']:.2f}"
    return out


def head_figures(path: str = HEAD_CONFIG) -> dict[str, str]:
    """The shipped EAGLE-2 head's draft vocabulary: rows it drafts from, of how many, and their coverage."""
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    trained = cfg["eagle_explainer"]["trained_on"]
    return {"draft_rows": f"{trained['draft_vocab']:,}", "vocab_rows": f"{cfg['vocab_size']:,}",
            "coverage": f"{100 * trained['draft_vocab_coverage']:.1f}%"}


@functools.cache
def figures() -> dict[str, str]:
    """All of them, by field name (cached: the files change only when re-recorded). A missing or broken
    file leaves its fields out (fill shows them as "—"): the page still opens."""
    out: dict[str, str] = {}
    for source in (quoted, language_figures, head_figures):
        try:
            out.update(source())
        except (OSError, ValueError, KeyError, IndexError, TypeError):
            pass
    return out


def fill(text: str, values: dict[str, str] | None = None) -> str:
    """`text` with each {name} replaced by its value (default: figures()), "—" for one without a value.
    Braces around anything but a plain name (`x_{t+1}`) are left alone."""
    values = figures() if values is None else values
    return FIELD.sub(lambda m: values.get(m.group(1), "—"), text)
