"""The app's decoding callbacks: Generate, Step and Stop, and the one decode line they share
(`LINE`). They return values for the named outputs in views.OUT; the views and status lines are
in views.py, the per-tab stop flags in flags.py, the page's own events in page.py, the Traces
tab's callbacks in traces.py. Nothing here builds a widget.

Timing. Both timed runs (EAGLE, then vanilla) get the same treatment: while either runs, the
page receives nothing (or, with EAGLE_APP_PROGRESS_S > 0, a one-line progress update that
often); the text, the tree, the charts and the replay are drawn once, after both runs have
finished. Redrawing plotly figures every cycle made the browser (on the same 2-core machine)
take a core from the decoder during EAGLE only, which made EAGLE look 2.5x slower than it is;
even the once-a-second progress line cost vanilla up to 30% (docs/app.md, "How it behaves").
Step mode is not timed and draws every step.
"""
from __future__ import annotations

import queue
import threading
import time

import gradio as gr
import torch

from eagle_core.environment import seconds
from eagle_core.trace import tau

from ..i18n import APP_TEXT, lang_of
from ..decode_queue import FAIR_BUDGET_S, RUN_BUDGET_S, DecodeLine
from ..model import MODEL
from ..settings import build, check_prompt, takes_settings
from ..tokens import readable_cycle, readable_run
from ..traces import remove_tab_folder, save_trace
from ..views import (SUMMARY, all_views, cleared_views, cycle_views, done_status, new_state, outputs, progress_line,
                     refuse, session_id, summary_views)
from ..worker import Worker, new_stepper, next_cycle
from .flags import RUNS

LINE = DecodeLine()  # the one decode slot, shared by Generate and Step of every tab
# While the two timed runs decode the page gets no update at all, by default: with Chromium on the
# same 2-core machine even a one-line progress update a second (plus Gradio's status trackers) takes
# a share of the cores the timed decode needs (docs/app.md, "No page update while timed").
# EAGLE_APP_PROGRESS_S > 0 sends a progress line that often instead.
UI_INTERVAL_S = seconds("EAGLE_APP_PROGRESS_S", 0.0)
SETTLE_S = 1.0  # after clearing the page, let the browser draw it before the clock starts (0.3 s was
# too short on a busy 2-core machine: the clearing overlapped the start of the EAGLE run)
# the texts (status lines, the cards' note) are eagle_app/i18n.py's APP_TEXT strings, in the tab's language


def arm(request: gr.Request = None) -> int:
    """Runs unqueued on click, before the queued generation: replaces this tab's earlier runs and
    returns the id of the new run's own stop flag (kept in a gr.State for `generate`)."""
    return RUNS.arm(session_id(request))


def stop(request: gr.Request = None, lang: str = "en"):
    """Stop (unqueued): every run of this tab ends. Gradio puts the request first, then the input (lang)."""
    if RUNS.stop(session_id(request)):
        gr.Info(APP_TEXT("status.stopping", lang))


def forget_session(request: gr.Request = None):
    """A closed tab (demo.unload): its runs stop, its flags and its download folder go."""
    sid = session_id(request)
    RUNS.forget(sid)
    remove_tab_folder(sid)


# ---------------------------------------------------------------------------------- decoding
def read_settings(prompt, values):
    """The prompt's characters checked and the page's values built into DecodeSettings (settings.py).
    Validation is Engine.check's, with the context limit, once the model is there; only while the
    model still loads are the settings also validated here (without the limit), so that a bad value
    is refused at once rather than after the load."""
    check_prompt(prompt)
    settings = build(values)
    if not MODEL.ready.is_set():
        settings.validate()
    return settings


def wait_for_model(flag: threading.Event, lang: str = "en"):
    """Yields status updates while the model loads; returns the engine (None if stopped or failed)."""
    MODEL.start()
    while not MODEL.ready.wait(0.5):
        if flag.is_set():
            return None
        yield outputs(model=MODEL.status(lang), status=APP_TEXT("status.waiting_model", lang))
    if MODEL.engine is None:
        gr.Warning(MODEL.status(lang), title=APP_TEXT("no_model", lang))
    return MODEL.engine


