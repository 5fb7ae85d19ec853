"""Watch EAGLE decode, step by step, beside vanilla decoding.  Run: python app.py

Layout (Gradio's own style): the callbacks live in app_callbacks.py (decoding), app_views.py
(the named outputs, renderers, scrubber) and app_traces.py (download / load); this file holds
the Blocks layout, then the event wiring, then the launch. The model is read-only and shared (loaded on the
engine thread at start, app_runtime.ModelHolder); everything per user lives in a gr.State dict;
decoding runs through eagle_core only, figures come from viz/.
"""
from __future__ import annotations

import time

import gradio as gr
from starlette.middleware import Middleware

from eagle_app.callbacks import decoding as cb
from eagle_app.callbacks import page
from eagle_app import frontend as app_frontend
from eagle_app import traces
from eagle_app import views
import viz
from eagle_app.model import MODEL
from eagle_app.views import OUT, VIEW
from eagle_core import METHOD_LABELS, METHODS, PRESETS
from viz.examples import TRACE_DIR as EXAMPLE_DIR
from viz.examples import cartesian_tree_cycle, example_prompts, example_traces
from viz.languages import language_figure, language_table, load_language_rows
from viz.learn import FEATURES, GLOSSARY, INTRO, LANGUAGES, OTHERS, TREE, VERIFY
from viz.traces import MAX_TRACE_BYTES

T_START = time.perf_counter()
if __name__ == "__main__":
    MODEL.start()  # load while the page is built: it is usable at once, replaying an example trace
METHOD_CHOICES = [(METHOD_LABELS[m] if m != "vanilla" else "vanilla only (no drafting)", m) for m in METHODS]
PRESET_CHOICES = [(f"{label} (depth {PRESETS[name]['depth']}, top-k {PRESETS[name]['tree_top_k']}, "
                   f"{PRESETS[name]['total_tokens']} tokens)", name)
                  for label, name in (("readable tree", "explain"), ("fastest on a 2-core CPU", "cpu"),
                                      ("GPU, published EAGLE-2", "gpu"))]

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

