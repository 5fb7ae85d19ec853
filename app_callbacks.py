"""The app's callbacks: pure functions of their inputs and the tab's state, returning values for
the named outputs in OUT (app.py maps the names to components). Nothing here builds a widget.

Timing. Both timed runs (EAGLE, then vanilla) get the same treatment: while either runs, the
page receives only a one-line text progress update at most twice a second; the text, the tree,
the charts and the replay are drawn once, after both runs have finished. Redrawing plotly
figures every cycle made the browser (on the same 2-core machine) take a core from the decoder
during EAGLE only, which made EAGLE look 2.5x slower than it is. Step mode is not timed and
draws every step.
"""
from __future__ import annotations

import itertools
import os
import queue
import threading
import time

import gradio as gr

import viz
from app_runtime import (RUN_BUDGET_S, DecodeLine, Worker, check_prompt, model_from_env, parse_settings,
                         readable_cycle, readable_run, trace_dir)
from eagle_core import PRESETS
from eagle_core.trace import tau
from viz.examples import example_traces, load_trace_file
from viz.style import md_text

MODEL = model_from_env()
LINE = DecodeLine()  # the one decode slot, shared by Generate and Step of every tab
UI_INTERVAL_S = 0.5  # progress line at most twice a second while a timed run decodes
SETTLE_S = 0.3  # after clearing the page, let the browser draw it before the clock starts
TRACE_DIR = trace_dir()

VIEW = ("text", "tree", "mask", "probs", "caption", "slider")
SUMMARY = ("comparison", "replay", "acclen", "depth", "timing")
OUT = VIEW + SUMMARY + ("state", "status", "download", "examples", "model", "upload")
TIMED_NOTE = ("Timed with live drawing paused: while each run decoded, the page showed only a one-line "
              "progress update; the text, tree and charts were drawn after both runs finished. EAGLE ran "
              "first, then vanilla, same prompt and settings, one after the other on {threads} CPU "
              "thread(s). The replay below plays both at the measured pace.")
TRACE_NOTE = "Timings as recorded in the trace (measured when it was made, on the machine that made it)."
REASONS = {"max_new_tokens": "reached max new tokens", "eos": "the model ended its answer",
           "context_full": "the model's context is full", "stopped": "stopped early"}


def outputs(**named) -> tuple:
    """Values for OUT in order; outputs not named are left as they are (gr.skip)."""
    unknown = set(named) - set(OUT)
    assert not unknown, f"unknown outputs {unknown}"
    return tuple(named.get(name, gr.skip()) for name in OUT)


def named(values) -> dict:
    """The inverse of `outputs`, for tests: {name: value} of the outputs that were set."""
    return {name: v for name, v in zip(OUT, values) if not (isinstance(v, dict) and v == gr.skip())}


def new_state(eagle=None, vanilla=None, title="", source=None) -> dict:
    main = eagle or vanilla
    return {"eagle": eagle, "vanilla": vanilla, "title": title, "cycles": list(main.cycles) if main else [],
            "stepper": None, "step_key": None, "source": source, "note": TRACE_NOTE if main else ""}


# ---------------------------------------------------------------------------------- renderers
def cycle_views(state: dict, k: int | None) -> dict:
    """{text, tree, mask, probs, caption, slider} for cycle k (1-based; None = the last)."""
    cycles = state["cycles"]
    if not cycles:
        blank = viz.empty_figure("Press Generate (or Step) to draw the draft tree.")
        return dict(text=viz.colored_text_html([]), tree=blank, mask=viz.empty_figure("Tree-attention mask", 260),
                    probs=blank, caption="", slider=gr.Slider(minimum=1, maximum=2, value=1, label="Cycle"))
    n = len(cycles)
    i = min(max(int(k or n), 1), n) - 1
    c = cycles[i]
    return dict(text=viz.colored_text_html(cycles, selected=c.step), tree=viz.tree_figure(c), mask=viz.mask_figure(c),
                probs=viz.probs_figure(c), caption=viz.cycle_caption(c, n),
                slider=gr.Slider(minimum=1, maximum=max(n, 2), value=i + 1, step=1, label=f"Cycle (of {n})"))


def summary_views(state: dict) -> dict:
    e, v = state["eagle"], state["vanilla"]
    cycles = state["cycles"]
    return dict(comparison=viz.comparison_html(e, v, note=state.get("note", "")),
                replay=viz.replay_html(e, v, nonce=int(time.time() * 1000)),
                acclen=viz.accepted_length_figure(cycles), depth=viz.acceptance_by_depth_figure(cycles),
                timing=viz.timing_figure(e, v))


