"""The benchmark's optional CPU peer (eagle_core/bench/llamacpp.py): greedy from the harness's token
ids, the same stop condition as the engine, timed with the prefill; a clear refusal without it."""
import sys
import types

import pytest

from eagle_core.bench import harness, llamacpp
from eagle_core.bench.prompts import Prompt
from eagle_core.bench.report import summarize
from eagle_core.config import DecodeSettings


class _FakeLlama:
    """llama_cpp.Llama's generate: yields the ids it was told to, records what it was asked."""
    made = []

    def __init__(self, **kw):
        self.kw, self.asked = kw, []
        _FakeLlama.made.append(self)

    def generate(self, tokens, **kw):
        self.asked.append((list(tokens), kw))
        yield from [5, 6, 7, 2, 8, 9]  # 2 is an EOS id below


@pytest.fixture
def fake_llama_cpp(monkeypatch, tmp_path):
    mod = types.ModuleType("llama_cpp")
    mod.Llama = _FakeLlama
    monkeypatch.setitem(sys.modules, "llama_cpp", mod)
    _FakeLlama.made.clear()
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"")
    monkeypatch.setattr(llamacpp, "default_gguf", lambda: str(gguf))
    return gguf


def test_greedy_from_the_given_ids_stops_at_eos_or_the_budget(fake_llama_cpp):
    peer = llamacpp.LlamaCpp(threads=2)
    assert peer.llm.kw["model_path"] == str(fake_llama_cpp) and peer.llm.kw["n_threads"] == 2
    toks, wall, stop = peer.generate([1, 3, 4], 10, {2})
    assert toks == [5, 6, 7] and stop == "eos" and wall >= 0
    ids, kw = peer.llm.asked[0]
    assert ids == [1, 3, 4] and kw["top_k"] == 1 and kw["temp"] == 0.0 and kw["reset"]
    toks, _, stop = peer.generate([1], 2, {2})
    assert toks == [5, 6] and stop == "max_new_tokens"


def test_the_harness_runs_it_as_a_method_and_reports_it_beside_vanilla(fake_llama_cpp):
    class Target:
        eos_ids = (2,)
        device = "cpu"

    runner = harness.Runner(Target(), None, DecodeSettings(max_new_tokens=8))
    p = Prompt(index=0, text="hi", category="writing")
    smp = runner.run("llama.cpp", p, [1, 3], 0, 0)
    assert smp.method == "llama.cpp" and smp.token_ids == (5, 6, 7) and smp.stop_reason == "eos"
    van = harness.Sample("vanilla", 0, 0, "writing", (5, 6, 7), smp.wall_s * 2, 3, 1.0)
    res = summarize([van, smp], ["vanilla", "llama.cpp"], greedy=True)
    st = res["methods"]["vanilla"]["overall"]
    assert st["speedup_vs_llama_cpp"] == pytest.approx(0.5)
    assert res["methods"]["llama.cpp"]["overall"]["identical_to_vanilla"] == 1.0
    with pytest.raises(ValueError, match="greedy only"):
        harness.Runner(Target(), None, DecodeSettings(temperature=1.0)).run("llama.cpp", p, [1], 0, 0)


def test_without_llama_cpp_python_the_command_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # import fails
    ok, why = llamacpp.available()
    assert not ok and "pip install llama-cpp-python" in why
    with pytest.raises(SystemExit, match="llama-cpp-python"):
        harness.main(["--methods", "vanilla,llama.cpp", "--prompts", "nonexistent.jsonl"])
