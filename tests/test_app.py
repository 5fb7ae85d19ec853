"""The app's callbacks, called directly (no browser), and a gradio_client run against the
launched app. Uses the default model with a few new tokens per run. The browser-level checks
are in tests/test_browser.py; issue-11 findings are named "#n" below."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time

import gradio as gr
import pytest

import viz
from eagle_app import traces as at
from eagle_app import views as av
from eagle_app.callbacks import decoding as cb
from eagle_app.callbacks import page as page_events
from eagle_app.decode_queue import DecodeLine
from eagle_app.model import ModelHolder
from eagle_app.settings import MAX_PROMPT_CHARS, build
from eagle_app.tempfiles import trace_dir
from eagle_app.tokens import readable_run
from tests import app_fixtures as fixtures
from tests.app_fixtures import _app_model, engine, free_port, illustration, in_thread, launched_app, req  # noqa: F401
from viz.examples import example_traces

import app  # noqa: E402  (after the fixtures: importing the app must not load a model)

GOOD = dict(method="eagle2", depth=3, tree_top_k=4, total_tokens=8, chain_length=3, temperature=0.0, top_p=1.0,
            top_k=0, max_new=6, seed=0)


def start_generate(prompt="Say hello.", session="A", compare=True, **kw):
    return fixtures.start_generate(prompt, session, {**GOOD, **kw}, compare)


def run_generate(prompt="Say hello.", session="A", compare=True, **kw):
    return [av.named(o) for o in start_generate(prompt, session, compare, **kw)]


def test_importing_the_app_loads_no_model():
    """In a fresh interpreter (here the fixture has installed an engine already): importing the
    app builds the page, and neither loads a model nor starts loading one."""
    code = ("import time, gradio as gr, eagle_core, eagle_core.target as t\n"
            "def refuse(*a, **k): raise RuntimeError('load_target called')\n"
            "eagle_core.load_target = t.load_target = refuse\n"
            "import app\n"
            "from eagle_app.callbacks import decoding as cb\n"
            "assert isinstance(app.demo, gr.Blocks)\n"
            "time.sleep(1)  # a load started by the import would have failed by now\n"
            "assert cb.MODEL.engine is None and cb.MODEL.error is None and not cb.MODEL.ready.is_set()\n"
            "print('no model')\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root, timeout=300)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("no model"), proc.stderr[-2000:]
    assert cb.MODEL.engine is not None  # in this process: installed by the fixture
    assert len(app.ALL) == len(av.OUT)


def test_app_files_stay_short():
    """The project's rule (issue 9): no file of the app over 400 lines."""
    root = os.path.dirname(app.__file__)
    files = ["app.py"] + [os.path.relpath(os.path.join(d, f), root) for d, _, names in
                          os.walk(os.path.join(root, "eagle_app")) for f in names if f.endswith(".py")]
    assert {"app.py", "eagle_app/callbacks/decoding.py", "eagle_app/views.py", "eagle_app/traces.py",
            "eagle_app/worker.py"} <= set(files)
    for name in files:
        with open(os.path.join(root, name), encoding="utf-8") as f:
            assert sum(1 for _ in f) < 400, name


@pytest.mark.parametrize("kw,msg", [
    (dict(depth=0), "depth"), (dict(tree_top_k=99), "top_k"), (dict(total_tokens=1000), "total_tokens"),
    (dict(max_new=0), "max_new_tokens"), (dict(top_p=0), "top_p"), (dict(temperature=-1), "temperature"),
    (dict(max_new="lots"), "number"), (dict(depth=2.5), "whole number"), (dict(method="medusa"), "unknown method"),
    (dict(seed=-3), "seed"),
])
def test_out_of_range_settings_are_refused(kw, msg):
    args = {**GOOD, **kw}
    with pytest.raises(ValueError, match=msg):
        build(tuple(args.values())).validate()  # what Engine.check runs, without the context limit
    outs = run_generate(**kw)
    assert [set(o) for o in outs] == [{"status"}] and msg.split()[0] in outs[0]["status"].replace("\\", "")


