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
        if "event: error" in body:
            return json.loads(body.split("data:", 1)[1].strip().splitlines()[0])
        last = [line for line in body.splitlines() if line.startswith("data:")][-1]
        return {"status": json.loads(last[5:])[OUT.index("status")]}  # a refusal: the status line says why

    import app
    from eagle_app.views import OUT

    n_inputs = len(next(d for d in app.demo.config["dependencies"] if d.get("api_name") == "generate")["inputs"])
    good = ["Say hi.", "eagle2", 2, 2, 4, 4, 0, 1, 0, 8, 0, True] + [None] * (n_inputs - 12)  # + the page's states
    with launched_app(free_port()) as url:
        answers = {name: call(url, data) for name, data in (
            ("too few", good[:3]), ("not a number", good[:2] + ["deep"] + good[3:]),
            ("unknown method", good[:1] + ["nope"] + good[2:]), ("out of range", good[:2] + [1e9] + good[3:]))}
    assert f"takes {n_inputs} values" in answers["too few"]["error"] and "got 3" in answers["too few"]["error"]
    # a setting's slider hands any value to the callbacks (#45), which refuse it with the engine's message
    assert "depth must be a number" in answers["not a number"]["status"]
    assert "nope" in answers["unknown method"]["error"]
    assert "depth must be between 1 and 16" in answers["out of range"]["status"].replace("\\", "")
    assert "Traceback" not in capfd.readouterr().err


def _engine(head="assets/head-smollm2-135m", head3="assets/head3-smollm2-135m", name="smollm2-135m", device="cpu"):
    from types import SimpleNamespace

    describe = f'{name} (134.5M params, {device}, float32, kernels onednn+smallgemm (211 linear layers), lean "forward")'
    return SimpleNamespace(target=SimpleNamespace(name=name, device=device, describe=lambda: describe),
                           head_name=head, head3_name=head3)


def _visible(line: str) -> str:
    """What the page shows without hovering: the line minus the hover's title attribute."""
    import re

    return re.sub(r'title="[^"]*"', "", line)


def test_the_model_line_is_plain_words_with_the_details_on_hover():
    """The model line was jargon ("kernels onednn+smallgemm (211 linear layers...)"): now plain words,
    the technical details in the title of a "(details)" element (the browser shows it on hover)."""
    import html
    import re

    from eagle_app.model import model_line

    line = model_line(_engine(), 4.24)
    shown = _visible(line)
    assert "SmolLM2-135M-Instruct on this CPU, loaded in 4.2 s" in shown
    assert "EAGLE-2 and EAGLE-3, trained by this project" in shown and "(details)" in shown
    assert not any(w in shown for w in ("onednn", "kernels", "params", "float32", "assets/"))
    title = html.unescape(re.search(r'title="([^"]*)"', line).group(1))
    assert "kernels onednn+smallgemm" in title and 'lean "forward"' in title  # quotes escaped, then restored
    assert "assets/head3-smollm2-135m" in title
    assert "loaded in" not in model_line(_engine(), 0.0)  # an engine installed ready-made: no load time to tell
    zh = model_line(_engine(), 4.24, "zh")
    assert "运行在本机 CPU 上" in _visible(zh) and "由本项目训练" in zh and "（详情）" in zh
    assert "onednn" not in _visible(zh) and "onednn" in zh
    # the console's and the progress bar's copy: plain text, no hover element, no Markdown
    from eagle_app.model import ModelHolder

    holder = ModelHolder()
    holder.set_engine(_engine())
    plain = holder.status_plain()
    assert plain.startswith("Model ready: SmolLM2-135M-Instruct on this CPU")
    assert not any(c in plain for c in "<>*") and "details" not in plain and "onednn" not in plain


def test_the_model_line_says_what_kind_of_head_it_has():
    from eagle_app.model import model_line

    assert "untrained, so expect τ ≈ 1" in model_line(_engine(head="random (untrained)", head3=""), 1.0)
    mine = _visible(model_line(_engine(head="/data/my-head", head3="", name="/data/Qwen2-0.5B", device="cuda:0"), 9.0))
    assert "Qwen2-0.5B on the GPU" in mine and "EAGLE-2, loaded from your folder" in mine and "EAGLE-3" not in mine
    assert "none (vanilla decoding only)" in model_line(_engine(head="", head3=""), 1.0)
