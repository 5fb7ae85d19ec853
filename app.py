"""Watch EAGLE decode, step by step, beside vanilla decoding.  Run: python app.py

Layout: pure callbacks first, then the Blocks layout, then event wiring (Gradio's own style).
The model is read-only and shared (app_runtime.MODEL, loaded in a background thread at start);
everything per user lives in a gr.State dict; decoding runs through eagle_core only, figures
come from viz/.
"""
from __future__ import annotations

import os
import queue
import tempfile
import threading
import time

import gradio as gr

import viz
from app_runtime import Worker, check_prompt, model_from_env, parse_settings
from eagle_core import METHOD_LABELS, METHODS, PRESETS
from eagle_core.trace import tau
from viz.examples import cartesian_tree_cycle, example_prompts, example_traces, load_trace_file
from viz.learn import FEATURES, GLOSSARY, INTRO, OTHERS, TREE, VERIFY

MODEL = model_from_env()
UI_INTERVAL_S = 0.5  # redraw at most twice a second: drawing shares the GIL and the 2 cores with the decode thread
STOPS: dict[str, threading.Event] = {}  # session -> stop flag of its current generation
TRACE_DIR = tempfile.mkdtemp(prefix="eagle-traces-")
METHOD_CHOICES = [(METHOD_LABELS[m] if m != "vanilla" else "vanilla only (no drafting)", m) for m in METHODS]
PRESET_CHOICES = [(f"{label} (depth {PRESETS[name]['depth']}, top-k {PRESETS[name]['tree_top_k']}, "
                   f"{PRESETS[name]['total_tokens']} tokens)", name)
                  for label, name in (("readable tree", "explain"), ("fastest on a 2-core CPU", "cpu"),
                                      ("GPU, published EAGLE-2", "gpu"))]


def new_state(eagle=None, vanilla=None, title="") -> dict:
    main = eagle or vanilla
    return {"eagle": eagle, "vanilla": vanilla, "title": title, "cycles": list(main.cycles) if main else [],
            "stepper": None, "step_key": None}


# ---------------------------------------------------------------------------------- renderers
def cycle_views(state: dict, k: int | None) -> tuple:
    """(text, tree, mask, probs, caption, slider) for cycle k (1-based; None = the last)."""
    cycles = state["cycles"]
    if not cycles:
        blank = viz.empty_figure("Press Generate (or Step) to draw the draft tree.")
        return (viz.colored_text_html([]), blank, viz.empty_figure("Tree-attention mask", 260), blank,
                "", gr.Slider(minimum=1, maximum=2, value=1, label="Cycle"))
    n = len(cycles)
    i = min(max(int(k or n), 1), n) - 1
    c = cycles[i]
    return (viz.colored_text_html(cycles, selected=c.step), viz.tree_figure(c), viz.mask_figure(c), viz.probs_figure(c),
            viz.cycle_caption(c, n), gr.Slider(minimum=1, maximum=max(n, 2), value=i + 1, step=1, label=f"Cycle (of {n})"))


def summary_views(state: dict) -> tuple:
    """(comparison, replay, accepted-length chart, acceptance-by-depth chart, timing chart)."""
    e, v = state["eagle"], state["vanilla"]
    cycles = state["cycles"]
    return (viz.comparison_html(e, v), viz.replay_html(e, v, nonce=int(time.time() * 1000)),
            viz.accepted_length_figure(cycles), viz.acceptance_by_depth_figure(cycles), viz.timing_figure(e, v))


def showcase_cycle(cycles) -> int | None:
    """1-based index of the cycle to show when a run ends: the one that accepted the most drafts
    (the earliest of equals), so the page opens on a real tree rather than on a final cycle
    that had no room left to draft."""
    drafted = [c for c in cycles if c.n_draft > 0]
    if not drafted:
        return None
    best = max(drafted, key=lambda c: (c.accepted_drafts, -c.step))
    return cycles.index(best) + 1


def all_views(state: dict) -> tuple:
    return cycle_views(state, showcase_cycle(state["cycles"])) + summary_views(state)


def session_id(request: gr.Request | None) -> str:
    return getattr(request, "session_hash", None) or "local"


def run_status(kind: str, cycles: list, t0: float, max_new: int) -> str:
    n = sum(len(c.committed_ids) for c in cycles) + (1 if cycles else 0)
    name = "EAGLE" if kind == "eagle" else "vanilla"
    return (f"**{name}** running · cycle {len(cycles)} · {min(n, max_new)}/{max_new} tokens · τ {tau(cycles):.2f} · "
            f"{n / max(time.perf_counter() - t0, 1e-6):.1f} tok/s")


