"""Gradio's per-session memory is bounded (eagle_app/sessions.py): an API client's session is forgotten
once idle, a closed tab's after the hour, an open tab's never (below the cap), the oldest beyond the cap."""
from __future__ import annotations

import datetime
import threading
from collections import OrderedDict
from types import SimpleNamespace

from gradio.state_holder import StateHolder

from eagle_app import sessions

NOW = datetime.datetime(2026, 12, 7, 14, 0, 0)


def holder(**idle_s):
    """A StateHolder-shaped object: session -> seconds since its last event (in order of use)."""
    h = SimpleNamespace(session_data=OrderedDict(), time_last_used={}, lock=threading.Lock())
    for sid, (idle, closed) in sorted(idle_s.items(), key=lambda kv: -kv[1][0]):
        h.session_data[sid] = SimpleNamespace(is_closed=closed)
        h.time_last_used[sid] = NOW - datetime.timedelta(seconds=idle)
    return h


def test_gradio_keeps_the_attributes_pruning_reads():
    h = StateHolder()
    assert isinstance(h.session_data, OrderedDict) and isinstance(h.time_last_used, dict) and hasattr(h, "lock")


def test_api_sessions_go_once_idle_tabs_stay_until_closed_for_the_hour():
    for sid in ("tab_open", "tab_closed_recently", "tab_closed_long_ago"):
        sessions.note_page(sid)
    h = holder(api_busy=(5, False), api_idle=(sessions.API_IDLE_S + 1, False), tab_open=(10_000, False),
               tab_closed_recently=(60, True), tab_closed_long_ago=(sessions.KEEP_S + 1, True))
    gone = sessions.prune(h, now=NOW)
    assert sorted(gone) == ["api_idle", "tab_closed_long_ago"]
    assert set(h.session_data) == set(h.time_last_used) == {"api_busy", "tab_open", "tab_closed_recently"}


def test_beyond_the_cap_the_least_recently_used_go_first():
    for i in range(5):
        sessions.note_page(f"tab{i}")
    h = holder(**{f"tab{i}": (100 - i, False) for i in range(5)})  # tab0 used longest ago
    assert sessions.prune(h, now=NOW, keep=3) == ["tab0", "tab1"]
    assert list(h.session_data) == ["tab2", "tab3", "tab4"]


def test_a_holder_without_those_attributes_is_left_alone():
    assert sessions.prune(SimpleNamespace()) == []
