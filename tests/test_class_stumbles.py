"""What a class met trying the page (issue 45, "Tried as a student would"), each fixed and checked here
without a model or a browser: the cards' note says what actually ran, a vanilla run says it drafts
nothing, the compare box greys out for vanilla, one accepted draft reads in the singular, a clamped
number is said, the wait estimate follows this machine's measured rate, and the first cycle shown
says why it was chosen."""
from __future__ import annotations

from dataclasses import replace

import gradio as gr
import pytest

import viz
from eagle_app import views as av
from eagle_app.callbacks import decoding as cb
from eagle_app.callbacks import page as page_events
from eagle_app.decode_queue import DecodeLine
from eagle_app.settings import build
from eagle_core import DecodeSettings
from eagle_core.trace import ACCEPTED
from tests.app_fixtures import illustration, vanilla_cycle

DEVICE = ("device.cpu", {"threads": 2})


def note(eagle, vanilla, planned, lang="en"):
    state = av.new_state(eagle, vanilla)
    state["note"] = cb.timed_note(state, planned, False, DEVICE)
    return av.note_text(state["note"], lang)


# ------------------------------------------------------------------ 1: the note says what ran
def test_note_says_what_ran():
    eagle, vanilla = illustration()
    both = note(eagle, vanilla, 2)
    assert "EAGLE ran first, then vanilla" in both and "plays both" in both
    alone = note(None, vanilla, 1)  # vanilla only
    assert "One run only: vanilla" in alone and "then vanilla" not in alone and "both" not in alone
    assert "One run only: EAGLE" in note(eagle, None, 1)  # no comparison asked for
    stopped = note(eagle, None, 2)  # a Stop before vanilla started
    assert "vanilla did not run" in stopped and "plays both" not in stopped
    zh = note(None, vanilla, 1, "zh")
    assert "只有一次运行：普通解码" in zh and "两者" not in zh
    assert "普通解码没有运行" in note(eagle, None, 2, "zh")


# ------------------------------------------------------------------ 2: a vanilla run drafts nothing
def test_vanilla_run_says_it_drafts_nothing():
    c = replace(vanilla_cycle(), draft_ms=0.4)  # a real vanilla cycle records a little "drafting" time
    state = av.new_state(vanilla=replace(illustration()[1], cycles=(c,)))
    views = av.cycle_views(state, 1)
    assert "Vanilla decoding drafts nothing" in views["caption"]
    assert "one token was left" not in views["caption"] and "No drafts this cycle" not in views["caption"]
    for name in ("probs", "mask"):
        texts = [a.text for a in views[name].layout.annotations]
        assert texts == ["Vanilla drafts nothing: no tree to verify."], (name, texts)
        assert not views[name].data  # no stretched bonus bar, no one-square mask
    zh = av.cycle_views(state, 1, "zh")
    assert "普通解码不起草" in zh["caption"]
    assert [a.text for a in zh["probs"].layout.annotations] == ["普通解码不起草：没有要验证的树。"]
    # an EAGLE run's last cycle with nothing drafted keeps its own words
    eagle = illustration()[0]
    last = replace(eagle.cycles[-1], nodes=eagle.cycles[-1].nodes[:1], accepted=(0,))
    cap = av.cycle_views(av.new_state(replace(eagle, cycles=(last,))), 1)["caption"]
    assert "only one token was left" in cap


# ------------------------------------------------------------------ 3: the compare box for vanilla
def test_compare_box_is_greyed_for_vanilla():
    assert page_events.compare_box("vanilla").interactive is False
    assert page_events.compare_box("eagle2").interactive is True


def test_method_change_is_wired_to_the_compare_box():
    import app

    deps = app.demo.config["dependencies"]
    comps = {c["id"]: c for c in app.demo.config["components"]}
    radio = [i for i, c in comps.items() if c["type"] == "radio" and any(
        ch[1] == "vanilla" for ch in c["props"].get("choices", []))]
    box = [i for i, c in comps.items() if c["type"] == "checkbox"]
    assert radio and box
    assert any(any(t[0] == radio[0] and t[1] == "change" for t in d["targets"]) and box[0] in d["outputs"]
               for d in deps)


