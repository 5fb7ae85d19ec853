"""Issue 28's smaller findings on the page, each with the case that failed: the cycle scrubber
given 0, 999 or 2.5 (an error toast; the slider at 3 but the caption at 2)."""
from __future__ import annotations

import gradio as gr

import eagle_app.views as av
from tests.app_fixtures import illustration


def test_the_scrubber_takes_any_number_and_agrees_with_its_caption():
    eagle, vanilla = illustration()
    state = av.new_state(eagle, vanilla)  # 4 cycles
    slider = av.CycleSlider(1, 4, value=1, step=1)
    assert slider.get_block_name() == "slider"  # drawn by the ordinary slider
    assert slider.preprocess(999) == 999 and slider.preprocess(0) == 0  # gr.Slider raised here
    assert slider.preprocess("x") is None
    for typed, shown in ((0, 1), (999, 4), (2.5, 3), (3.49, 3), (-7, 1)):
        text, tree, mask, probs, caption, update = av.show(state, slider.preprocess(typed))
        assert f"Cycle {shown} of 4" in caption, (typed, caption)
        assert update != gr.skip() and update.value == shown  # the slider is put where the caption is
    assert av.show(state, 2)[5] == gr.skip()  # a cycle that exists: the slider is left alone (a drag)
    assert "Cycle 4 of 4" in av.shift(state, 3.6, +1)[4] and av.play_tick(state, None)[4].startswith("**Cycle 1")


def test_the_public_api_is_generate_and_step():
    """The page's internal events (/arm_1, /lambda_*, /play_tick, /status ...) were listed as API."""
    import app

    assert sorted(app.demo.get_api_info()["named_endpoints"]) == ["/generate", "/step"]
    assert not app.demo.get_api_info().get("unnamed_endpoints")
