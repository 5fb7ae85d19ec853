"""The Lesson tab (issue 52, item 1): eight steps that tell one story, from why one pass over k tokens
costs about one to the live Decode tab (eagle_app/lesson_plan.py). Each step has one idea, a caption of
at most 120 words, one figure from viz/, one question for the class, and a "try it" that names one
control of the Decode tab and predicts what it will do; "Go live" puts the step's prompt and settings
on the Decode tab (the lesson's settings: the page's `cpu` tree) and shows it.

Every figure about this project in the captions is a {field} read at render time from a record: the
hardware panel's recording and tau per tree (assets/learn/, eagle_core.machine), tau per language
(assets/learn/per_language.json), the lesson's traces and manifest (assets/lesson/), the shipped heads'
config.json (eagle_app/lesson_cards.py). tests/test_literal_figures.py fails when one is typed. Every string
is in eagle_app/lesson_text.py, in English and Chinese; the tab redraws itself when the page's language changes.
"""
from __future__ import annotations

import os

import gradio as gr

import viz
from viz.i18n import lang_of

from .lesson_cards import _recorded, card, live_head_inputs, precision_text, recorded_steps, trace
from .lesson_plan import BY_KEY, LESSON_DIR, PRESET, STEPS, TREE
from .lesson_text import TEXT

PRECISIONS = ("float32", "gguf")  # step 8's switch: the target's weights as float32, or the GGUF's own blocks

# ------------------------------------------------------------------------------------- figures
def figure(key: str, lang: str, live: dict | None = None, fmt: str = "float32"):
    """The step's one figure (None when its trace is not recorded yet); step 8's in the precision `fmt` picked."""
    from viz.head_inputs import head_inputs_figure
    from viz.hardware import forward_figure

    step = BY_KEY[key]
    if step.figure == "forward":
        m, _ = _recorded()
        return forward_figure(m, TREE["total_tokens"] + 1, lang)
    if step.figure == "head_inputs":
        return head_inputs_figure(live, lang)
    if step.figure == "hardware":
        return hardware_figure(lang, fmt)
    if step.figure == "languages":
        from viz.languages import language_figure, load_language_rows

        return language_figure(load_language_rows(), lang)
    s = recorded_steps().get(key)
    if not s:
        return None
    eagle, _ = trace(step.file)
    c = eagle.cycles[s["cycle"] - 1]
    if step.figure == "mask":  # every row and column labelled: the step's question names a row
        fig = viz.mask_figure(c, lang)
        labels = list(fig.data[0].x)
        fig.update_xaxes(tickmode="array", tickvals=labels, ticktext=labels)
        fig.update_yaxes(tickmode="array", tickvals=labels, ticktext=labels)
        return fig.update_layout(height=max(fig.layout.height or 0, 22 * len(labels) + 260))
    if step.figure == "probs":
        return viz.probs_figure(c, lang)
    return viz.tree_figure(c, lang=lang)


def _step8_record(here: dict | None):
    """(record, tau table) step 8 reads: the measurement made here ("measure here"), else the hardware record."""
    if here:
        from eagle_core.machine import load_tau_table

        return here, load_tau_table()
    return _recorded()


def hardware_figure(lang: str, fmt: str = "float32", here: dict | None = None):
    """Step 8: both weight formats' t(k) and predicted speedup per tree from the hardware record (the GGUF's
    blocks named "not recorded yet" where the record lacks them), the switch's format drawn bold."""
    from eagle_core.machine import lesson as predicted
    from eagle_core.machine.hardware import format_lessons
    from viz.hardware import precision_figure

    m, table = _step8_record(here)
    if not m:
        return precision_figure({}, None, fmt, lang)
    return precision_figure(format_lessons(m, table), predicted(m, table), fmt, lang, here=bool(here))


def precision_words(fmt: str, lang: str, here: dict | None = None) -> str:
    """Step 8's words under the switch: from the measurement made here (so labelled) or the record."""
    if not here:
        return precision_text(fmt, lang)
    from .lesson_measure import here_line

    m, table = _step8_record(here)
    return here_line(here, lang) + "\n\n" + precision_text(fmt, lang, m, table)


def precision_views(fmt, lang: str = "en", here: dict | None = None) -> tuple:
    """The precision switch: (step 8's figure, its words) in format `fmt`."""
    lang = lang_of(lang)
    fmt = fmt if fmt in PRECISIONS else PRECISIONS[0]
    return gr.Plot(value=hardware_figure(lang, fmt, here)), gr.Markdown(value=precision_words(fmt, lang, here))


