"""The decode worker: EAGLE (unless the method is vanilla) then vanilla, one after the other, on
the one engine thread, with a stop flag that is also a clock (Deadline). Nothing here imports gradio.
"""
from __future__ import annotations

import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Callable

import torch

from eagle_core import DecodeSettings, Engine
from eagle_core.decode import Generation
from eagle_core.parting import first_parting

from .line import FAIR_BUDGET_S, RUN_BUDGET_S
from .tokens import readable_run


# One long-lived thread does all torch work of the app: loading the model and every decode.
# Each Python thread that calls torch gets its own OpenMP team, and measured on 2 cores a
# decode in a fresh thread ran ~20% slower than in a thread whose team already exists.
ENGINE_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="eagle-engine")


def start_generation(engine: Engine, prompt: str, settings: DecodeSettings, stop, prompt_ids: list[int]) -> Generation:
    """A Generation of a request that Engine.check has passed (`prompt_ids` is what it returned):
    the settings are not validated again and the prompt is not tokenized again."""
    return engine.generate(prompt, settings, stop, prompt_ids=prompt_ids)


class Deadline:
    """A stop flag for one decode: set by the user's Stop, or by the clock once `budget_s` has
    passed since `arm()`, or `fair_s` while `crowded()` says others wait. The engine only calls
    `is_set()` once per cycle. `limit` names the clock limit that ended the decode, if one did."""

    def __init__(self, user: threading.Event, budget_s: float, fair_s: float = float("inf"),
                 crowded: Callable[[], bool] = lambda: False):
        self.user, self.budget_s, self.fair_s, self.crowded = user, budget_s, fair_s, crowded
        self.t0, self.limit = float("inf"), None

    def arm(self) -> "Deadline":
        self.t0 = time.perf_counter()
        return self

    def expired(self) -> bool:
        if self.limit is None:
            elapsed = time.perf_counter() - self.t0
            if elapsed >= self.budget_s:
                self.limit = "budget"
            elif elapsed >= self.fair_s and self.crowded():
                self.limit = "fair"
        return self.limit is not None

    def is_set(self) -> bool:
        return self.user.is_set() or self.expired()


@dataclass
class Worker:
    """Decodes EAGLE (unless method is vanilla) and then vanilla, one after the other, on the
    engine thread, so the UI thread never holds up the decode loop.

    Messages on `events`: ("start", kind, perf_counter at the start), ("cycle", kind, CycleRecord),
    ("done", kind, Run), ("error", kind, str), and finally ("end", None, None). kind is "eagle" or
    "vanilla". `timed_out` maps the kinds that hit a clock limit to "budget" (RUN_BUDGET_S) or
    "fair" (FAIR_BUDGET_S while others waited). Finished runs get readable
    labels for byte-level tokens (`readable_run`) after their clock has stopped.

    `prompt_ids`: what Engine.check returned for this prompt and settings (the app checks before
    it queues); without them, `start` checks. Both runs reuse them: no run validates or tokenizes again."""

    engine: Engine
    prompt: str
    settings: DecodeSettings
    compare: bool = True
    stop: threading.Event = field(default_factory=threading.Event)
    events: "queue.Queue" = field(default_factory=queue.Queue)
    budget_s: float = RUN_BUDGET_S
    fair_s: float = FAIR_BUDGET_S
    crowded: Callable[[], bool] = lambda: False  # are others waiting for the decode slot?
    timed_out: dict = field(default_factory=dict)
    threads: int = 0
    prompt_ids: list[int] | None = None

    def plan(self) -> list[tuple[str, DecodeSettings]]:
        s = self.settings
        if s.method == "vanilla":
            return [("vanilla", s)]
        return [("eagle", s)] + ([("vanilla", s.with_(method="vanilla"))] if self.compare else [])

    def start(self) -> "Worker":
        if self.prompt_ids is None:  # fail fast, before the thread, with the engine's own messages
            self.prompt_ids = self.engine.check(self.prompt, self.settings)
        self.job = ENGINE_THREAD.submit(self._run)
        return self

    def _run(self) -> None:
        self.threads = torch.get_num_threads()  # of the engine thread, which decodes (the page says it)
        runs = {}
        try:
            eagle_tokens = None
            for kind, s in self.plan():
                if self.stop.is_set():
                    break
                if kind == "vanilla" and eagle_tokens is not None:
                    s = s.with_(max_new_tokens=eagle_tokens)  # EAGLE hit the time limit: compare like for like
                try:
                    flag = Deadline(self.stop, self.budget_s, self.fair_s, self.crowded)
                    gen = start_generation(self.engine, self.prompt, s, flag, self.prompt_ids)
                    self.events.put(("start", kind, time.perf_counter()))
                    flag.arm()
                    for rec in gen:
                        self.events.put(("cycle", kind, rec))
                    if flag.expired() and not self.stop.is_set():
                        self.timed_out[kind] = flag.limit
                        if kind == "eagle":
                            eagle_tokens = max(gen.run.summary.new_tokens, 1)
                    runs[kind] = gen.run
                    self.events.put(("done", kind, readable_run(gen.run, self.engine.target.tokenizer)))
                except Exception as e:  # shown as a warning; never a traceback in the page
                    self.events.put(("error", kind, f"{type(e).__name__}: {e}"))
                    break
            self._explain_parting(runs)
        finally:
            self.events.put(("end", None, None))

    def _explain_parting(self, runs) -> None:
        """Greedy outputs that part: where, between which tokens, and by what logit margin (a
        near-tie in half precision, or a clear winner, which would be a bug): ("parting", None, dict)."""
        e, v = runs.get("eagle"), runs.get("vanilla")
        if e is None or v is None or not self.settings.greedy:
            return
        p = first_parting(self.engine.target, self.prompt_ids, v.summary.token_ids, e.summary.token_ids)
        if p is not None:
            tt = self.engine.target.token_text
            self.events.put(("parting", None, {**p.to_dict(), "vanilla_text": tt(p.vanilla_token),
                                               "eagle_text": tt(p.eagle_token)}))

    def wait(self) -> None:
        """Block until both decodes have finished (scripts)."""
        self.job.result()

    def cancel(self, wait_s: float = 5.0) -> None:
        """Stop a still-running decode (a closed tab) and wait for its thread; no-op once finished."""
        job = getattr(self, "job", None)
        if job is not None and not job.done():
            self.stop.set()
            try:
                job.exception(timeout=wait_s)
            except FutureTimeout:  # still running after wait_s; it stops at its next cycle
                pass