def ready_request(prompt, values, flag: threading.Event, lang: str = "en"):
    """What Generate and Step do first: read the settings (a bad value is refused at once), then wait
    for the model. Yields page updates (the refusal, the waiting lines, the stopped line); returns
    (settings, engine), or None when the request was refused, stopped or there is no model."""
    try:
        settings = read_settings(prompt, values)
    except ValueError as e:
        yield refuse(e, lang)
        return None
    engine = yield from wait_for_model(flag, lang)
    if engine is None:
        yield outputs(model=MODEL.status(lang), status=APP_TEXT("status.stopped_model", lang))
        return None
    return settings, engine


def wait_in_line(ticket, flag: threading.Event, lang: str = "en"):
    """Yields the place in line until the ticket holds the decode slot; returns False if stopped."""
    last = 0.0
    while not LINE.wait(ticket, 0.25):
        if flag.is_set():
            return False
        if time.perf_counter() - last >= 1.0:
            last = time.perf_counter()
            ahead, wait = LINE.place(ticket)
            yield outputs(status=waiting_line(ahead, wait, lang))
    return not flag.is_set()


def waiting_line(ahead: int, wait: float, lang: str = "en") -> str:
    fair = APP_TEXT("status.fair", lang, fair=FAIR_BUDGET_S, budget=RUN_BUDGET_S)
    return APP_TEXT("status.waiting_line", lang, ahead=ahead, s="s" if ahead != 1 else "", wait=wait, fair=fair)


def tab_language(lang, request=None) -> str:
    """The tab's language: its gr.State once the page load has set it; before that (None: a Generate pressed
    while the load's events still queue, so the page already shows the browser's language) the browser's own,
    from the request's Accept-Language; "en" for an API call that sends neither."""
    if lang in ("en", "zh"):
        return lang
    headers = getattr(request, "headers", None) or {}
    return lang_of(headers.get("accept-language", "")) if hasattr(headers, "get") else "en"


@takes_settings
def generate(prompt, values: tuple, compare, state, run_id=None, lang="en", request: gr.Request = None):
    """Generate: (prompt, *settings.NAMES, compare, state, run_id, lang), as the page and the API pass them
    (the API passes no state, run id or language: gr.State inputs are not API parameters)."""
    sid = session_id(request)
    run_id, flag = RUNS.get(sid, run_id)
    try:
        yield from _generate(prompt, values, bool(compare), flag, sid, tab_language(lang, request))
    finally:
        RUNS.done(sid, run_id)


