"""The decode worker: EAGLE (unless the method is vanilla) then vanilla, one after the other, on
the one engine thread (on ZeroGPU: inside spaces.GPU, eagle_app/zerogpu.py), with a stop flag that is
also a clock (Deadline). Nothing here imports gradio.
"""
from __future__ import annotations

import contextvars
import os
import queue
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Callable

import torch

from eagle_core import DecodeSettings, Engine
from eagle_core.decode import Generation
from eagle_core.divergence import first_parting

from . import zerogpu
from .decode_queue import FAIR_BUDGET_S, RUN_BUDGET_S
from .tokens import readable_run
from .engine_thread import ENGINE_THREAD
from . import model as app_model  # read at call time: the app (and a test) may replace MODEL


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


@dataclass(frozen=True)
class DecodeJob:
    """One Generate's decode, as plain data (on ZeroGPU it is pickled to the GPU worker process):
    `prompt_ids` is what Engine.check returned for this prompt and settings."""

    prompt: str
    settings: DecodeSettings
    prompt_ids: tuple[int, ...]
    compare: bool = True
    budget_s: float = RUN_BUDGET_S
    fair_s: float = FAIR_BUDGET_S

    def plan(self) -> list[tuple[str, DecodeSettings]]:
        s = self.settings
        if s.method == "vanilla":
            return [("vanilla", s)]
        return [("eagle", s)] + ([("vanilla", s.with_(method="vanilla"))] if self.compare else [])


def decode_events(engine: Engine, job: DecodeJob, stop, crowded: Callable[[], bool] = lambda: False):
    """The decode entry: EAGLE (unless the method is vanilla) then vanilla, and where greedy outputs
    part, why. Yields (what, kind, payload): ("threads", None, n), ("start", kind, perf_counter at the
    start), ("cycle", kind, RawCycle: ids and numbers only), ("timed_out", kind, "budget" | "fair"), ("done",
    kind, Run: its records, labels and text built after its last cycle, made readable), ("error", kind, str),
    ("parting", None, dict).
    `stop.is_set()` ends it early (the user's Stop); `crowded()`: are others waiting for the decode slot?"""
    yield ("threads", None, torch.get_num_threads())  # of the thread that decodes (the page says it)
    runs, eagle_tokens = {}, None
    for kind, s in job.plan():
        if stop.is_set():
            break
        if kind == "vanilla" and eagle_tokens is not None:
            s = s.with_(max_new_tokens=eagle_tokens)  # EAGLE hit the time limit: compare like for like
        try:
            flag = Deadline(stop, job.budget_s, job.fair_s, crowded)
            gen = start_generation(engine, job.prompt, s, flag, list(job.prompt_ids))
            yield ("start", kind, time.perf_counter())
            flag.arm()
            for raw in gen.raw():  # the page draws the run once it is done: no labels or text per cycle
                yield ("cycle", kind, raw)
            if flag.expired() and not stop.is_set():
                yield ("timed_out", kind, flag.limit)
                if kind == "eagle":
                    eagle_tokens = max(gen.run.summary.new_tokens, 1)
            runs[kind] = gen.run
            yield ("done", kind, readable_run(gen.run, engine.target.tokenizer))
        except Exception as e:  # shown as a warning; never a traceback in the page
            yield ("error", kind, f"{type(e).__name__}: {e}")
            break
    parting = explain_parting(engine, job, runs)
    if parting is not None:
        yield ("parting", None, parting)


def explain_parting(engine: Engine, job: DecodeJob, runs: dict) -> dict | None:
    """Greedy outputs that part: where, between which tokens, and by what logit margin (a near-tie in
    half precision, or a clear winner, which would be a bug); None if they did not part."""
    e, v = runs.get("eagle"), runs.get("vanilla")
    if e is None or v is None or not job.settings.greedy:
        return None
    p = first_parting(engine.target, list(job.prompt_ids), v.summary.token_ids, e.summary.token_ids)
    if p is None:
        return None
    tt = engine.target.token_text
    return {**p.to_dict(), "vanilla_text": tt(p.vanilla_token), "eagle_text": tt(p.eagle_token)}


def gpu_seconds(job: DecodeJob) -> float:
    """How long a decode may hold a ZeroGPU GPU: each run's time limit, plus the warm-up, the parting
    check and slack."""
    return len(job.plan()) * job.budget_s + 15


WARM_TOKENS = 4
_warmed: set[int] = set()  # the processes whose GPU has decoded already


def warm_gpu(engine: Engine, job: DecodeJob) -> bool:
    """An untimed warm-up at the start of a ZeroGPU call: each run of the job (same method, tree and
    prompt) for WARM_TOKENS tokens, so that a freshly forked GPU worker pays its first-kernel costs
    (kernel loading and selection, memory pools) here and not inside EAGLE's timed prefill, which runs
    first. Once per process (the app's own process never warms: load_engine(warm=False) on ZeroGPU,
    eagle_app/zerogpu.py). -> whether it ran."""
    if os.getpid() in _warmed:
        return False
    for _, s in job.plan():
        for _ in engine.generate(job.prompt, s.with_(max_new_tokens=WARM_TOKENS), None, prompt_ids=list(job.prompt_ids)):
            pass
    _warmed.add(os.getpid())
    return True


@zerogpu.gpu(duration=gpu_seconds)
def gpu_decode(job: DecodeJob):
    """The decode entry on ZeroGPU, run by `spaces` in its GPU worker process (a plain call elsewhere):
    the model is the app's (loaded at start-up, before the fork), Stop arrives through zerogpu.STOP.
    On ZeroGPU an untimed warm-up comes first (warm_gpu)."""
    if zerogpu.ZERO:
        warm_gpu(app_model.MODEL.engine, job)
    yield from decode_events(app_model.MODEL.engine, job, zerogpu.STOP)