@pytest.mark.parametrize("prompt", ["", "   \n"])
def test_empty_prompt_leaves_the_figures_alone(prompt):
    """#9: no gr.Error (whose red badges covered every output): a warning and a status line only."""
    outs = run_generate(prompt)
    assert [set(o) for o in outs] == [{"status"}]
    assert "empty" in outs[0]["status"]


def test_long_paste_is_refused_with_its_length():
    """#8: the textbox no longer cuts a paste silently at 6,000 characters; the server says why."""
    assert app.settings_in[0].max_length is None
    outs = run_generate("x" * 50_000)
    assert [set(o) for o in outs] == [{"status"}]
    assert "50,000 characters" in outs[0]["status"] and f"{MAX_PROMPT_CHARS:,}" in outs[0]["status"]


def test_zero_tokens_are_explained():
    """#8: a run that produced nothing says so, with the prompt length and the prefill time."""
    eagle, vanilla = illustration()
    from dataclasses import replace

    empty = replace(eagle, summary=replace(eagle.summary, new_tokens=0, stop_reason="eos", prompt_tokens=1530,
                                           prefill_ms=26_000.0))
    text = av.done_status({"eagle": empty, "vanilla": None})
    assert "produced no tokens (the model ended its answer)" in text and "1,530-token prompt" in text
    assert "26.0 s" in text


def test_prompt_longer_than_context_is_refused(engine):
    limit = engine.target.context_limit
    engine.target.context_limit = 50
    try:
        outs = run_generate(("word " * 1000)[:4000])
    finally:
        engine.target.context_limit = limit
    assert [set(o) for o in outs] == [{"status"}] and "context" in outs[0]["status"]


def test_generate_draws_nothing_while_timed():
    """Both timed runs get the same treatment: one clearing update before the clock starts (its
    status says what is timed and why the page stays still), nothing while they decode, then
    every view once at the end."""
    assert cb.UI_INTERVAL_S == 0  # the default (EAGLE_APP_PROGRESS_S unset)
    outs = run_generate("Write one line of Python.", max_new=12)
    clear, live, final = outs[0], outs[1:-1], outs[-1]
    assert set(av.VIEW + av.SUMMARY) <= set(clear)  # nothing of the previous run stays
    assert "after both timed runs" in clear["comparison"] and "after both timed runs" in clear["replay"]
    assert "Timing EAGLE, then vanilla, on 12 new tokens each" in clear["status"]
    assert "The page stays still" in clear["status"]
    assert live == [], [set(o) for o in live]
    assert "the page did not change while either run decoded" in final["comparison"]
    state = final["state"]
    e, v = state["eagle"], state["vanilla"]
    assert e.summary.method == "eagle2" and v.summary.method == "vanilla"
    assert e.summary.token_ids == v.summary.token_ids  # lossless at temperature 0
    assert "identical" in final["comparison"] and "speedup" in final["comparison"]
    assert "Timed with live drawing paused" in final["comparison"]
    assert "Done." in final["status"] and "stopped" not in final["status"]
    assert "eg-bonus" in final["text"]
    assert len(state["cycles"]) == e.summary.cycles
    value = final["download"].value
    path = value["path"] if isinstance(value, dict) else value
    with open(path, encoding="utf-8") as f:
        assert set(json.load(f)["runs"]) == {"eagle", "vanilla"}
    assert av.named(at.load_trace(path, source=path))["state"]["eagle"].summary.text == e.summary.text


def test_progress_lines_when_asked_for(monkeypatch):
    """EAGLE_APP_PROGRESS_S > 0: status lines only while the runs decode, never a figure."""
    monkeypatch.setattr(cb, "UI_INTERVAL_S", 0.05)
    outs = run_generate("Write one line of Python.", max_new=24)
    live, final = outs[1:-1], outs[-1]
    assert live and all(set(o) == {"status"} for o in live), [set(o) for o in live]
    assert all("tok/s" not in o["status"] or "so far" in o["status"] for o in live)
    assert "a one-line progress update" in final["comparison"]


