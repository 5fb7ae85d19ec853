"""The page's events: which callback runs on which click, with which inputs and outputs. Called
by layout.build() inside its gr.Blocks; every decode callback returns values in views.OUT order.
"""
from __future__ import annotations

import gradio as gr

from . import hardware, lesson, picker, traces, views
from .i18n import DETECT_JS, SET_LOCALE_JS
from .callbacks import decoding, page as page_events


def wire(page) -> None:
    c, w = page.c, page.settings
    VIEWS = [c[name] for name in views.VIEW]
    # Decoding: Gradio runs up to 16 callbacks at once; the one decode slot is decoding.LINE, whose
    # waiting callers show their place in line and can leave it with Stop. show_progress="hidden": the
    # status line is the progress, and no spinner animates over the figures while a run is timed.
    decode = dict(concurrency_limit=16, concurrency_id="decode", show_progress="hidden")
    # the public API is /generate and /step; every other event is the page's own business
    hidden = dict(api_visibility="private")
    # trigger_mode="multiple": a Generate while this tab's run is pending is sent (Gradio's default "once"
    # dropped it, so the click only stopped the old run); decoding.arm has replaced the old run by then.
    for trigger, api in ((c["gen_btn"].click, dict(api_name="generate")),
                         (c["prompt"].submit, dict(api_visibility="private"))):
        trigger(decoding.arm, None, c["run"], queue=False, **hidden).then(
            decoding.generate, page.settings_in + [c["compare"], c["state"], c["run"], c["lang"]], page.all,
            trigger_mode="multiple", **decode, **api)
    c["step_btn"].click(decoding.step, page.settings_in + [c["state"], c["lang"]], page.all, api_name="step", **decode)
    c["stop_btn"].click(decoding.stop, c["lang"], None, queue=False, **hidden)
    # .input fires for a drag and for a typed number (the box has no Enter event); always_last drops the
    # cycles dragged past while one was drawing
    scrub = [c["state"], c["slider"], c["lang"]]
    c["slider"].input(views.show, scrub, VIEWS, trigger_mode="always_last", show_progress="hidden", **hidden)
    c["prev_btn"].click(lambda s, k, lang: views.shift(s, k, -1, lang), scrub, VIEWS, **hidden)
    c["next_btn"].click(lambda s, k, lang: views.shift(s, k, +1, lang), scrub, VIEWS, **hidden)
    c["play_btn"].click(lambda: gr.Timer(active=True), None, c["play_timer"], **hidden)
    c["pause_btn"].click(lambda: gr.Timer(active=False), None, c["play_timer"], **hidden)
    c["play_timer"].tick(views.play_tick, scrub, VIEWS + [c["play_timer"]], **hidden)
    c["replay_btn"].click(lambda s, lang: views.summary_views(s, lang)["replay"], [c["state"], c["lang"]], c["replay"],
                          **hidden)
    c["preset"].change(page_events.apply_preset, c["preset"], [w["depth"], w["tree_top_k"], w["total_tokens"]],
                       **hidden)
    w["method"].change(page_events.compare_box, w["method"], c["compare"], **hidden)  # greyed for vanilla
    for name, widget in w.items():  # a typed number past a slider's range: the note says it was clamped
        if isinstance(widget, gr.Slider):
            widget.change(lambda v, lang, name=name: page_events.clamp_note(name, v, lang), [widget, c["lang"]],
                          c["settings_note"], show_progress="hidden", **hidden)
    c["learn_tab"].select(views.learn_views, scrub, [c["learn_tree"], c["learn_mask"], c["learn_probs"]],
                            **hidden)
    c["upload"].upload(traces.upload_trace, [c["upload"], c["lang"]], page.all, **hidden)
    c["examples"].input(traces.load_example, [c["examples"], c["lang"]], page.all, **hidden)
    tree = [w["depth"], w["tree_top_k"], w["total_tokens"]]  # the tree chosen for this machine, once the model is ready
    ready = dict(fn=page_events.model_status, inputs=[c["lang"], *tree],
                 outputs=[c["model"], c["status_timer"], *tree, c["preset"]], **hidden)
    c["status_timer"].tick(**ready)
    hardware.wire(c)  # Measure this machine: takes the decode slot like a run
    picker.wire(c)  # Load a public pair (on a CUDA GPU): takes the decode slot too
    lesson.wire(page)  # the Lesson tab's steps, its language and "open in the Decode tab"
    # Language: the page load reads the browser's language (DETECT_JS, navigator.language, as Gradio's own
    # i18n does), then draws the example trace in it; the switch changes Gradio's locale in the page
    # (SET_LOCALE_JS) and draws the callbacks' texts again (page_events.set_language).
    texts = [c["lang"], c["learn_text"], c["glossary"], c["lang_table"], c["lang_figure"], c["medusa"], c["decode_tab"], c["learn_tab"], c["traces_tab"], c["model"]] + [c[name] for name in views.VIEW + views.SUMMARY] \
        + [c["status"]]
    page.demo.load(page_events.page_language, c["lang_switch"], c["lang_switch"], js=DETECT_JS, **hidden).then(
        page_events.set_language, [c["lang_switch"], c["state"], c["slider"]], texts, js=SET_LOCALE_JS, **hidden).then(
        page_events.on_page_load, c["lang"], page.all, **hidden).then(**ready)  # a page opened once the model is ready
    c["lang_switch"].input(page_events.set_language, [c["lang_switch"], c["state"], c["slider"]], texts,
                           js=SET_LOCALE_JS, **hidden)
    page.demo.unload(decoding.forget_session)
