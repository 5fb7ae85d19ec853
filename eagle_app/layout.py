"""The page: the gr.Blocks layout (Decode, Learn, Lesson and Traces tabs), then the event wiring
(wiring.py). `build()` returns the Blocks and the components by name; it loads no model.
"""
from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

import viz
from eagle_core import METHOD_LABELS, METHODS, PRESETS
from viz.examples import example_prompts, example_traces, medusa_figure
from viz.languages import language_figure, language_table, load_language_rows
from viz.learn import learn_blocks
from viz.traces import MAX_TRACE_BYTES

from . import hardware, lesson, picker, settings, views, wiring
from .i18n import LANG_CHOICES, preset_label, translatable
from .tree_advice import recorded_advice
from .model import MODEL

METHOD_CHOICES = [(translatable(METHOD_LABELS[m] if m != "vanilla" else "vanilla only (no drafting)"), m) for m in METHODS]
PRESET_CHOICES = [(translatable(preset_label(name)), name) for name in ("cpu", "explain", "gpu") if name in PRESETS]
TITLE = ("# EAGLE speculative decoding, step by step\nA small head drafts a **tree** of tokens from the model's own "
         "features; the model checks the whole tree in **one** forward pass and keeps the longest correct path "
         "plus one **bonus** token of its own. In float32, the same output as ordinary decoding in fewer passes "
         "(half precision may part where two tokens nearly tie).")
CSS = """
.gradio-container{max-width:min(100%,2200px) !important}
#eg-title h1{font-size:2.1em;margin-bottom:0}
#eg-caption{font-size:17px;line-height:1.55;background:#f6f8fb;border-left:5px solid #0072B2;padding:10px 14px;border-radius:6px}
#eg-status{font-size:16px}
.eg-learn p,.eg-learn li{font-size:17px;line-height:1.6}
.eg-learn table,.prose table{display:block;overflow-x:auto;max-width:100%}
.eg-learn th{white-space:nowrap}
.eg-learn td{white-space:normal;min-width:4em}
#eg-model .eg-more{text-decoration:underline dotted;cursor:help;color:#555}
"""
THEME = gr.themes.Soft(primary_hue="blue", neutral_hue="slate", font=[gr.themes.Font(f) for f in ("system-ui", "Segoe UI", "Roboto", "sans-serif")],
                       font_mono=[gr.themes.Font(f) for f in ("ui-monospace", "Menlo", "Consolas", "monospace")])
# system fonts only: the default theme fetches Google Fonts, and the app must work offline


@dataclass
class Page:
    demo: gr.Blocks
    c: dict  # components by name: views.OUT's names, the buttons, timers and tabs
    settings: dict  # the settings' widgets by settings.NAMES
    settings_in: list  # [prompt, *the settings' widgets in settings.NAMES order]: the decode callbacks' inputs
    all: list  # the components of views.OUT, in order: what every callback returns


class SettingSlider(gr.Slider):
    """A decode setting's slider that hands any number on as it came: gr.Slider refused one past its range with
    an error badge before any callback ran; here the callbacks refuse it with the engine's own message (the
    refusal path), and the page's note says when the browser clamped a typed number (callbacks/page.clamp_note).
    Drawn by the ordinary slider component (a template of it)."""

    is_template = True

    def preprocess(self, payload):
        return payload


def setting_widget(f: settings.Field):
    """The widget of one decode setting, from its settings.FIELDS entry."""
    if f.name == "method":
        return gr.Radio(METHOD_CHOICES, value=f.value, label=translatable(f.label))
    if f.maximum is None:
        return gr.Number(f.value, precision=0, label=translatable(f.label), minimum=f.minimum)
    return SettingSlider(f.minimum, f.maximum, value=f.value, step=f.step, label=translatable(f.label), elem_id=f.elem_id)