# ------------------------------------------------------------------ 4: one accepted draft, singular
def test_one_accepted_draft_reads_in_the_singular():
    c = illustration()[0].cycles[0]
    one = replace(c, accepted=c.accepted[:2])
    one = replace(one, nodes=tuple(replace(n, decision="rejected") if n.decision == ACCEPTED and n.index not in
                                   one.accepted else n for n in one.nodes))
    cap, zh = viz.cycle_caption(one, 4), viz.cycle_caption(one, 4, lang="zh")
    assert "(it matched the target's own top choice)" in cap and "each matched" not in cap
    assert "它与目标模型自己的首选一致" in zh and "每个都" not in zh
    many = viz.cycle_caption(c, 4)
    assert "(each matched the target's own top choice)" in many


# ------------------------------------------------------------------ 5: a clamped number is said
def test_a_number_past_the_slider_is_said_and_refused():
    note_ = page_events.clamp_note("total_tokens", 100000)
    assert "100000" in note_ and "256" in note_ and "above the maximum" in note_
    assert "256" in page_events.clamp_note("total_tokens", 100000, "zh") and "上限" in page_events.clamp_note(
        "total_tokens", 100000, "zh")
    assert page_events.clamp_note("total_tokens", 256) == gr.skip()  # the clamp's result keeps the note
    assert page_events.clamp_note("total_tokens", 12) == ""  # a value in range clears it
    assert "minimum" in page_events.clamp_note("depth", 0)
    from eagle_app.layout import SettingSlider

    # the slider hands the number on (gr.Slider raised its own error first); the engine's check refuses it
    assert SettingSlider(1, 256, value=8).preprocess(100000) == 100000
    values = dict(method="eagle2", depth=3, tree_top_k=4, total_tokens=100000, chain_length=3, temperature=0.0,
                  top_p=1.0, top_k=0, max_new=6, seed=0)
    with pytest.raises(ValueError, match="total_tokens must be between 1 and 256"):
        build(tuple(values.values())).validate()
    out = av.named(av.refuse(ValueError("total_tokens must be between 1 and 256")))
    assert set(out) == {"status"} and "between 1 and 256" in out["status"]


# ------------------------------------------------------------------ 6: the wait estimate
def test_measured_rate_changes_the_estimate(monkeypatch):
    line = DecodeLine(rate=8.0)
    monkeypatch.setattr(cb, "LINE", line)
    s = DecodeSettings(method="eagle2", max_new_tokens=48)
    guess = lambda: float(cb.starting_line(s, 2).split("about ")[1].split(" s")[0])  # noqa: E731
    before = guess()
    assert before == pytest.approx(cb.SETTLE_S + 96 / 8.0, abs=0.5)
    line.note_run("eagle", 48, 1.0)  # measured here: 48 tok/s for EAGLE, 24 for vanilla
    line.note_run("vanilla", 48, 2.0)
    after = guess()
    assert after == pytest.approx(cb.SETTLE_S + 1.0 + 2.0, abs=0.5) and after < before / 3
    vanilla = DecodeSettings(method="vanilla", max_new_tokens=48)
    assert "about 3 s" in cb.starting_line(vanilla, 1)  # 1 s settle + 48 tokens at vanilla's 24 tok/s


def test_the_first_guess_is_the_recorded_t1():
    from eagle_app.decode_queue import recorded_rate

    rate = recorded_rate()
    assert rate is None or DecodeLine().rate == pytest.approx(rate)
    assert recorded_rate("/nonexistent.json") is None and DecodeLine(rate=None).rate > 0


# ------------------------------------------------------------------ 7: why this cycle is shown first
def test_first_cycle_shown_says_why():
    eagle, vanilla = illustration()
    state = av.new_state(eagle, vanilla)
    k = av.showcase_cycle(state["cycles"])
    views = av.all_views(state)
    assert views["slider"].value == k
    assert "Shown first: the cycle that accepted the most drafts" in views["caption"]
    assert f"all {len(state['cycles'])} cycles" in views["caption"]
    assert "接受草稿最多的一轮" in av.all_views(state, "zh")["caption"]
    assert "**" not in av.all_views(state, "zh")["caption"]
    # scrubbing to another cycle draws the plain caption
    assert "Shown first" not in av.cycle_views(state, 1)["caption"]