def test_progress_line_has_no_rate_at_first():
    """The live status once read "vanilla running · cycle 1 · 62131.1 tok/s"."""
    now = time.perf_counter()
    assert "tok/s" not in av.progress_line("vanilla", 2, 1, now - 0.01, 48)
    assert "≈ 4.0 tok/s so far" in av.progress_line("vanilla", 12, 11, now - 3.0, 48)


def test_vanilla_only_and_no_compare():
    final = run_generate(method="vanilla")[-1]
    state = final["state"]
    assert state["eagle"] is None and state["vanilla"].summary.tau == 1.0
    # #45: the note says one run ran; the caption, the mask and the p/q chart say vanilla drafts nothing
    assert "One run only: vanilla" in final["comparison"] and "then vanilla" not in final["comparison"]
    assert "Vanilla decoding drafts nothing" in final["caption"]
    assert not final["probs"].data and not final["mask"].data
    final = run_generate(compare=False)[-1]
    state = final["state"]
    assert state["vanilla"] is None and state["eagle"] is not None
    assert "One run only: EAGLE" in final["comparison"]


LONG = "Tell me a long story about a lighthouse keeper and the storm that changed her life."


def test_stop_mid_run_keeps_the_partial_run():
    t, outs = in_thread(start_generate(LONG, session="S", max_new=400))
    time.sleep(cb.SETTLE_S + 1.0)  # the page is cleared, then EAGLE decodes (no update meanwhile)
    cb.stop(req("S"))
    t.join(60)
    final = outs[-1]
    e = final["state"]["eagle"]
    assert e.summary.stop_reason == "stopped" and 0 < e.summary.new_tokens < 400
    assert final["state"]["vanilla"] is None  # vanilla never started
    assert "vanilla did not run" in final["comparison"] and "plays both" not in final["comparison"]
    assert "stopped by you" in final["status"] and "stopped: stopped" not in final["status"]


def test_second_generate_then_stop_stops_both():
    """#1: Generate, Generate again, Stop: the first run used to run on (its flag was replaced)."""
    t1, first = in_thread(start_generate(LONG, session="G", max_new=400))
    time.sleep(cb.SETTLE_S + 1.0)
    second_id = cb.arm(req("G"))  # the second click ends the first run (it leaves the page to the second) ...
    t1.join(60)
    assert not t1.is_alive() and not any("state" in o for o in first)
    t2, second = in_thread(cb.generate(LONG, *{**GOOD, "max_new": 400}.values(), True, av.new_state(), second_id,
                                       request=req("G")))
    time.sleep(cb.SETTLE_S + 1.0)
    cb.stop(req("G"))  # ... and Stop reaches the second
    t2.join(60)
    final = second[-1]
    assert final["state"]["eagle"].summary.stop_reason == "stopped" and final["state"]["vanilla"] is None


def test_stop_while_waiting_in_line_leaves_at_once_and_keeps_the_page():
    """#2: Stop on a queued run: out of the line at once, nothing on the page replaced."""
    other = cb.LINE.join(100)  # another user's run holds the decode slot
    try:
        gen = start_generate(session="Q")
        waiting = av.named(next(gen))
        assert set(waiting) == {"status"} and "ahead of yours" in waiting["status"]
        t0 = time.perf_counter()
        cb.stop(req("Q"))
        rest = [av.named(o) for o in gen]
        assert time.perf_counter() - t0 < 2.0
        assert [set(o) for o in rest] == [{"status"}] and "nothing ran" in rest[-1]["status"]
    finally:
        cb.LINE.leave(other)


def test_decode_line_order_place_and_estimate():
    """#3: first come first served, with each waiting run's place and an estimated wait."""
    line = DecodeLine(rate=10.0)
    a, b, c = line.join(100), line.join(50), line.join(10)
    assert line.wait(a, 0.01) and not line.wait(b, 0.01)
    ahead, wait = line.place(c)
    assert ahead == 2 and 13.0 < wait <= 15.0  # 100 + 50 tokens at 10 tok/s, minus a's few ms
    line.leave(a, tokens=100, seconds=5.0)
    assert line.wait(b, 0.01) and line.place(c)[0] == 1
    assert line.rate == pytest.approx(20)  # the first measurement replaces the guess (#45: estimates ran 2-4x long)
    line.leave(b, tokens=50, seconds=5.0)
    assert line.rate == pytest.approx(0.7 * 20 + 0.3 * 10)  # later ones are averaged in


