"""FastPath is the one seam between the portable path and the CPU's C library (issue 53, item 1).

- Down the portable path (FastPath.portable(), kernels="stock") nothing calls the library, whatever its
  state: here it is present but every use of it raises, and greedy EAGLE-1/2/3 still equal vanilla token
  for token, and sampling keeps the target's distribution.
- The cycle's kernels look at the tensors' device before they look for the library, and a target on
  another device (tensors on 'meta' stand in for a GPU's) never builds or loads it.
- The kernel-choice cache survives a change of the library's state (it once handed out smallgemm to a
  process without the library: AttributeError on 'pack_weight').
"""
from __future__ import annotations

import pytest
import torch

from conftest import tiny_head, tiny_target
from eagle_core import DecodeSettings, Engine, FastPath, from_model
from eagle_core.cpu import kernels
from eagle_core.cpu.kernels import build, compact as compact_module, rows as rows_module
from test_engine import PROMPTS, TREES
from test_portable import N_DRAWS, second_token_draws

WIDE = dict(depth=6, tree_top_k=8, total_tokens=40)


class Forbidden:
    """A library that is there (library() is not None) and raises on any use of it."""

    def __getattr__(self, name):
        raise AssertionError(f"the portable path called the C library ({name})")


def forbid_c(monkeypatch) -> list:
    """From now on the library is present and every use of it an error; library() calls counted."""
    calls = []
    monkeypatch.setattr(build, "_LIB", [Forbidden(), ""])
    real = build.library

    def counted():
        calls.append(1)
        return real()
    for mod in (build, rows_module, compact_module, kernels.attention, kernels.backends, kernels.calibration, kernels.gemv8):
        monkeypatch.setattr(mod, "library", counted)
    monkeypatch.setattr(kernels, "library", counted)
    monkeypatch.setattr(kernels.backends, "_SMALLGEMM", kernels.backends._LazyFn())  # no cached ctypes function either
    return calls


@pytest.fixture
def c_forbidden(monkeypatch):
    return forbid_c(monkeypatch)


def _target8(vocab: int, seed: int, fast):
    """test_head3.tiny_target8's model (built under EAGLE_PORTABLE=1: no kernels installed), wrapped with `fast`."""
    from test_head3 import tiny_target8

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(build.PORTABLE_ENV, "1")
        t = tiny_target8(vocab=vocab, seed=seed)
    return from_model(t.model, t.tokenizer, name=t.name, eos_ids=t.eos_ids, fast=fast)


def _greedy(engine, prompt, **tree):
    return engine.run(prompt, DecodeSettings(max_new_tokens=32, chat_template=False, **tree)).summary.token_ids


@pytest.mark.parametrize("fast", [FastPath.portable(), FastPath(kernels="stock")], ids=["portable", "stock"])
def test_portable_path_calls_no_c_and_greedy_eagle_1_2_3_equal_vanilla(monkeypatch, fast):
    # a model set up by a target on the engine's kernels first: the portable target undoes that
    first = tiny_target("llama", seed=1, vocab=8, fast=FastPath())
    c_forbidden = forbid_c(monkeypatch)
    target = from_model(first.model, first.tokenizer, name="tiny", eos_ids=first.eos_ids, fast=fast)
    assert not any(isinstance(m, kernels.Linear) for m in target.model.modules())
    assert target.forward_path == "transformers" and target.config._attn_implementation == "sdpa"
    c_forbidden.clear()
    engine = Engine(target, tiny_head(target, seed=11))
    assert engine.drafter.cpu is None
    for prompt in PROMPTS:
        van = _greedy(engine, prompt, method="vanilla")
        for tree in (TREES["eagle1"], TREES["eagle2"], TREES["eagle2-wide"]):
            assert _greedy(engine, prompt, **tree) == van, tree
    t8 = _target8(vocab=8, seed=1, fast=fast)
    from test_head3 import tiny_head3

    e3 = Engine(t8, head3=tiny_head3(t8, seed=11), head3_name="random")
    for prompt in PROMPTS:
        assert _greedy(e3, prompt, method="eagle3", **WIDE) == _greedy(e3, prompt, method="vanilla")
    assert not c_forbidden, "the portable path asked for the library"




def test_portable_path_sampling_keeps_the_target_distribution(c_forbidden):
    """As tests/test_portable.py's exactness test, with the library present and forbidden: the 2nd token
    goes through drafting and the point-mass rule; its frequencies follow the target's p(x2)."""
    target = tiny_target("llama", seed=5, vocab=8, fast=FastPath.portable())
    with torch.no_grad():
        target.model.lm_head.weight.mul_(0.05)  # a spread-out distribution, so sampling matters
    tv, accepted = second_token_draws(target, "eagle2", dict(depth=1, tree_top_k=3, total_tokens=3))
    assert accepted > N_DRAWS // 10  # drafts really were accepted, not only bonus tokens
    assert tv < 0.07  # sampling noise with 600 draws over 8 outcomes is ~0.03
    assert not c_forbidden