def controls(c: dict, w: dict) -> None:
    """The Decode tab's left column: prompt, examples, settings (into `w` by name), buttons."""
    group = lambda name: [f for f in settings.FIELDS if f.group == name]  # noqa: E731
    c["prompt"] = gr.Textbox(label=translatable("Prompt"), lines=4, elem_id="eg-prompt",
                             placeholder=translatable("Ask anything, or pick an example below…"))
    gr.Examples([p for _, p in example_prompts()], inputs=c["prompt"], label=translatable("Examples: writing · code · "
                "math · summarisation · translation · Chinese"), examples_per_page=6)
    w["method"] = setting_widget(settings.BY_NAME["method"])
    c["compare"] = gr.Checkbox(True, label=translatable("Also decode with vanilla afterwards (fair, one after the other)"))
    w["max_new_tokens"] = setting_widget(settings.BY_NAME["max_new_tokens"])
    with gr.Accordion(translatable("Tree settings"), open=False):
        c["preset"] = gr.Radio(PRESET_CHOICES, value=settings.PAGE_PRESET, label=translatable("Preset"))
        w.update({f.name: setting_widget(f) for f in group("tree")})
        c["tree_advice"] = gr.Markdown(recorded_advice(), elem_id="eg-tree-advice")  # which trees pay here
    with gr.Accordion(translatable("Sampling (temperature 0 = greedy, reproducible)"), open=False):
        w.update({f.name: setting_widget(f) for f in group("sampling")})
    picker.panel(c)  # the public target / head pairs, on a CUDA GPU only (picker.py)
    c["settings_note"] = gr.Markdown(elem_id="eg-settings-note")  # a typed number the slider clamped (wiring.py)
    with gr.Row():
        c["gen_btn"] = gr.Button(translatable("▶ Generate"), variant="primary", elem_id="eg-generate")
        c["step_btn"] = gr.Button(translatable("Step one cycle ›"), elem_id="eg-step")
        c["stop_btn"] = gr.Button(translatable("■ Stop"), variant="stop", elem_id="eg-stop")


def decode_tab(c: dict, w: dict) -> None:
    with gr.Row():
        with gr.Column(scale=2, min_width=340):
            controls(c, w)
        with gr.Column(scale=3):
            c["text"] = gr.HTML(viz.colored_text_html([]), elem_id="eg-text")
            c["caption"] = gr.Markdown(elem_id="eg-caption")
            with gr.Row():
                c["prev_btn"] = gr.Button(translatable("◀ Previous"), size="sm", min_width=90)
                c["slider"] = views.CycleSlider(1, 2, value=1, step=1, label=translatable("Cycle"), scale=4, elem_id="eg-scrubber")
                c["next_btn"] = gr.Button(translatable("Next ▶"), size="sm", min_width=90)
                c["play_btn"] = gr.Button(translatable("▶ Play"), size="sm", min_width=80)
                c["pause_btn"] = gr.Button(translatable("❚❚ Pause"), size="sm", min_width=80)
    with gr.Row():  # min_width: on a narrow screen the mask goes below the tree instead of over it
        c["tree"] = gr.Plot(show_label=False, label="Draft tree of this cycle", scale=3, min_width=380,
                            elem_id="eg-tree")
        c["mask"] = gr.Plot(show_label=False, label="Tree-attention mask", scale=2, min_width=330, elem_id="eg-mask")
    c["probs"] = gr.Plot(show_label=False, label="p (target) vs q (draft) for each tested token", elem_id="eg-probs")
    gr.Markdown(translatable("## EAGLE beside vanilla decoding"))
    c["comparison"] = gr.HTML(viz.comparison_html(None, None), elem_id="eg-comparison")
    with gr.Row():
        gr.Markdown(translatable("### Replay at the measured pace"))
        c["replay_btn"] = gr.Button(translatable("↻ Replay"), size="sm", min_width=100)
    c["replay"] = gr.HTML(elem_id="eg-replay")
    with gr.Row():
        c["acclen"] = gr.Plot(show_label=False, label="Accepted length per cycle", min_width=330, elem_id="eg-acclen")
        c["depth"] = gr.Plot(show_label=False, label="Acceptance by depth", min_width=330, elem_id="eg-depth")
    c["timing"] = gr.Plot(show_label=False, label="Time", elem_id="eg-timing")