def test_a_run_is_bounded_in_time(engine, monkeypatch):
    """#3: one request cannot hold the decoder for minutes: each method stops at the budget, and
    vanilla then decodes as many tokens as EAGLE did, so the comparison stays like for like."""
    monkeypatch.setattr(cb, "RUN_BUDGET_S", 0.4)
    final = run_generate("Write a long story about a dragon.", max_new=400, session="B")[-1]
    e, v = final["state"]["eagle"], final["state"]["vanilla"]
    assert e.summary.new_tokens < 400 and v.summary.new_tokens <= e.summary.new_tokens
    assert "stopped at the 0.4 s limit" in final["status"]


def test_two_sessions_generate_at_once_without_leaking():
    results = {}

    def go(name, prompt):
        results[name] = run_generate(prompt, session=name)[-1]["state"]

    threads = [threading.Thread(target=go, args=(n, p)) for n, p in (("T1", "Name a colour."), ("T2", "Name a fruit."))]
    [t.start() for t in threads]
    [t.join(300) for t in threads]
    for name, prompt in (("T1", "Name a colour."), ("T2", "Name a fruit.")):
        state = results[name]
        assert state["eagle"].summary.prompt == state["vanilla"].summary.prompt == prompt
        assert list(state["cycles"]) == list(state["eagle"].cycles)  # no cycle of the other session


def test_step_mode_advances_one_cycle_per_click():
    # depth 3 commits at most 4 tokens a cycle, so 9 tokens need at least 3 cycles whatever the head
    state, args = av.new_state(), {**GOOD, "max_new": 9}
    steps = []
    for i in range(12):
        out = av.named(list(cb.step("Hi!", *args.values(), state, request=req("P")))[-1])
        state = out["state"]
        steps.append(len(state["cycles"]))
        if i == 0:  # a new step-by-step run clears the last run's comparison and charts
            assert "when the step-by-step run finishes" in out["comparison"]
        if state["eagle"] is not None:
            break
    assert steps[:3] == [1, 2, 3]
    assert state["eagle"] is not None and "finished" in out["status"]
    # every click added a cycle, the last one included (it used to take one more click that added none)
    assert steps == list(range(1, len(steps) + 1)) and len(state["eagle"].cycles) == len(steps)


def test_scrubber_and_play_stay_in_range():
    eagle, vanilla = illustration()
    state = av.new_state(eagle, vanilla)
    text, tree, mask, probs, caption, slider = av.show(state, 2)
    assert "Cycle 2 of 4" in caption and "eg-sel" in text
    assert slider == gr.skip()  # #10: a typed number is shown, and the box is left as typed
    assert av.show(state, 9)[5].value == 4  # out of range: the slider is put back in range
    assert "Cycle 1 of 4" in av.shift(state, 1, -1)[4]
    assert "Cycle 4 of 4" in av.shift(state, 4, +1)[4]
    assert av.play_tick(state, 4)[-1].active is False  # the end: play stops
    assert "appears here" in av.cycle_views(av.new_state(), None)["text"]


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return str(p)


def refused(path) -> str:
    out = av.named(at.load_trace(path))
    assert set(out) <= {"status", "upload"}, set(out)  # no view replaced, no gr.Error badge
    return out["status"]


def test_malformed_traces_are_refused_without_error_badges(tmp_path):
    assert "Could not load" in refused(write(tmp_path, "a.json", '{"summary": {}, "cycles": [{"nodes": 3}]}'))
    p = tmp_path / "b.json"
    p.write_bytes(b"\xff\xfe not json")
    assert "Could not load" in refused(str(p))


