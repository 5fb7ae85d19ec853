"""The page as fast as the engine (issue 54, item 7): while a timed run decodes, what is kept per cycle
is ids and numbers (RawCycle); the labels and text are built after the last cycle, the same records an
iterating consumer gets, and the engine's timed span covers the whole decode less what its consumer holds."""
from __future__ import annotations

import pytest
import torch

import eagle_core.decode as decode_module
from conftest import tiny_head, tiny_target
from eagle_core import DecodeSettings, Engine
from eagle_core.trace import RawCycle


def engine_and_settings(**kw):
    target = tiny_target("llama", seed=2, vocab=24)
    engine = Engine(target, tiny_head(target, seed=4))
    s = DecodeSettings(method="eagle2", depth=3, tree_top_k=3, total_tokens=8, max_new_tokens=24,
                       chat_template=False).with_(**kw)
    return engine, s


def same_but_times(a, b):
    strip = lambda c: c.__class__(**{**c.__dict__, "draft_ms": 0.0, "verify_ms": 0.0})  # noqa: E731
    return [strip(c) for c in a] == [strip(c) for c in b]


@pytest.mark.parametrize("kw", [{}, {"temperature": 0.8, "top_p": 0.9, "seed": 3},
                                {"method": "chain", "temperature": 1.0, "seed": 1}, {"method": "vanilla"}])
def test_raw_run_builds_the_records_an_iterating_run_gets(kw):
    engine, s = engine_and_settings(**kw)
    it = engine.generate("hello world", s)
    records = list(it)
    gen = engine.generate("hello world", s)
    raws = list(gen.raw())
    assert raws and all(isinstance(r, RawCycle) for r in raws) and len(raws) == len(records)
    assert [r.committed_ids for r in raws] == [c.committed_ids for c in records]
    assert same_but_times(gen.run.cycles, records) and same_but_times(gen.cycles, records)
    assert gen.run.summary.text == it.run.summary.text and gen.run.summary.token_ids == it.run.summary.token_ids
    assert all(r.tree.q_dists is None for r in raws)  # a sampled chain's q over the vocabulary is not kept


def test_a_raw_run_decodes_no_text_until_its_last_cycle(monkeypatch):
    """Work, counted: tokenizer.decode calls (labels, text) during the run's cycles: none."""
    engine, s = engine_and_settings()
    calls = []
    real = engine.target.tokenizer.decode
    monkeypatch.setattr(engine.target.tokenizer, "decode", lambda *a, **k: calls.append(1) or real(*a, **k))
    gen = engine.generate("hello world", s)
    per_cycle = []
    for _ in gen.raw():
        per_cycle.append(len(calls))
    assert len(per_cycle) > 3 and per_cycle[-1] == 0  # nothing decoded while the cycles ran ...
    assert len(calls) > len(per_cycle)  # ... and every label and text after: the records are complete
    assert all(n.text for c in gen.run.cycles for n in c.nodes)


@pytest.mark.parametrize("mode", ["iterate", "raw"])
def test_the_timed_span_is_the_whole_decode_less_what_the_consumer_holds(monkeypatch, mode):
    """A clock that moves 1 s at each cut_at_stop (the prefill's and each cycle's, inside the engine's
    work) and 5 s whenever the consumer holds a cycle: the run's wall time is 1 s per cut exactly."""
    engine, s = engine_and_settings()
    now, cuts = [0.0], []
    real_cut = decode_module.cut_at_stop

    def cut(*a):
        cuts.append(1)
        now[0] += 1.0
        return real_cut(*a)

    monkeypatch.setattr(decode_module, "cut_at_stop", cut)
    monkeypatch.setattr(decode_module, "clock", lambda device: now[0])
    gen = engine.generate("hello world", s)
    for _ in (gen if mode == "iterate" else gen.raw()):
        now[0] += 5.0  # the consumer's own time: not the engine's
    assert gen.run.summary.wall_s == float(len(cuts)) == 1.0 + gen.run.summary.cycles
    assert gen.run.summary.prefill_ms == 1000.0


def test_the_page_worker_passes_raw_cycles_and_a_finished_run():
    from eagle_app.worker import DecodeJob, decode_events

    engine, s = engine_and_settings()
    ids = engine.check("hello world", s)
    events = list(decode_events(engine, DecodeJob("hello world", s, tuple(ids)), stop=_NeverStop()))
    cycles = [p for what, _, p in events if what == "cycle"]
    done = {k: p for what, k, p in events if what == "done"}
    assert cycles and all(isinstance(c, RawCycle) for c in cycles)
    assert sum(len(r.cycles) for r in done.values()) == len(cycles)
    want = engine.run("hello world", s)
    assert done["eagle"].summary.token_ids == want.summary.token_ids
    assert same_but_times(done["eagle"].cycles, want.cycles)


class _NeverStop:
    def is_set(self) -> bool:
        return False


def test_measure_app_vs_cli_checks_the_setup_and_reports_both_ratios(monkeypatch):
    """The comparison script (run on a quiet machine by hand): the CLI must have run the page's prompt and
    tree, and each method's median page/CLI ratio is printed against the 5% bar."""
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(__file__), "..", "scripts", "measure_app_vs_cli.py")
    spec = importlib.util.spec_from_file_location("measure_app_vs_cli", path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)

    def fake_cli(prompt, method, a):
        return {"tokens_per_s": 100.0 if method == "eagle" else 50.0, "token_ids": [1, 2],
                "method": "eagle2" if method == "eagle" else "vanilla",
                "settings": {"depth": a.depth, "tree_top_k": a.top_k, "total_tokens": a.total, "max_new_tokens": a.max_new}}

    monkeypatch.setattr(m, "cli", fake_cli)
    a = type("A", (), {"depth": 4, "top_k": 2, "total": 7, "max_new": 32})()
    shown = {"prompt": "p", "depth": 4, "tree_top_k": 2, "total_tokens": 7, "max_new_tokens": 32}
    good = m.add_cli({"e_page": 97.0, "v_page": 40.0}, "p", a, shown)
    bad = m.add_cli({"e_page": 97.0, "v_page": 40.0}, "p", a, {**shown, "depth": 3})
    assert good["setup"] and not bad["setup"] and good["same"]
    text = m.ratio_lines([m.median_row("p", [good])], "page")
    assert "EAGLE: page/CLI median 0.970" in text and "within 5%" in text
    assert "vanilla: page/CLI median 0.800" in text and "NOT within 5%" in text
    assert "1 of 1 prompts" in text


def test_the_page_thread_is_not_woken_per_cycle():
    """The worker counts cycles into `progress` and queues only a run's start, end and results: a
    message per cycle woke the page's thread once per vanilla token while the decoder ran."""
    from eagle_app.worker import Worker

    engine, s = engine_and_settings()
    worker = Worker(engine, "hello world", s).start()
    worker.wait()
    queued = []
    while not worker.events.empty():
        queued.append(worker.events.get_nowait())
    kinds = [what for what, _, _ in queued]
    assert "cycle" not in kinds and kinds[-1] == "end"
    done = {k: p for what, k, p in queued if what == "done"}
    assert set(done) == {"eagle", "vanilla"}
    for kind, run in done.items():  # (tokens, cycles): the prefill's token, then each cycle's commits
        assert worker.progress[kind] == (run.summary.new_tokens, len(run.cycles))