with gr.Blocks(title="EAGLE speculative decoding, step by step", delete_cache=(900, 3600)) as demo:
    # delete_cache: uploads and served downloads are removed from Gradio's cache after an hour
    state_box = gr.State(views.new_state(), time_to_live=3 * 3600)
    run_box = gr.State(None)  # id of this tab's latest Generate (its own stop flag, app_callbacks.RunFlags)
    gr.Markdown("# EAGLE speculative decoding, step by step\nA small head drafts a **tree** of tokens from the "
                "model's own features; the model checks the whole tree in **one** forward pass and keeps the "
                "longest correct path plus one **bonus** token of its own. Same output as ordinary decoding, "
                "fewer passes.", elem_id="eg-title")
    model_md = gr.Markdown(MODEL.status, elem_id="eg-model")  # a callable: evaluated on every page load
    status_md = gr.Markdown(elem_id="eg-status")
    with gr.Tab("Decode"):
        with gr.Row():
            with gr.Column(scale=2, min_width=340):
                prompt = gr.Textbox(label="Prompt", lines=4, elem_id="eg-prompt",
                                    placeholder="Ask anything, or pick an example below…")
                gr.Examples([p for _, p in example_prompts()], inputs=prompt, label="Examples: writing · code · "
                            "math · summarisation · translation · Chinese", examples_per_page=6)
                method = gr.Radio(METHOD_CHOICES, value="eagle2", label="Method")
                compare = gr.Checkbox(True, label="Also decode with vanilla afterwards (fair, one after the other)")
                max_new = gr.Slider(4, 512, value=48, step=1, label="Max new tokens", elem_id="eg-maxnew")
                with gr.Accordion("Tree settings", open=False):
                    preset = gr.Radio(PRESET_CHOICES, value="explain", label="Preset")
                    depth = gr.Slider(1, 16, value=PRESETS["explain"]["depth"], step=1, label="Depth (expansion steps)",
                                      elem_id="eg-set-depth")
                    tree_top_k = gr.Slider(1, 32, value=PRESETS["explain"]["tree_top_k"], step=1,
                                           label="Top-k (children per node, frontier width)", elem_id="eg-set-topk")
                    total_tokens = gr.Slider(1, 256, value=PRESETS["explain"]["total_tokens"], step=1,
                                             label="Total draft tokens verified per cycle (EAGLE-2)", elem_id="eg-set-total")
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
        with gr.Row():  # min_width: on a narrow screen the mask goes below the tree instead of over it
            tree_plot = gr.Plot(show_label=False, label="Draft tree of this cycle", scale=3, min_width=380,
                                elem_id="eg-tree")
            mask_plot = gr.Plot(show_label=False, label="Tree-attention mask", scale=2, min_width=330, elem_id="eg-mask")
        probs_plot = gr.Plot(show_label=False, label="p (target) vs q (draft) for each tested token", elem_id="eg-probs")
        gr.Markdown("## EAGLE beside vanilla decoding")
        comparison = gr.HTML(viz.comparison_html(None, None), elem_id="eg-comparison")
        with gr.Row():
            gr.Markdown("### Replay at the measured pace")
            replay_btn = gr.Button("↻ Replay", size="sm", min_width=100)
        replay = gr.HTML(elem_id="eg-replay")
        with gr.Row():
            acclen_plot = gr.Plot(show_label=False, label="Accepted length per cycle", min_width=330, elem_id="eg-acclen")
            depth_plot = gr.Plot(show_label=False, label="Acceptance by depth", min_width=330, elem_id="eg-depth")
        timing_plot = gr.Plot(show_label=False, label="Time", elem_id="eg-timing")
    with gr.Tab("Learn") as learn_tab:
        with gr.Row():
            with gr.Column(scale=3, elem_classes="eg-learn"):
                for block in (INTRO, FEATURES, TREE, VERIFY, OTHERS, LANGUAGES):
                    gr.Markdown(block)
                lang_rows = load_language_rows()
                gr.Markdown(language_table(lang_rows))
                gr.Plot(language_figure(lang_rows), show_label=False, label="tau by language", elem_id="eg-languages")
                gr.Markdown(GLOSSARY)
            with gr.Column(scale=2, min_width=360):
                gr.Markdown("**Live figures of the cycle selected in the Decode tab**")
                learn_tree = gr.Plot(show_label=False, label="Draft tree")
                learn_mask = gr.Plot(show_label=False, label="Mask")
                learn_probs = gr.Plot(show_label=False, label="p vs q")
                gr.Plot(viz.tree_figure(cartesian_tree_cycle(), show_bonus=False, title="Medusa: a Cartesian product "
                        "of per-position top-3 (note “I am begin”)"), show_label=False, label="Medusa-style tree")
    with gr.Tab("Traces"):
        gr.Markdown("Download the current run (EAGLE and vanilla, every cycle) or load a saved one: every view "
                    f"works without the model. Files up to {MAX_TRACE_BYTES // 10 ** 6} MB. Shipped examples are below.")
        with gr.Row():
            download = gr.DownloadButton("Download trace (JSON)", interactive=False, elem_id="eg-download")
            upload = gr.File(label="Load a trace (.json)", file_types=[".json"], type="filepath", elem_id="eg-upload")
        examples_dd = gr.Dropdown(list(example_traces()), label="Example traces", value=None, elem_id="eg-examples")
    play_timer = gr.Timer(0.9, active=False)
    status_timer = gr.Timer(1.0, active=True)

    # ------------------------------------------------------------------------------ wiring
    COMPONENTS = dict(text=text_html, tree=tree_plot, mask=mask_plot, probs=probs_plot, caption=caption_md,
                      slider=slider, comparison=comparison, replay=replay, acclen=acclen_plot, depth=depth_plot,
                      timing=timing_plot, state=state_box, status=status_md, download=download,
                      examples=examples_dd, model=model_md, upload=upload)
    ALL = [COMPONENTS[name] for name in OUT]  # every callback returns values in app_views.OUT order
    VIEWS = [COMPONENTS[name] for name in VIEW]
    settings_in = [prompt, method, depth, tree_top_k, total_tokens, chain_length, temperature, top_p, top_k, max_new,
                   seed]
    # Decoding: Gradio runs up to 16 callbacks at once; the one decode slot is app_callbacks.LINE, whose
    # waiting callers show their place in line and can leave it with Stop. show_progress="hidden": the
    # status line is the progress, and no spinner animates over the figures while a run is timed.
    decode = dict(concurrency_limit=16, concurrency_id="decode", show_progress="hidden")
    # trigger_mode="multiple": a Generate while this tab's run is pending is sent (Gradio's default "once"
    # dropped it, so the click only stopped the old run); cb.arm has replaced the old run by then.
    for trigger, api in ((gen_btn.click, dict(api_name="generate")), (prompt.submit, dict(api_visibility="private"))):
        trigger(cb.arm, None, run_box, queue=False).then(cb.generate, settings_in + [compare, state_box, run_box], ALL,
                                                        trigger_mode="multiple", **decode, **api)
    step_btn.click(cb.step, settings_in + [state_box], ALL, api_name="step", **decode)
    stop_btn.click(cb.stop, None, None, queue=False)
    # .input fires for a drag and for a typed number (the box has no Enter event); always_last drops the
    # cycles dragged past while one was drawing
    slider.input(views.show, [state_box, slider], VIEWS, trigger_mode="always_last", show_progress="hidden")
    prev_btn.click(lambda s, k: views.shift(s, k, -1), [state_box, slider], VIEWS)
    next_btn.click(lambda s, k: views.shift(s, k, +1), [state_box, slider], VIEWS)
    play_btn.click(lambda: gr.Timer(active=True), None, play_timer)
    pause_btn.click(lambda: gr.Timer(active=False), None, play_timer)
    play_timer.tick(views.play_tick, [state_box, slider], VIEWS + [play_timer])
    replay_btn.click(lambda s: views.summary_views(s)["replay"], state_box, replay)
    preset.change(page.apply_preset, preset, [depth, tree_top_k, total_tokens])
    learn_tab.select(views.learn_views, [state_box, slider], [learn_tree, learn_mask, learn_probs])
    upload.upload(traces.upload_trace, upload, ALL)
    examples_dd.input(traces.load_example, examples_dd, ALL)
    status_timer.tick(page.model_status, None, [model_md, status_timer])
    demo.load(page.on_page_load, None, ALL)
    demo.unload(cb.forget_session)