def cleared_views(what: str) -> dict:
    """Placeholders for every view while a new run is on its way (nothing from the last run stays)."""
    wait = viz.empty_figure(f"Drawn {what}.", height=200)
    msg = f"Decoding… the text, the draft tree and every chart are drawn {what}."
    return dict(text=viz.colored_text_html([], placeholder=msg), tree=wait, mask=wait, probs=wait, caption="",
                slider=gr.Slider(minimum=1, maximum=2, value=1, label="Cycle"),
                comparison=viz.comparison_html(None, None, placeholder=f"The comparison appears {what}."),
                replay=viz.replay_html(None, None, placeholder=f"The paced replay appears {what}."),
                acclen=wait, depth=wait, timing=wait)


def showcase_cycle(cycles) -> int | None:
    """1-based index of the cycle to show when a run ends: the one that accepted the most drafts
    (the earliest of equals), so the page opens on a real tree rather than on a final cycle
    that had no room left to draft."""
    drafted = [c for c in cycles if c.n_draft > 0]
    if not drafted:
        return None
    best = max(drafted, key=lambda c: (c.accepted_drafts, -c.step))
    return cycles.index(best) + 1


def all_views(state: dict) -> dict:
    return {**cycle_views(state, showcase_cycle(state["cycles"])), **summary_views(state)}


def session_id(request: gr.Request | None) -> str:
    return getattr(request, "session_hash", None) or "local"


def reason_text(run, how: str = "") -> str:
    s = run.summary
    why = REASONS.get(s.stop_reason, md_text(s.stop_reason.replace("_", " ")))
    if how and s.stop_reason == "stopped":
        why = how
    if s.new_tokens == 0:
        return (f"produced no tokens ({why}) after reading a {s.prompt_tokens:,}-token prompt in "
                f"{s.prefill_ms / 1e3:.1f} s")
    return why


def done_status(state: dict, how: dict | None = None) -> str:
    parts = []
    for kind, label in (("eagle", "EAGLE"), ("vanilla", "vanilla")):
        r = state[kind]
        if r is not None:
            s = r.summary
            parts.append(f"**{label}**: {s.new_tokens} tokens, {s.tokens_per_s:.1f} tok/s, τ {s.tau:.2f} "
                         f"({reason_text(r, (how or {}).get(kind, ''))})")
    return "Done. " + " · ".join(parts) if parts else ""


def progress_line(kind: str, tokens: int, cycles: int, started: float, max_new: int, before: str = "") -> str:
    """The only thing sent to the page while a timed run decodes. No rate until it means something."""
    name = "EAGLE" if kind == "eagle" else "vanilla"
    dt = time.perf_counter() - started
    rate = f" · ≈ {tokens / dt:.1f} tok/s so far" if dt >= 2.0 and cycles >= 3 else ""
    return (f"{before}⏱ **{name}** decoding (timed; figures drawn after both runs) · {min(tokens, max_new)}/{max_new} "
            f"tokens · {cycles} cycles · {dt:.0f} s{rate}")


