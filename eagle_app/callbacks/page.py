"""The page's own events: page load (the first example trace), the model's status line, presets."""
from __future__ import annotations

import gradio as gr

from eagle_core import PRESETS
from viz.examples import example_traces

from ..model import MODEL
from ..traces import load_example
from ..views import OUT, outputs


def on_page_load(request: gr.Request = None):
    """The first example trace, and the model's status line as of now."""
    MODEL.start()
    first = next(iter(example_traces()), None)
    out = load_example(first, request) if first else outputs()
    return out[:OUT.index("model")] + (MODEL.status(),) + out[OUT.index("model") + 1:]


def model_status():
    return MODEL.status(), gr.Timer(active=not MODEL.ready.is_set())


def apply_preset(name):
    p = PRESETS[name]
    return p["depth"], p["tree_top_k"], p["total_tokens"]
