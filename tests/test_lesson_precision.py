"""Lesson step 8's precision switch (issue 54, item 6): the hardware record holds a forward curve per weight
format (float32 on top, the GGUF's blocks under "formats"), the lesson reads both from it and says where the best
tree moves only as the record shows it; a record without the gguf fields (every record made before them) reads
"not recorded yet", one made where the blocks cannot run says why; the recorder writes the fields (on a tiny
model: the gguf entry measured through the same code, the prompt decoded in both formats)."""
from __future__ import annotations

import json

import pytest

from conftest import tiny_head, tiny_target
from eagle_app import lesson, lesson_cards as cards
from eagle_core import Engine, FastPath
from eagle_core.config import TreeSetting
from eagle_core.machine import hardware as hw
from viz.hardware import TEXT as HW
from viz.style import md_text

SMALL, MID, BIG = TreeSetting(1, 1, 1), TreeSetting(2, 2, 3), TreeSetting(3, 4, 7)
TABLE = {"tau": {"1,1,1": 1.5, "2,2,3": 2.0, "3,4,7": 3.0}, "trees": [SMALL, MID, BIG]}
STEP = {1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0}
WEIGHTS = {"target": 1000, "head_step": 50, "layers": 20}
# float32: memory-bound, t(k) flat up to 8 rows, so the biggest tree pays; the blocks: t(1) a third of float32's
# and t(k) rising with every row (compute-bound), so the smallest tree pays
F32 = {"1": 30.0, "2": 30.0, "4": 31.0, "8": 33.0, "32": 60.0}
GGUF = {"1": 10.0, "2": 13.0, "4": 20.0, "8": 40.0, "32": 150.0}


def decode(vanilla_tps, eagle_tps, tau, ids):
    return {"prompt": "What is the capital of France?", "method": "eagle2", "max_new_tokens": 40, "tree": "4,2,7",
            "vanilla": {"tokens_per_s": vanilla_tps, "tau": 1.0, "new_tokens": len(ids), "token_ids": ids},
            "eagle2": {"tokens_per_s": eagle_tps, "tau": tau, "new_tokens": len(ids), "token_ids": ids}}


def record(gguf=None) -> dict:
    m = {"forward_ms": F32, "step_ms": {str(k): v for k, v in STEP.items()}, "weights": WEIGHTS, "hardware": "CPU A",
         "date": "2026-12-07", "decode": decode(31.5, 47.25, 2.5, [5, 6, 7, 8])}
    if gguf is not None:
        m["format"], m["formats"] = "float32", {"gguf": gguf}
    return m


BOTH = record({"forward_ms": GGUF, "step_ms": {"1": 0.5, "2": 0.5, "3": 0.5, "4": 0.5},
               "decode": decode(70.5, 82.25, 2.25, [5, 6, 9, 9])})


def test_a_record_with_both_formats_gives_each_its_curve_and_best_tree():
    fl = hw.format_lessons(BOTH, TABLE)
    assert {f: x["state"] for f, x in fl.items()} == {"float32": "recorded", "gguf": "recorded"}
    assert fl["float32"]["curve"] == {1: 30.0, 2: 30.0, 4: 31.0, 8: 33.0, 32: 60.0}
    # float32: BIG verifies 8 rows at 33/30 of a step + drafting (1 + 2 x 1)/30 -> c 1.2, 3.0 / 1.2 = 2.5x: the best
    # blocks: SMALL 2 rows 13/10 + 0.05 = 1.35 -> 1.11x; BIG 40/10 + 0.15 = 4.15 -> 0.72x: the smallest is best
    assert fl["float32"]["best"]["tree"] == "3,4,7" and fl["float32"]["best"]["speedup"] == pytest.approx(2.5)
    assert fl["gguf"]["best"]["tree"] == "1,1,1" and fl["gguf"]["best"]["speedup"] == pytest.approx(1.5 / 1.35)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_switch_says_where_the_best_tree_moves_as_the_record_shows_it(lang):
    text = cards.precision_text("gguf", lang, BOTH, TABLE)
    assert "{" not in text and "}" not in text and "—" not in text
    fl = hw.format_lessons(BOTH, TABLE)
    words = lambda key, **kw: lesson.TEXT(key, lang, **kw)  # noqa: E731
    names = dict(f_name=HW("fmt.float32", lang), g_name=HW("fmt.gguf", lang))
    assert words("prec.smaller", f_best="3,4,7", g_best="1,1,1", g_speedup=f"{fl['gguf']['best']['speedup']:.2f}",
                 **names) in text
    assert words("prec.steeper", k=32, g_r="15.00", f_r="2.00", **names) in text  # 150/10 against 60/30
    assert text.startswith(words("prec.shown", name=names["g_name"], t1="10.0", k=32, tk="150.0", r="15.00",
                                 best="1,1,1", speedup=f"{fl['gguf']['best']['speedup']:.2f}"))
    # the same prompt's tokens/s in both, the tokens it decoded (4 ids, not the 40 asked for), and where the two
    # formats' vanilla texts part (after 2 tokens)
    assert "31.5" in text and "47.2" in text and "70.5" in text and "82.2" in text
    assert words("prec.decode", prompt="What is the capital of France?", n=4, **names, f_van="31.5", f_eagle="47.2",
                 f_tau="2.50", g_van="70.5", g_eagle="82.2", g_tau="2.25", same=2) in text
    # float32 picked: its own figures first, the same comparison after
    f32 = cards.precision_text("float32", lang, BOTH, TABLE)
    assert f32.startswith(words("prec.shown", name=names["f_name"], t1="30.0", k=32, tk="60.0", r="2.00",
                                best="3,4,7", speedup="2.50"))


