"""The page's own events: page load (the first example trace), the model's status line, presets."""
from __future__ import annotations

import gradio as gr

from eagle_core import PRESETS
from viz.examples import example_traces

from ..model import MODEL
from viz.examples import medusa_figure
from viz.languages import language_figure, language_table, load_language_rows
from viz.learn import learn_blocks

from ..i18n import APP_TEXT, PRESET_NAMES, lang_of, text
from ..sessions import note_page
from ..settings import BY_NAME, OPENING
from ..tree_advice import opening_tree
from ..traces import load_example, replay_status
from ..views import OUT, SUMMARY, VIEW, cycle_views, done_status, outputs, summary_views


def on_page_load(lang: str = "en", request: gr.Request = None):
    """The first example trace, and the model's status line as of now (in the tab's language)."""
    note_page(getattr(request, "session_hash", None))  # a browser tab: its session is kept while it is open
    MODEL.start()
    first = next(iter(example_traces()), None)
    out = load_example(first, lang, request) if first else outputs()
    return out[:OUT.index("model")] + (MODEL.status(lang),) + out[OUT.index("model") + 1:]


def model_status(lang: str = "en", depth=None, top_k=None, total=None):
    """The model line, the timer (stopped once the model is ready), and on the tick the model is ready, the tree
    chosen for this machine in the tree's sliders (tree_advice.opening_tree: only while they hold the page's
    opening tree) with the preset that matches it, if any. -> (model, timer, depth, top_k, total, preset)"""
    ready = MODEL.ready.is_set()
    tree = opening_tree(MODEL.tree, (depth, top_k, total), OPENING) if ready else None
    if tree is None:
        sliders = (gr.skip(),) * 4
    else:
        preset = next((n for _, _, n in PRESET_NAMES
                       if (PRESETS[n]["depth"], PRESETS[n]["tree_top_k"], PRESETS[n]["total_tokens"]) == tree), None)
        sliders = (*tree, preset)  # None: no preset selected (apply_preset leaves the sliders)
    return MODEL.status(lang), gr.Timer(active=not ready), *sliders


# ---------------------------------------------------------------------------------- language
def page_language(lang) -> str:
    """The tab's language from what the browser says (navigator.language, sent by the load event's JS;
    an Accept-Language header works too): "zh" for any Chinese, else "en"."""
    return lang_of(lang)


TABS = ("Decode", "Learn", "Traces")  # the tabs' labels: Gradio's tab bar does not redraw them when its locale changes


def language_texts(lang: str) -> tuple:
    """The texts the callbacks draw in the tab's language: the Learn tab's Markdown (viz/learn.py,
    viz/learn_zh.py), its language table and figures, and the tabs' labels. The other labels, buttons and headings follow Gradio's own
    i18n in the browser (eagle_app/i18n.py)."""
    blocks = learn_blocks(lang)
    rows = load_language_rows()
    return (blocks["text"], blocks["glossary"], language_table(rows, lang), language_figure(rows, lang),
            medusa_figure(lang), *(gr.Tab(label=text(name, lang)) for name in TABS))


def set_language(lang, state, k):
    """The switch (or the page load): the tab's language, the Learn text and the tabs' labels, the model
    line, the views of the selected cycle and the run's cards, and the status line of a finished run or a
    loaded trace, all drawn again in it. -> (lang, *language_texts, model, *views.VIEW, *views.SUMMARY, status)"""
    lang = lang_of(lang)
    status = status_again(state, lang) if state else gr.skip()
    if state and state["cycles"]:
        drawn = {**cycle_views(state, k, lang), **summary_views(state, lang)}
        drawn["slider"] = gr.Slider(label=APP_TEXT("slider.of", lang, n=len(state["cycles"])))  # the label only
        views = tuple(drawn[name] for name in VIEW + SUMMARY)
    else:
        views = (gr.skip(),) * len(VIEW + SUMMARY)
    return (lang, *language_texts(lang), MODEL.status(lang), *views, status)


def status_again(state: dict, lang: str):
    """The status line of the tab's run in `lang`: a finished run's summary, a trace's replay line."""
    if state.get("eagle") is None and state.get("vanilla") is None:
        return gr.skip()
    if "how" in state or (state.get("note") or ("",))[0] == "status.step_note":
        return done_status(state, state.get("how"), lang)
    return replay_status(state, lang)


def compare_box(method):
    """The "also decode with vanilla" box: greyed out while the method is vanilla (there is nothing to compare)."""
    return gr.Checkbox(interactive=method != "vanilla")


def clamp_note(name: str, value, lang: str = "en"):
    """A setting's slider was given a number past its range (typed: the browser then clamps it silently): say so.
    A number inside the range clears the note; the maximum itself leaves it (the clamp's own result)."""
    f = BY_NAME[name]
    try:
        v = float(value)
    except (TypeError, ValueError):
        return gr.skip()
    if f.maximum is not None and v > f.maximum:
        return APP_TEXT("note.clamped", lang, what=text(f.label, lang), v=f"{v:g}", edge=f"{f.maximum:g}")
    if f.minimum is not None and v < f.minimum:
        return APP_TEXT("note.clamped_min", lang, what=text(f.label, lang), v=f"{v:g}", edge=f"{f.minimum:g}")
    return gr.skip() if v in (f.maximum, f.minimum) else ""


def apply_preset(name):
    if name not in PRESETS:  # the radio cleared (model_status: a chosen tree that is no preset)
        return gr.skip(), gr.skip(), gr.skip()
    p = PRESETS[name]
    return p["depth"], p["tree_top_k"], p["total_tokens"]
