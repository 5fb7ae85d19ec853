"""The one decode slot and its line: first come first served, each waiting request told its
place and expected wait, and the time limits of one request's hold on the slot. No torch, no gradio."""
from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import threading
import time

from eagle_core.environment import seconds

from .zerogpu import on_zerogpu

# A shared Space has one decode slot: bound what one request can hold it for. Each decode (EAGLE,
# then vanilla) stops after this many seconds; vanilla then decodes as many tokens as EAGLE did.
# On ZeroGPU each Generate asks for the GPU for 2 x this + 15 s of a visitor's few daily minutes: 20 s.
RUN_BUDGET_S = seconds("EAGLE_APP_RUN_BUDGET_S", 20.0 if on_zerogpu() else 60.0)
# Fair share: while somebody waits in line behind a run, each of its decodes stops after this many
# seconds instead (a class of thirty sharing one slot should not wait behind 512-token runs).
FAIR_BUDGET_S = seconds("EAGLE_APP_FAIR_BUDGET_S", 20.0)


# The hardware panel's recording (eagle_core.machine.RECORDED; `python -m eagle_core.bench.hardware --record`
# writes it): its t(1), one target pass of one token
RECORDED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "assets", "learn",
                        "hardware_recorded.json")


def recorded_rate(path: str = RECORDED) -> float | None:
    """Tokens/s of vanilla decoding from the recording's t(1) (1000 / ms per pass), or None without one."""
    try:
        with open(path, encoding="utf-8") as f:
            ms = float(json.load(f)["forward_ms"]["1"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return 1000.0 / ms if ms > 0 else None


class Ticket:
    """One request's place in the decode line. Compared by identity: two waiting runs with the
    same settings are two tickets (as plain dicts they were equal, and `leave` could remove the
    wrong one, leaving a dead ticket at the head of the line for good)."""

    __slots__ = ("tokens", "since")

    def __init__(self, tokens: int):
        self.tokens = tokens
        self.since: float | None = None  # when it got the slot

    def __repr__(self) -> str:
        return f"Ticket(tokens={self.tokens}, since={self.since}, id={id(self):#x})"


class DecodeLine:
    """The one decode slot, first come first served. Every request joins the line with an
    estimate of its own duration; a waiting request sees its place and the expected wait, and
    can leave at once (Stop, a closed tab, a new Generate) without ever running. Replaces
    Gradio's concurrency limit for the decode events, whose queue a user cannot leave without
    losing the page's contents. Tickets are found by identity, never by value."""

    def __init__(self, rate: float | None = None):
        self._cv = threading.Condition()
        self._line: list[Ticket] = []  # [0] holds the slot
        # tokens/s of recent decodes, for estimates: a guess (the recording's t(1), else 8) until a run is measured
        self.rate = rate or recorded_rate() or 8.0
        self.measured = False
        self.run_rates: dict[str, float] = {}  # "eagle" / "vanilla": the last timed run's tokens/s in this process

    def note_run(self, kind: str, tokens: int, seconds: float) -> None:
        """A timed run of `kind` decoded `tokens` in `seconds`: the rate its next estimate uses."""
        if tokens > 0 and seconds > 0:
            self.run_rates[kind] = tokens / seconds

    def run_s(self, kind: str, tokens: int) -> float:
        """Seconds a timed run of `kind` will take for `tokens`: at this process's last measured rate of that kind,
        else at the line's rate (measured or guessed)."""
        return tokens / max(self.run_rates.get(kind) or self.rate, 0.1)

    def join(self, tokens: int) -> Ticket:
        ticket = Ticket(tokens)
        with self._cv:
            self._line.append(ticket)
            self._grant()
        return ticket

    def _grant(self) -> None:
        if self._line and self._line[0].since is None:
            self._line[0].since = time.perf_counter()
        self._cv.notify_all()

    def _index(self, ticket: Ticket) -> int | None:
        return next((i for i, t in enumerate(self._line) if t is ticket), None)

    def wait(self, ticket: Ticket, timeout: float) -> bool:
        """True once `ticket` holds the slot (waits at most `timeout` seconds)."""
        with self._cv:
            return self._cv.wait_for(lambda: bool(self._line) and self._line[0] is ticket, timeout)

    def place(self, ticket: Ticket) -> tuple[int, float]:
        """(requests ahead of this one, estimated seconds until it gets the slot)."""
        with self._cv:
            i = self._index(ticket)
            if i is None:
                return 0, 0.0
            now, wait = time.perf_counter(), 0.0
            for t in self._line[:i]:
                cost = self.estimate_s(t.tokens)
                wait += cost - (now - t.since) if t.since is not None else cost
            return i, max(wait, 0.0)

    def waiting(self) -> int:
        """How many requests wait behind the one holding the slot."""
        with self._cv:
            return max(len(self._line) - 1, 0)

    def estimate_s(self, tokens: int) -> float:
        """Seconds a run of `tokens` (both decodes) will hold the slot while others wait behind it."""
        return min(tokens / max(self.rate, 0.1), 2 * min(RUN_BUDGET_S, FAIR_BUDGET_S))

    def leave(self, ticket: Ticket, tokens: int = 0, seconds: float = 0.0) -> None:
        """Give the slot (or the place in line) back; `tokens` decoded in `seconds` update the rate.
        Removes exactly this ticket; leaving twice is harmless."""
        with self._cv:
            i = self._index(ticket)
            ran = i is not None and self._line[i].since is not None
            if i is not None:
                del self._line[i]
            if tokens and seconds > 0.5:  # the first measurement replaces the guess; later ones are averaged in
                self.rate = 0.7 * self.rate + 0.3 * tokens / seconds if self.measured else tokens / seconds
                self.measured = True
            self._grant()
        if ran:
            give_back_memory()


def _libc_trim():
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc (macOS, musl): nothing to do
        return None


_TRIM = _libc_trim()


def give_back_memory() -> None:
    """Return the C heap's free pages to the system after a run (glibc's malloc_trim; a no-op
    elsewhere). glibc keeps freed pages in its arenas: without this, the server's RSS stayed
    214 MB higher through 100 runs (freed while the model loaded and while runs decoded, never
    returned). Takes well under a millisecond; it does not change the per-run slope
    (docs/app.md, "Memory and temporary files")."""
    if _TRIM is not None:
        _TRIM(0)
