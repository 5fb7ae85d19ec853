"""The hardware lesson: the prediction from hand-made costs, the measurement on a tiny random
model, the figure's curves and labels, and the panel's callback (eagle_core/bench/hardware.py,
viz/hardware.py, eagle_app/hardware.py)."""
from __future__ import annotations

import json

import plotly.graph_objects as go
import pytest

from conftest import tiny_head, tiny_target
from eagle_core import Engine
from eagle_core.bench import hardware as hw
from eagle_core.config import TreeSetting
from viz.hardware import TEXT, hardware_figure, hardware_markdown

SMALL, MID, BIG = TreeSetting(1, 1, 1), TreeSetting(2, 2, 3), TreeSetting(3, 4, 7)
TREES = [SMALL, MID, BIG]
TAUS = {"1,1,1": 1.5, "2,2,3": 2.0, "3,4,7": 3.0}
STEP = {1: 2.0, 2: 2.0, 3: 2.0, 4: 4.0}  # ms per drafting step by frontier width


def test_prediction_from_hand_made_costs():
    """CPU-like costs: t(k) grows with k, so the middle tree wins; verification flat: the biggest."""
    fwd = {1: 10.0, 2: 12.0, 4: 20.0, 8: 40.0}
    rows = hw.predict(fwd, STEP, TAUS, TREES)
    # SMALL: verify t(2)/t(1) = 1.2; draft: one catch-up step over tau = 1.5 tokens = 2 ms -> 0.2; c = 1.4
    # MID:   verify t(4)/t(1) = 2.0; draft 2 (catch-up over 2) + 1 * 2 (width 2) = 4 ms -> 0.4; c = 2.4
    # BIG:   verify t(8)/t(1) = 4.0; draft 2 (catch-up over 3) + 2 * 4 (width 4) = 10 ms -> 1.0; c = 5.0
    assert [r["tree"] for r in rows] == ["1,1,1", "2,2,3", "3,4,7"]
    assert [r["nodes"] for r in rows] == [2, 4, 8]
    assert [r["c"] for r in rows] == pytest.approx([1.4, 2.4, 5.0])
    assert [r["speedup"] for r in rows] == pytest.approx([1.5 / 1.4, 2.0 / 2.4, 3.0 / 5.0])
    assert hw.best(rows)["tree"] == "1,1,1"
    flat = hw.predict(fwd, STEP, TAUS, TREES, flat_verify=True)
    assert [r["c"] for r in flat] == pytest.approx([1.2, 1.4, 2.0])
    assert [r["speedup"] for r in flat] == pytest.approx([1.5 / 1.2, 2.0 / 1.4, 3.0 / 2.0])
    assert hw.best(flat)["tree"] == "3,4,7"


def test_prediction_interpolates_between_measured_sizes():
    fwd = {1: 10.0, 2: 10.0, 10: 30.0}  # t(4) = 10 + 20 * 2/8 = 15 ms, t(8) = 25 ms
    rows = hw.predict(fwd, {1: 0.0, 4: 0.0}, TAUS, TREES)
    assert [r["verify"] for r in rows] == pytest.approx([1.0, 1.5, 2.5])
    assert hw.interp({1: 1.0, 3: 5.0}, 0) == 1.0 and hw.interp({1: 1.0, 3: 5.0}, 9) == 5.0
    assert hw.interp({1: 1.0, 3: 5.0}, 2) == pytest.approx(3.0)


def test_lesson_reads_string_keys_and_keeps_the_spread():
    measured = {"forward_ms": {"1": 10.0, "2": 12.0, "4": 20.0, "8": 40.0, "5": 99.0},
                "step_ms": {str(k): v for k, v in STEP.items()}}
    table = {"tau": TAUS, "trees": TREES}
    res = hw.lesson(measured, table)
    assert res["best_here"]["tree"] == "1,1,1" and res["best_gpu"]["tree"] == "3,4,7"
    assert list(res["ratios"]) == [1, 2, 4, 8]  # 5 is a tree size, not in the table's spread
    assert res["ratios"][8] == pytest.approx(4.0)


def test_recorded_tau_table_names_its_source_and_is_sensible():
    table = hw.load_tau_table()
    for field in ("head", "prompts", "source"):
        assert table[field]
    assert len(table["trees"]) >= 3
    taus = [table["tau"][t.text] for t in table["trees"]]
    assert all(1.0 <= t <= t_.depth + 1 for t, t_ in zip(taus, table["trees"]))
    assert "1,1,1" in table["tau"] and "6,10,60" in table["tau"]


def test_sizes_cover_the_spread_and_every_tree():
    sizes = hw.sizes_for(TREES + [TreeSetting(6, 10, 60)])
    assert set(hw.SPREAD) <= set(sizes) and {2, 4, 8, 61} <= set(sizes)
    assert max(sizes) == 64 and min(sizes) == 1


@pytest.fixture(scope="module")
def tiny():
    target = tiny_target()
    return target, tiny_head(target)


def test_measurement_on_a_tiny_model_returns_every_k_with_positive_times(tiny):
    target, head = tiny
    seen = []
    m = hw.measure(target, head, None, TREES, ctx=40, repeats=2, head_repeats=2,
                   progress=lambda f, what: seen.append((f, what)))
    assert set(m["forward_ms"]) == set(hw.sizes_for(TREES))
    assert all(v > 0 for v in m["forward_ms"].values())
    assert set(m["step_ms"]) == set(hw.widths_for(TREES)) and all(v > 0 for v in m["step_ms"].values())
    assert m["rounds"] == 2 and m["seconds"] > 0 and m["hardware"] and m["device"] == "cpu"
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[0] == 0.0 and fractions[-1] == pytest.approx(1.0)
    assert {w for _, w in seen} == {hw.FORWARD, hw.HEAD}
    json.dumps(hw.to_json(m))  # what --json-out writes


