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


def test_malformed_api_calls_get_a_message_and_leave_no_traceback(capfd):
    """Too few values, a value a widget cannot read, an unknown choice, an out-of-range number:
    each answer names the problem (a third of them answered {"error": null}), and the server
    log has no traceback (it had one for each)."""
    import json
    import urllib.request

    from tests.app_fixtures import free_port, launched_app

    def call(url, data):
        req = urllib.request.Request(url + "gradio_api/call/generate", data=json.dumps({"data": data}).encode(),
                                     headers={"Content-Type": "application/json"})
        event = json.load(urllib.request.urlopen(req, timeout=30))["event_id"]
        body = urllib.request.urlopen(url + f"gradio_api/call/generate/{event}", timeout=120).read().decode()
        return json.loads(body.split("data:", 1)[1].strip().splitlines()[0]) if "event: error" in body else None

    import app

    n_inputs = len(next(d for d in app.demo.config["dependencies"] if d.get("api_name") == "generate")["inputs"])
    good = ["Say hi.", "eagle2", 2, 2, 4, 4, 0, 1, 0, 8, 0, True] + [None] * (n_inputs - 12)  # + the page's states
    with launched_app(free_port()) as url:
        answers = {name: call(url, data) for name, data in (
            ("too few", good[:3]), ("not a number", good[:2] + ["deep"] + good[3:]),
            ("unknown method", good[:1] + ["nope"] + good[2:]), ("out of range", good[:2] + [1e9] + good[3:]))}
    assert f"takes {n_inputs} values" in answers["too few"]["error"] and "got 3" in answers["too few"]["error"]
    assert "Depth" in answers["not a number"]["error"]
    assert "nope" in answers["unknown method"]["error"] and "maximum value 16" in answers["out of range"]["error"]
    assert "Traceback" not in capfd.readouterr().err