def _generate(prompt, values, compare, flag, sid, lang="en"):
    ready = yield from ready_request(prompt, values, flag, lang)
    if ready is None:
        return
    settings, engine = ready
    try:  # the one validation (with the context limit) and the one tokenization of this request
        prompt_ids = engine.check(prompt, settings)
    except ValueError as e:
        yield refuse(e, lang)
        return
    worker = Worker(engine, prompt, settings, compare, flag, budget_s=RUN_BUDGET_S, crowded=lambda: LINE.waiting() > 0,
                    prompt_ids=prompt_ids)
    n_prompt = len(prompt_ids)
    tokens = settings.max_new_tokens * len(worker.plan())
    ticket = LINE.join(tokens)
    t_slot, decoded = time.perf_counter(), 0
    try:
        if not (yield from wait_in_line(ticket, flag, lang)):
            if flag.reason != "replaced":  # a replaced run leaves the page to the run that replaced it
                yield outputs(status=APP_TEXT("status.stopped_line", lang))
            return
        if engine is not MODEL.engine:  # the model picker loaded another model while this request waited
            yield outputs(model=MODEL.status(lang), status=APP_TEXT("status.switched", lang))
            return
        t_slot = time.perf_counter()
        long = APP_TEXT("status.long_prompt", lang, n=n_prompt) if n_prompt > 400 else ""
        yield outputs(**cleared_views("wait.after_runs", lang), model=MODEL.status(lang),
                      status=long + starting_line(settings, len(worker.plan()), lang),
                      download=gr.DownloadButton(value=None, interactive=False))
        time.sleep(SETTLE_S)
        worker.start()
        state = yield from _follow(worker, settings, sid, prompt, lang)
        decoded = sum(r.summary.new_tokens for r in (state["eagle"], state["vanilla"]) if r is not None)
    finally:
        worker.cancel()  # a closed tab or a Stop: end the decode before the next user starts
        LINE.leave(ticket, decoded, time.perf_counter() - t_slot)
    if flag.reason == "replaced":  # the tab's new Generate runs instead and owns the page
        return
    how = {k: ("how.budget", {"s": RUN_BUDGET_S}) if limit == "budget" else ("how.fair", {"s": FAIR_BUDGET_S})
           for k, limit in worker.timed_out.items()}
    if flag.is_set():
        how = {k: ("how.you", {}) for k in ("eagle", "vanilla")}
        gr.Info(APP_TEXT("status.stopped_kept", lang))
    for kind in ("eagle", "vanilla"):  # this machine's measured rates, for the next "about N s"
        run = state[kind]
        if run is not None and run.summary.stop_reason != "stopped":
            LINE.note_run(kind, run.summary.new_tokens, run.summary.wall_s)
    state["note"] = timed_note(state, len(worker.plan()), UI_INTERVAL_S > 0,
                               device_note(engine.target.device, worker.threads))
    state["how"] = how  # so that the status line can be drawn again in the other language
    yield outputs(**all_views(state, lang), state=state, status=done_status(state, how, lang),
                  download=save_trace(state, sid), examples=None)


def timed_note(state: dict, planned: int, live: bool, device: tuple) -> tuple:
    """The cards' note (an APP_TEXT key and its fields) for what actually ran: both runs, one run alone (vanilla
    only, or no comparison asked for), or EAGLE only because vanilla never started (a Stop, a limit)."""
    ran = [k for k in ("eagle", "vanilla") if state[k] is not None]
    if len(ran) == 2:
        return ("note.timed", {"how": "note.live" if live else "note.quiet", "device": device})
    fields = {"how": "note.live_one" if live else "note.quiet_one", "device": device}
    if planned > 1:  # vanilla was to follow EAGLE but did not run
        return ("note.timed_unrun", fields)
    return ("note.timed_one", {**fields, "name": ("label.vanilla", {}) if ran == ["vanilla"] else "EAGLE"})


def device_note(device, threads: int = 0) -> tuple:
    """Where the timed runs ran, for the cards' note (an APP_TEXT key and its fields): the GPU by its name on
    CUDA, the CPU threads of the engine thread elsewhere."""
    device = str(device)
    if device.startswith("cuda"):
        return ("device.cuda", {"name": torch.cuda.get_device_name(device)})
    if device.startswith("mps"):
        return ("device.mps", {})
    return ("device.cpu", {"threads": threads or "?"})


def starting_line(settings, n_runs: int, lang: str = "en") -> str:
    """The status shown while the runs are timed: what runs, about how long, and why the page is still."""
    if UI_INTERVAL_S > 0:
        return APP_TEXT("status.start_eagle" if settings.method != "vanilla" else "status.start_vanilla", lang)
    what = APP_TEXT("status.what_both" if n_runs > 1 else "status.what_vanilla" if settings.method == "vanilla"
               else "status.what_eagle", lang)
    each, done = (APP_TEXT("status.each", lang), APP_TEXT("status.both_done", lang)) if n_runs > 1 else \
        ("", APP_TEXT("status.it_done", lang))
    kinds = ["vanilla"] if settings.method == "vanilla" else ["eagle", "vanilla"][:n_runs]
    guess = SETTLE_S + sum(min(LINE.run_s(kind, settings.max_new_tokens), RUN_BUDGET_S) for kind in kinds)
    return APP_TEXT("status.timing", lang, what=what, n=settings.max_new_tokens, each=each, guess=guess, done=done)


