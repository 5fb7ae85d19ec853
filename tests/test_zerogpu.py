"""ZeroGPU by design, checked on a CPU: with SPACES_ZERO_GPU=true and a stand-in `spaces` package,
every decode (Generate and Step) runs inside the functions decorated with spaces.GPU, called from
the request's thread and not on the engine thread; what crosses to the GPU worker process (the
arguments, each yielded message, the results) survives pickling, as it must there; the model
loads at start-up without the CUDA warm-up; Stop reaches the decode. Off ZeroGPU nothing changes.
Each case runs in a fresh interpreter (the platform sets the variable before the app starts)."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from eagle_app import zerogpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A stand-in for the `spaces` package: GPU(duration=...) records each decoration and call, marks the
# time inside a call, and pickles the arguments and every result as the real worker process would.
FAKE_SPACES = '''
import functools, inspect, pickle
CALLS, INSIDE = [], [False]

def _cross(x):
    return pickle.loads(pickle.dumps(x))

def GPU(task=None, *, duration=60):
    def deco(fn):
        CALLS.append(["decorated", fn.__name__])
        def seconds(a, k):
            return duration(*a, **k) if callable(duration) else duration
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def gen(*a, **k):
                a, k = _cross((a, k))
                CALLS.append(["call", fn.__name__, seconds(a, k)])
                INSIDE[0] = True
                try:
                    for item in fn(*a, **k):
                        INSIDE[0] = False
                        yield _cross(item)
                        INSIDE[0] = True
                finally:
                    INSIDE[0] = False
            return gen
        @functools.wraps(fn)
        def call(*a, **k):
            a, k = _cross((a, k))
            CALLS.append(["call", fn.__name__, seconds(a, k)])
            INSIDE[0] = True
            try:
                return _cross(fn(*a, **k))
            finally:
                INSIDE[0] = False
        return call
    return deco if task is None else deco(task)
'''

SCRIPT = '''
import json, threading, time
from types import SimpleNamespace
import spaces
import app  # as on a Space: app.py first, which imports eagle_app.zerogpu (and so `spaces`) first
from eagle_app import model, worker, zerogpu
from eagle_app import views as av
from eagle_app.callbacks import decoding as cb

warm = []
real_load = model.load_engine
model.load_engine = lambda *a, **k: (warm.append(k.get("warm", True)), real_load(*a, **k))[1]
model.MODEL.start()  # on ZeroGPU: loads here, synchronously
loaded = model.MODEL.ready.is_set() and model.MODEL.engine is not None
seen = []
real = worker.start_generation
def spy(*a, **k):
    seen.append([spaces.INSIDE[0], threading.current_thread().name])
    return real(*a, **k)
worker.start_generation = spy
req = SimpleNamespace(session_hash="Z")
GOOD = dict(method="eagle2", depth=3, tree_top_k=4, total_tokens=8, chain_length=3, temperature=0.0, top_p=1.0,
            top_k=0, max_new=6, seed=0)
outs = [av.named(o) for o in cb.generate("Say hello.", *GOOD.values(), True, av.new_state(), cb.arm(req), request=req)]
state = outs[-1]["state"]
steps, st = [], av.new_state()
for _ in range(3):
    o = av.named(list(cb.step("Say hello.", *dict(GOOD, max_new=40).values(), st, request=req))[-1])
    st = o["state"]
    steps.append([c.committed_text for c in st["cycles"]])
long = dict(GOOD, max_new=400)
box = []
t = threading.Thread(target=lambda: box.extend(av.named(o) for o in cb.generate(
    "Write a long story about the sea.", *long.values(), False, av.new_state(), cb.arm(req), request=req)))
t.start()
deadline = time.time() + 60  # Stop once the decode runs inside spaces.GPU (a fixed sleep let a fast CPU finish first)
while not spaces.INSIDE[0] and t.is_alive() and time.time() < deadline:
    time.sleep(0.005)
cb.stop(req); t.join(120)
stopped = box[-1]["state"]["eagle"]
print("RESULT " + json.dumps(dict(
    zero=zerogpu.ZERO, loaded=loaded, warm=warm, calls=spaces.CALLS, seen=seen,
    same=state["eagle"].summary.token_ids == state["vanilla"].summary.token_ids,
    eagle=state["eagle"].summary.token_ids, steps=steps, stop_set=zerogpu.STOP.is_set(),
    stopped_tokens=stopped.summary.new_tokens if stopped else None, alive=t.is_alive())))
'''


def run(tmp_path, zero: bool) -> dict:
    (tmp_path / "spaces").mkdir(exist_ok=True)
    (tmp_path / "spaces" / "__init__.py").write_text(FAKE_SPACES)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), ROOT]), SPACES_ZERO_GPU="true" if zero else "")
    r = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")]
    assert line, r.stderr[-3000:]
    return json.loads(line[-1][7:])


@pytest.fixture(scope="module")
def zero(tmp_path_factory):
    return run(tmp_path_factory.mktemp("zero"), True)


def test_every_decode_runs_inside_spaces_gpu(zero):
    assert zero["zero"] and zero["loaded"]
    assert ["decorated", "gpu_decode"] in zero["calls"] and ["decorated", "gpu_step"] in zero["calls"]
    calls = [c for c in zero["calls"] if c[0] == "call"]
    assert [c[1] for c in calls].count("gpu_decode") == 2 and "gpu_step" in [c[1] for c in calls]
    # Generate: EAGLE and vanilla; Step: 1 + 2 + 3 cycles decoded again; the long run: EAGLE only
    assert len(zero["seen"]) == 2 + 3 + 1
    assert all(inside for inside, _ in zero["seen"]), zero["seen"]  # no decode outside the wrapper
    assert not any(name.startswith("eagle-engine") for _, name in zero["seen"])  # nor on the engine thread
    assert next(c[2] for c in calls if c[1] == "gpu_decode") >= 2 * 1  # a duration per request, in seconds


def test_results_survive_the_process_boundary(zero):
    assert zero["same"] and zero["eagle"]  # greedy EAGLE identical to vanilla, through pickling
    a, b, c = zero["steps"]
    assert len(a) == 1 and b[:1] == a and c[:2] == b and len(c) == 3  # Step: one more cycle per click, the same ones


def test_no_cuda_warm_up_at_load_and_stop_reaches_the_decode(zero):
    assert zero["warm"] == [False]  # load_engine told not to warm up on CUDA (no CUDA outside spaces.GPU)
    assert zero["stop_set"] and not zero["alive"]
    assert zero["stopped_tokens"] is not None and zero["stopped_tokens"] < 400


def test_off_zerogpu_the_decorator_is_not_applied(tmp_path):
    off = run(tmp_path, False)
    assert not off["zero"] and off["calls"] == [] and off["warm"] == [True]
    assert off["seen"] and all(name.startswith("eagle-engine") for _, name in off["seen"][:2])  # Generate's runs
    assert off["same"]


@pytest.mark.parametrize("value,expected", [("true", True), ("1", True), ("True", True), ("", False), ("0", False),
                                            ("false", False)])
def test_zerogpu_is_detected_as_spaces_does(value, expected):
    assert zerogpu.on_zerogpu({"SPACES_ZERO_GPU": value}) is expected
    assert zerogpu.on_zerogpu({}) is False


def test_run_budget_is_shorter_on_zerogpu_unless_set():
    """On ZeroGPU a Generate asks for 2 x the run budget + 15 s of a visitor's daily GPU minutes."""
    code = "from eagle_app import decode_queue; print(decode_queue.RUN_BUDGET_S)"
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def budget(**env):
        base = {k: v for k, v in os.environ.items() if k not in ("SPACES_ZERO_GPU", "EAGLE_APP_RUN_BUDGET_S")}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                             env={**base, **env}, timeout=120)
        assert out.returncode == 0, out.stderr
        return float(out.stdout.strip().splitlines()[-1])

    assert budget() == 60.0
    assert budget(SPACES_ZERO_GPU="true") == 20.0
    assert budget(SPACES_ZERO_GPU="true", EAGLE_APP_RUN_BUDGET_S="45") == 45.0