def learn_tab(c: dict) -> None:
    with gr.Row():
        with gr.Column(scale=3, elem_classes="eg-learn"):
            blocks = learn_blocks("en")  # drawn again in Chinese by page_events.set_language (wiring.py)
            c["learn_text"] = gr.Markdown(blocks["text"])
            lang_rows = load_language_rows()
            c["lang_table"] = gr.Markdown(language_table(lang_rows))
            c["lang_figure"] = gr.Plot(language_figure(lang_rows), show_label=False, label="tau by language",
                                       elem_id="eg-languages")
            c["glossary"] = gr.Markdown(blocks["glossary"])
        with gr.Column(scale=2, min_width=360):
            gr.Markdown(translatable("**Live figures of the cycle selected in the Decode tab**"))
            c["learn_tree"] = gr.Plot(show_label=False, label="Draft tree")
            c["learn_mask"] = gr.Plot(show_label=False, label="Mask")
            c["learn_probs"] = gr.Plot(show_label=False, label="p vs q")
            c["medusa"] = gr.Plot(medusa_figure(), show_label=False, label="Medusa-style tree")


def traces_tab(c: dict) -> None:
    gr.Markdown(translatable("Download the current run (EAGLE and vanilla, every cycle) or load a saved one: every view "
                  f"works without the model. Files up to {MAX_TRACE_BYTES // 10 ** 6} MB. Shipped examples are below."))
    with gr.Row():
        c["download"] = gr.DownloadButton(translatable("Download trace (JSON)"), interactive=False, elem_id="eg-download")
        c["upload"] = gr.File(label=translatable("Load a trace (.json)"), file_types=[".json"], type="filepath", elem_id="eg-upload")
    c["examples"] = gr.Dropdown(list(example_traces()), label=translatable("Example traces"), value=None, elem_id="eg-examples")


def build() -> Page:
    """The whole page with its events wired; the model is neither loaded nor started."""
    c, w = {}, {}
    with gr.Blocks(title="EAGLE speculative decoding, step by step", delete_cache=(900, 3600)) as demo:
        # delete_cache: uploads and served downloads are removed from Gradio's cache after an hour
        c["state"] = gr.State(views.new_state(), time_to_live=3 * 3600)
        c["run"] = gr.State(None)  # id of this tab's latest Generate (its own stop flag, callbacks/flags.py)
        # this tab's language, "en" or "zh": the browser's at load, then the switch's; None until the load sets it
        c["lang"] = gr.State(None)
        c["lang_switch"] = gr.Radio(LANG_CHOICES, value="en", label=translatable("Language"), show_label=False, container=False,
                                    elem_id="eg-lang")
        gr.Markdown(translatable(TITLE), elem_id="eg-title")
        c["model"] = gr.Markdown(MODEL.status(), elem_id="eg-model")  # brought up to date by each page load
        c["status"] = gr.Markdown(elem_id="eg-status")
        with gr.Tab(translatable("Decode")) as c["decode_tab"]:
            decode_tab(c, w)
        with gr.Tab(translatable("Learn")) as c["learn_tab"]:
            learn_tab(c)
            hardware.panel(c)  # the hardware lesson (eagle_app/hardware.py)
        lesson.tab(c)  # the lesson a teacher runs (eagle_app/lesson.py)
        with gr.Tab(translatable("Traces")) as c["traces_tab"]:
            traces_tab(c)
        c["play_timer"] = gr.Timer(0.9, active=False)
        c["status_timer"] = gr.Timer(1.0, active=True)
        assert set(w) == set(settings.NAMES), set(w) ^ set(settings.NAMES)
        page = Page(demo, c, w, [c["prompt"]] + [w[name] for name in settings.NAMES],
                    [c[name] for name in views.OUT])
        wiring.wire(page)
    return page
