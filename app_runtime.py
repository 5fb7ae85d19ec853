"""What the Gradio app needs besides widgets: the shared model, the settings parser, and the
decode worker that runs EAGLE then vanilla in one background thread.

Kept apart from app.py so the callbacks there stay short, and so tests can drive the worker
without a browser. Nothing here imports gradio.
"""
from __future__ import annotations

import os
import queue
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field

from eagle_core import METHODS, DecodeSettings, Engine, load_default_head, load_target

# One long-lived thread does all torch work of the app: loading the model and every decode.
# Each Python thread that calls torch gets its own OpenMP team, and measured on 2 cores a
# decode in a fresh thread ran ~20% slower than in a thread whose team already exists.
ENGINE_THREAD = ThreadPoolExecutor(max_workers=1, thread_name_prefix="eagle-engine")

MAX_PROMPT_CHARS = 6000  # checked before tokenising, so a pasted novel fails fast

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
            target = load_target(self.model)
            head, vocab, name = load_default_head(target, self.head)
            self.engine = Engine(target, head, vocab, name)
        except Exception as e:  # reported in the page; the app still replays traces
            self.error = f"{type(e).__name__}: {e}"
        self.load_s = time.perf_counter() - self.t0
        self.ready.set()

    def status(self) -> str:
        if self.engine is not None:
            t = self.engine.target
            head = self.engine.head_name or "none"
            warn = " — untrained, so expect τ ≈ 1 (still exact, not faster)" if "random" in head else ""
            return f"**Model ready:** {t.describe()} · EAGLE head: {head}{warn}"
        if self.error:
            return f"**Model failed to load:** {self.error}. Saved traces still replay."
        if self._job is None:
            return "Model not loaded yet; it loads on the first request."
        return (f"**Loading the model…** ({time.perf_counter() - self.t0:.0f} s) — meanwhile explore the "
                "example traces below; Generate will wait for it.")


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


@dataclass
class Worker:
    """Decodes EAGLE (unless method is vanilla) and then vanilla, one after the other, in a
    background thread, so drawing in the UI thread never holds up the decode loop.

    Messages on `events`: ("cycle", kind, CycleRecord), ("done", kind, Run), ("error", kind, str),
    and finally ("end", None, None). kind is "eagle" or "vanilla"."""

    engine: Engine
    prompt: str
    settings: DecodeSettings
    compare: bool = True
    stop: threading.Event = field(default_factory=threading.Event)
    events: "queue.Queue" = field(default_factory=queue.Queue)

    def plan(self) -> list[tuple[str, DecodeSettings]]:
        s = self.settings
        if s.method == "vanilla":
            return [("vanilla", s)]
        return [("eagle", s)] + ([("vanilla", s.with_(method="vanilla"))] if self.compare else [])

    def start(self) -> "Worker":
        for _, s in self.plan():  # fail fast, before the thread, with the engine's own messages
            self.engine.check(self.prompt, s)
        self.job: Future = ENGINE_THREAD.submit(self._run)
        return self

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the decode job to finish; True if it has."""
        try:
            self.job.exception(timeout=timeout)
        except FutureTimeout:
            return False
        return True

    def _run(self) -> None:
        try:
            for kind, s in self.plan():
                if self.stop.is_set():
                    break
                try:
                    gen = self.engine.generate(self.prompt, s, self.stop)
                    for rec in gen:
                        self.events.put(("cycle", kind, rec))
                    self.events.put(("done", kind, gen.run))
                except Exception as e:  # shown as a warning; never a traceback in the page
                    self.events.put(("error", kind, f"{type(e).__name__}: {e}"))
                    break
        finally:
            self.events.put(("end", None, None))

    def cancel(self, wait_s: float = 5.0) -> None:
        """Stop a still-running decode (a closed tab) and wait for its thread; no-op once finished."""
        job = getattr(self, "job", None)
        if job is not None and not job.done():
            self.stop.set()
            self.wait(wait_s)


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