def test_deep_nesting_and_non_numbers_are_refused(tmp_path):
    """#5: 100,000 nested levels used to raise an uncaught RecursionError; NaN / inf / 1e400 were shown."""
    assert "nested" in refused(write(tmp_path, "deep.json", "[" * 100_000 + "]" * 100_000))
    from eagle_core.trace import run_to_dict

    eagle, _ = illustration()
    good = run_to_dict(eagle)
    for bad in ("NaN", "Infinity", "-Infinity", "1e400"):
        text = json.dumps(good).replace('"wall_s": ' + json.dumps(eagle.summary.wall_s), f'"wall_s": {bad}')
        assert bad in text
        assert "Could not load" in refused(write(tmp_path, "nan.json", text)), bad
    d = run_to_dict(eagle)
    d["cycles"][0]["nodes"][1]["q"] = 7.5
    assert "Could not load" in refused(write(tmp_path, "q.json", json.dumps(d)))


def test_trace_strings_are_shown_as_text(tmp_path):
    """#6: summary.model = "<img src=x>" was rendered as HTML in the status line."""
    from dataclasses import replace

    from eagle_core.trace import run_to_json

    eagle, _ = illustration()
    c = eagle.cycles[0]
    nodes = (c.nodes[0], replace(c.nodes[1], text="<b>x</b>")) + c.nodes[2:]
    evil = replace(eagle, summary=replace(eagle.summary, model="<img src=x onerror=alert(1)>", method="eagle2"),
                   cycles=(replace(c, nodes=nodes),) + eagle.cycles[1:])
    out = av.named(at.load_trace(write(tmp_path, "evil.json", run_to_json(evil)), "<script>t</script>"))
    assert "<img" not in out["status"] and "&lt;img" in out["status"] and "<script>" not in out["status"]
    first = av.cycle_views(out["state"], 1)
    assert "<b>x</b>" not in first["caption"] and "&lt;b&gt;x&lt;/b&gt;" in first["caption"]
    labels = [t for tr in first["tree"].data for t in (tr.text or ())]
    assert "&lt;b&gt;x&lt;/b&gt;" in labels and "<b>x</b>" not in labels


