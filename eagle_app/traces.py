"""The Traces tab's callbacks: save this tab's run for download, load one back (an upload or a
shipped example) with every view working and no model. Downloads are one file per tab in
TRACE_DIR (this process's folder, removed at exit); an upload is deleted once read.

Temporary files stay bounded: Gradio serves a download from its own cache (GRADIO_TEMP_DIR, a
copy per file content), so a tab's new download removes both its previous file and Gradio's copy
of it, and a closed tab removes both. Tabs that never close (API clients: no unload event) lose
their folder after KEEP_S or when more than KEEP_TABS tabs have one (the oldest first).
"""
from __future__ import annotations

import os
import shutil
import time

import gradio as gr

import viz
from viz.examples import example_traces, load_trace_file
from viz.style import md_text

from .i18n import APP_TEXT, method_name, trace_title
from .tempfiles import trace_dir
from .views import all_views, new_state, outputs, session_id

TRACE_DIR = trace_dir()
KEEP_S = 3600.0  # a tab's download lives this long without a new run: Gradio's own cache age (layout.py delete_cache)
KEEP_TABS = 256  # and at most this many tabs have one


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
    remove_tab_folder(sid)
    prune_tab_folders()
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"eagle-trace-{time.strftime('%Y%m%d-%H%M%S')}.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(viz.bundle_to_json(state["eagle"], state["vanilla"], title=state.get("title", "")))
    return gr.DownloadButton(value=path, interactive=True)


def remove_tab_folder(sid: str) -> None:
    """A closed tab (or its next download): its download goes, Gradio's cached copy of it, and its folder."""
    _remove_folder(tab_folder(sid))


def _remove_folder(folder: str) -> None:
    """(Two tabs may prune at once: a file another call removed first is no error.)"""
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        try:
            _remove_cached_copy(os.path.join(folder, name))
        except OSError:
            pass
    shutil.rmtree(folder, ignore_errors=True)


def _remove_cached_copy(path: str) -> None:
    """Gradio's copy of a served file: <its cache>/<hash of the content>/<name> (gradio 6.31's
    processing_utils.save_file_to_cache, pinned in requirements.txt)."""
    from gradio.processing_utils import hash_file
    from gradio.utils import get_upload_folder

    copy_dir = os.path.join(get_upload_folder(), hash_file(path))
    copy = os.path.join(copy_dir, os.path.basename(path))
    if os.path.isfile(copy):
        os.remove(copy)
        if not os.listdir(copy_dir):
            os.rmdir(copy_dir)


def prune_tab_folders(now: float | None = None) -> None:
    """Folders of tabs that made no download for KEEP_S, and the oldest beyond KEEP_TABS, are removed."""
    now = time.time() if now is None else now
    folders = []
    for name in os.listdir(TRACE_DIR):
        try:
            folders.append((os.path.getmtime(os.path.join(TRACE_DIR, name)), os.path.join(TRACE_DIR, name)))
        except OSError:  # removed meanwhile
            pass
    folders.sort()
    for i, (mtime, path) in enumerate(folders):
        if now - mtime > KEEP_S or len(folders) - i > KEEP_TABS:
            _remove_folder(path)


def load_trace(path, title="", source=None, request: gr.Request = None, lang: str = "en") -> tuple:
    """Load a saved trace (upload or shipped example) into this tab: every view, no model needed.
    An uploaded file is deleted once read (Gradio keeps its own copy only until its cache expires)."""
    if not path:
        return outputs()
    try:
        eagle, vanilla = load_trace_file(path)
    except (ValueError, OSError) as e:
        gr.Warning(APP_TEXT("trace.bad", lang, err=e), title=APP_TEXT("trace.bad_title", lang))
        return outputs(status="⚠ " + APP_TEXT("trace.bad", lang, err=md_text(e)), upload=None)
    finally:
        if source is None:
            _remove_upload(path)
    state = new_state(eagle, vanilla, title or os.path.basename(path), source)
    status = replay_status(state, lang)
    return outputs(**all_views(state, lang), state=state, status=status, download=save_trace(state, session_id(request)),
                   examples=title if source else None, upload=None if source is None else gr.skip())


def replay_status(state: dict, lang: str = "en") -> str:
    """The status line of a loaded trace."""
    s = (state["eagle"] or state["vanilla"]).summary
    return APP_TEXT("trace.replaying", lang, title=md_text(trace_title(state["title"], lang)),
               method=md_text(method_name(s.method, lang)),
               model=md_text(s.model) if s.model else APP_TEXT("trace.unknown_model", lang), n=len(state["cycles"]))


def _remove_upload(path: str) -> None:
    from gradio.utils import get_upload_folder

    upload_root = os.path.realpath(get_upload_folder())
    real = os.path.realpath(path)
    if real.startswith(upload_root + os.sep) and os.path.isfile(real):
        os.remove(real)


def upload_trace(path, lang: str = "en", request: gr.Request = None):
    return load_trace(path, request=request, lang=lang)


def load_example(name, lang: str = "en", request: gr.Request = None):
    path = example_traces().get(name)
    return load_trace(path, name, source=path, request=request, lang=lang) if path else outputs()
