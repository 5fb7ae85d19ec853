"""The model picker: the public target / head pairs of eagle_app/public_models.py, offered where torch sees a
CUDA GPU (hidden on a CPU and on ZeroGPU; on a shared Space only when its operator allows it:
public_models.picker_shown). A switch changes the model for every user of the app, so the button says so,
waits for the decode slot (a running decode finishes first), lets the old model go, and shows the
load's progress. A gated target without a token is refused before anything is unloaded.
"""
from __future__ import annotations

import math
import time

import gradio as gr

from eagle_core.target.hub import GATED_HINT

from . import public_models
from .callbacks.decoding import LINE
from .i18n import APP_TEXT, translatable
from .model import MODEL


def expected_load_s(pair: public_models.Pair) -> float:
    """A rough guess of a first load (download at ~100 MB/s, then onto the GPU), for the progress bar only."""
    return 20 + 12 * pair.weights_gb


def describe(key: str) -> str:
    """The picked pair's facts, as the picker shows them under the list."""
    p = public_models.BY_KEY.get(key)
    if p is None:
        return ""
    heads = ", ".join(h for h in (p.head, p.head3) if h) or "the shipped heads"
    lines = [f"**{p.target or 'SmolLM2-135M-Instruct (embedded)'}** with {heads} · ~{p.weights_gb:g} GB of weights"
             + (" · gated: needs HF_TOKEN" if p.gated else "")
             + (f" · needs {' and '.join(p.needs)} (requirements-extra.txt)" if p.needs else ""),
             f"Checked: {p.facts}.", "Sources: " + "; ".join(p.sources)]
    if p.rope_source:
        rope = f"{p.rope_theta:g}" if p.rope_theta else "the head's config"
        lines.append(f"RoPE base used: {rope} ({p.rope_source}).")
    return "\n\n".join(lines)


def load_pair(key: str, lang: str = "en", progress=gr.Progress()):
    """The button: yields (model line, picker status) until the picked pair is loaded, or says why not."""
    lang = lang if lang in ("en", "zh") else "en"
    pair = public_models.BY_KEY.get(key)
    if pair is None:
        yield gr.skip(), APP_TEXT("pick.unknown", lang, pair=key)
        return
    if not public_models.picker_shown():  # checked here too: the page hides it, a caller of the API may not
        yield gr.skip(), APP_TEXT("pick.off", lang)
        return
    missing = public_models.missing_packages(pair)
    if missing:  # Vicuna's SentencePiece tokenizer: said before a 13 GB download
        yield gr.skip(), APP_TEXT("pick.failed", lang, pair=pair.key, err=f"its tokenizer needs {' and '.join(missing)} "
                             "(pip install -r requirements-extra.txt). The current model stays")
        return
    if public_models.gated_without_token(pair):
        yield gr.skip(), APP_TEXT("pick.gated", lang, target=pair.target, hint=GATED_HINT)
        return
    MODEL.start()
    while not MODEL.ready.wait(0.5):  # the first load, still under way
        yield MODEL.status(lang), APP_TEXT("status.waiting_model", lang)
    ticket = LINE.join(1)
    try:
        while not LINE.wait(ticket, 0.25):
            progress(0.0, desc=APP_TEXT("pick.waiting", lang))
            yield gr.skip(), APP_TEXT("pick.waiting", lang)
        MODEL.switch(pair.target, pair.head, pair.head3, pair.layer_ids, pair.methods, pair.rope_theta)
        t0 = time.perf_counter()
        while not MODEL.ready.wait(0.5):
            s = time.perf_counter() - t0
            line = APP_TEXT("pick.loading", lang, pair=pair.key, s=s)
            progress(1 - math.exp(-s / expected_load_s(pair)), desc=line)
            yield MODEL.status(lang), line
    finally:
        LINE.leave(ticket)
    if MODEL.engine is None:
        yield MODEL.status(lang), APP_TEXT("pick.failed", lang, pair=pair.key, err=MODEL.error)
    else:
        yield MODEL.status(lang), APP_TEXT("pick.done", lang, pair=pair.key, s=MODEL.load_s)


def panel(c: dict) -> None:
    """The picker's widgets, into `c` by name (inside layout.build's Blocks); hidden unless public_models.picker_shown()."""
    shown = public_models.picker_shown()
    with gr.Accordion(translatable("Model (GPU): public target and EAGLE head pairs"), open=False, visible=shown,
                      elem_id="eg-picker") as c["pick_box"]:
        gr.Markdown(translatable("Loading a pair changes the model for **everyone** using this app; a running decode "
                      "finishes first. The first load downloads the weights (4-16 GB)."))
        c["pick"] = gr.Dropdown([p.key for p in public_models.PAIRS], value=public_models.DEFAULT.key, label=translatable("Pair"),
                                elem_id="eg-pick")
        c["pick_facts"] = gr.Markdown(describe(public_models.DEFAULT.key))
        c["pick_btn"] = gr.Button(translatable("Load for everyone"), elem_id="eg-pick-load")
        c["pick_status"] = gr.Markdown(elem_id="eg-pick-status")


def wire(c: dict) -> None:
    """The picker's events: the facts follow the choice; the load is queued with the decode events."""
    c["pick"].change(describe, c["pick"], c["pick_facts"], api_visibility="private")
    c["pick_btn"].click(load_pair, [c["pick"], c["lang"]], [c["model"], c["pick_status"]], concurrency_limit=16,
                        concurrency_id="decode", api_visibility="private")