def test_the_move_follows_the_record_not_the_story():
    """A record where the blocks' curve is as flat as float32's: no compute-bound claim, the best tree stays."""
    flat = record({"forward_ms": F32, "step_ms": {str(k): v for k, v in STEP.items()}})
    text = cards.precision_text("gguf", "en", flat, TABLE)
    assert "no steeper" in text and "keeps its size" in text and "compute-bound" not in text
    assert "moves smaller" not in text and "tokens/s" not in text  # no gguf decode in this record: no sentence


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_record_without_the_gguf_fields_says_not_recorded_yet(lang):
    old = record()  # as every record before issue 54: no "format", no "formats"
    fl = hw.format_lessons(old, TABLE)
    assert fl["float32"]["state"] == "recorded" and fl["gguf"] == {"state": "missing", "why": ""}
    text = cards.precision_text("gguf", lang, old, TABLE)
    assert lesson.TEXT("prec.missing", lang, name=HW("fmt.gguf", lang), f_name=HW("fmt.float32", lang),
                       command=cards.RECORD_FORMATS) in text
    assert "{" not in text and "python scripts/record_traces.py --records" in text
    from viz.hardware import precision_figure

    fig = precision_figure(fl, hw.lesson(old, TABLE), "gguf", lang)
    notes = [a.text for a in fig.layout.annotations]
    assert HW("prec_missing", lang, name=HW("fmt.gguf", lang)) in notes
    assert {t.legendgroup for t in fig.data if t.legendgroup} == {"float32"}  # only float32 drawn, and bold
    assert max(t.line.width for t in fig.data if t.legendgroup == "float32" and t.mode == "lines+markers") == 4


def test_a_record_made_where_the_blocks_cannot_run_says_why():
    why = "the portable path (EAGLE_PORTABLE=1) calls no C"
    m = record({"unavailable": why})
    assert hw.format_lessons(m, TABLE)["gguf"] == {"state": "unavailable", "why": why}
    for lang in ("en", "zh"):
        text = cards.precision_text("gguf", lang, m, TABLE)
        assert lesson.TEXT("prec.unavailable", lang, name=HW("fmt.gguf", lang), why=md_text(why)) in text


def test_the_figure_draws_both_formats_the_picked_one_bold():
    from viz.hardware import precision_figure

    fl = hw.format_lessons(BOTH, TABLE)
    fig = precision_figure(fl, hw.lesson(BOTH, TABLE), "gguf", "en")
    curves = {t.legendgroup: t for t in fig.data if t.name and t.name.endswith("recorded")}
    here = precision_figure(fl, None, "gguf", "zh", here=True)
    assert {t.name for t in here.data if t.mode == "lines+markers" and t.showlegend is not False} == {
        HW("prec_curve_here", "zh", name=HW(f"fmt.{f}", "zh")) for f in ("float32", "gguf")}
    assert list(curves["gguf"].y) == [10.0, 13.0, 20.0, 40.0, 150.0] and list(curves["float32"].x) == [1, 2, 4, 8, 32]
    assert curves["gguf"].line.width > curves["float32"].line.width
    stars = sorted((t.legendgroup, t.text[0]) for t in fig.data if t.marker.symbol == "star")
    assert stars == [("float32", "3,4,7"), ("gguf", "1,1,1")]
    assert any("illustration" in (t.name or "") for t in fig.data) and not fig.layout.annotations[2:]


def test_step_eight_shows_the_switch_and_other_steps_do_not():
    n = len(lesson.STEPS)
    views = lesson.step_views(n, "zh", "gguf")
    radio, words = views[5], views[6]
    assert radio.visible and radio.value == "gguf" and [c[1] for c in radio.choices] == list(lesson.PRECISIONS)
    assert words.visible and words.value == cards.precision_text("gguf", "zh")
    assert not lesson.step_views(1, "en")[5].visible
    fig, text = lesson.precision_views("nonsense", "en")  # an unknown value falls back to float32
    assert text.value == cards.precision_text("float32", "en") and fig.value is not None


# ------------------------------------------------------------------------------------- the recorder
@pytest.fixture()
def tiny_engine():
    target = tiny_target()
    return Engine(target, tiny_head(target), None, "tiny head")