def test_a_busy_machine_gets_fewer_rounds(tiny):
    target, head = tiny
    m = hw.measure(target, head, None, TREES, ctx=40, repeats=5, head_repeats=1, budget_s=0.0)
    assert m["rounds"] == 1 and set(m["forward_ms"]) == set(hw.sizes_for(TREES))


def _result():
    fwd = {1: 10.0, 2: 12.0, 4: 20.0, 8: 40.0}
    return hw.lesson({"forward_ms": fwd, "step_ms": STEP}, {"tau": TAUS, "trees": TREES})


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_figure_has_both_curves_the_best_markers_and_labels(lang):
    T = TEXT[lang]
    fig = hardware_figure(_result(), "Test CPU", lang)
    assert isinstance(fig, go.Figure)
    by_name = {t.name: t for t in fig.data}
    here, gpu = by_name[T["here"].format(device="Test CPU")], by_name[T["gpu"]]
    assert list(here.x) == [2, 4, 8] and list(here.y) == pytest.approx([1.5 / 1.4, 2.0 / 2.4, 3.0 / 5.0])
    assert list(gpu.y) == pytest.approx([1.5 / 1.2, 2.0 / 1.4, 1.5])
    stars = [t for t in fig.data if t.marker is not None and t.marker.symbol == "star"]
    assert sorted((t.x[0], t.text[0]) for t in stars) == [(2, "1,1,1"), (8, "3,4,7")]
    assert any(t.name == T["published"] for t in fig.data)
    if lang == "en":
        assert "measured here" in here.name and "illustration, not measured here" in gpu.name
        assert "AngelSlim" in T["published"] and "another model" in T["published"]
    assert "1,1,1" in fig.layout.title.text and "3,4,7" in fig.layout.title.text


def test_text_has_the_same_keys_and_placeholders_in_every_language():
    import re

    assert set(TEXT["zh"]) == set(TEXT["en"])
    for key, en in TEXT["en"].items():
        assert re.findall(r"{(\w+)", en) == re.findall(r"{(\w+)", TEXT["zh"][key]), key


def test_blank_figure_before_any_measurement():
    fig = hardware_figure(None)
    assert not fig.data and "Measure this machine" in fig.layout.annotations[0].text


def test_markdown_table_marks_the_best_tree():
    res = _result()
    md = hardware_markdown({"forward_ms": {1: 10.0}, "step_ms": STEP}, res, {"head": "H", "prompts": "P"})
    assert "| 1,1,1 ★ |" in md and "| 3,4,7 |" in md and "4.00" in md and "H, P" in md


def test_panel_callback_returns_a_figure_without_a_model_error(tiny, monkeypatch):
    from eagle_app import hardware as panel
    from eagle_app.model import ModelHolder

    target, head = tiny
    holder = ModelHolder()
    holder.set_engine(Engine(target, head, None, "tiny"))
    monkeypatch.setattr(panel, "MODEL", holder)
    monkeypatch.setattr(panel, "measure", _small(hw.measure))
    calls = []
    fig, md, status = panel.measure_machine("en", lambda f, desc="": calls.append(f))
    assert isinstance(fig, go.Figure) and len(fig.data) >= 4
    assert "No model" not in status and status.startswith("Measured in")
    assert "t(k)/t(1)" in md and "★" in md
    assert calls and max(calls) <= 1.0
    assert panel.LINE.waiting() == 0 and panel.LINE._line == []  # the slot is given back


def test_panel_callback_without_a_model_says_so(monkeypatch):
    from eagle_app import hardware as panel
    from eagle_app.model import ModelHolder

    holder = ModelHolder()
    holder.error = "OSError: no weights"
    holder.ready.set()
    monkeypatch.setattr(panel, "MODEL", holder)
    fig, _, status = panel.measure_machine("en", lambda *a, **k: None)
    assert isinstance(fig, go.Figure) and "no weights" in status


def test_recorded_views_label_the_recorded_measurement(tmp_path):
    from eagle_app.hardware import recorded_views

    path = tmp_path / "rec.json"
    path.write_text(json.dumps({"forward_ms": {"1": 10, "2": 12, "64": 90}, "step_ms": {"1": 1, "10": 3},
                                "device": "cpu", "hardware": "Test CPU", "date": "2026-12-03"}))
    fig, md, status = recorded_views("en", str(path))
    assert "recorded" in status and "Test CPU" in status and len(fig.data) >= 4
    fig, md, status = recorded_views("en", str(tmp_path / "missing.json"))
    assert not fig.data and md == ""


def _small(fn):
    """The measurement with a short context and few repeats: a tiny model, seconds not minutes."""
    return lambda target, head, vocab, trees, progress=None, **kw: fn(target, head, vocab, trees, ctx=40,
                                                                      repeats=1, head_repeats=1, progress=progress)


def test_a_failing_measurement_is_a_status_line_and_gives_the_slot_back(tiny, monkeypatch):
    from eagle_app import hardware as panel
    from eagle_app.model import ModelHolder

    target, head = tiny
    holder = ModelHolder()
    holder.set_engine(Engine(target, head, None, "tiny"))
    monkeypatch.setattr(panel, "MODEL", holder)

    def broken(*a, **k):
        raise RuntimeError("out of memory")
    monkeypatch.setattr(panel, "measure", broken)
    fig, _, status = panel.measure_machine("en", lambda *a, **k: None)
    assert isinstance(fig, go.Figure) and "out of memory" in status and panel.LINE._line == []