def save_trace(state: dict, sid: str):
    """The download button for this tab's run: the shipped file itself for an example, else one
    file per tab in TRACE_DIR (the previous one removed; the folder goes when the tab closes)."""
    if state["eagle"] is None and state["vanilla"] is None:
        return gr.DownloadButton(value=None, interactive=False)
    if state.get("source"):
        return gr.DownloadButton(value=state["source"], interactive=True)
    folder = os.path.join(TRACE_DIR, "".join(ch for ch in sid if ch.isalnum())[:40] or "tab")
    os.makedirs(folder, exist_ok=True)
    for old in os.listdir(folder):
        os.remove(os.path.join(folder, old))
    path = os.path.join(folder, f"eagle-trace-{time.strftime('%Y%m%d-%H%M%S')}.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(viz.bundle_to_json(state["eagle"], state["vanilla"], title=state.get("title", "")))
    return gr.DownloadButton(value=path, interactive=True)


def refuse(message: str) -> tuple:
    """A bad input: a warning toast and a line in the status; every figure stays as it was."""
    gr.Warning(message, title="Please check the input")
    return outputs(status=f"⚠ {md_text(message)}")


# ---------------------------------------------------------------------------------- stop flags
class RunFlags:
    """Stop flags per tab, one per requested run. A new Generate stops the tab's earlier runs
    (running or waiting) and gets its own flag; Stop sets every flag of the tab. (One flag per
    tab, replaced on every click, let a second click orphan the first run: Stop missed it.)"""

    def __init__(self):
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._flags: dict[str, dict[int, threading.Event]] = {}

    def arm(self, sid: str) -> int:
        with self._lock:
            runs = self._flags.setdefault(sid, {})
            for f in runs.values():
                f.set()
            run_id = next(self._ids)
            runs[run_id] = threading.Event()
            return run_id

    def get(self, sid: str, run_id: int | None) -> tuple[int, threading.Event]:
        """The flag `arm` made for this run; a run that did not come through arm (the API) gets one."""
        with self._lock:
            runs = self._flags.setdefault(sid, {})
            if run_id not in runs:
                run_id = next(self._ids)
                runs[run_id] = threading.Event()
            return run_id, runs[run_id]

    def stop(self, sid: str) -> int:
        with self._lock:
            runs = self._flags.get(sid, {})
            for f in runs.values():
                f.set()
            return len(runs)

    def done(self, sid: str, run_id: int) -> None:
        with self._lock:
            self._flags.get(sid, {}).pop(run_id, None)

    def forget(self, sid: str) -> None:
        self.stop(sid)
        with self._lock:
            self._flags.pop(sid, None)


RUNS = RunFlags()


def arm(request: gr.Request = None) -> int:
    """Runs unqueued on click, before the queued generation: stops this tab's earlier runs and
    returns the id of the new run's own stop flag (kept in a gr.State for `generate`)."""
    return RUNS.arm(session_id(request))


def stop(request: gr.Request = None):
    if RUNS.stop(session_id(request)):
        gr.Info("Stopping…")


def forget_session(request: gr.Request = None):
    sid = session_id(request)
    RUNS.forget(sid)
    folder = os.path.join(TRACE_DIR, "".join(ch for ch in sid if ch.isalnum())[:40] or "tab")
    if os.path.isdir(folder):
        for name in os.listdir(folder):
            os.remove(os.path.join(folder, name))
        os.rmdir(folder)


# ---------------------------------------------------------------------------------- decoding
def settings_from(prompt, method, depth, tree_top_k, total_tokens, chain_length, temperature, top_p, top_k,
                  max_new, seed):
    check_prompt(prompt)
    return parse_settings(method, depth, tree_top_k, total_tokens, chain_length, temperature, top_p, top_k,
                          max_new, seed)


def wait_for_model(flag: threading.Event):
    """Yields status updates while the model loads; returns the engine (None if stopped or failed)."""
    MODEL.start()
    while not MODEL.ready.wait(0.5):
        if flag.is_set():
            return None
        yield outputs(model=MODEL.status(), status="Waiting for the model to finish loading…")
    if MODEL.engine is None:
        gr.Warning(MODEL.status(), title="No model")
    return MODEL.engine


def wait_in_line(ticket: dict, flag: threading.Event):
    """Yields the place in line until the ticket holds the decode slot; returns False if stopped."""
    last = 0.0
    while not LINE.wait(ticket, 0.25):
        if flag.is_set():
            return False
        if time.perf_counter() - last >= 1.0:
            last = time.perf_counter()
            ahead, wait = LINE.place(ticket)
            yield outputs(status=f"⏳ Waiting for the decoder: {ahead} run{'s' if ahead != 1 else ''} ahead of "
                                 f"yours, about {wait:.0f} s (each run is limited to {RUN_BUDGET_S:g} s per "
                                 f"method). **Stop** leaves the line; this page stays as it is.")
    return not flag.is_set()


def generate(prompt, method, depth, tree_top_k, total_tokens, chain_length, temperature, top_p, top_k, max_new,
             seed, compare, state, run_id=None, request: gr.Request = None):
    sid = session_id(request)
    run_id, flag = RUNS.get(sid, run_id)
    try:
        yield from _generate(prompt, (method, depth, tree_top_k, total_tokens, chain_length, temperature, top_p,
                                      top_k, max_new, seed), bool(compare), flag, sid)
    finally:
        RUNS.done(sid, run_id)


def _generate(prompt, settings_args, compare, flag, sid):
    try:
        settings = settings_from(prompt, *settings_args)
    except ValueError as e:
        yield refuse(str(e))
        return
    engine = yield from wait_for_model(flag)
    if engine is None:
        yield outputs(model=MODEL.status(), status="Stopped before the model was ready; the page is unchanged.")
        return
    worker = Worker(engine, prompt, settings, compare, flag, budget_s=RUN_BUDGET_S)
    try:
        n_prompt = len(engine.check(prompt, settings))
    except ValueError as e:
        yield refuse(str(e))
        return
    tokens = settings.max_new_tokens * len(worker.plan())
    ticket = LINE.join(tokens)
    t_slot, decoded = time.perf_counter(), 0
    try:
        if not (yield from wait_in_line(ticket, flag)):
            yield outputs(status="Stopped while waiting in line: nothing ran, the page is unchanged.")
            return
        t_slot = time.perf_counter()
        long = f"Reading the {n_prompt:,}-token prompt first (long prompts take a while on a CPU). " \
            if n_prompt > 400 else ""
        yield outputs(**cleared_views("after both timed runs finish"), model=MODEL.status(),
                      status=f"{long}Starting EAGLE (timed)…", download=gr.DownloadButton(value=None, interactive=False))
        time.sleep(SETTLE_S)
        worker.start()
        state = yield from _follow(worker, settings, sid, prompt)
        decoded = sum(r.summary.new_tokens for r in (state["eagle"], state["vanilla"]) if r is not None)
    finally:
        worker.cancel()  # a closed tab or a Stop: end the decode before the next user starts
        LINE.leave(ticket, decoded, time.perf_counter() - t_slot)
    how = {k: f"stopped at the {RUN_BUDGET_S:g} s limit" for k in worker.timed_out}
    if flag.is_set():
        how = {k: "stopped by you" for k in ("eagle", "vanilla")}
        gr.Info("Stopped. The partial run is kept: scrub through it or download its trace.")
    state["note"] = TIMED_NOTE.format(threads=worker.threads or "?")
    yield outputs(**all_views(state), state=state, status=done_status(state, how), download=save_trace(state, sid),
                  examples=None)


def _follow(worker: Worker, settings, sid: str, prompt: str):
    """Yields the progress line while the worker decodes; returns the new state."""
    state = new_state(title=prompt[:60])
    main = "vanilla" if settings.method == "vanilla" else "eagle"
    kind, started, tokens, cycles, before, last = main, time.perf_counter(), 0, 0, "", 0.0
    while True:
        try:
            what, k, payload = worker.events.get(timeout=0.1)
        except queue.Empty:
            what = None
        if what == "end":
            return state
        if what == "start":
            kind, started, tokens, cycles = k, payload, 1, 0
        elif what == "cycle":
            tokens, cycles = tokens + len(payload.committed_ids), cycles + 1
        elif what == "done":
            state[k] = payload
            if k == main:
                state["cycles"] = list(payload.cycles)
                s = payload.summary
                before = f"EAGLE done: {s.new_tokens} tokens in {s.wall_s:.1f} s. "
        elif what == "error":
            gr.Warning(f"{k} decoding failed: {payload}")
        if time.perf_counter() - last >= UI_INTERVAL_S:
            last = time.perf_counter()
            yield outputs(status=progress_line(kind, tokens, cycles, started, settings.max_new_tokens,
                                               before if kind != main else ""))


def step(prompt, method, depth, tree_top_k, total_tokens, chain_length, temperature, top_p, top_k, max_new, seed,
         state, request: gr.Request = None):
    """Step mode: advance the tab's own generation by exactly one draft/verify cycle (not timed)."""
    sid = session_id(request)
    run_id, flag = RUNS.get(sid, None)
    try:
        try:
            settings = settings_from(prompt, method, depth, tree_top_k, total_tokens, chain_length, temperature,
                                     top_p, top_k, max_new, seed)
        except ValueError as e:
            yield refuse(str(e))
            return
        engine = yield from wait_for_model(flag)
        if engine is None:
            return
        ticket = LINE.join(1)
        try:
            if not (yield from wait_in_line(ticket, flag)):
                yield outputs(status="Stopped while waiting in line; the page is unchanged.")
                return
            yield _step(engine, prompt, settings, state, sid)
        finally:
            LINE.leave(ticket)
    finally:
        RUNS.done(sid, run_id)


def _step(engine, prompt, settings, state, sid) -> tuple:
    key = (prompt, settings)
    fresh = state.get("stepper") is None or state.get("step_key") != key
    if fresh:
        try:
            gen = engine.generate(prompt, settings)
        except ValueError as e:
            return refuse(str(e))
        state = new_state(title=prompt[:60])
        state.update(stepper=(gen, iter(gen)), step_key=key)
    gen, it = state["stepper"]
    tok = engine.target.tokenizer
    from app_runtime import ENGINE_THREAD  # all torch work on the engine thread

    rec = ENGINE_THREAD.submit(next, it, None).result()
    if rec is not None:
        state["cycles"].append(readable_cycle(rec, tok))
        status = (f"Step mode (not timed): cycle {len(state['cycles'])} done, τ so far {tau(state['cycles']):.2f}. "
                  "Click **Step** for the next one (change a setting or the prompt to start over).")
    else:
        kind = "vanilla" if settings.method == "vanilla" else "eagle"
        run = readable_run(gen.run, tok)
        state.update({kind: run, "stepper": None, "step_key": None, "cycles": list(run.cycles),
                      "note": "Step mode: each cycle waited for your click, so these timings are per cycle only."})
        status = "Step mode finished. " + done_status(state)
    views = cycle_views(state, None)
    if state["stepper"] is None:
        views.update(summary_views(state))
    elif fresh:
        views.update({k: v for k, v in cleared_views("when the step-by-step run finishes").items() if k in SUMMARY})
    return outputs(**views, state=state, status=status, download=save_trace(state, sid),
                   examples=None if fresh else gr.skip())


# ---------------------------------------------------------------------------------- scrubbing
def show(state, k):
    """A typed or dragged cycle number: draw that cycle (the slider itself is left alone unless
    the number was out of range)."""
    views = cycle_views(state, k)
    n = len(state["cycles"])
    if n and k is not None and 1 <= int(k) <= n:
        views["slider"] = gr.skip()
    return tuple(views[name] for name in VIEW)


def shift(state, k, delta):
    n = len(state["cycles"])
    views = cycle_views(state, min(max(int(k or 1) + delta, 1), max(n, 1)))
    return tuple(views[name] for name in VIEW)


def play_tick(state, k):
    n = len(state["cycles"])
    nxt = int(k or 0) + 1
    if nxt > n:
        return (gr.skip(),) * len(VIEW) + (gr.Timer(active=False),)
    views = cycle_views(state, nxt)
    return tuple(views[name] for name in VIEW) + (gr.Timer(active=nxt < n),)


def learn_views(state, k):
    views = cycle_views(state, k)
    return views["tree"], views["mask"], views["probs"]


# ---------------------------------------------------------------------------------- traces
def load_trace(path, title="", source=None, request: gr.Request = None) -> tuple:
    """Load a saved trace (upload or shipped example) into this tab: every view, no model needed.
    An uploaded file is deleted once read (Gradio keeps its own copy only until its cache expires)."""
    if not path:
        return outputs()
    try:
        eagle, vanilla = load_trace_file(path)
    except (ValueError, OSError) as e:
        gr.Warning(f"Could not load this trace: {e}", title="Bad trace file")
        return outputs(status=f"⚠ Could not load this trace: {md_text(e)}", upload=None)
    finally:
        if source is None:
            _remove_upload(path)
    state = new_state(eagle, vanilla, title or os.path.basename(path), source)
    s = (eagle or vanilla).summary
    status = (f"Replaying **{md_text(state['title'])}** — {md_text(s.method)}, {md_text(s.model or 'unknown model')}, "
              f"{len(state['cycles'])} cycles. No model needed to explore it.")
    return outputs(**all_views(state), state=state, status=status, download=save_trace(state, session_id(request)),
                   examples=title if source else None, upload=None if source is None else gr.skip())


def _remove_upload(path: str) -> None:
    from gradio.utils import get_upload_folder

    upload_root = os.path.realpath(get_upload_folder())
    real = os.path.realpath(path)
    if real.startswith(upload_root + os.sep) and os.path.isfile(real):
        os.remove(real)


def upload_trace(path, request: gr.Request = None):
    return load_trace(path, request=request)


def load_example(name, request: gr.Request = None):
    path = example_traces().get(name)
    return load_trace(path, name, source=path, request=request) if path else outputs()


def on_page_load(request: gr.Request = None):
    MODEL.start()
    first = next(iter(example_traces()), None)
    return load_example(first, request) if first else outputs()


def model_status():
    return MODEL.status(), gr.Timer(active=not MODEL.ready.is_set())


def apply_preset(name):
    p = PRESETS[name]
    return p["depth"], p["tree_top_k"], p["total_tokens"]
