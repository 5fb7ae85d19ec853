"""The hardware lesson: the prediction from hand-made costs, the measurement on a tiny random
model, the figure's curves and labels, and the panel's callback (eagle_core/machine/hardware.py,
viz/hardware.py, eagle_app/hardware.py)."""
from __future__ import annotations

import json

import plotly.graph_objects as go
import pytest

from conftest import tiny_head, tiny_target
from eagle_core import Engine
from eagle_core.machine import hardware as hw
from eagle_core.config import TreeSetting
from viz.hardware import TEXT, hardware_figure, hardware_markdown

SMALL, MID, BIG = TreeSetting(1, 1, 1), TreeSetting(2, 2, 3), TreeSetting(3, 4, 7)
TREES = [SMALL, MID, BIG]
TAUS = {"1,1,1": 1.5, "2,2,3": 2.0, "3,4,7": 3.0}
STEP = {1: 2.0, 2: 2.0, 3: 2.0, 4: 4.0}  # ms per drafting step by frontier width
WEIGHTS = {"target": 1000, "head_step": 50, "layers": 20}  # a head step reads 5% of the target's weights


def test_prediction_from_hand_made_costs():
    """CPU-like costs: t(k) grows with k, so the smallest tree wins; the GPU illustration: the biggest."""
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
    # GPU illustration: verify 1 step whatever the size; each of the depth drafting steps 0.05 of a step
    gpu = hw.predict(fwd, STEP, TAUS, TREES, gpu_share=0.05)
    assert [r["verify"] for r in gpu] == [1.0, 1.0, 1.0] and [r["draft"] for r in gpu] == pytest.approx([.05, .1, .15])
    assert [r["speedup"] for r in gpu] == pytest.approx([1.5 / 1.05, 2.0 / 1.1, 3.0 / 1.15])
    assert hw.best(gpu)["tree"] == "3,4,7"


def test_the_gpu_illustration_drafts_at_the_cost_of_reading_the_heads_weights():
    """It used to keep this CPU's drafting cost, so big trees never paid in it (6,10,60: 1.41x, best 3,4,8)."""
    assert hw.gpu_head_share({"weights": WEIGHTS}) == pytest.approx(0.05)
    with open(hw.RECORDED, encoding="utf-8") as f:
        recorded = json.load(f)
    res = hw.lesson(recorded, hw.load_tau_table())
    assert 1 / 30 < res["gpu_share"] < 0.1  # SmolLM2-135M + the shipped head: about two of 30 layers
    assert res["best_gpu"]["nodes"] >= 33 and res["best_gpu"]["speedup"] > 1.8  # one of the two largest trees
    assert res["best_here"]["nodes"] <= 9  # and on this CPU a small tree


def test_prediction_interpolates_between_measured_sizes():
    fwd = {1: 10.0, 2: 10.0, 10: 30.0}  # t(4) = 10 + 20 * 2/8 = 15 ms, t(8) = 25 ms
    rows = hw.predict(fwd, {1: 0.0, 4: 0.0}, TAUS, TREES)
    assert [r["verify"] for r in rows] == pytest.approx([1.0, 1.5, 2.5])
    assert hw.interp({1: 1.0, 3: 5.0}, 0) == 1.0 and hw.interp({1: 1.0, 3: 5.0}, 9) == 5.0
    assert hw.interp({1: 1.0, 3: 5.0}, 2) == pytest.approx(3.0)


def test_lesson_reads_string_keys_and_keeps_the_spread():
    measured = {"forward_ms": {"1": 10.0, "2": 12.0, "4": 20.0, "8": 40.0, "5": 99.0},
                "step_ms": {str(k): v for k, v in STEP.items()}, "weights": WEIGHTS}
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
    assert "1,1,1" in table["tau"] and max(t.total_tokens for t in table["trees"]) >= 59  # up to the published size


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
    assert m["weights"]["layers"] == 2 and 0 < m["weights"]["head_step"] < m["weights"]["target"]
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
    return hw.lesson({"forward_ms": fwd, "step_ms": STEP, "weights": WEIGHTS}, {"tau": TAUS, "trees": TREES})


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_figure_has_both_curves_the_best_markers_and_labels(lang):
    T = TEXT.table(lang)
    fig = hardware_figure(_result(), "Test CPU", lang)
    assert isinstance(fig, go.Figure)
    by_name = {t.name: t for t in fig.data}
    here, gpu = by_name[T["here"].format(device="Test CPU")], by_name[T["gpu"].format(share=0.05)]
    assert list(here.x) == [2, 4, 8] and list(here.y) == pytest.approx([1.5 / 1.4, 2.0 / 2.4, 3.0 / 5.0])
    assert list(gpu.y) == pytest.approx([1.5 / 1.05, 2.0 / 1.1, 3.0 / 1.15])
    stars = [t for t in fig.data if t.marker is not None and t.marker.symbol == "star"]
    assert sorted((t.x[0], t.text[0]) for t in stars) == [(2, "1,1,1"), (8, "3,4,7")]
    assert any(t.name == T["published"] for t in fig.data)
    if lang == "en":
        assert "measured here" in here.name and "illustration, not measured" in gpu.name and "0.050 t(1)" in gpu.name
        assert "AngelSlim" in T["published"] and "another model" in T["published"]
    assert "1,1,1" in fig.layout.title.text and "3,4,7" in fig.layout.title.text


