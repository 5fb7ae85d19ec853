"""How the page is served: the queue's settings and the launch() settings (shared with the tests)."""
from __future__ import annotations

import gradio as gr
from starlette.middleware import Middleware

from viz.examples import TRACE_DIR as EXAMPLE_DIR
from viz.traces import MAX_TRACE_BYTES

from .frontend import EarlyScript
from .i18n import gradio_i18n
from .layout import CSS, THEME


def queue(demo: gr.Blocks) -> gr.Blocks:
    demo.queue(max_size=32, default_concurrency_limit=8)
    # Gradio's queue looks for new events every 1 ms and for progress every 10 ms, idle or busy: measured
    # ~850 wake-ups a second and 7% of a core on the idle server, all on its event-loop thread, which on a
    # 2-core machine takes turns with the decoder's two OpenMP threads. Polling every 50 ms / 100 ms: 28
    # wake-ups a second and 1%; a queued event starts at most 50 ms later. (Attributes of gradio 6.31's
    # Queue, pinned in requirements.txt; a version without them keeps its own polling.)
    for attr, seconds in (("sleep_when_free", 0.05), ("progress_update_sleep_when_free", 0.1)):
        if hasattr(demo._queue, attr):
            setattr(demo._queue, attr, seconds)
    return demo


# launch() settings shared with the tests: uploads capped at the trace limit (Gradio refuses larger ones
# before they are stored), the shipped example traces downloadable from any working directory, and the
# page served with the script that slows Gradio's 60-a-second status-tracker frames (frontend.py), and the
# page's Chinese for Gradio's i18n (eagle_app/i18n.py)
LAUNCH = dict(theme=THEME, css=CSS, max_file_size=MAX_TRACE_BYTES, allowed_paths=[EXAMPLE_DIR],
              app_kwargs={"middleware": [Middleware(EarlyScript)]}, i18n=gradio_i18n())