def new_stepper(engine: Engine, prompt: str, settings: DecodeSettings, prompt_ids: list[int]):
    """A Step-mode run (not timed), advanced one cycle per click by `next_cycle`: a live generation,
    or on ZeroGPU the request itself (see gpu_step)."""
    if zerogpu.ZERO:
        return DecodeJob(prompt, settings, tuple(prompt_ids), compare=False)
    gen = start_generation(engine, prompt, settings, None, prompt_ids)
    return gen, iter(gen)


def next_cycle(stepper, done: int):
    """The next cycle of a Step-mode run that has `done` cycles: (its CycleRecord, or None if there
    was none; the finished Run, or None while it goes on). All torch work on the engine thread."""
    if zerogpu.ZERO:
        return gpu_step(stepper, done)
    gen, it = stepper
    rec = ENGINE_THREAD.submit(next, it, None).result()
    if rec is not None and gen.ending is not None:  # that was the last cycle: finish now, not on one more click
        ENGINE_THREAD.submit(next, it, None).result()
    return rec, gen.run


@zerogpu.gpu(duration=lambda job, done: 30)
def gpu_step(job: DecodeJob, done: int):
    """Step mode on ZeroGPU. A generation cannot stay alive between clicks in the GPU worker process (what
    it changes there never comes back), so each click decodes the run again from its start to cycle
    done + 1: the same cycles, since a run is deterministic (greedy, or sampling from its seed)."""
    gen = start_generation(app_model.MODEL.engine, job.prompt, job.settings, None, list(job.prompt_ids))
    it, rec = iter(gen), None
    for _ in range(done + 1):
        rec = next(it, None)
    if rec is not None and gen.ending is not None:
        next(it, None)
    return rec, gen.run


@dataclass
class Worker:
    """Runs the decode entry for one Generate so that the UI thread never holds up the decode loop:
    on the engine thread (decode_events), or on ZeroGPU in a thread of the request's own that calls
    gpu_decode (the GPU worker process decodes).

    Messages on `events`: decode_events' messages, but for "threads", "timed_out" and "cycle" (kept in
    `threads`, `timed_out` and `progress`), and finally ("end", None, None). kind is "eagle" or "vanilla".
    A cycle is counted, not queued: a message per cycle woke the page's thread once per token of
    vanilla (less often for EAGLE), and on 2 cores each wake-up can hold up the decoder's OpenMP team
    (docs/app.md, "How it behaves"). `progress[kind]` is (tokens, cycles) so far, read by the page's
    progress line when EAGLE_APP_PROGRESS_S asks for one.
    `timed_out` maps the kinds that hit a clock limit to "budget" (RUN_BUDGET_S) or "fair"
    (FAIR_BUDGET_S while others waited).

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
    progress: dict = field(default_factory=dict)  # kind -> (tokens, cycles) of the run so far
    threads: int = 0
    prompt_ids: list[int] | None = None

    def plan(self) -> list[tuple[str, DecodeSettings]]:
        return DecodeJob(self.prompt, self.settings, (), self.compare).plan()

    def start(self) -> "Worker":
        if self.prompt_ids is None:  # fail fast, before the thread, with the engine's own messages
            self.prompt_ids = self.engine.check(self.prompt, self.settings)
        job = DecodeJob(self.prompt, self.settings, tuple(self.prompt_ids), self.compare, self.budget_s, self.fair_s)
        if zerogpu.ZERO:  # the spaces client needs the request's context: a thread that carries it
            zerogpu.STOP.clear()
            self.job = Future()
            ctx = contextvars.copy_context()
            threading.Thread(target=ctx.run, args=(self._relay, gpu_decode(job), self.job), daemon=True).start()
        else:
            self.job = ENGINE_THREAD.submit(self._relay, decode_events(self.engine, job, self.stop, self.crowded))
        return self

    def _relay(self, events, done: Future | None = None) -> None:
        """Passes the entry's messages on to `events` (and the user's Stop on to zerogpu.STOP)."""
        try:
            for what, kind, payload in events:
                if self.stop.is_set() and zerogpu.ZERO:
                    zerogpu.STOP.set()
                if what == "threads":
                    self.threads = payload
                elif what == "timed_out":
                    self.timed_out[kind] = payload
                elif what == "cycle":
                    tokens, cycles = self.progress.get(kind, (1, 0))  # 1: the prefill's token
                    self.progress[kind] = (tokens + len(payload.committed_ids), cycles + 1)  # one assignment
                else:
                    if what == "start":
                        self.progress[kind] = (1, 0)
                    self.events.put((what, kind, payload))
        except Exception as e:  # on ZeroGPU, the GPU call itself (no GPU in time, the quota spent)
            self.events.put(("error", "eagle", f"{type(e).__name__}: {e}"))
        finally:
            self.events.put(("end", None, None))
            if done is not None:
                done.set_result(None)

    def wait(self) -> None:
        """Block until both decodes have finished (scripts)."""
        self.job.result()

    def cancel(self, wait_s: float = 5.0) -> None:
        """Stop a still-running decode (a closed tab) and wait for its thread; no-op once finished."""
        job = getattr(self, "job", None)
        if job is not None and not job.done():
            self.stop.set()
            if zerogpu.ZERO:
                zerogpu.STOP.set()
            try:
                job.exception(timeout=wait_s)
            except FutureTimeout:  # still running after wait_s; it stops at its next cycle
                pass