def test_text_has_the_same_keys_and_placeholders_in_every_language():
    import re

    for key, (en, zh) in TEXT.entries.items():
        assert re.findall(r"{(\w+)", en) == re.findall(r"{(\w+)", zh), key


def test_blank_figure_before_any_measurement():
    fig = hardware_figure(None)
    assert not fig.data and "Measure this machine" in fig.layout.annotations[0].text


def test_markdown_table_marks_the_best_tree():
    res = _result()
    md = hardware_markdown({"forward_ms": {1: 10.0}, "step_ms": STEP, "weights": WEIGHTS}, res, {"head": "H", "prompts": "P"})
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
    fig, md, status, measured = panel.measure_machine("en", lambda f, desc="": calls.append(f))
    assert isinstance(fig, go.Figure) and len(fig.data) >= 4 and measured["weights"]["layers"] == 2
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
    fig, _, status, measured = panel.measure_machine("en", lambda *a, **k: None)
    assert isinstance(fig, go.Figure) and "no weights" in status and measured is None


def test_recorded_views_label_the_recorded_measurement(tmp_path):
    from eagle_app.hardware import recorded_views

    path = tmp_path / "rec.json"
    path.write_text(json.dumps({"forward_ms": {"1": 10, "2": 12, "64": 90}, "step_ms": {"1": 1, "10": 3},
                                "device": "cpu", "hardware": "Test CPU", "date": "2026-12-03", "weights": WEIGHTS}))
    fig, md, status = recorded_views("en", str(path))
    assert "recorded" in status and "Test CPU" in status and len(fig.data) >= 4
    fig, md, status = recorded_views("en", str(tmp_path / "missing.json"))
    assert not fig.data and md == ""



def test_on_zerogpu_the_panel_shows_the_record_and_no_measure_button(tmp_path, monkeypatch):
    """ZeroGPU lends the GPU per decorated call: the panel must not offer to time the machine there."""
    import gradio as gr

    from eagle_app import hardware, zerogpu

    monkeypatch.setattr(zerogpu, "ZERO", True)
    path = tmp_path / "rec.json"
    path.write_text(json.dumps({"forward_ms": {"1": 10, "2": 12, "64": 90}, "step_ms": {"1": 1, "10": 3},
                                "device": "cpu", "hardware": "Test CPU", "date": "2026-12-03", "weights": WEIGHTS}))
    _, _, status = hardware.recorded_views("zh", str(path))
    assert "ZeroGPU" in status and "Test CPU" in status
    c = {}
    with gr.Blocks():
        c["lang"] = gr.State("en")
        hardware.panel(c)
    assert c["hw_btn"].visible is False
    monkeypatch.setattr(zerogpu, "ZERO", False)
    with gr.Blocks():
        hardware.panel(c)
    assert c["hw_btn"].visible is True


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
    fig, _, status, _ = panel.measure_machine("en", lambda *a, **k: None)
    assert isinstance(fig, go.Figure) and "out of memory" in status and panel.LINE._line == []


def test_the_panel_speaks_the_tabs_language(tiny, monkeypatch):
    """The panel showed English on a Chinese page: the callback answers in the tab's language, and the
    switch redraws the panel from the tab's own measurement (or the recorded one)."""
    from eagle_app import hardware as panel
    from eagle_app.i18n import CHINESE
    from eagle_app.model import ModelHolder

    target, head = tiny
    holder = ModelHolder()
    holder.set_engine(Engine(target, head, None, "tiny"))
    monkeypatch.setattr(panel, "MODEL", holder)
    monkeypatch.setattr(panel, "measure", _small(hw.measure))
    fig, md, status, measured = panel.on_measure("zh", lambda *a, **k: None)
    assert status.startswith("测量用时") and "GPU 示意" in md and fig.layout.title.text.startswith("预测加速比")
    intro, why, fig, md, status = panel.redraw("en", measured)  # the switch: English, same measurement
    assert status.startswith("Measured in") and "Why the best tree" in why and "k = 1..64" in intro
    intro, why, fig, md, status = panel.redraw("zh", None)
    assert "记录的" in status and "为什么" in why and "测量本机" in intro
    assert CHINESE[TEXT("panel")] == "为什么草稿树的大小取决于硬件" and CHINESE[TEXT("button")] == "测量本机"  # Gradio's i18n


def test_the_panel_runs_on_the_default_model_in_under_a_minute():
    """Issue 28, done when: the hardware panel runs on the default model in under a minute."""
    import time

    from eagle_app import hardware as panel
    from tests.app_fixtures import default_engine

    panel.MODEL.set_engine(default_engine())
    t0 = time.perf_counter()
    fig, md, status, measured = panel.measure_machine("en", lambda *a, **k: None)
    assert time.perf_counter() - t0 < 60, status
    assert status.startswith("Measured in") and measured["seconds"] < 60 and measured["target"].startswith("smollm2")
    assert measured["weights"]["layers"] == 30 and "★" in md and len(fig.data) >= 4
