"""The hardware lesson panel ("Why tree size depends on the hardware"): a button that times this
machine (eagle_core.machine.measure) while holding the decode slot, on the engine thread,
with a progress bar; then the predicted speedup per tree, measured here vs a flat-verification
(GPU) illustration. Before a measurement it shows the recorded one from the docs, labelled so.
Its words are viz.hardware.TEXT, in the tab's language: the accordion's title and the button through
Gradio's i18n (eagle_app/i18n.py CHINESE), the rest drawn by the callbacks (`redraw` on the language switch,
from this tab's last measurement, kept in a gr.State)."""
from __future__ import annotations

import json
from concurrent.futures import wait as wait_futures

import gradio as gr
import torch

from eagle_core.machine import RECORDED, lesson, load_tau_table, measure
from viz.hardware import TEXT, hardware_figure, hardware_markdown

from .callbacks.decoding import LINE
from .tree_advice import advice, recorded_advice
from .i18n import lang_of, translatable
from . import zerogpu
from .model import MODEL, path_note
from .engine_thread import ENGINE_THREAD

LANG = "en"
SLOT_S = 60.0  # how long the measurement holds the decode slot, for the line's estimates


def recorded_views(lang: str = LANG, path: str = RECORDED):
    """(figure, table Markdown, status) of the recorded measurement, or a blank figure without one."""
    T = TEXT.table(lang)
    try:
        with open(path, encoding="utf-8") as f:
            m = json.load(f)
        table = load_tau_table()
    except (OSError, ValueError, KeyError):
        return hardware_figure(None, lang=lang), "", T["none_yet"]
    res = lesson(m, table)
    when = ", ".join(x for x in (m.get("hardware", m["device"]), m.get("date"), f"`{m['command']}`" if m.get("command")
                                  else None) if x)
    # ZeroGPU lends the GPU to one decorated call at a time (zerogpu.py): no measuring there, only the record
    return (hardware_figure(res, m.get("hardware", m["device"]), lang), hardware_markdown(m, res, table, lang),
            T["zerogpu" if zerogpu.ZERO else "recorded"].format(when=when) + _path_here(lang))


def _path_here(lang: str = LANG) -> str:
    """The loaded engine's fallback line (model.path_note), or "" (no engine yet, or its own kernels)."""
    engine = MODEL.engine
    return path_note(engine.target, lang) if engine is not None else ""


def _timed(engine, trees, state):
    """On ENGINE_THREAD: the measurement, with the engine thread's torch thread count."""
    m = measure(engine.target, engine.drafter.head, engine.draft_vocab, trees,
                progress=lambda f, what: state.update(f=f, what=what))
    m["threads"] = torch.get_num_threads()
    return m


def measure_machine(lang: str = LANG, progress=gr.Progress()):
    """The button: wait for the model and the decode slot, time this machine, draw the lesson.
    -> (figure, table, status, the measurement or None)."""
    T = TEXT.table(lang)
    MODEL.start()
    while not MODEL.ready.wait(0.5):
        progress(0.0, desc=MODEL.status_plain(lang))
    engine = MODEL.engine
    if engine is None or engine.drafter is None:
        fig, md, _ = recorded_views(lang)
        return fig, md, T["no_model"].format(error=MODEL.error or "no EAGLE head"), None
    table = load_tau_table()
    ticket = LINE.join(int(SLOT_S * LINE.rate))
    try:
        while not LINE.wait(ticket, 0.25):
            progress(0.0, desc=T["waiting"])
        state = {"f": 0.0, "what": ""}
        progress(0.0, desc=T["measuring"])
        job = ENGINE_THREAD.submit(_timed, engine, table["trees"], state)
        while not wait_futures([job], timeout=0.25).done:
            progress(state["f"], desc=f"{T['measuring']}: {state['what']}")
        m = job.result()
    except Exception as e:  # shown in the panel's status line, never a traceback in the page
        fig, md, _ = recorded_views(lang)
        return fig, md, T["failed"].format(error=f"{type(e).__name__}: {e}"), None
    finally:
        LINE.leave(ticket)
    return (*measured_views(m, table, lang), m)


def measured_views(m: dict, table: dict, lang: str = LANG):
    """(figure, table Markdown, status) of a measurement made here."""
    res = lesson(m, table)
    status = TEXT("done", lang, seconds=m["seconds"], device=m["hardware"], threads=m["threads"], target=m["target"])
    status += _path_here(lang)  # a measurement on a fallback path is slower: the panel says which path it timed
    return hardware_figure(res, m["hardware"], lang), hardware_markdown(m, res, table, lang), status


def on_measure(lang: str = LANG, progress=gr.Progress()):
    return measure_machine(lang_of(lang), progress)


def redraw(lang: str, measured: dict | None):
    """The language switch (and the page load): the panel's texts again in `lang`, with this tab's
    own measurement if it made one, else the recorded one."""
    lang = lang_of(lang)
    views = measured_views(measured, load_tau_table(), lang) if measured else recorded_views(lang)
    return (TEXT("intro", lang), TEXT("why", lang), *views)


def panel(c: dict, lang: str = LANG) -> None:
    """The panel's widgets, into `c` by name (called inside layout.build's Blocks)."""
    fig, md, status = recorded_views(lang)
    with gr.Accordion(translatable(TEXT("panel")), open=False, elem_id="eg-hardware"):
        c["hw_intro"] = gr.Markdown(TEXT("intro", lang))
        c["hw_btn"] = gr.Button(translatable(TEXT("button")), variant="primary", elem_id="eg-hw-measure", visible=not zerogpu.ZERO)
        c["hw_status"] = gr.Markdown(status, elem_id="eg-hw-status")
        c["hw_plot"] = gr.Plot(fig, show_label=False, label=TEXT("panel"), elem_id="eg-hw-plot")
        c["hw_why"] = gr.Markdown(TEXT("why", lang))
        c["hw_table"] = gr.Markdown(md, elem_id="eg-hw-table")
        c["hw_run"] = gr.State(None)  # this tab's last measurement, for redrawing in another language


def wire(c: dict) -> None:
    """The button's event: queued with the decode events (the slot itself is decoding.LINE); the
    language switch redraws the panel (`redraw`)."""
    c["hw_btn"].click(on_measure, c["lang"], [c["hw_plot"], c["hw_table"], c["hw_status"], c["hw_run"]],
                      concurrency_limit=16, concurrency_id="decode", api_visibility="private")
    c["lang"].change(redraw, [c["lang"], c["hw_run"]],
                     [c["hw_intro"], c["hw_why"], c["hw_plot"], c["hw_table"], c["hw_status"]],
                     api_visibility="private")
    if "tree_advice" in c:  # under the tree settings: which trees pay, from this measurement or the recorded one
        c["hw_run"].change(tree_advice, [c["lang"], c["hw_run"]], c["tree_advice"], api_visibility="private")
        c["lang"].change(tree_advice, [c["lang"], c["hw_run"]], c["tree_advice"], api_visibility="private")


def tree_advice(lang: str, measured: dict | None) -> str:
    """The tree settings' note in `lang`: from this tab's measurement when it made one, else the recorded one."""
    lang = lang_of(lang)
    return advice(measured, load_tau_table(), lang) if measured else recorded_advice(lang)
