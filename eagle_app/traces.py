"""The Traces tab's callbacks: save this tab's run for download, load one back (an upload or a
shipped example) with every view working and no model. Downloads are one file per tab in
TRACE_DIR (this process's folder, removed at exit); an upload is deleted once read.
"""
from __future__ import annotations

import os
import time

import gradio as gr

import viz
from viz.examples import example_traces, load_trace_file
from viz.style import md_text

from .tempfiles import trace_dir
from .views import all_views, new_state, outputs, session_id

TRACE_DIR = trace_dir()


def tab_folder(sid: str) -> str:
    """The folder holding this tab's download (named from the session id, alphanumerics only)."""
    return os.path.join(TRACE_DIR, "".join(ch for ch in sid if ch.isalnum())[:40] or "tab")


def save_trace(state: dict, sid: str):
    """The download button for this tab's run: the shipped file itself for an example, else one
    file per tab in TRACE_DIR (the previous one removed; the folder goes when the tab closes)."""
    if state["eagle"] is None and state["vanilla"] is None:
        return gr.DownloadButton(value=None, interactive=False)
    if state.get("source"):
        return gr.DownloadButton(value=state["source"], interactive=True)
    folder = tab_folder(sid)
    os.makedirs(folder, exist_ok=True)
    for old in os.listdir(folder):
        os.remove(os.path.join(folder, old))
    path = os.path.join(folder, f"eagle-trace-{time.strftime('%Y%m%d-%H%M%S')}.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(viz.bundle_to_json(state["eagle"], state["vanilla"], title=state.get("title", "")))
    return gr.DownloadButton(value=path, interactive=True)


def remove_tab_folder(sid: str) -> None:
    """A closed tab: its download goes, and its folder."""
    folder = tab_folder(sid)
    if os.path.isdir(folder):
        for name in os.listdir(folder):
            os.remove(os.path.join(folder, name))
        os.rmdir(folder)


def load_trace(path, title="", source=None, request: gr.Request = None) -> tuple:
    """Load a saved trace (upload or shipped example) into this tab: every view, no model needed.
    An uploaded file is deleted once read (Gradio keeps its own copy only until its cache expires)."""
    if not path:
        return outputs()
    try:
        eagle, vanilla = load_trace_file(path)
    except (ValueError, OSError) as e:
        gr.Warning(f"Could not load this trace: {e}", title="Bad trace file")
        return outputs(status=f"⚠ Could not load this trace: {md_text(e)}", upload=None)
    finally:
        if source is None:
            _remove_upload(path)
    state = new_state(eagle, vanilla, title or os.path.basename(path), source)
    s = (eagle or vanilla).summary
    status = (f"Replaying **{md_text(state['title'])}** — {md_text(s.method)}, {md_text(s.model or 'unknown model')}, "
              f"{len(state['cycles'])} cycles. No model needed to explore it.")
    return outputs(**all_views(state), state=state, status=status, download=save_trace(state, session_id(request)),
                   examples=title if source else None, upload=None if source is None else gr.skip())


def _remove_upload(path: str) -> None:
    from gradio.utils import get_upload_folder

    upload_root = os.path.realpath(get_upload_folder())
    real = os.path.realpath(path)
    if real.startswith(upload_root + os.sep) and os.path.isfile(real):
        os.remove(real)


def upload_trace(path, request: gr.Request = None):
    return load_trace(path, request=request)


def load_example(name, request: gr.Request = None):
    path = example_traces().get(name)
    return load_trace(path, name, source=path, request=request) if path else outputs()
