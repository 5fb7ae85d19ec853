"""The model picker and its pairs (eagle_app/public_models.py, eagle_app/picker.py), on a CPU: who may see
and use it, the load with its progress, a gated target without a token, a Generate that waited
through a switch. The loader is monkeypatched (it returns the default engine): nothing is
downloaded, no hub is reached."""
from __future__ import annotations

import copy
import os
import threading
import time
from types import SimpleNamespace

import pytest
import torch

from eagle_app import model as am
from eagle_app import public_models, picker, zerogpu
from eagle_app import views as av
from eagle_app.callbacks import decoding as cb
from eagle_core.target.hub import HUB_ID
from tests.app_fixtures import default_engine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
QWEN = next(p for p in public_models.PAIRS if p.target == "Qwen/Qwen3-1.7B")
LLAMA = next(p for p in public_models.PAIRS if p.target == "meta-llama/Llama-3.1-8B-Instruct")
VICUNA = next(p for p in public_models.PAIRS if p.target == "lmsys/vicuna-7b-v1.3")


def test_the_pairs_are_complete_and_sourced():
    assert public_models.PAIRS[0] is public_models.DEFAULT and len(public_models.PAIRS) >= 4
    for p in public_models.PAIRS[1:]:
        assert HUB_ID.match(p.target) and all(HUB_ID.match(h) for h in (p.head, p.head3) if h)
        assert p.layer_ids in ("inputs", "outputs") and p.sources and "silu" in p.facts and p.weights_gb > 1
    assert LLAMA.gated and not QWEN.gated and not VICUNA.gated
    assert LLAMA.methods == QWEN.methods == ("vanilla", "eagle3")
    assert VICUNA.methods == ("vanilla", "eagle2", "eagle1", "chain") and public_models.DEFAULT.methods is None


def test_the_docs_list_every_pair_with_its_layer_ids():
    text = open(os.path.join(ROOT, "docs", "gpu.md"), encoding="utf-8").read()
    for p in public_models.PAIRS[1:]:
        assert p.target in text and (p.head or p.head3) in text, p.key
    assert "AngelSlim" in text and "2, 14, 25" in text and "2, 16, 29" in text


@pytest.mark.parametrize("cuda,env,zero,shown", [
    (False, {}, False, False),  # a CPU: hidden
    (True, {}, False, True),  # a GPU of one's own: shown
    (True, {"SPACE_ID": "user/app"}, False, False),  # a shared Space: hidden unless its operator says so
    (True, {"SPACE_ID": "user/app", "EAGLE_APP_ALLOW_SWITCH": "1"}, False, True),
    (True, {"EAGLE_APP_ALLOW_SWITCH": "0"}, False, False),
    (True, {"EAGLE_APP_ALLOW_SWITCH": "1"}, True, False),  # ZeroGPU: the model loads at start-up only
])
def test_who_sees_the_picker(monkeypatch, cuda, env, zero, shown):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(zerogpu, "ZERO", zero)
    assert public_models.picker_shown(env) is shown


def test_the_picker_is_hidden_on_a_cpu():
    from eagle_app import layout

    assert not torch.cuda.is_available()
    page = layout.build()
    assert page.c["pick_box"].visible is False and page.c["pick"].choices


@pytest.fixture
def holder(monkeypatch):
    """A fresh model holder with the default engine, a GPU that may switch, and a loader that takes 1.5 s."""
    engine = default_engine()
    h = am.ModelHolder()
    h.set_engine(engine)
    calls = []

    def fake_load(model=None, head=None, *a, **kw):
        calls.append(dict(model=model, head=head, **kw))
        time.sleep(1.5)
        return copy.copy(engine)  # another engine object, as a new load would give

    monkeypatch.setattr(am, "load_engine", fake_load)
    for mod in (picker, cb):
        monkeypatch.setattr(mod, "MODEL", h)
    monkeypatch.setattr(public_models, "picker_shown", lambda env=None: True)
    return SimpleNamespace(h=h, calls=calls, engine=engine)


def test_loading_a_pair_shows_progress_and_frees_the_slot(holder):
    seen = []
    outs = list(picker.load_pair(QWEN.key, "en", progress=lambda f, desc="": seen.append((f, desc))))
    lines = [status for _, status in outs]
    assert any("Loading **Qwen3-1.7B" in s for s in lines) and "is loaded" in lines[-1]
    assert seen and all(0 <= f < 1 for f, _ in seen) and seen[-1][0] > seen[0][0]  # the bar moves
    assert holder.calls == [dict(model="Qwen/Qwen3-1.7B", head=None, head3="AngelSlim/Qwen3-1.7B_eagle3",
                                 head3_layer_ids="inputs", methods=("vanilla", "eagle3"), dtype=None, warm=True,
                                 head3_rope_theta=10000.0)]
    assert holder.h.model == "Qwen/Qwen3-1.7B" and holder.h.engine is not holder.engine
    ticket = cb.LINE.join(1)
    assert cb.LINE.wait(ticket, 1.0)  # the decode slot is free again
    cb.LINE.leave(ticket)


def test_a_gated_target_without_a_token_is_refused_before_unloading(holder, monkeypatch, tmp_path):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda *a, **k: (_ for _ in ()).throw(OSError("no")))
    outs = list(picker.load_pair(LLAMA.key, "en", progress=lambda *a, **k: None))
    assert len(outs) == 1 and "gated" in outs[0][1] and "HF_TOKEN" in outs[0][1] and "stays" in outs[0][1]
    assert holder.calls == [] and holder.h.engine is holder.engine  # nothing unloaded


def test_switching_is_refused_where_it_is_off(holder, monkeypatch):
    monkeypatch.setattr(public_models, "picker_shown", lambda env=None: False)
    outs = list(picker.load_pair(QWEN.key, "zh", progress=lambda *a, **k: None))
    assert len(outs) == 1 and "EAGLE_APP_ALLOW_SWITCH" in outs[0][1] and holder.calls == []


def test_a_generate_that_waited_through_a_switch_asks_to_press_again(holder):
    GOOD = dict(method="eagle2", depth=3, tree_top_k=4, total_tokens=8, chain_length=3, temperature=0.0, top_p=1.0,
                top_k=0, max_new=6, seed=0)
    req = SimpleNamespace(session_hash="W")
    ticket = cb.LINE.join(1)
    assert cb.LINE.wait(ticket, 1.0)  # the slot is taken, as by a running decode
    box = []
    t = threading.Thread(target=lambda: box.extend(av.named(o) for o in cb.generate(
        "Say hello.", *GOOD.values(), True, av.new_state(), cb.arm(req), request=req)))
    t.start()
    time.sleep(1.5)  # the Generate has its engine and waits in line
    holder.h.set_engine(copy.copy(holder.engine))  # the picker's switch
    cb.LINE.leave(ticket)
    t.join(60)
    assert "switched" in box[-1]["status"] and "state" not in box[-1]
