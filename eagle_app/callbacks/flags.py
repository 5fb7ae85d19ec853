"""Per-tab stop flags, one per requested run: a new Generate replaces the tab's earlier runs,
Stop ends every run of the tab, a closed tab forgets its flags. No gradio."""
from __future__ import annotations

import itertools
import threading


class RunFlag(threading.Event):
    """A run's stop flag; `reason` says who set it: "stopped" (Stop, a closed tab) or "replaced"
    (a new Generate from the same tab, which runs instead)."""

    reason: str | None = None

    def end(self, reason: str) -> None:
        self.reason = self.reason or reason
        self.set()


class RunFlags:
    """Stop flags per tab, one per requested run. A new Generate replaces the tab's earlier runs
    (running or waiting: they end without touching the page) and gets its own flag; Stop sets
    every flag of the tab. (One flag per tab, replaced on every click, let a second click orphan
    the first run: Stop missed it.)"""

    def __init__(self):
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._flags: dict[str, dict[int, RunFlag]] = {}

    def arm(self, sid: str) -> int:
        with self._lock:
            runs = self._flags.setdefault(sid, {})
            for f in runs.values():
                f.end("replaced")
            run_id = next(self._ids)
            runs[run_id] = RunFlag()
            return run_id

    def get(self, sid: str, run_id: int | None) -> tuple[int, RunFlag]:
        """The flag `arm` made for this run; a run that did not come through arm (the API) gets one."""
        with self._lock:
            runs = self._flags.setdefault(sid, {})
            if run_id not in runs:
                run_id = next(self._ids)
                runs[run_id] = RunFlag()
            return run_id, runs[run_id]

    def stop(self, sid: str) -> int:
        with self._lock:
            runs = self._flags.get(sid, {})
            for f in runs.values():
                f.end("stopped")
            return len(runs)

    def done(self, sid: str, run_id: int) -> None:
        with self._lock:
            self._flags.get(sid, {}).pop(run_id, None)

    def forget(self, sid: str) -> None:
        self.stop(sid)
        with self._lock:
            self._flags.pop(sid, None)


RUNS = RunFlags()
