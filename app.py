"""Watch EAGLE decode, step by step, beside vanilla decoding.  Run: python app.py

The app is the package eagle_app/, one module a job (docs/app.md): layout.py builds the page,
wiring.py wires its events to callbacks/ (decoding: Generate / Step / Stop; page: load, status,
presets), views.py and traces.py. This file builds the page and launches it. The model is
read-only and shared (eagle_app.model.MODEL, loaded on the engine thread at start); everything
per user lives in a gr.State dict; decoding runs through eagle_core only, figures come from viz/.
"""
from __future__ import annotations

import threading
import time

from eagle_app.environment_check import stop_on_bad_settings

stop_on_bad_settings(serve=__name__ == "__main__")  # a bad environment variable: its one line, no traceback

from eagle_app import zerogpu  # noqa: E402,F401  (first of the app: on ZeroGPU it imports `spaces` before CUDA is touched)
from eagle_app.launch import LAUNCH, queue  # noqa: E402
from eagle_app.layout import build  # noqa: E402
from eagle_app.model import MODEL  # noqa: E402
from eagle_app.sessions import start_pruning  # noqa: E402

T_START = time.perf_counter()
if __name__ == "__main__":
    MODEL.start()  # load while the page is built: it is usable at once, replaying an example trace

page = build()
demo = queue(page.demo)
ALL = page.all  # the components of eagle_app.views.OUT, in order
settings_in = page.settings_in  # [prompt, *the settings' widgets in eagle_app.settings.NAMES order]

if __name__ == "__main__":
    threading.Thread(target=lambda: MODEL.ready.wait() and print(
        f"* Model ready {time.perf_counter() - T_START:.1f} s after start: {MODEL.status_plain()}", flush=True),
        daemon=True).start()
    start_pruning(demo)  # Gradio's sessions of API clients and long-closed tabs forgotten (eagle_app/sessions.py)
    demo.launch(share=False, **LAUNCH)
