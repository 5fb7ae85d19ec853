"""The app's callbacks, called directly (no browser), and a gradio_client run against the
launched app. Uses the default model with a few new tokens per run."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from types import SimpleNamespace

import gradio as gr
import pytest

from app_runtime import MAX_PROMPT_CHARS, parse_settings
from tests.app_fixtures import default_engine, free_port, illustration, launched_app

import app  # noqa: E402  (after the fixtures: importing the app must not load a model)

GOOD = dict(method="eagle2", depth=3, tree_top_k=4, total_tokens=8, chain_length=3, temperature=0.0, top_p=1.0,
            top_k=0, max_new=6, seed=0)


@pytest.fixture(scope="module", autouse=True)
def engine():
    e = default_engine()
    app.MODEL.set_engine(e)
    return e


def req(name: str):
    return SimpleNamespace(session_hash=name)


def run_generate(prompt="Say hello.", session="A", compare=True, **kw):
    args = {**GOOD, **kw}
    app.arm(req(session))
    outs = list(app.generate(prompt, *args.values(), compare, app.new_state(), request=req(session)))
    return outs


def test_importing_the_app_loads_no_model():
    """In a fresh interpreter (here the fixture has installed an engine already): importing the
    app builds the page, and neither loads a model nor starts loading one."""
    code = ("import time, gradio as gr, eagle_core, eagle_core.target as t\n"
            "def refuse(*a, **k): raise RuntimeError('load_target called')\n"
            "eagle_core.load_target = t.load_target = refuse\n"
            "import app\n"
            "assert isinstance(app.demo, gr.Blocks)\n"
            "time.sleep(1)  # a load started by the import would have failed by now\n"
            "assert app.MODEL.engine is None and app.MODEL.error is None and not app.MODEL.ready.is_set()\n"
            "print('no model')\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("no model"), proc.stderr[-2000:]
    assert app.MODEL.engine is not None  # in this process: installed by the fixture


@pytest.mark.parametrize("kw,msg", [
    (dict(depth=0), "depth"), (dict(tree_top_k=99), "top_k"), (dict(total_tokens=1000), "total_tokens"),
    (dict(max_new=0), "max_new_tokens"), (dict(top_p=0), "top_p"), (dict(temperature=-1), "temperature"),
    (dict(max_new="lots"), "number"), (dict(depth=2.5), "whole number"), (dict(method="medusa"), "unknown method"),
    (dict(seed=-3), "seed"),
])
def test_out_of_range_settings_are_clear_errors(kw, msg):
    args = {**GOOD, **kw}
    with pytest.raises(ValueError, match=msg):
        parse_settings(*args.values())
    with pytest.raises(gr.Error):
        run_generate(**kw)


@pytest.mark.parametrize("prompt", ["", "   \n", "x" * (MAX_PROMPT_CHARS + 1)])
def test_bad_prompts_raise_gr_error(prompt):
    with pytest.raises(gr.Error):
        run_generate(prompt)


def test_prompt_longer_than_context_is_refused(engine):
    long = "word " * 1000  # under the character cap, still fine for the tokenizer: make the context tiny instead
    limit = engine.target.context_limit
    engine.target.context_limit = 50
    try:
        with pytest.raises(gr.Error, match="context"):
            run_generate(long[:4000])
    finally:
        engine.target.context_limit = limit


def test_generate_eagle_then_vanilla():
    outs = run_generate("Write one line of Python.")
    final = outs[-1]
    state = final[app.state_box]
    e, v = state["eagle"], state["vanilla"]
    assert e.summary.method == "eagle2" and v.summary.method == "vanilla"
    assert e.summary.token_ids == v.summary.token_ids  # lossless at temperature 0
    assert "identical" in final[app.comparison] and "speedup" in final[app.comparison]
    assert "Done." in final[app.status_md]
    assert "eg-bonus" in final[app.text_html]
    assert len(state["cycles"]) == e.summary.cycles
    live = [o for o in outs[:-1] if app.tree_plot in o]
    assert live, "the tree is drawn while decoding, before the end"
    value = final[app.download].value
    path = value["path"] if isinstance(value, dict) else value
    with open(path, encoding="utf-8") as f:
        bundle = json.load(f)
    assert set(bundle["runs"]) == {"eagle", "vanilla"}
    loaded = app.load_trace(path)
    assert loaded[-3]["eagle"].summary.text == e.summary.text


def test_vanilla_only_and_no_compare():
    state = run_generate(method="vanilla")[-1][app.state_box]
    assert state["eagle"] is None and state["vanilla"].summary.tau == 1.0
    state = run_generate(compare=False)[-1][app.state_box]
    assert state["vanilla"] is None and state["eagle"] is not None


def test_stop_mid_run_keeps_the_partial_run():
    app.arm(req("S"))
    gen = app.generate("Count from one to fifty in words.", *{**GOOD, "max_new": 200}.values(), True,
                       app.new_state(), request=req("S"))
    next(gen)  # the first cycle is on screen
    app.STOPS["S"].set()
    final = list(gen)[-1]
    e = final[app.state_box]["eagle"]
    assert e.summary.stop_reason == "stopped" and e.summary.new_tokens < 200
    assert final[app.state_box]["vanilla"] is None  # vanilla never started


def test_two_sessions_generate_at_once_without_leaking():
    results = {}

    def go(name, prompt):
        results[name] = run_generate(prompt, session=name)[-1][app.state_box]

    threads = [threading.Thread(target=go, args=(n, p)) for n, p in (("T1", "Name a colour."), ("T2", "Name a fruit."))]
    [t.start() for t in threads]
    [t.join(300) for t in threads]
    for name, prompt in (("T1", "Name a colour."), ("T2", "Name a fruit.")):
        state = results[name]
        assert state["eagle"].summary.prompt == state["vanilla"].summary.prompt == prompt
        assert list(state["cycles"]) == list(state["eagle"].cycles)  # no cycle of the other session


def test_step_mode_advances_one_cycle_per_click():
    state, args = app.new_state(), {**GOOD, "max_new": 4}
    steps = []
    for _ in range(6):
        out = list(app.step("Hi!", *args.values(), state, request=req("P")))[-1]
        state = out[app.state_box]
        steps.append(len(state["cycles"]))
        if state["eagle"] is not None:
            break
    assert steps[:3] == [1, 2, 3]
    assert state["eagle"] is not None and "finished" in out[app.status_md]


def test_scrubber_and_play_stay_in_range():
    eagle, vanilla = illustration()
    state = app.new_state(eagle, vanilla)
    text, tree, mask, probs, caption, slider = app.show(state, 2)
    assert "Cycle 2 of 4" in caption and "eg-sel" in text
    assert "Cycle 1 of 4" in app.shift(state, 1, -1)[4]
    assert "Cycle 4 of 4" in app.shift(state, 4, +1)[4]
    out = app.play_tick(state, 4)
    assert out[-1].active is False  # the end: play stops
    empty = app.cycle_views(app.new_state(), None)
    assert "appears here" in empty[0]


def test_malformed_trace_is_a_gr_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"summary": {}, "cycles": [{"nodes": 3}]}')
    with pytest.raises(gr.Error):
        app.load_trace(str(bad))
    bad.write_bytes(b"\xff\xfe not json")
    with pytest.raises(gr.Error):
        app.load_trace(str(bad))


def test_shipped_example_traces_load():
    names = list(app.example_traces())
    assert len(names) >= 3
    for name in names:
        out = app.load_example(name)
        assert out[-3]["cycles"], name


def test_gradio_client_generates():
    from gradio_client import Client

    with launched_app(free_port()) as url:
        client = Client(url, verbose=False)
        result = client.predict("Say hi.", "eagle2", 3, 4, 8, 3, 0.0, 1.0, 0, 6, 0, True, api_name="/generate")
        text = " ".join(str(r) for r in result)
        assert "identical" in text and "vanilla tokens/s" in text
        with pytest.raises(Exception, match="empty"):
            client.predict("", "eagle2", 3, 4, 8, 3, 0.0, 1.0, 0, 6, 0, True, api_name="/generate")
