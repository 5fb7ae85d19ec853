"""Regenerate assets/traces/, the example traces the app ships (run again once a trained head
ships in assets/). Real runs of the default model and head only (or EAGLE_APP_MODEL /
EAGLE_APP_HEAD); the hand-made illustration run is a test fixture (tests/illustration.py).

    python scripts/make_example_traces.py
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from eagle_app.model import model_from_env  # noqa: E402
from eagle_app.worker import Worker  # noqa: E402
from eagle_core import DecodeSettings  # noqa: E402

EXAMPLE_RUNS = (  # (file name, title, example label, settings)
    ("01-code-greedy.json", "Code, EAGLE-2 greedy", "code", dict(method="eagle2", max_new_tokens=40)),
    ("02-story-sampled.json", "Story, EAGLE-2 sampled (T=0.8)", "writing",
     dict(method="eagle2", max_new_tokens=40, temperature=0.8, top_p=0.95, seed=1)),
    ("03-chinese-eagle1.json", "Chinese, EAGLE-1 static tree", "Chinese", dict(method="eagle1", max_new_tokens=32)),
)


def start_engine():
    """The app's engine (the default model and heads, or EAGLE_APP_MODEL / EAGLE_APP_HEAD), loaded."""
    holder = model_from_env().start()
    holder.ready.wait()
    if holder.engine is None:
        raise SystemExit(holder.error)
    return holder.engine


def decode_runs(engine, prompt: str, settings: DecodeSettings, compare: bool = True) -> dict:
    """{"eagle": Run, "vanilla": Run} as the app records them (through its Worker: byte tokens readable)."""
    w = Worker(engine, prompt, settings, compare=compare).start()
    w.wait()
    runs = {}
    while not w.events.empty():
        what, kind, payload = w.events.get()
        if what == "done":
            runs[kind] = payload
    return runs


def make_example_traces(out_dir: str | None = None) -> None:
    """Regenerate assets/traces/ (run again once a trained head ships in assets/)."""
    from viz.examples import TRACE_DIR, example_prompts
    from viz.traces import bundle_to_json

    out_dir = out_dir or TRACE_DIR
    os.makedirs(out_dir, exist_ok=True)
    engine = start_engine()
    prompts = dict(example_prompts())
    for name, title, label, kw in EXAMPLE_RUNS:
        runs = decode_runs(engine, prompts[label], DecodeSettings(**kw))
        head = engine.head_name
        with open(os.path.join(out_dir, name), "w", encoding="utf-8") as f:
            f.write(bundle_to_json(runs.get("eagle"), runs.get("vanilla"), title=f"{title} · head: {head}"))
        print(name, {k: round(r.summary.tau, 2) for k, r in runs.items()})


if __name__ == "__main__":
    make_example_traces(sys.argv[1] if len(sys.argv) > 1 else None)