def test_the_fast_path_answers_for_the_portable_one_without_c(c_forbidden):
    rows = torch.randn(3, 10)
    p = FastPath.portable()
    assert p.row_stats(rows) is None and p.row_topk(rows, 2) is None and p.library() is None
    assert p.move_rows([], 0, [0]) is False
    assert not c_forbidden


def _no_library_at_all(monkeypatch):
    """Any attempt to find, build or load the library fails the test."""
    def refuse(*a, **k):
        raise AssertionError("the CPU library was looked for")
    monkeypatch.setattr(build, "_LIB", [])
    monkeypatch.setattr(build, "compile_kernels", refuse)
    for mod in (build, rows_module, compact_module, kernels.attention):
        monkeypatch.setattr(mod, "library", refuse)


def test_the_cycle_kernels_look_at_the_device_first(monkeypatch):
    _no_library_at_all(monkeypatch)
    meta = torch.empty(3, 10, device="meta")  # a GPU's tensors, as far as the check goes
    assert rows_module.row_stats(meta) is None and rows_module.row_topk(meta, 2) is None
    assert FastPath().row_stats(meta) is None

    class Layer:
        keys = values = torch.empty(1, 2, 8, 4, device="meta")
    assert compact_module.move_rows([Layer(), Layer()], 2, [0, 1, 3]) is False


def test_a_target_on_another_device_never_builds_the_library(monkeypatch):
    """A 'meta' model stands in for a CUDA one: the target gets the portable path, its drafter the
    portable drafter, its head cache torch's attention, and nothing looks for the library."""
    template = tiny_target("llama", seed=0, vocab=24, fast=FastPath.portable())
    _no_library_at_all(monkeypatch)
    model = template.model.to("meta")
    target = from_model(model, template.tokenizer, name="gpu-like", eos_ids=(-1,), fast=FastPath())
    assert target.fast == FastPath.portable() and target.kernels is None and target.forward_path == "transformers"
    head = tiny_head(template, seed=3).to("meta")
    engine = Engine(target, head)
    assert engine.drafter.cpu is None
    cache = engine.drafter.new_cache(16)
    q = torch.empty(1, 4, 2, 16, device="meta")
    assert cache.layers[0].attend(q, cache.layers[0], 2, None) is None


def test_the_choice_cache_survives_the_library_going_away(monkeypatch, tmp_path):
    """A plan measured with the library (smallgemm chosen), then a process without it (EAGLE_PORTABLE=1
    with an explicit FastPath, or the compiler gone): the plan must not hand out smallgemm. On the code
    before this test the install below raised AttributeError: 'NoneType' object has no attribute
    'pack_weight'."""
    monkeypatch.setenv("EAGLE_EXPLAINER_CACHE", str(tmp_path))
    monkeypatch.setattr(kernels.calibration, "time_backends",
                        lambda backends, n, k: {b.name: {1: 1.0 if b.name == "smallgemm" else 9.0} for b in backends})
    monkeypatch.setattr(kernels.calibration, "batch_invariant", lambda b, n, k: True)
    monkeypatch.setattr(kernels.SmallGemm, "available", staticmethod(lambda: True))
    assert kernels.choose([(24, 16)])[(24, 16)] == "smallgemm"
    monkeypatch.setattr(kernels.SmallGemm, "available", staticmethod(lambda: False))  # the library gone
    model = torch.nn.Sequential(torch.nn.Linear(16, 24))
    inst = kernels.install(model, "auto")
    assert inst.choice[(24, 16)] != "smallgemm"
    x = torch.randn(3, 16)
    with torch.inference_mode():
        torch.testing.assert_close(model(x), x @ model[0].weight.T + model[0].bias)
    monkeypatch.setattr(kernels.SmallGemm, "available", staticmethod(lambda: True))  # and back: the first plan holds
    assert kernels.choose([(24, 16)])[(24, 16)] == "smallgemm"


def test_no_invariant_backend_means_the_per_row_product(monkeypatch, tmp_path):
    """Where no fast backend passes the batch-invariance check, the choice is one invariant by
    construction (rowwise), never an unchecked one; and rowwise is invariant, bit for bit."""
    monkeypatch.setenv("EAGLE_EXPLAINER_CACHE", str(tmp_path))
    monkeypatch.setattr(kernels.calibration, "batch_invariant", lambda b, n, k: False)
    assert kernels.choose([(40, 24)])[(40, 24)] == "rowwise"
    assert set(kernels.calibration.REJECTED[(40, 24)]) == set(kernels.calibration.available())
    monkeypatch.undo()
    assert kernels.batch_invariant(kernels.RowWise, 300, 257)


def test_the_library_is_reached_only_through_the_fast_path():
    """grep: outside eagle_core/cpu (and the benchmarks, which measure the kernels themselves) no module
    asks for the library or imports a kernel that calls it."""
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[1] / "eagle_core"
    leaks = []
    for path in root.rglob("*.py"):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(("cpu/", "bench/")):
            continue
        text = path.read_text(encoding="utf-8")
        if re.search(r"library\(\)|kernels\.(rows|compact|attention|gemv8|build)\b|kernels import (attention|rows|compact)",
                     text):
            leaks.append(rel)
    assert not leaks, leaks
