"""No figure about this project is typed into the Learn tab's or the lesson's text (issue 52, item 4): every
time, ratio, speedup, τ, share, size or count this project measured is a {field} filled at render time from a
record in assets/ (the hardware recording, τ per tree and per language, the lesson's traces and manifest, the
heads' config.json). The test reads every text table of the two tabs (English and Chinese) with its fields
taken out and fails on a number with a unit or a τ beside it, unless the figure is on the short ALLOWED list:
published numbers quoted with their source, and definitions that are not measurements."""
from __future__ import annotations

import re

import pytest

from eagle_app import lesson
from viz import hardware, head_inputs, learn, learn_zh
from viz.i18n import FIGURE_TEXT as VIZ

FIELD = re.compile(r"\{[^{}]*\}")  # a {field} (and a format spec), filled from a record at render time
UNIT = (r"×|x\b|ms\b|毫秒|%|MB\b|GB\b|M\b|tokens/s|tokens?\b|个?词元|prompts?\b|个提示词|nodes?\b|个?节点|rows?\b|行"
        r"|steps?\b|步|s\b|秒|layers?\b|层|characters?\b|个?汉字|cycles?\b|轮|drafts?\b|个草稿|passes\b|次前向")
FIGURE = re.compile(rf"(?:τ|tau)\s*(?:[=:≈]|of|为)?\s*\d[\d.,]*|\d[\d.,]*\s*(?:{UNIT})")

# Each allowed figure, and why it is not a figure this project measured. Keep it short.
ALLOWED = {
    "τ 3.98", "τ 4.83", "τ 6.65", "3×", "4×", "5.6×",  # EAGLE-1/2/3 papers, Vicuna-13B, MT-bench (cited in place)
    "2.36×", "2.19×", "4.34 个词元", "80GB",  # Spec-Bench's leaderboard, dated and with its hardware in place
    "2.04×", "60 节点", "60-node",  # the AngelSlim README's published point (cited in place)
    "63-node", "63 节点",  # Medusa's shipped tree (its paper and code)
    "64 tokens", "64 个词元", "64 new tokens", "64 个新词元",  # the GPU illustration's assumption and the panel's k range
    "1×", "τ ≈ 1", "1 rows", "1 行", "1 个词元",  # definitions: vanilla is 1x; an untrained head; k + 1 rows; one token
}


def texts() -> list[tuple[str, str]]:
    """(where, text) of every Learn and lesson text, both languages."""
    out = []
    for name in learn.BLOCKS + ("GLOSSARY",):
        out += [(f"viz/learn.py {name}", getattr(learn, name)), (f"viz/learn_zh.py {name}", getattr(learn_zh, name))]
    for where, table in (("eagle_app/lesson.py", lesson.TEXT), ("viz/hardware.py", hardware.TEXT),
                         ("viz/head_inputs.py", head_inputs.TEXT)):
        for key, pair in table.entries.items():
            out += [(f"{where} {key} {lang}", text) for lang, text in zip(("en", "zh"), pair)]
    for key, pair in VIZ.entries.items():
        if key.startswith("lang."):  # the Learn tab's language table and figure
            out += [(f"viz/i18n.py {key} {lang}", text) for lang, text in zip(("en", "zh"), pair)]
    return out


def literal_figures(text: str) -> list[str]:
    bare = FIELD.sub(" ", text)
    bare = re.sub(r"%\{[^}]*\}", " ", bare)  # plotly's hover fields
    return [m.group(0).strip() for m in FIGURE.finditer(bare) if m.group(0).strip() not in ALLOWED]


def test_no_learn_or_lesson_text_holds_a_project_figure():
    found = [(where, hit) for where, text in texts() for hit in literal_figures(text)]
    assert not found, found


@pytest.mark.parametrize("typed", ["τ 1.68 against 1.86", "a pass over 8 tokens took 1.13× a pass over one",
                                   "t(1) = 19.3 ms", "16 prompts a set", "准确率提高了 0.5%", "τ 为 2.14",
                                   "draft vocabulary: 8,192 rows"])
def test_the_check_catches_a_typed_figure(typed):
    assert literal_figures(typed), typed


def test_the_check_leaves_fields_and_cited_figures_alone():
    assert literal_figures("t(1) = {t1} ms, {r}× one pass; EAGLE-3 τ 6.65 (about 5.6×), its paper") == []