def _follow(worker: Worker, settings, sid: str, prompt: str, lang: str = "en"):
    """Yields the progress line while the worker decodes (only if UI_INTERVAL_S > 0); returns the new state."""
    state = new_state(title=prompt[:60])
    main = "vanilla" if settings.method == "vanilla" else "eagle"
    kind, started, before, last = main, time.perf_counter(), "", 0.0
    # Without a progress line nothing here needs waking before the next message (a run's start or
    # end): the page's thread sleeps through the timed runs. With one, it wakes that often.
    wait = min(UI_INTERVAL_S, 0.5) if UI_INTERVAL_S > 0 else 0.5
    while True:
        try:
            what, k, payload = worker.events.get(timeout=wait)
        except queue.Empty:
            what = None
        if what == "end":
            return state
        if what == "start":
            kind, started = k, payload
        elif what == "done":
            state[k] = payload
            if k == main:
                state["cycles"] = list(payload.cycles)
                s = payload.summary
                before = APP_TEXT("status.eagle_done", lang, n=s.new_tokens, s=s.wall_s)
        elif what == "parting":
            state["parting"] = payload
        elif what == "error":
            gr.Warning(APP_TEXT("status.failed", lang, k=k, err=payload))
        if UI_INTERVAL_S > 0 and time.perf_counter() - last >= UI_INTERVAL_S:
            last = time.perf_counter()
            tokens, cycles = worker.progress.get(kind, (0, 0))
            yield outputs(status=progress_line(kind, tokens, cycles, started,
                                               settings.max_new_tokens, before if kind != main else "", lang))


@takes_settings
def step(prompt, values: tuple, state, lang="en", request: gr.Request = None):
    """Step mode: advance the tab's own generation by exactly one draft/verify cycle (not timed).
    The page and the API pass (prompt, *settings.NAMES, state, lang)."""
    sid = session_id(request)
    run_id, flag = RUNS.get(sid, None)
    lang = tab_language(lang, request)
    try:
        ready = yield from ready_request(prompt, values, flag, lang)
        if ready is None:
            return
        settings, engine = ready
        ticket = LINE.join(1)
        try:
            if not (yield from wait_in_line(ticket, flag, lang)):
                yield outputs(status=APP_TEXT("status.stopped_line_step", lang))
                return
            yield _step(engine, prompt, settings, state, sid, lang)
        finally:
            LINE.leave(ticket)
    finally:
        RUNS.done(sid, run_id)


def _step(engine, prompt, settings, state, sid, lang="en") -> tuple:
    key = (prompt, settings, id(engine))  # a switched model starts the Step run over
    fresh = state.get("stepper") is None or state.get("step_key") != key
    if fresh:  # a click that continues a run has the settings this check passed: no check again
        try:
            prompt_ids = engine.check(prompt, settings)
        except ValueError as e:
            return refuse(e, lang)
        state = new_state(title=prompt[:60])
        state.update(stepper=new_stepper(engine, prompt, settings, prompt_ids), step_key=key)
    tok = engine.target.tokenizer
    rec, finished = next_cycle(state["stepper"], len(state["cycles"]))
    if rec is not None:
        state["cycles"].append(readable_cycle(rec, tok))
    if finished is None:
        status = APP_TEXT("status.step", lang, n=len(state["cycles"]), tau=tau(state["cycles"]))
    else:
        kind = "vanilla" if settings.method == "vanilla" else "eagle"
        run = readable_run(finished, tok)
        state.update({kind: run, "stepper": None, "step_key": None, "cycles": list(run.cycles),
                      "note": ("status.step_note", {})})
        status = APP_TEXT("status.step_done", lang) + done_status(state, lang=lang)
    views = cycle_views(state, None, lang)
    if state["stepper"] is None:
        views.update(summary_views(state, lang))
    elif fresh:
        views.update({k: v for k, v in cleared_views("wait.after_steps", lang).items() if k in SUMMARY})
    return outputs(**views, state=state, status=status, download=save_trace(state, sid),
                   examples=None if fresh else gr.skip())
