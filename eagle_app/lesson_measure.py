"""Lesson step 8's "measure here" (issue 54, item 6): both weight formats timed on the machine the page runs on,
the page's own engine in float32 and the same model loaded again in the GGUF's blocks where they run here (else
the step says why), holding the decode slot on the engine thread as the hardware panel does (eagle_app/hardware.py).
Step 8's figure and words then read this measurement instead of the record (lesson.py keeps it in a gr.State).
Only t(k) and the head's steps are timed here: the same prompt's tokens/s come from the record."""
from __future__ import annotations

import time
from concurrent.futures import wait as wait_futures

import gradio as gr

from eagle_core.machine import load_tau_table, measure
from eagle_core.machine.hardware import FORMATS, format_unavailable, load_in_format, to_json, with_formats
from viz.style import md_text

from .lesson_text import TEXT

BUDGET_S = 30.0  # per format: measure() stops its rounds over k early past this (a busy machine)
SLOT_S = 90.0  # how long the two measurements hold the decode slot, for the line's estimates


def timed(engine, trees, fmt: str, state: dict) -> dict:
    """On the engine thread: format `fmt`'s entry of a record measured here, or {"unavailable": why}."""
    import torch

    why = format_unavailable(engine.target, fmt)
    if why:
        return {"unavailable": why}
    own = getattr(engine.target, "weight_format", "float32") == fmt
    target = engine.target if own else load_in_format(engine.target, fmt)
    m = measure(target, engine.drafter.head, engine.draft_vocab, trees, budget_s=BUDGET_S,
                progress=lambda f, what: state.update(f=f, what=what))
    m["threads"] = torch.get_num_threads()
    return to_json(m)


def measure_here(lang: str = "en", progress=None) -> tuple[dict | None, str]:
    """Wait for the model and the decode slot, time every format here -> (the record made here, or None; status)."""
    from .callbacks.decoding import LINE
    from .engine_thread import ENGINE_THREAD
    from .model import MODEL

    progress = progress or (lambda *a, **k: None)
    MODEL.start()
    while not MODEL.ready.wait(0.5):
        progress(0.0, desc=MODEL.status_plain(lang))
    engine = MODEL.engine
    if engine is None or engine.drafter is None:
        return None, TEXT("prec.no_model", lang, error=md_text(MODEL.error or "no EAGLE head"))
    trees, t0 = load_tau_table()["trees"], time.perf_counter()
    ticket = LINE.join(int(SLOT_S * LINE.rate))
    entries = {}
    try:
        while not LINE.wait(ticket, 0.25):
            progress(0.0, desc=TEXT("prec.waiting", lang))
        for i, fmt in enumerate(FORMATS):
            state = {"f": 0.0, "what": ""}
            job = ENGINE_THREAD.submit(timed, engine, trees, fmt, state)
            while not wait_futures([job], timeout=0.25).done:
                progress((i + state["f"]) / len(FORMATS), desc=f"{fmt}: {state['what']}")
            entries[fmt] = job.result()
    except Exception as e:  # a status line in the step, never a traceback in the page
        return None, TEXT("prec.failed", lang, error=md_text(f"{type(e).__name__}: {e}"))
    finally:
        LINE.leave(ticket)
    here = with_formats({**entries["float32"], "format": "float32", "seconds_here": time.perf_counter() - t0},
                        {f: e for f, e in entries.items() if f != "float32"})
    return here, here_line(here, lang)


def here_line(here: dict, lang: str) -> str:
    """What a measurement made here says about itself, above step 8's words."""
    return TEXT("prec.here", lang, machine=md_text(here.get("hardware", "")), threads=here.get("threads", "—"),
                seconds=f"{here.get('seconds_here', 0):.0f}")


def button(lang: str, visible: bool) -> gr.Button:
    from . import zerogpu

    # ZeroGPU lends the GPU per decorated call: no timing of the machine there, as in the hardware panel
    return gr.Button(value=TEXT("prec.measure", lang), visible=visible and not zerogpu.ZERO)