def done_status(state: dict) -> str:
    parts = []
    for kind, r in (("EAGLE", state["eagle"]), ("vanilla", state["vanilla"])):
        if r is not None:
            s = r.summary
            parts.append(f"**{kind}**: {s.new_tokens} tokens, {s.tokens_per_s:.1f} tok/s, τ {s.tau:.2f} "
                         f"(stopped: {s.stop_reason.replace('_', ' ')})")
    return "Done. " + " · ".join(parts) if parts else ""


def save_trace(state: dict):
    if state["eagle"] is None and state["vanilla"] is None:
        return gr.DownloadButton(value=None, interactive=False)
    path = os.path.join(TRACE_DIR, f"eagle-trace-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{id(state)}.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(viz.bundle_to_json(state["eagle"], state["vanilla"], title=state.get("title", "")))
    return gr.DownloadButton(value=path, interactive=True)


# ---------------------------------------------------------------------------------- callbacks
def arm(request: gr.Request = None):
    """Runs unqueued on click, before the queued generation: a fresh stop flag for this tab."""
    STOPS[session_id(request)] = threading.Event()


def stop(request: gr.Request = None):
    STOPS.setdefault(session_id(request), threading.Event()).set()
    gr.Info("Stopping after the current cycle…")


def forget_session(request: gr.Request = None):
    STOPS.pop(session_id(request), None)


def settings_from(prompt, method, depth, tree_top_k, total_tokens, chain_length, temperature, top_p, top_k,
                  max_new, seed):
    try:
        check_prompt(prompt)
        return parse_settings(method, depth, tree_top_k, total_tokens, chain_length, temperature, top_p, top_k,
                              max_new, seed)
    except ValueError as e:
        raise gr.Error(str(e), title="Please check the input") from None


def wait_for_model(flag: threading.Event):
    """Yields status updates while the model loads; returns the engine (raises gr.Error on failure)."""
    MODEL.start()
    while not MODEL.ready.wait(0.5):
        if flag.is_set():
            return None
        yield {model_md: MODEL.status(), status_md: "Waiting for the model to finish loading…"}
    if MODEL.engine is None:
        raise gr.Error(MODEL.status())
    return MODEL.engine


def generate(prompt, method, depth, tree_top_k, total_tokens, chain_length, temperature, top_p, top_k, max_new,
             seed, compare, state, request: gr.Request = None):
    settings = settings_from(prompt, method, depth, tree_top_k, total_tokens, chain_length, temperature, top_p,
                             top_k, max_new, seed)
    flag = STOPS.setdefault(session_id(request), threading.Event())
    engine = yield from wait_for_model(flag)
    if engine is None:
        yield {status_md: "Stopped before the model was ready."}
        return
    worker = Worker(engine, prompt, settings, bool(compare), flag)
    try:
        worker.start()
    except ValueError as e:
        raise gr.Error(str(e), title="Please check the input") from None
    state = new_state(title=prompt[:60])
    main = "vanilla" if settings.method == "vanilla" else "eagle"
    live, t0, last_draw, dirty, cur = {"eagle": [], "vanilla": []}, time.perf_counter(), 0.0, False, main
    try:
        while True:
            try:
                what, kind, payload = worker.events.get(timeout=0.05)
            except queue.Empty:
                what = kind = None
            if what == "end":
                break
            if what == "cycle":
                if kind != cur:
                    cur, t0 = kind, time.perf_counter()
                live[kind].append(payload)
                dirty = True
            elif what == "done":
                state[kind] = payload
                if kind == main:
                    state["cycles"] = list(payload.cycles)
                    yield {**dict(zip(VIEW_OUTPUTS + SUMMARY_OUTPUTS, all_views(state))), state_box: state}
                    dirty = False
            elif what == "error":
                gr.Warning(f"{kind} decoding failed: {payload}")
            first = dirty and len(live[cur]) == 1
            if dirty and (first or time.perf_counter() - last_draw >= UI_INTERVAL_S):
                last_draw, dirty = time.perf_counter(), False
                status = run_status(cur, live[cur], t0, settings.max_new_tokens)
                if cur == main:
                    state["cycles"] = live[main]
                    yield {**dict(zip(VIEW_OUTPUTS, cycle_views(state, None))), status_md: status}
                else:
                    yield {status_md: status}
    finally:
        worker.cancel()  # a closed tab or a Stop: end the decode thread before the next user starts
    if flag.is_set():
        gr.Info("Stopped. The partial run is kept: scrub through it or download its trace.")
    yield {**dict(zip(VIEW_OUTPUTS + SUMMARY_OUTPUTS, all_views(state))), state_box: state,
           status_md: done_status(state), download: save_trace(state)}


def step(prompt, method, depth, tree_top_k, total_tokens, chain_length, temperature, top_p, top_k, max_new, seed,
         state, request: gr.Request = None):
    """Step mode: advance the tab's own generation by exactly one draft/verify cycle."""
    settings = settings_from(prompt, method, depth, tree_top_k, total_tokens, chain_length, temperature, top_p,
                             top_k, max_new, seed)
    engine = yield from wait_for_model(threading.Event())
    key = (prompt, settings)
    if state.get("stepper") is None or state.get("step_key") != key:
        try:
            gen = engine.generate(prompt, settings)
        except ValueError as e:
            raise gr.Error(str(e), title="Please check the input") from None
        state = new_state(title=prompt[:60])
        state.update(stepper=(gen, iter(gen)), step_key=key, cycles=gen.cycles)
    gen, it = state["stepper"]
    try:
        next(it)
        status = (f"Step mode: cycle {len(gen.cycles)} done. Click **Step** for the next one "
                  f"(change a setting or the prompt to start over).")
    except StopIteration:
        kind = "vanilla" if settings.method == "vanilla" else "eagle"
        state.update({kind: gen.run, "stepper": None, "step_key": None})
        status = f"Step mode finished ({gen.run.summary.stop_reason.replace('_', ' ')}). " + done_status(state)
    views = cycle_views(state, None) + (summary_views(state) if state["stepper"] is None else ())
    outs = VIEW_OUTPUTS + (SUMMARY_OUTPUTS if state["stepper"] is None else [])
    yield {**dict(zip(outs, views)), state_box: state, status_md: status, download: save_trace(state)}


def show(state, k):
    return cycle_views(state, k)


def shift(state, k, delta):
    n = len(state["cycles"])
    return cycle_views(state, min(max(int(k or 1) + delta, 1), max(n, 1)))


def play_tick(state, k):
    n = len(state["cycles"])
    nxt = int(k or 0) + 1
    if nxt > n:
        return (gr.skip(),) * 6 + (gr.Timer(active=False),)
    return cycle_views(state, nxt) + (gr.Timer(active=nxt < n),)


def load_trace(path, title=""):
    """Load a saved trace (upload or shipped example) into this tab: every view, no model needed."""
    if not path:
        return (gr.skip(),) * (len(VIEW_OUTPUTS) + len(SUMMARY_OUTPUTS) + 3)
    try:
        eagle, vanilla = load_trace_file(path)
    except (ValueError, OSError) as e:
        raise gr.Error(f"Could not load this trace: {e}", title="Bad trace file") from None
    state = new_state(eagle, vanilla, title or os.path.basename(path))
    s = (eagle or vanilla).summary
    status = (f"Replaying **{state['title']}** — {s.method}, {s.model or 'unknown model'}, "
              f"{len(state['cycles'])} cycles. No model needed to explore it.")
    return all_views(state) + (state, status, save_trace(state))


def load_example(name):
    return load_trace(example_traces().get(name), name)


def on_page_load():
    MODEL.start()
    traces = example_traces()
    first = next(iter(traces), None)
    return load_example(first) if first else (gr.skip(),) * (len(VIEW_OUTPUTS) + len(SUMMARY_OUTPUTS) + 3)


def model_status():
    return MODEL.status(), gr.Timer(active=not MODEL.ready.is_set())


def apply_preset(name):
    p = PRESETS[name]
    return p["depth"], p["tree_top_k"], p["total_tokens"]


def learn_views(state, k):
    text, tree, mask, probs, caption, _ = cycle_views(state, k)
    return tree, mask, probs


# ---------------------------------------------------------------------------------- layout
CSS = """
.gradio-container{max-width:1500px !important}
#eg-title h1{font-size:2.1em;margin-bottom:0}
#eg-caption{font-size:17px;line-height:1.55;background:#f6f8fb;border-left:5px solid #0072B2;padding:10px 14px;border-radius:6px}
#eg-status{font-size:16px}
.eg-learn p,.eg-learn li{font-size:17px;line-height:1.6}
"""
THEME = gr.themes.Soft(primary_hue="blue", neutral_hue="slate", font=[gr.themes.Font(f) for f in ("system-ui", "Segoe UI", "Roboto", "sans-serif")],
                       font_mono=[gr.themes.Font(f) for f in ("ui-monospace", "Menlo", "Consolas", "monospace")])
# system fonts only: the default theme fetches Google Fonts, and the app must work offline

with gr.Blocks(title="EAGLE speculative decoding, step by step") as demo:
    state_box = gr.State(new_state(), time_to_live=3 * 3600)
    gr.Markdown("# EAGLE speculative decoding, step by step\nA small head drafts a **tree** of tokens from the "
                "model's own features; the model checks the whole tree in **one** forward pass and keeps the "
                "longest correct path plus one **bonus** token of its own. Same output as ordinary decoding, "
                "fewer passes.", elem_id="eg-title")
    model_md = gr.Markdown(MODEL.status(), elem_id="eg-model")
    status_md = gr.Markdown(elem_id="eg-status")
    with gr.Tab("Decode"):
        with gr.Row():
            with gr.Column(scale=2, min_width=340):
                prompt = gr.Textbox(label="Prompt", lines=4, max_length=6000, elem_id="eg-prompt",
                                    placeholder="Ask anything, or pick an example below…")
                gr.Examples([p for _, p in example_prompts()], inputs=prompt, label="Examples: writing · code · "
                            "math · summarisation · translation · Chinese", examples_per_page=6)
                method = gr.Radio(METHOD_CHOICES, value="eagle2", label="Method")
                compare = gr.Checkbox(True, label="Also decode with vanilla afterwards (fair, one after the other)")
                max_new = gr.Slider(4, 512, value=48, step=1, label="Max new tokens", elem_id="eg-maxnew")
                with gr.Accordion("Tree settings", open=False):
                    preset = gr.Radio(PRESET_CHOICES, value="explain", label="Preset")
                    depth = gr.Slider(1, 16, value=PRESETS["explain"]["depth"], step=1, label="Depth (expansion steps)")
                    tree_top_k = gr.Slider(1, 32, value=PRESETS["explain"]["tree_top_k"], step=1,
                                           label="Top-k (children per node, frontier width)")
                    total_tokens = gr.Slider(1, 256, value=PRESETS["explain"]["total_tokens"], step=1,
                                             label="Total draft tokens verified per cycle (EAGLE-2)")
                    chain_length = gr.Slider(1, 16, value=4, step=1, label="Chain length (chain method)")
                with gr.Accordion("Sampling (temperature 0 = greedy, reproducible)", open=False):
                    temperature = gr.Slider(0, 2, value=0, step=0.05, label="Temperature")
                    top_p = gr.Slider(0.05, 1, value=1, step=0.05, label="Top-p")
                    top_k = gr.Slider(0, 200, value=0, step=1, label="Top-k (0 = off)")
                    seed = gr.Number(0, precision=0, label="Seed", minimum=0)
                with gr.Row():
                    gen_btn = gr.Button("▶ Generate", variant="primary", elem_id="eg-generate")
                    step_btn = gr.Button("Step one cycle ›", elem_id="eg-step")
                    stop_btn = gr.Button("■ Stop", variant="stop", elem_id="eg-stop")
            with gr.Column(scale=3):
                text_html = gr.HTML(viz.colored_text_html([]), elem_id="eg-text")
                caption_md = gr.Markdown(elem_id="eg-caption")
                with gr.Row():
                    prev_btn = gr.Button("◀ Previous", size="sm", min_width=90)
                    slider = gr.Slider(1, 2, value=1, step=1, label="Cycle", scale=4, elem_id="eg-scrubber")
                    next_btn = gr.Button("Next ▶", size="sm", min_width=90)
                    play_btn = gr.Button("▶ Play", size="sm", min_width=80)
                    pause_btn = gr.Button("❚❚ Pause", size="sm", min_width=80)
        with gr.Row():
            tree_plot = gr.Plot(show_label=False, label="Draft tree of this cycle", scale=3, elem_id="eg-tree")
            mask_plot = gr.Plot(show_label=False, label="Tree-attention mask", scale=2, elem_id="eg-mask")
        probs_plot = gr.Plot(show_label=False, label="p (target) vs q (draft) for each tested token", elem_id="eg-probs")
        gr.Markdown("## EAGLE beside vanilla decoding")
        comparison = gr.HTML(viz.comparison_html(None, None), elem_id="eg-comparison")
        with gr.Row():
            acclen_plot = gr.Plot(show_label=False, label="Accepted length per cycle", elem_id="eg-acclen")
            depth_plot = gr.Plot(show_label=False, label="Acceptance by depth", elem_id="eg-depth")
        timing_plot = gr.Plot(show_label=False, label="Time", elem_id="eg-timing")
        with gr.Row():
            gr.Markdown("### Replay at the measured pace")
            replay_btn = gr.Button("↻ Replay", size="sm", min_width=100)
        replay = gr.HTML(elem_id="eg-replay")
    with gr.Tab("Learn") as learn_tab:
        with gr.Row():
            with gr.Column(scale=3, elem_classes="eg-learn"):
                for block in (INTRO, FEATURES, TREE, VERIFY, OTHERS, GLOSSARY):
                    gr.Markdown(block)
            with gr.Column(scale=2):
                gr.Markdown("**Live figures of the cycle selected in the Decode tab**")
                learn_tree = gr.Plot(show_label=False, label="Draft tree")
                learn_mask = gr.Plot(show_label=False, label="Mask")
                learn_probs = gr.Plot(show_label=False, label="p vs q")
                gr.Plot(viz.tree_figure(cartesian_tree_cycle(), show_bonus=False, title="Medusa: a Cartesian product "
                        "of per-position top-3 (note “I am begin”)"), show_label=False, label="Medusa-style tree")
    with gr.Tab("Traces"):
        gr.Markdown("Download the current run (EAGLE and vanilla, every cycle) or load a saved one: every view "
                    "works without the model. Shipped examples are below.")
        with gr.Row():
            download = gr.DownloadButton("Download trace (JSON)", interactive=False, elem_id="eg-download")
            upload = gr.File(label="Load a trace (.json)", file_types=[".json"], type="filepath", elem_id="eg-upload")
        examples_dd = gr.Dropdown(list(example_traces()), label="Example traces", value=None, elem_id="eg-examples")
    play_timer = gr.Timer(0.9, active=False)
    status_timer = gr.Timer(1.0, active=True)

    # ------------------------------------------------------------------------------ wiring
    VIEW_OUTPUTS = [text_html, tree_plot, mask_plot, probs_plot, caption_md, slider]
    SUMMARY_OUTPUTS = [comparison, replay, acclen_plot, depth_plot, timing_plot]
    LOAD_OUTPUTS = VIEW_OUTPUTS + SUMMARY_OUTPUTS + [state_box, status_md, download]
    settings_in = [prompt, method, depth, tree_top_k, total_tokens, chain_length, temperature, top_p, top_k, max_new,
                   seed]
    gen_event = gen_btn.click(arm, None, None, queue=False).then(
        generate, settings_in + [compare, state_box], LOAD_OUTPUTS, concurrency_limit=1, concurrency_id="decode",
        api_name="generate")
    prompt.submit(arm, None, None, queue=False).then(
        generate, settings_in + [compare, state_box], LOAD_OUTPUTS, concurrency_limit=1, concurrency_id="decode",
        api_visibility="private")
    step_btn.click(step, settings_in + [state_box], LOAD_OUTPUTS, concurrency_limit=1, concurrency_id="decode",
                   api_name="step")
    stop_btn.click(stop, None, None, queue=False)
    slider.release(show, [state_box, slider], VIEW_OUTPUTS)
    prev_btn.click(lambda s, k: shift(s, k, -1), [state_box, slider], VIEW_OUTPUTS)
    next_btn.click(lambda s, k: shift(s, k, +1), [state_box, slider], VIEW_OUTPUTS)
    play_btn.click(lambda: gr.Timer(active=True), None, play_timer)
    pause_btn.click(lambda: gr.Timer(active=False), None, play_timer)
    play_timer.tick(play_tick, [state_box, slider], VIEW_OUTPUTS + [play_timer])
    replay_btn.click(lambda s: summary_views(s)[1], state_box, replay)
    preset.change(apply_preset, preset, [depth, tree_top_k, total_tokens])
    learn_tab.select(learn_views, [state_box, slider], [learn_tree, learn_mask, learn_probs])
    upload.upload(load_trace, upload, LOAD_OUTPUTS)
    examples_dd.input(load_example, examples_dd, LOAD_OUTPUTS)
    status_timer.tick(model_status, None, [model_md, status_timer])
    demo.load(on_page_load, None, LOAD_OUTPUTS)
    demo.unload(forget_session)

demo.queue(max_size=32, default_concurrency_limit=8)

if __name__ == "__main__":
    t_start = time.perf_counter()
    MODEL.start()  # load in the background: the page is usable at once, replaying example traces
    threading.Thread(target=lambda: MODEL.ready.wait() and print(
        f"* Model ready {time.perf_counter() - t_start:.1f} s after start: {MODEL.status()}", flush=True),
        daemon=True).start()
    demo.launch(share=False, theme=THEME, css=CSS)
