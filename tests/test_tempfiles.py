"""Temporary files stay bounded over many runs (issue 28: "/tmp/gradio gains a file per run").

Each run writes its trace for download (eagle_app/traces.py, one file per tab), and Gradio serves
it from a copy in its own cache (GRADIO_TEMP_DIR, one folder per file content). Gradio's hourly
clean-up (delete_cache) alone let the copies grow by one per run for an hour: now a tab's new
download removes the previous copy, so the files left are one per tab, whatever the number of runs."""
from __future__ import annotations

import os
import time

from eagle_app import traces as at
from tests.app_fixtures import free_port, illustration, launched_app

ARGS = ("eagle2", 2, 2, 4, 3, 0.0, 1.0, 0, 4, 0, True)  # the API's settings: tree 2,2,4, 4 new tokens


def served_download(result) -> str:
    """The server-side path of the trace the page was given to download (Gradio's cached copy)."""
    return next(r["value"]["path"] for r in result if isinstance(r, dict) and "eagle-trace-" in str(r.get("value")))


def test_files_left_after_many_runs_are_one_per_tab():
    """Two tabs (API sessions: they never close) make 4 runs each: 8 downloads were served, and
    2 of Gradio's copies remain (before: all 8), and 2 files in the app's own trace folder."""
    from gradio_client import Client

    served, clients = [], []
    with launched_app(free_port()) as url:
        for _ in range(2):
            clients.append(Client(url, verbose=False, download_files=False))  # kept open: a dropped one closes its tab
            for i in range(4):
                served.append(served_download(clients[-1].predict(f"Count to {i + 3}.", *ARGS, api_name="/generate")))
        assert len(set(served)) == 8
        left = [p for p in served if os.path.exists(p)]
        assert left == [served[3], served[7]], left  # each tab's last download, nothing older
        mine = [os.path.join(d, f) for d, _, names in os.walk(at.TRACE_DIR) for f in names]
        assert len(mine) == len(os.listdir(at.TRACE_DIR))  # one file per tab folder


def test_folders_of_tabs_that_never_close_are_pruned(monkeypatch):
    """A tab with no unload (an API client) keeps its download for KEEP_S, and at most KEEP_TABS do."""
    eagle, vanilla = illustration()
    state = {"eagle": eagle, "vanilla": vanilla, "title": "t"}
    for sid in ("old1", "old2", "new1", "new2"):
        at.save_trace(state, sid)
    stale = time.time() - at.KEEP_S - 60
    for sid in ("old1", "old2"):
        os.utime(at.tab_folder(sid), (stale, stale))
    at.prune_tab_folders()
    assert not os.path.exists(at.tab_folder("old1")) and not os.path.exists(at.tab_folder("old2"))
    assert os.path.exists(at.tab_folder("new1")) and os.path.exists(at.tab_folder("new2"))
    monkeypatch.setattr(at, "KEEP_TABS", 1)
    os.utime(at.tab_folder("new1"), (time.time() - 10, time.time() - 10))
    at.save_trace(state, "new3")  # prunes: only the newest KEEP_TABS folders stay (new3's own is made after)
    assert not os.path.exists(at.tab_folder("new1")) and os.path.exists(at.tab_folder("new3"))
    for sid in ("new2", "new3"):
        at.remove_tab_folder(sid)