def test_a_fresh_gpu_worker_warms_up_once_untimed_before_eagles_prefill(monkeypatch):
    """ZeroGPU: the GPU call first decodes each of the job's runs for a few tokens, untimed, so a freshly
    forked worker's first-kernel costs do not land in EAGLE's timed prefill; once per worker process;
    the timed runs and their figures are the job's own. Off ZeroGPU no warm-up."""
    from types import SimpleNamespace

    from conftest import tiny_head, tiny_target
    from eagle_app import model as app_model
    from eagle_app import worker
    from eagle_core import DecodeSettings, Engine

    target = tiny_target()
    engine = Engine(target, tiny_head(target), None, "tiny")
    log = []
    real_generate = engine.generate

    def generate(prompt, settings, stop=None, **kw):
        log.append(("generate", settings.method, settings.max_new_tokens))
        return real_generate(prompt, settings, stop, **kw)

    monkeypatch.setattr(engine, "generate", generate)
    monkeypatch.setattr(app_model, "MODEL", SimpleNamespace(engine=engine))
    monkeypatch.setattr(worker, "_warmed", set())
    settings = DecodeSettings(method="eagle2", max_new_tokens=12, depth=2, tree_top_k=2, total_tokens=4)
    job = worker.DecodeJob("abcabc", settings, tuple(engine.check("abcabc", settings)))

    def decode():
        out = []
        for what, kind, payload in worker.gpu_decode(job):
            log.append((what, kind))
            out.append((what, kind, payload))
        return out

    monkeypatch.setattr(zerogpu, "ZERO", True)
    events = decode()
    first_start = log.index(("start", "eagle"))
    before = [e for e in log[:first_start] if e[0] == "generate"]  # the warm-up, then the timed EAGLE run's start
    assert before == [("generate", "eagle2", worker.WARM_TOKENS), ("generate", "vanilla", worker.WARM_TOKENS),
                      ("generate", "eagle2", 12)]
    done = {kind: run for what, kind, run in events if what == "done"}
    assert done["eagle"].summary.new_tokens == done["vanilla"].summary.new_tokens == 12  # the job's runs only
    assert sum(len(r.cycles) for r in done.values()) == sum(1 for what, _, _ in events if what == "cycle")

    log.clear()
    decode()  # the same worker process: warm already
    assert [e for e in log if e[0] == "generate"] == [("generate", "eagle2", 12), ("generate", "vanilla", 12)]

    monkeypatch.setattr(worker, "_warmed", set())
    monkeypatch.setattr(zerogpu, "ZERO", False)
    log.clear()
    decode()  # off ZeroGPU (load_engine warms a dedicated GPU at load): none here
    assert [e for e in log if e[0] == "generate"] == [("generate", "eagle2", 12), ("generate", "vanilla", 12)]
