"""What the Gradio app needs besides widgets: the shared model, the settings parser, and the
decode worker that runs EAGLE then vanilla in one background thread.

Kept apart from app.py so the callbacks there stay short, and so tests can drive the worker
without a browser. Nothing here imports gradio.
"""
from __future__ import annotations

import atexit
import os
import queue
import shutil
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Callable

import torch

from app_tokens import readable_run
from eagle_core import METHODS, DecodeSettings, Engine, load_engine

# One long-lived thread does all torch work of the app: loading the model and every decode.
# Each Python thread that calls torch gets its own OpenMP team, and measured on 2 cores a
# decode in a fresh thread ran ~20% slower than in a thread whose team already exists.
ENGINE_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="eagle-engine")

MAX_PROMPT_CHARS = 6000  # checked before tokenising, so a pasted novel fails fast
# A shared Space has one decode slot: bound what one request can hold it for. Each decode (EAGLE,
# then vanilla) stops after this many seconds; vanilla then decodes as many tokens as EAGLE did.
RUN_BUDGET_S = float(os.environ.get("EAGLE_APP_RUN_BUDGET_S", "60"))
# Fair share: while somebody waits in line behind a run, each of its decodes stops after this many
# seconds instead (a class of thirty sharing one slot should not wait behind 512-token runs).
FAIR_BUDGET_S = float(os.environ.get("EAGLE_APP_FAIR_BUDGET_S", "20"))

class ModelHolder:
    """The read-only engine, loaded once in a background thread and shared by every user."""

    def __init__(self, model: str | None = None, head: str | None = None):
        self.model, self.head = model, head
        self.engine: Engine | None = None
        self.error: str | None = None
        self.ready = threading.Event()  # set when loaded OR failed
        self._job: Future | None = None  # the loading job on ENGINE_THREAD
        self._lock = threading.Lock()
        self.t0 = self.load_s = 0.0

    def start(self) -> "ModelHolder":
        with self._lock:
            if self._job is None and not self.ready.is_set():
                self.t0 = time.perf_counter()
                self._job = ENGINE_THREAD.submit(self._load)
        return self

    def set_engine(self, engine: Engine) -> None:
        """Install an already-built engine (tests)."""
        self.engine, self.error = engine, None
        self.ready.set()

    def _load(self) -> None:
        try:
            if os.environ.get("EAGLE_APP_THREADS"):  # torch CPU threads, as the CLI's --threads
                torch.set_num_threads(int(os.environ["EAGLE_APP_THREADS"]))
            self.engine = load_engine(self.model, self.head)
        except Exception as e:  # reported in the page; the app still replays traces
            self.error = f"{type(e).__name__}: {e}"
        self.load_s = time.perf_counter() - self.t0
        self.ready.set()

    def status(self) -> str:
        if self.engine is not None:
            t = self.engine.target
            head = self.engine.head_name or "none"
            warn = " — untrained, so expect τ ≈ 1 (still exact, not faster)" if "random" in head else ""
            return f"**Model ready** (loaded in {self.load_s:.1f} s): {t.describe()} · EAGLE head: {head}{warn}"
        if self.error:
            return f"**Model failed to load:** {self.error}. Saved traces still replay."
        if self._job is None:
            return "**Loading the model…** — meanwhile explore the example trace below; Generate will wait for it."
        return (f"**Loading the model…** ({time.perf_counter() - self.t0:.0f} s) — meanwhile explore the "
                "example trace below; Generate will wait for it.")


def parse_settings(method, depth, tree_top_k, total_tokens, chain_length, temperature, top_p, top_k,
                   max_new_tokens, seed, context_limit: int | None = None) -> DecodeSettings:
    """UI values -> validated DecodeSettings. Raises ValueError with a readable message."""
    def as_int(name, v):
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a number (got {v!r})") from None
        if f != int(f):
            raise ValueError(f"{name} must be a whole number (got {v!r})")
        return int(f)

    def as_float(name, v):
        try:
            return float(v)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a number (got {v!r})") from None

    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {', '.join(METHODS)}")
    s = DecodeSettings(method=method, depth=as_int("depth", depth), tree_top_k=as_int("tree top-k", tree_top_k),
                       total_tokens=as_int("total tokens", total_tokens),
                       chain_length=as_int("chain length", chain_length),
                       temperature=as_float("temperature", temperature), top_p=as_float("top-p", top_p),
                       top_k=as_int("top-k", top_k), max_new_tokens=as_int("max new tokens", max_new_tokens),
                       seed=as_int("seed", seed))
    return s.validate(context_limit)


