"""How the page is served: the queue's settings and the launch() settings (shared with the tests)."""
from __future__ import annotations

import re

import gradio as gr
from starlette.middleware import Middleware

from viz.examples import TRACE_DIR as EXAMPLE_DIR
from viz.traces import MAX_TRACE_BYTES

from .frontend import EarlyScript
from .i18n import gradio_i18n
from .layout import CSS, THEME


def queue(demo: gr.Blocks) -> gr.Blocks:
    demo.queue(max_size=32, default_concurrency_limit=8)
    guard_inputs(demo)
    # Gradio's queue looks for new events every 1 ms and for progress every 10 ms, idle or busy: hundreds
    # of wake-ups a second on its event-loop thread, which on a 2-core machine takes turns with the
    # decoder's two OpenMP threads. Polling every 50 ms / 100 ms wakes it a few dozen times a second; a
    # queued event starts at most 50 ms later (docs/app.md, "Gradio's queue polling"). (Attributes of
    # gradio 6.31's Queue, pinned in requirements.txt; a version without them keeps its own polling.)
    for attr, seconds in (("sleep_when_free", 0.05), ("progress_update_sleep_when_free", 0.1)):
        if hasattr(demo._queue, attr):
            setattr(demo._queue, attr, seconds)
    return demo


def guard_inputs(demo: gr.Blocks) -> None:
    """Every malformed API call gets a message that says what was wrong, and the server log no
    traceback. Gradio checks an event's values before any callback runs: too few of them was a
    ValueError and a value a widget could not read a ComponentProcessingError, both answered
    {"error": null} (no message unless show_error) and logged with a traceback; an out-of-range or
    unknown choice was a message with a traceback. Here all of them become a gr.Error without one.
    (Wraps two methods of gradio 6.31's Blocks, pinned in requirements.txt.)"""
    check, prepare = demo.validate_inputs, demo.preprocess_data

    def validate_inputs(block_fn, inputs):
        try:
            return check(block_fn, inputs)
        except Exception:
            names = ["the page's state (null)" if isinstance(b, gr.State) else _label(b) for b in block_fn.inputs]
            raise gr.Error(f"/{block_fn.api_name or block_fn.name} takes {len(names)} values ({'; '.join(names)}); "
                           f"got {len(inputs)}.", print_exception=False) from None

    async def preprocess_data(block_fn, inputs, state, explicit_call=False):
        try:
            return await prepare(block_fn, inputs, state, explicit_call)
        except Exception as e:
            raise gr.Error(_input_problem(block_fn, e), print_exception=False) from None

    demo.validate_inputs, demo.preprocess_data = validate_inputs, preprocess_data


def _label(block) -> str:
    """A widget's English label (a translated one is an I18nData holding its English key)."""
    label = getattr(block, "label", None)
    return str(getattr(label, "key", label) or type(block).__name__.lower())


def _input_problem(block_fn, e: Exception) -> str:
    """A one-line reason: which input (by its label) and what was wrong with its value."""
    text = getattr(e, "message", None) or str(e)
    where = re.search(r"at index (\d+)", text)
    original = re.search(r"Original error: (.*)", text, re.S)
    if where:
        label = _label(block_fn.inputs[int(where.group(1))])
        why = original.group(1).strip().splitlines()[0] if original else text.splitlines()[-1]
        return f"/{block_fn.api_name}: the value for “{label}” could not be read ({why})."
    return f"/{block_fn.api_name}: {text.strip().strip(chr(34))}"


# launch() settings shared with the tests: uploads capped at the trace limit (Gradio refuses larger ones
# before they are stored), the shipped example traces downloadable from any working directory, and the
# page served with the script that slows Gradio's 60-a-second status-tracker frames (frontend.py), and the
# page's Chinese for Gradio's i18n (eagle_app/i18n.py)
LAUNCH = dict(theme=THEME, css=CSS, max_file_size=MAX_TRACE_BYTES, allowed_paths=[EXAMPLE_DIR],
              app_kwargs={"middleware": [Middleware(EarlyScript)]}, i18n=gradio_i18n())