def test_uploads_are_capped_checked_before_reading_and_removed(tmp_path, monkeypatch):
    """#4: Gradio's upload limit is set; the loader checks the size before reading; an upload is
    deleted once loaded; stale trace folders of dead processes are removed."""
    from viz.traces import MAX_TRACE_BYTES

    assert app.LAUNCH["max_file_size"] == MAX_TRACE_BYTES
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(MAX_TRACE_BYTES + 1)  # sparse: the loader must refuse it by size, not by reading it
    monkeypatch.setattr("builtins.open", lambda *a, **k: pytest.fail("the file was opened"))
    assert "too large" in refused(str(big))
    monkeypatch.undo()
    from gradio.utils import get_upload_folder

    folder = os.path.join(get_upload_folder(), "test-upload")
    os.makedirs(folder, exist_ok=True)
    eagle, vanilla = illustration()
    path = os.path.join(folder, "trace.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(viz.bundle_to_json(eagle, vanilla))
    out = av.named(at.upload_trace(path, request=req("U")))
    assert out["state"]["eagle"] is not None and not os.path.exists(path) and out["upload"] is None
    stale = tmp_path / "eagle-traces-999999999-abc"
    stale.mkdir()
    mine = trace_dir(str(tmp_path))
    assert not stale.exists() and os.path.isdir(mine)


def test_trace_files_one_per_tab_removed_on_close():
    """#4: one download file per tab (the previous one removed), the folder removed on unload."""
    eagle, vanilla = illustration()
    state = av.new_state(eagle, vanilla)
    folder = os.path.join(at.TRACE_DIR, "tabX")
    for _ in range(3):
        at.save_trace(state, "tabX")
        time.sleep(1.1)  # a new file name each second
    assert len(os.listdir(folder)) == 1
    cb.forget_session(req("tabX"))
    assert not os.path.exists(folder)


def test_chinese_tokens_are_readable(engine):
    """#7: byte-level tokens that hold part of a character showed "\ufffd" in every label."""
    from eagle_core import DecodeSettings

    run = engine.run("用中文回答：你好吗？", DecodeSettings(method="eagle2", max_new_tokens=12, depth=3, tree_top_k=4,
                                                     total_tokens=8))
    raw = [n.text for c in run.cycles for n in c.nodes]
    assert any("\ufffd" in t for t in raw), "the prompt should produce split characters"
    fixed = readable_run(run, engine.target.tokenizer)
    state = av.new_state(fixed, None)
    for k in range(1, len(state["cycles"]) + 1):
        views = av.cycle_views(state, k)
        labels = [t for tr in views["tree"].data for t in (tr.text or ())]
        assert not any("\ufffd" in t for t in labels), labels
        assert "\ufffd" not in views["text"] and "\ufffd" not in views["caption"]
    assert "eg-draft" in av.cycle_views(state, None)["text"] or "eg-bonus" in av.cycle_views(state, None)["text"]


def test_example_traces_load_and_name_the_dropdown():
    """#11: the Example traces dropdown names the example on screen (it was blank)."""
    names = list(example_traces())
    assert len(names) >= 3
    for name in names:
        out = av.named(at.load_example(name))
        assert out["state"]["cycles"] and out["examples"] == name, name
        assert out["download"].value  # the shipped file itself: no copy per page load
    assert av.named(page_events.on_page_load(req("L")))["examples"] == names[0]
    shipped = [n.text for name in names for c in av.named(at.load_example(name))["state"]["cycles"] for n in c.nodes]
    assert not any("\ufffd" in t for t in shipped), "regenerate: python scripts/record_traces.py --examples"


def test_status_while_loading_says_loading():
    """#12: the page said "loads on the first request" while the model was already loading."""
    holder = ModelHolder("nowhere/none")
    assert "Loading the model" in holder.status() and "first request" not in holder.status()
    assert "Model ready:** SmolLM2-135M-Instruct on this CPU" in cb.MODEL.status()


def test_stop_reasons_read_as_words():
    """#11: "(stopped: stopped)"."""
    eagle, vanilla = illustration()
    from dataclasses import replace

    stopped = replace(eagle, summary=replace(eagle.summary, stop_reason="stopped"))
    text = av.done_status({"eagle": stopped, "vanilla": vanilla}, {"eagle": "stopped by you"})
    assert "(stopped by you)" in text and "(reached max new tokens)" in text and "stopped: " not in text


def test_gradio_client_generates():
    from gradio_client import Client

    with launched_app(free_port()) as url:
        client = Client(url, verbose=False)
        result = client.predict("Say hi.", "eagle2", 3, 4, 8, 3, 0.0, 1.0, 0, 6, 0, True, api_name="/generate")
        text = " ".join(str(r) for r in result)
        assert "identical" in text and "vanilla tokens/s" in text
        result = client.predict("", "eagle2", 3, 4, 8, 3, 0.0, 1.0, 0, 6, 0, True, api_name="/generate")
        assert "empty" in " ".join(str(r) for r in result)  # refused server-side, nothing decoded
        import httpx

        too_big = httpx.post(f"{url}gradio_api/upload", files={"files": ("t.json", b"0" * (21 * 10 ** 6))})
        assert too_big.status_code in (400, 413), too_big.status_code


def _wakeups(pid: int) -> int:
    """Context switches (voluntary + not) of every thread of a process so far (Linux /proc)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status", encoding="utf-8") as f:
                total += sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
        except OSError:  # a thread that ended meanwhile
            pass
    return total


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="needs Linux /proc")
def test_idle_server_does_not_poll_a_thousand_times_a_second():
    """Gradio's queue polls every 1 ms by default (~850 wake-ups a second measured, 7% of a core on
    the idle server, taken from the decoder's cores); eagle_app/launch.py slows the polls to 50 / 100 ms."""
    with launched_app(free_port()):
        time.sleep(1.0)
        before, t0 = _wakeups(os.getpid()), time.perf_counter()
        time.sleep(3.0)
        rate = (_wakeups(os.getpid()) - before) / (time.perf_counter() - t0)
    assert rate < 200, f"{rate:.0f} wake-ups a second"