def on_measure_here(fmt, lang: str = "en", progress=gr.Progress()) -> tuple:
    """Step 8's "measure here": (the measurement kept for the tab, figure, words); a failure keeps the record."""
    from .lesson_measure import measure_here

    lang = lang_of(lang)
    here, status = measure_here(lang, progress)
    fig, words = precision_views(fmt, lang, here)
    return here, fig, words if here else gr.Markdown(value=status + "\n\n" + words.value)


def precision_choices(lang: str) -> list[tuple[str, str]]:
    from viz.hardware import TEXT as HW

    return [(HW(f"fmt.{f}", lang), f) for f in PRECISIONS]


def run_text(key: str, lang: str) -> str:
    """The coloured text of the step's recorded run at its cycle ("" without one)."""
    step = BY_KEY[key]
    s = recorded_steps().get(key) if step.file else None
    if not s:
        return ""
    eagle, _ = trace(step.file)
    return viz.colored_text_html(eagle.cycles, selected=eagle.cycles[s["cycle"] - 1].step, lang=lang)


def step_of(value) -> int:
    """The 1-based step of a radio value (its step number), clamped to the lesson."""
    try:
        i = int(value)
    except (TypeError, ValueError):
        i = 1
    return min(max(i, 1), len(STEPS))


def step_data(value, lang: str = "en", live_model: bool = True, fmt: str = "float32") -> tuple:
    """(step number, card, figure or None, text HTML) of the step `value` in `lang`. live_model: step 2 asks
    the page's engine for the head's inputs (False: the sketch, as at build time); fmt: step 8's precision."""
    i = step_of(value)
    key = STEPS[i - 1].key
    live = live_head_inputs() if key == "head" and live_model else None
    return i, card(i, lang, live), figure(key, lang, live, fmt), run_text(key, lang)


def step_views(value, lang: str = "en", fmt: str = "float32", here: dict | None = None) -> tuple:
    """The callbacks' (radio, card, figure, text, open button, precision switch, its words, measure button) of
    step `value`; here: step 8's measurement made on this machine, if the tab made one."""
    from .lesson_measure import button

    lang = lang_of(lang)
    fmt = fmt if fmt in PRECISIONS else PRECISIONS[0]
    i, md, fig, text = step_data(value, lang, fmt=fmt)
    key = STEPS[i - 1].key
    if here and BY_KEY[key].figure == "hardware":
        fig = hardware_figure(lang, fmt, here)
    can_open = bool(BY_KEY[key].file and recorded_steps().get(key))
    hw = BY_KEY[key].figure == "hardware"
    return (gr.Radio(choices=choices(lang), value=i), md, gr.Plot(value=fig, visible=fig is not None),
            gr.HTML(value=text, visible=bool(text)), gr.Button(value=TEXT("open", lang), visible=can_open),
            gr.Radio(choices=precision_choices(lang), value=fmt, label=TEXT("prec.label", lang), visible=hw),
            gr.Markdown(value=precision_words(fmt, lang, here) if hw else "", visible=hw), button(lang, hw))


def choices(lang: str) -> list[tuple[str, int]]:
    return [(f"{i} · {TEXT('title.' + s.key, lang)}", i) for i, s in enumerate(STEPS, start=1)]


def shift(value, delta: int, lang: str = "en", fmt: str = "float32", here: dict | None = None) -> tuple:
    return step_views(step_of(value) + delta, lang, fmt, here)


def redraw(value, lang: str = "en", fmt: str = "float32", here: dict | None = None) -> tuple:
    """The language switch: the step again in `lang`, and the tab's own labels."""
    lang = lang_of(lang)
    return (*step_views(value, lang, fmt, here), gr.Tab(label=TEXT("tab", lang)), gr.Button(value=TEXT("prev", lang)),
            gr.Button(value=TEXT("next", lang)), gr.Button(value=TEXT("live", lang)), TEXT("intro", lang))


def open_in_decode(value, lang: str = "en", request: gr.Request = None) -> tuple:
    """The step's recorded run into the Decode tab's views, at the step's cycle (scrub, play and download work)."""
    from .traces import save_trace
    from .views import cycle_views, new_state, outputs, session_id, summary_views

    lang = lang_of(lang)
    i = step_of(value)
    step = STEPS[i - 1]
    s = recorded_steps().get(step.key) if step.file else None
    if not s:
        return outputs()
    path = os.path.join(LESSON_DIR, step.file)
    eagle, vanilla = trace(step.file)
    title = TEXT("opened", lang, i=i, title=TEXT(f"title.{step.key}", lang), k=s["cycle"], of=len(eagle.cycles))
    state = new_state(eagle, vanilla, title, source=path)
    views = {**cycle_views(state, s["cycle"], lang), **summary_views(state, lang)}
    return outputs(**views, state=state, status=title, download=save_trace(state, session_id(request)), examples=None)