def small_settings():
    from eagle_core import DecodeSettings

    return DecodeSettings(method="eagle2", depth=2, tree_top_k=2, total_tokens=3, max_new_tokens=6)


def test_the_recorder_says_why_a_model_without_a_gguf_file_has_no_blocks_curve(tmp_path, tiny_engine):
    path = tmp_path / "hardware_recorded.json"
    path.write_text(json.dumps(record()), encoding="utf-8")
    m = hw.record_formats(tiny_engine, str(path), [SMALL], "abc", small_settings().to_dict(), log=lambda s: None)
    assert json.loads(path.read_text(encoding="utf-8")) == m
    assert m["format"] == "float32" and "default model's GGUF file" in m["formats"]["gguf"]["unavailable"]
    assert m["decode"]["prompt"] == "abc" and m["decode"]["vanilla"]["token_ids"] == m["decode"]["eagle2"]["token_ids"]
    assert hw.format_lessons(m, TABLE)["gguf"]["state"] == "unavailable"


def test_the_recorder_measures_the_blocks_curve_where_they_run(tmp_path, tiny_engine, monkeypatch):
    """The gguf entry through record_formats' own path, the tiny model standing in for the default one."""
    import eagle_core.engine_loading as loading

    monkeypatch.setattr(hw, "format_unavailable", lambda target, fmt: None)
    monkeypatch.setattr(hw, "load_in_format", lambda target, fmt: tiny_target(fast=FastPath(weights=fmt)))
    monkeypatch.setattr(loading, "load_engine", lambda target, methods: Engine(target, tiny_head(target), None, "h"))
    path = tmp_path / "hardware_recorded.json"
    path.write_text(json.dumps(hw.to_json(hw.measure(tiny_engine.target, tiny_engine.drafter.head, None, [SMALL],
                                                     ctx=20, repeats=1, head_repeats=1))), encoding="utf-8")
    m = hw.record_formats(tiny_engine, str(path), [SMALL], "abc", small_settings(), log=lambda s: None)
    g = m["formats"]["gguf"]
    assert g["format"] == "gguf" and "weights gguf" in g["target"] and set(g["forward_ms"]) == set(m["forward_ms"])
    assert g["decode"]["eagle2"]["token_ids"] == g["decode"]["vanilla"]["token_ids"]  # greedy identity in the format
    fl = hw.format_lessons(hw.load_recorded(str(path)), {"tau": {"1,1,1": 1.5}, "trees": [SMALL]})
    assert fl["gguf"]["state"] == fl["float32"]["state"] == "recorded"


# ------------------------------------------------------------------------------------- measured here
def holder_of(engine):
    from eagle_app.model import ModelHolder

    holder = ModelHolder()
    holder.set_engine(engine)
    return holder


def small_measure(target, head, vocab, trees, progress=None, **kw):
    return hw.measure(target, head, vocab, trees, ctx=20, repeats=1, head_repeats=1, progress=progress)


def test_measuring_here_times_float32_and_says_why_the_blocks_cannot_run(tiny_engine, monkeypatch):
    import eagle_app.model
    from eagle_app import lesson_measure
    from eagle_app.callbacks.decoding import LINE

    monkeypatch.setattr(eagle_app.model, "MODEL", holder_of(tiny_engine))
    monkeypatch.setattr(lesson_measure, "measure", small_measure)
    calls = []
    here, status = lesson_measure.measure_here("zh", lambda f, desc="": calls.append(f))
    assert LINE._line == [] and max(calls, default=0.0) <= 1.0  # the slot given back; progress within the bar
    assert here["format"] == "float32" and here["forward_ms"]["1"] > 0
    assert "default model's GGUF file" in here["formats"]["gguf"]["unavailable"]  # the tiny model has none
    assert status == lesson_measure.here_line(here, "zh") and status.startswith("<b>本机实测")
    fl = hw.format_lessons(here, hw.load_tau_table())
    assert fl["float32"]["state"] == "recorded" and fl["gguf"]["state"] == "unavailable"
    # step 8 then reads the measurement, labelled, in either format and language
    words = lesson.precision_words("gguf", "en", here)
    assert words.startswith("**Measured here:**") and "not available" in words
    views = lesson.step_views(len(lesson.STEPS), "en", "gguf", here)
    assert views[6].value == words and views[7].visible


def test_a_failing_measurement_here_keeps_the_record_and_gives_the_slot_back(tiny_engine, monkeypatch):
    import eagle_app.model
    from eagle_app import lesson_measure
    from eagle_app.callbacks.decoding import LINE

    def broken(*a, **k):
        raise RuntimeError("out of memory")

    monkeypatch.setattr(eagle_app.model, "MODEL", holder_of(tiny_engine))
    monkeypatch.setattr(lesson_measure, "measure", broken)
    here, fig, words = lesson.on_measure_here("float32", "en", lambda *a, **k: None)
    assert here is None and LINE._line == [] and "out of memory" in words.value
    assert cards.precision_text("float32", "en") in words.value and fig.value is not None
