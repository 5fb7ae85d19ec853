"""The app where torch sees a CUDA GPU, checked on a CPU: the page opens with the `gpu` tree and the
model picker, the timing note names the device, and Generate and Step share one request prefix (refuse, wait for
the model). CUDA is faked by monkeypatching torch.cuda; no test here needs a GPU or the hub."""
from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from eagle_app import views as av
from eagle_app.callbacks import decoding as cb
from eagle_app.views import note_text
from eagle_core import PRESETS
from tests.app_fixtures import default_engine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOOD = dict(method="eagle2", depth=3, tree_top_k=4, total_tokens=8, chain_length=3, temperature=0.0, top_p=1.0,
            top_k=0, max_new=6, seed=0)


@pytest.fixture(scope="module")
def engine():
    e = default_engine()
    cb.MODEL.set_engine(e)
    return e


def req(name: str):
    return SimpleNamespace(session_hash=name)


def test_the_page_opens_with_the_gpu_tree_on_cuda():
    """Built in a fresh interpreter where torch says it sees CUDA: preset, sliders and the API's defaults."""
    code = ("import torch; torch.cuda.is_available = lambda: True\n"
            "from eagle_app import layout, settings\n"
            "page = layout.build()\n"
            "print(page.c['pick_box'].visible, page.c['preset'].value,"
            "      *(page.settings[k].value for k in ('depth', 'tree_top_k', 'total_tokens')))")
    env = {k: v for k, v in os.environ.items() if k not in ("SPACE_ID", "EAGLE_APP_ALLOW_SWITCH", "SPACES_ZERO_GPU")}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    gpu = PRESETS["gpu"]
    assert out.stdout.split()[-5:] == ["True", "gpu", str(gpu["depth"]), str(gpu["tree_top_k"]),
                                       str(gpu["total_tokens"])]  # and the model picker is shown


def test_the_page_opens_with_the_cpu_tree_on_a_cpu(monkeypatch):
    from eagle_app import settings

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert settings.page_preset() == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert settings.page_preset() == "gpu"


def test_the_timing_note_names_the_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda d=None: "NVIDIA A100-SXM4-40GB")
    note = ("note.timed", {"how": "note.quiet", "device": cb.device_note("cuda:0", 2)})
    en, zh = note_text(note, "en"), note_text(note, "zh")
    assert "on the GPU NVIDIA A100-SXM4-40GB (CUDA)." in en and "CPU thread" not in en
    assert "GPU NVIDIA A100-SXM4-40GB（CUDA）上先后运行" in zh and "CPU" not in zh
    cpu = ("note.timed", {"how": "note.quiet", "device": cb.device_note("cpu", 2)})
    assert "on 2 CPU thread(s)." in note_text(cpu, "en") and "2 个 CPU 线程上" in note_text(cpu, "zh")


def test_a_generate_on_the_cpu_names_its_threads(engine):
    outs = [av.named(o) for o in cb.generate("Say hello.", *GOOD.values(), True, av.new_state(),
                                             cb.arm(req("N")), request=req("N"))]
    state = outs[-1]["state"]
    assert state["note"][1]["device"] == ("device.cpu", {"threads": torch.get_num_threads()})
    assert "CPU thread(s)." in outs[-1]["comparison"]


def test_generate_and_step_refuse_the_same_way():
    """The shared prefix: an empty prompt is refused by both, with the same message, before any model."""
    gen = [av.named(o) for o in cb.generate("  ", *GOOD.values(), True, av.new_state(), cb.arm(req("R")),
                                            request=req("R"))]
    step = [av.named(o) for o in cb.step("  ", *GOOD.values(), av.new_state(), request=req("R"))]
    assert len(gen) == len(step) == 1 and gen[0]["status"] == step[0]["status"]
    assert "empty" in gen[0]["status"]


def test_generate_and_step_both_say_when_stopped_before_the_model(monkeypatch):
    """The shared prefix: with no model (a failed load), both end with the same status line."""
    from eagle_app.model import ModelHolder

    holder = ModelHolder()
    holder.error = "OSError: no weights"
    holder.ready.set()
    monkeypatch.setattr(cb, "MODEL", holder)
    monkeypatch.setattr(cb.gr, "Warning", lambda *a, **k: None)
    gen = [av.named(o) for o in cb.generate("Hi", *GOOD.values(), True, av.new_state(), cb.arm(req("S")),
                                            request=req("S"))]
    step = [av.named(o) for o in cb.step("Hi", *GOOD.values(), av.new_state(), request=req("S"))]
    assert gen[-1]["status"] == step[-1]["status"] and "model" in gen[-1]["status"].lower()