def live_settings(value) -> tuple:
    """"Go live": (prompt, preset, compare, *each setting's value in settings.NAMES order) of step `value`:
    its prompt and the lesson's settings over the page's defaults (a sampled step keeps its temperature)."""
    from . import settings

    step = STEPS[step_of(value) - 1]
    values = {f.name: f.value for f in settings.FIELDS}
    values.update({k: v for k, v in step.settings.items() if k in values})
    return (step.prompt, PRESET, step.vanilla, *(values[n] for n in settings.NAMES))


# ------------------------------------------------------------------------------------- the tab
TO_DECODE = "() => { const tab = document.querySelector('button[role=tab]'); if (tab) tab.click(); }"


def tab(c: dict, lang: str = "en") -> None:
    """The Lesson tab's widgets, into `c` by name (called inside layout.build's Blocks)."""
    with gr.Tab(TEXT("tab", lang), elem_id="eg-lesson-tab") as c["lesson_tab"]:
        c["lesson_intro"] = gr.Markdown(TEXT("intro", lang))
        with gr.Row():
            c["lesson_prev"] = gr.Button(TEXT("prev", lang), size="sm", min_width=110, scale=0, elem_id="eg-lesson-prev")
            c["lesson_step"] = gr.Radio(choices(lang), value=1, show_label=False, container=False, scale=6,
                                        elem_id="eg-lesson-steps")
            c["lesson_next"] = gr.Button(TEXT("next", lang), size="sm", min_width=110, scale=0, elem_id="eg-lesson-next")
        _, first, fig, text = step_data(1, lang, live_model=False)
        c["lesson_card"] = gr.Markdown(first, elem_id="eg-lesson-card", elem_classes="eg-learn")
        c["lesson_precision"] = gr.Radio(precision_choices(lang), value=PRECISIONS[0], label=TEXT("prec.label", lang),
                                         visible=False, elem_id="eg-lesson-precision")
        c["lesson_precision_text"] = gr.Markdown("", visible=False, elem_id="eg-lesson-precision-text",
                                                 elem_classes="eg-learn")
        c["lesson_measure"] = gr.Button(TEXT("prec.measure", lang), size="sm", visible=False, elem_id="eg-lesson-measure")
        c["lesson_here"] = gr.State(None)  # step 8's measurement made on this machine, once the button ran
        c["lesson_figure"] = gr.Plot(fig, show_label=False, label="lesson figure", elem_id="eg-lesson-figure",
                                     visible=fig is not None)
        c["lesson_text"] = gr.HTML(text, elem_id="eg-lesson-text", visible=bool(text))
        with gr.Row():
            c["lesson_open"] = gr.Button(TEXT("open", lang), size="sm", elem_id="eg-lesson-open", visible=False)
            c["lesson_live"] = gr.Button(TEXT("live", lang), size="sm", variant="primary", elem_id="eg-lesson-live")


def wire(page) -> None:
    """The tab's events: a step picked, previous / next, the language switch, opening the trace, going live."""
    from . import settings

    c = page.c
    views = [c["lesson_step"], c["lesson_card"], c["lesson_figure"], c["lesson_text"], c["lesson_open"],
             c["lesson_precision"], c["lesson_precision_text"], c["lesson_measure"]]
    hidden = dict(api_visibility="private", show_progress="hidden")
    ins = [c["lesson_step"], c["lang"], c["lesson_precision"], c["lesson_here"]]
    c["lesson_step"].input(step_views, ins, views, **hidden)
    c["lesson_prev"].click(lambda v, lang, f, h: shift(v, -1, lang, f, h), ins, views, **hidden)
    c["lesson_next"].click(lambda v, lang, f, h: shift(v, +1, lang, f, h), ins, views, **hidden)
    step8 = [c["lesson_figure"], c["lesson_precision_text"]]
    c["lesson_precision"].input(precision_views, [c["lesson_precision"], c["lang"], c["lesson_here"]], step8, **hidden)
    c["lesson_measure"].click(on_measure_here, [c["lesson_precision"], c["lang"]], [c["lesson_here"]] + step8,
                              api_visibility="private")
    c["lang"].change(redraw, ins,
                     views + [c["lesson_tab"], c["lesson_prev"], c["lesson_next"], c["lesson_live"], c["lesson_intro"]],
                     **hidden)
    c["lesson_open"].click(open_in_decode, [c["lesson_step"], c["lang"]], page.all, **hidden).then(
        None, js=TO_DECODE, **hidden)  # then show the Decode tab (the first tab)
    live_out = [c["prompt"], c["preset"], c["compare"]] + [page.settings[n] for n in settings.NAMES]
    c["lesson_live"].click(live_settings, [c["lesson_step"]], live_out, **hidden).then(None, js=TO_DECODE, **hidden)
