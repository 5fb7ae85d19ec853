"""Gradio's per-session memory, bounded: sessions that nobody can use any more are forgotten.

Gradio keeps one SessionState per session (per tab, per API client): a copy of the whole page's
configuration (measured: 177 KB of Python objects for this page, before any output), each component a
callback updated, and the gr.State values. Its StateHolder drops a session only beyond 10,000 of them;
a closed tab's gr.State values go after an hour but the SessionState itself stays. Driving Generate
through the API with a new client every 5 runs (scripts/measure_memory.py), every client left its
session behind for good: memory grew with every new client, run after run (docs/app.md, "Memory and
temporary files").

Here, every PRUNE_EVERY_S, without touching a session in use:
- an API client's session (one that never loaded the page: `note_page` was never called for it) goes
  after API_IDLE_S without an event: the API passes no gr.State and reads none, so nothing it can use
  is lost (a run still going keeps its own reference to the session; Gradio makes a fresh one if the
  client comes back);
- a closed tab's session goes after Gradio's own hour (KEEP_S), as Gradio meant its state to;
- beyond KEEP_TABS sessions, the least recently used go first (the rule for trace files, traces.py).
A tab still open is never touched below KEEP_TABS. (Reads gradio 6.31's StateHolder attributes,
pinned in requirements.txt; with a Gradio without them this does nothing.)
"""
from __future__ import annotations

import datetime
import threading

from .traces import KEEP_S, KEEP_TABS

API_IDLE_S = 60.0  # an API client's session, idle this long, is forgotten
PRUNE_EVERY_S = 10.0

_pages: set[str] = set()  # sessions that loaded the page (browser tabs); an API client never does
_lock = threading.Lock()


def note_page(session_hash: str | None) -> None:
    """The page's load event ran in this session: a browser tab, whose state the page uses."""
    if session_hash:
        with _lock:
            _pages.add(session_hash)


def prune(holder, now: datetime.datetime | None = None, api_idle_s: float | None = None,
          closed_s: float | None = None, keep: int | None = None) -> list[str]:
    """Forget the sessions of `holder` (Gradio's StateHolder) as the module docstring says; -> their ids.
    The limits default to the module's API_IDLE_S, KEEP_S and KEEP_TABS, read at the call."""
    api_idle_s = API_IDLE_S if api_idle_s is None else api_idle_s
    closed_s = KEEP_S if closed_s is None else closed_s
    keep = KEEP_TABS if keep is None else keep
    data, used, lock = (getattr(holder, a, None) for a in ("session_data", "time_last_used", "lock"))
    if data is None or used is None or lock is None:
        return []
    now = now or datetime.datetime.now()
    gone = []
    with lock:
        with _lock:
            for sid in list(data):
                last = used.get(sid)
                idle = (now - last).total_seconds() if last is not None else float("inf")
                page = sid in _pages
                if (not page and idle > api_idle_s) or (getattr(data[sid], "is_closed", False) and idle > closed_s):
                    gone.append(sid)
            for sid in gone:
                data.pop(sid, None)
            # the least recently used beyond `keep` (Gradio's OrderedDict: most recent last)
            while len(data) > keep:
                sid, _ = data.popitem(last=False)
                gone.append(sid)
            for sid in gone:
                used.pop(sid, None)
                _pages.discard(sid)
    return gone


def start_pruning(demo, every_s: float = PRUNE_EVERY_S) -> threading.Thread:
    """A daemon thread that prunes `demo`'s sessions every `every_s` seconds once it is served."""

    def loop():
        stop = threading.Event()
        while not stop.wait(every_s):
            holder = getattr(demo, "state_holder", None)
            if holder is not None:
                prune(holder)

    thread = threading.Thread(target=loop, name="eagle-session-pruner", daemon=True)
    thread.start()
    return thread