def check_prompt(prompt) -> str:
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("The prompt is empty: type something (or pick an example) first.")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise ValueError(f"The prompt is {len(prompt):,} characters; this demo accepts at most {MAX_PROMPT_CHARS:,}.")
    return prompt


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
    labels for byte-level tokens (`readable_run`) after their clock has stopped."""

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

    def plan(self) -> list[tuple[str, DecodeSettings]]:
        s = self.settings
        if s.method == "vanilla":
            return [("vanilla", s)]
        return [("eagle", s)] + ([("vanilla", s.with_(method="vanilla"))] if self.compare else [])

    def start(self) -> "Worker":
        for _, s in self.plan():  # fail fast, before the thread, with the engine's own messages
            self.engine.check(self.prompt, s)
        self.job = ENGINE_THREAD.submit(self._run)
        return self

    def _run(self) -> None:
        self.threads = torch.get_num_threads()  # of the engine thread, which decodes (the page says it)
        try:
            eagle_tokens = None
            for kind, s in self.plan():
                if self.stop.is_set():
                    break
                if kind == "vanilla" and eagle_tokens is not None:
                    s = s.with_(max_new_tokens=eagle_tokens)  # EAGLE hit the time limit: compare like for like
                try:
                    flag = Deadline(self.stop, self.budget_s, self.fair_s, self.crowded)
                    gen = self.engine.generate(self.prompt, s, flag)
                    self.events.put(("start", kind, time.perf_counter()))
                    flag.arm()
                    for rec in gen:
                        self.events.put(("cycle", kind, rec))
                    if flag.expired() and not self.stop.is_set():
                        self.timed_out[kind] = flag.limit
                        if kind == "eagle":
                            eagle_tokens = max(gen.run.summary.new_tokens, 1)
                    self.events.put(("done", kind, readable_run(gen.run, self.engine.target.tokenizer)))
                except Exception as e:  # shown as a warning; never a traceback in the page
                    self.events.put(("error", kind, f"{type(e).__name__}: {e}"))
                    break
        finally:
            self.events.put(("end", None, None))

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

    def __init__(self, rate: float = 8.0):
        self._cv = threading.Condition()
        self._line: list[Ticket] = []  # [0] holds the slot
        self.rate = rate  # tokens/s of recent decodes, for estimates

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
            if i is not None:
                del self._line[i]
            if tokens and seconds > 0.5:
                self.rate = 0.7 * self.rate + 0.3 * tokens / seconds
            self._grant()


TRACE_PREFIX = "eagle-traces-"


def trace_dir(root: str | None = None) -> str:
    """A fresh folder for this process's downloadable trace files, removed at exit; folders left
    by earlier processes that are no longer running (a crash, a killed server) are removed too."""
    root = root or tempfile.gettempdir()
    for name in os.listdir(root):
        pid = name[len(TRACE_PREFIX):].split("-", 1)[0]
        if name.startswith(TRACE_PREFIX) and (not pid.isdigit() or not _alive(int(pid))):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    path = tempfile.mkdtemp(prefix=f"{TRACE_PREFIX}{os.getpid()}-", dir=root)
    atexit.register(shutil.rmtree, path, True)
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def model_from_env() -> ModelHolder:
    """EAGLE_APP_MODEL / EAGLE_APP_HEAD override the default target and head (a hub id or a directory)."""
    return ModelHolder(os.environ.get("EAGLE_APP_MODEL") or None, os.environ.get("EAGLE_APP_HEAD") or None)


EXAMPLE_RUNS = (  # (file name, title, example label, settings) for `python app_runtime.py --make-traces`
    ("01-code-greedy.json", "Code, EAGLE-2 greedy", "code", dict(method="eagle2", max_new_tokens=40)),
    ("02-story-sampled.json", "Story, EAGLE-2 sampled (T=0.8)", "writing",
     dict(method="eagle2", max_new_tokens=40, temperature=0.8, top_p=0.95, seed=1)),
    ("03-chinese-eagle1.json", "Chinese, EAGLE-1 static tree", "Chinese", dict(method="eagle1", max_new_tokens=32)),
)


def make_example_traces(out_dir: str | None = None) -> None:
    """Regenerate assets/traces/ (run again once a trained head ships in assets/)."""
    from viz.examples import TRACE_DIR, example_prompts
    from viz.traces import bundle_to_json

    # Only real runs of the shipped model and head are shipped; the hand-made illustration run
    # is a test fixture (tests/illustration.py).
    out_dir = out_dir or TRACE_DIR
    os.makedirs(out_dir, exist_ok=True)
    holder = model_from_env().start()
    holder.ready.wait()
    if holder.engine is None:
        raise SystemExit(holder.error)
    prompts = dict(example_prompts())
    for name, title, label, kw in EXAMPLE_RUNS:
        w = Worker(holder.engine, prompts[label], DecodeSettings(**kw)).start()
        w.wait()
        runs = {}
        while not w.events.empty():
            what, kind, payload = w.events.get()
            if what == "done":
                runs[kind] = payload
        head = holder.engine.head_name
        with open(os.path.join(out_dir, name), "w", encoding="utf-8") as f:
            f.write(bundle_to_json(runs.get("eagle"), runs.get("vanilla"), title=f"{title} · head: {head}"))
        print(name, {k: round(r.summary.tau, 2) for k, r in runs.items()})


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--make-traces"]:
        make_example_traces()
    else:
        print("usage: python app_runtime.py --make-traces")