demo.queue(max_size=32, default_concurrency_limit=8)
# Gradio's queue looks for new events every 1 ms and for progress every 10 ms, idle or busy: measured
# ~850 wake-ups a second and 7% of a core on the idle server, all on its event-loop thread, which on a
# 2-core machine takes turns with the decoder's two OpenMP threads. Polling every 50 ms / 100 ms: 28
# wake-ups a second and 1%; a queued event starts at most 50 ms later. (Attributes of gradio 6.31's
# Queue, pinned in requirements.txt; a version without them keeps its own polling.)
for _attr, _seconds in (("sleep_when_free", 0.05), ("progress_update_sleep_when_free", 0.1)):
    if hasattr(demo._queue, _attr):
        setattr(demo._queue, _attr, _seconds)
# launch() settings shared with the tests: uploads capped at the trace limit (Gradio refuses larger ones
# before they are stored), the shipped example traces downloadable from any working directory, and the
# page served with the script that slows Gradio's 60-a-second status-tracker frames (app_frontend.py)
LAUNCH = dict(theme=THEME, css=CSS, max_file_size=MAX_TRACE_BYTES, allowed_paths=[EXAMPLE_DIR],
              app_kwargs={"middleware": [Middleware(app_frontend.EarlyScript)]})

if __name__ == "__main__":
    import threading

    threading.Thread(target=lambda: MODEL.ready.wait() and print(
        f"* Model ready {time.perf_counter() - T_START:.1f} s after start: {MODEL.status()}", flush=True),
        daemon=True).start()
    demo.launch(share=False, **LAUNCH)
