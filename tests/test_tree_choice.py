"""The default tree chosen per machine and weight format (eagle_core/machine/tree_choice.py): hand-built
forward curves and tau tables whose best tree is known, the cache (hit, miss, what its key holds), the
refusals that keep the preset (EAGLE_FIXED_TREE, a GPU, the portable path, another head, a busy machine), the
command line (an explicit --tree wins, one stderr line otherwise) and the page (the tick the model is ready
puts the chosen tree in the sliders unless the user moved them)."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from eagle_core import PRESETS, parse_tree
from eagle_core.machine import tree_choice as tc
from eagle_core.machine.tree_choice import TreeChoice, choose_tree

TAU = {"1,1,1": 1.5, "2,2,4": 1.9, "4,2,7": 2.14, "4,4,12": 2.3}


def table(tau=TAU, head="h", vocab=8) -> dict:
    trees = sorted((parse_tree(k) for k in tau), key=lambda t: (t.total_tokens, t.depth))
    return {"head": head, "draft_vocab": vocab, "tau": dict(tau), "trees": trees}


def curve(t_of_k) -> dict:
    """t(k) for every k a candidate verifies (1 + its drafts) and k = 1, drafting free: c = t(k) / t(1)."""
    ks = {1} | {parse_tree(k).total_tokens + 1 for k in TAU}
    return {"forward_ms": {k: t_of_k(k) for k in ks}, "step_ms": {1: 0.0, 2: 0.0, 3: 0.0, 4: 0.0}, "seconds": 0.5,
            "others": 0.0}


FLAT = curve(lambda k: 10.0)  # a GPU-like curve: verifying 13 rows costs one step, so the biggest tau wins
STEEP = curve(lambda k: 10.0 * (1 + 0.25 * (k - 1)))  # each row +25%: 1,1,1 at 1.5/1.25 = 1.2 beats 2,2,4 at 0.95
CLIFF = curve(lambda k: 10.0 if k <= 8 else 20.0)  # flat to 8 rows, then double: 4,2,7 (2.14) beats 4,4,12 (1.15)


def engine(weights="float32", head="h", vocab=8, device="cpu", library=True, drafter=True):
    target = SimpleNamespace(device=device, fast=SimpleNamespace(calls_library=library), weight_format=weights,
                             name="tiny")
    return SimpleNamespace(target=target, drafter=SimpleNamespace(head=None) if drafter else None, head_name=head,
                           draft_vocab=list(range(vocab)))


class Measure:
    """A measurement that counts its calls and returns a hand-built curve."""

    def __init__(self, result):
        self.result, self.calls = result, 0

    def __call__(self, engine, trees):
        self.calls += 1
        assert [t.text for t in trees] == ["1,1,1", "2,2,4", "4,2,7", "4,4,12"]  # the candidates, smallest first
        return self.result


@pytest.mark.parametrize("measured,best", [(FLAT, "4,4,12"), (STEEP, "1,1,1"), (CLIFF, "4,2,7")])
def test_the_best_tree_of_a_hand_built_curve(measured, best, tmp_path):
    m = Measure(measured)
    got = choose_tree(engine(), table(), cache_dir=str(tmp_path), env={}, measure=m)
    assert got.chosen and got.tree.text == best and m.calls == 1
    rows = {r["tree"]: r["speedup"] for r in got.rows}
    assert got.predicted == pytest.approx(max(rows.values()), abs=1e-3)
    assert got.preset == "cpu" and got.preset_predicted == pytest.approx(rows["4,2,7"], abs=1e-3)
    assert f"Tree: {best} chosen for this machine" in got.line() and "t(13)/t(1)" in got.line()


def test_the_preset_stays_unless_another_tree_is_clearly_faster():
    rows = [{"tree": "4,2,7", "speedup": 1.60}, {"tree": "2,2,4", "speedup": 1.64}]
    assert tc.pick(rows, "4,2,7")["tree"] == "4,2,7"  # 2.5% faster: noise, the preset stays
    rows[1]["speedup"] = 1.70
    assert tc.pick(rows, "4,2,7")["tree"] == "2,2,4"


def test_a_second_start_reads_the_cache_and_another_format_or_cpu_measures_again(tmp_path, monkeypatch):
    m = Measure(STEEP)
    first = choose_tree(engine(), table(), cache_dir=str(tmp_path), env={}, measure=m)
    again = choose_tree(engine(), table(), cache_dir=str(tmp_path), env={}, measure=m)
    assert m.calls == 1 and not first.cached and again.cached and again.tree == first.tree
    assert again.ratios == first.ratios and again.predicted == first.predicted and "cached" in again.line()
    choose_tree(engine(weights="gguf"), table(), cache_dir=str(tmp_path), env={}, measure=m)
    assert m.calls == 2  # another weight format: another curve
    import eagle_core.cpu.kernels as kernels

    monkeypatch.setattr(kernels, "cpu_model", lambda: "Another CPU (family 1, model 2)")
    choose_tree(engine(), table(), cache_dir=str(tmp_path), env={}, measure=m)
    assert m.calls == 3  # another CPU model
    key = tc.cache_key(engine().target, table(), threads=2)
    assert {key["cpu"], key["threads"], key["weights"], key["head"]} == {"Another CPU (family 1, model 2)", 2,
                                                                         "float32", "h"}
    assert tc.cache_path(key) != tc.cache_path({**key, "threads": 1})
    assert tc.cache_path(key) != tc.cache_path({**key, "tau": "0" * 16})  # a new tau record measures again
    assert len(list(tmp_path.iterdir())) == 3 and all(json.load(open(p))["key"] for p in tmp_path.iterdir())


@pytest.mark.parametrize("case,reason", [
    (dict(env={"EAGLE_FIXED_TREE": "1"}), "EAGLE_FIXED_TREE=1"),
    (dict(engine=engine(device="cuda:0")), "not a CPU"),
    (dict(engine=engine(library=False)), "portable path"),
    (dict(engine=engine(head="my/own-head")), "shipped head"),
    (dict(engine=engine(vocab=5)), "shipped head"),
    (dict(engine=engine(drafter=False)), "no choice cached"),
    (dict(result={**STEEP, "others": 0.6}), "other processes used 60%"),
    (dict(result=curve(lambda k: 30.0 if k == 2 else 10.0)), "t(5) 10.0 ms under t(2) 30.0 ms"),
])
def test_the_preset_where_no_trustworthy_choice_is_possible(case, reason, tmp_path):
    m = Measure(case.get("result", STEEP))
    e = case.get("engine", engine())
    got = choose_tree(e, table(), cache_dir=str(tmp_path), env=case.get("env", {}), measure=m)
    preset = "gpu" if "cuda" in str(e.target.device) else "cpu"
    assert not got.chosen and got.tree == parse_tree(preset) and reason in got.reason
    assert got.line() == f"Tree: {got.tree.text}, the {preset} preset ({got.reason})."
    assert not list(tmp_path.iterdir())  # nothing cached: the next start tries again
    assert m.calls == (1 if "result" in case else 0)
    from eagle_app.tree_advice import KEPT_ZH, choice_note

    zh = choice_note(got, "zh")  # the Chinese page says the same reason in Chinese, with its values
    assert got.why in KEPT_ZH and KEPT_ZH[got.why].split("{")[0] in zh and (" " not in got.reason or got.reason not in zh)
    assert all(str(v) in zh for v in got.why_args.values()) and got.reason in choice_note(got, "en")


def test_the_others_share_leaves_out_this_process(monkeypatch):
    """/proc/stat's busy jiffies minus this process's own CPU seconds, over all CPUs' jiffies."""
    monkeypatch.setattr(tc.os, "sysconf", lambda name: 100)  # 100 jiffies a second
    assert tc.others_share(((100, 1000), 0.0), ((300, 1400), 1.0)) == pytest.approx(0.25)  # 2 s busy, 1 s ours, 4 s
    assert tc.others_share(((100, 1000), 0.0), ((300, 1400), 2.5)) == 0.0  # never below 0 (clock granularity)
    assert tc.others_share((None, 0.0), ((300, 1400), 1.0)) is None  # no /proc/stat: not known


def test_a_failed_measurement_keeps_the_preset(tmp_path, monkeypatch):
    def broken(engine, trees):
        raise RuntimeError("no memory")

    got = choose_tree(engine(), table(), cache_dir=str(tmp_path), env={}, measure=broken)
    assert not got.chosen and got.tree == parse_tree("cpu") and "no memory" in got.reason
    from eagle_app.tree_advice import choice_note, page_choice

    assert got.why == "failed" and "无法测量" in choice_note(got, "zh") and "no memory" in choice_note(got, "zh")
    monkeypatch.delenv("EAGLE_FIXED_TREE", raising=False)  # (the tests' conftest keeps the preset)
    bad = SimpleNamespace(drafter=object(), target=SimpleNamespace(device="cpu"))  # choose_tree raises: the preset
    kept = page_choice(bad)
    assert kept.why == "not_chosen" and "没有选择" in choice_note(kept, "zh") and "not chosen" in kept.reason


def test_the_measurement_itself_runs_on_a_tiny_engine(monkeypatch):
    """measure_here on a real (tiny) target and head: t(k) for 1 and every candidate's rows, one drafting step
    for every width the predictions read, all positive (the machine taken as quiet: this tests the code path)."""
    from conftest import tiny_head, tiny_target
    from eagle_core import Engine

    target = tiny_target("llama", seed=1, vocab=24)
    e = Engine(target, tiny_head(target, seed=3), head_name="random")
    trees = [parse_tree(t) for t in ("1,1,1", "2,2,4", "4,2,7")]
    monkeypatch.setattr(tc, "others_share", lambda before, after: 0.0)
    m = tc.measure_here(e, trees)
    assert sorted(m["forward_ms"]) == [1, 2, 5, 8] and all(v > 0 for v in m["forward_ms"].values())
    assert sorted(m["step_ms"]) == [1, 2, 3, 4] and all(v > 0 for v in m["step_ms"].values())
    assert m["others"] == 0.0 and m["seconds"] > 0
    got = tc.decide(m, table({k: TAU[k] for k in ("1,1,1", "2,2,4", "4,2,7")}), trees, "cpu", "float32")
    assert got.chosen and got.tree in trees and got.ratios[1] == 1.0


def test_the_rounds_stop_early_on_a_busy_or_slow_machine(monkeypatch, tmp_path):
    """Busy before the warm-up ends: no timed round, the preset (nothing cached); past the budget: the warm-up and
    one timed round only."""
    from conftest import tiny_head, tiny_target
    from eagle_core import Engine

    target = tiny_target("llama", seed=1, vocab=24)
    calls, step = [], tc.ForwardTiming.step
    monkeypatch.setattr(tc.ForwardTiming, "step", lambda self, ids, prepare=None: calls.append(ids.shape[1]) or
                        step(self, ids, prepare))
    assert tc.forward_curve(target, [1, 3], stop=lambda r: "abandon") is None and calls == []
    got = tc.forward_curve(target, [1, 3], stop=lambda r: "end")
    assert sorted(got) == [1, 3] and calls == [1, 3, 1, 3] and all(v > 0 for v in got.values())
    monkeypatch.setattr(tc, "others_share", lambda before, after: 0.9)
    e = Engine(target, tiny_head(target, seed=3), head_name="random")
    got = choose_tree(e, table(head="random", vocab="full"), cache_dir=str(tmp_path), env={})
    assert not got.chosen and "other processes used 90%" in got.reason and not list(tmp_path.iterdir())


# ---- the command line ----------------------------------------------------------------------------
@pytest.fixture
def cli(monkeypatch):
    """main() on a tiny engine, the machine's choice replaced by a known one (3 rows: 1,1,2)."""
    import eagle_core.engine_loading as loading
    import eagle_core.machine as machine
    from conftest import tiny_head, tiny_target
    from eagle_core import Engine

    target = tiny_target("llama", seed=1, vocab=8)
    e = Engine(target, tiny_head(target, seed=11), head_name="random")
    monkeypatch.setattr(loading, "load_engine", lambda *a, **k: e)
    asked = []
    picked = TreeChoice(parse_tree("1,1,2"), "cpu", chosen=True, predicted=1.5, preset_predicted=1.4, t1_ms=10.0,
                        ratios={1: 1.0, 3: 1.1})
    monkeypatch.setattr(machine, "choose_tree", lambda engine: asked.append(engine) or picked)
    return asked


def _run(capsys, *extra):
    from eagle_core.__main__ import main

    assert main(["generate", "--prompt", "hi", "--max-new-tokens", "4", "--json", "--no-chat-template", *extra]) == 0
    out = capsys.readouterr()
    settings = json.loads(out.out.strip().splitlines()[-1])["settings"]
    return settings, [x for x in out.err.splitlines() if x.startswith("Tree:")]


def test_the_cli_opens_with_the_chosen_tree_and_says_so(cli, capsys):
    s, lines = _run(capsys, "--method", "eagle")
    assert (s["depth"], s["tree_top_k"], s["total_tokens"]) == (1, 1, 2) and len(cli) == 1
    assert lines == ["Tree: 1,1,2 chosen for this machine (float32 weights): predicted 1.50x vanilla, the cpu preset "
                     "1.40x; t(1) 10.0 ms, t(3)/t(1) 1.10 (measured in 0.0 s; EAGLE_FIXED_TREE=1 keeps the preset)."]


def test_an_explicit_tree_wins_and_vanilla_asks_nothing(cli, capsys):
    s, lines = _run(capsys, "--method", "eagle", "--tree", "2,2,4")
    assert (s["depth"], s["tree_top_k"], s["total_tokens"]) == (2, 2, 4) and not lines and not cli
    _, lines = _run(capsys, "--method", "vanilla")
    assert not lines and not cli


# ---- the page --------------------------------------------------------------------------------------
def test_the_page_puts_the_chosen_tree_in_its_sliders_once_the_model_is_ready(monkeypatch):
    import gradio as gr

    from eagle_app.callbacks import page
    from eagle_app.model import MODEL
    from eagle_app.settings import OPENING

    opening = (OPENING["depth"], OPENING["tree_top_k"], OPENING["total_tokens"])
    chosen = TreeChoice(parse_tree("2,2,4"), "cpu", chosen=True, predicted=1.7, preset_predicted=1.5, t1_ms=12.0,
                        ratios={1: 1.0, 5: 1.05, 13: 1.4})
    monkeypatch.setattr(MODEL, "tree", chosen)
    monkeypatch.setattr(MODEL.ready, "is_set", lambda: True)
    line, timer, *sliders = page.model_status("en", *opening)
    assert sliders == [2, 2, 4, None]  # no preset is 2,2,4: the radio clears, and apply_preset leaves the sliders
    assert page.apply_preset(None) == (gr.skip(),) * 3
    assert page.model_status("en", 6, 10, 59)[2:] == (gr.skip(),) * 4  # the user set a tree: it wins
    monkeypatch.setattr(MODEL.ready, "is_set", lambda: False)
    assert page.model_status("en", *opening)[2:] == (gr.skip(),) * 4  # still loading: nothing chosen yet
    monkeypatch.setattr(MODEL.ready, "is_set", lambda: True)
    monkeypatch.setattr(MODEL, "tree", TreeChoice(parse_tree("4,4,12"), "cpu", chosen=True, predicted=2.0,
                                                  preset_predicted=1.5, t1_ms=12.0, ratios={1: 1.0, 13: 1.1}))
    assert page.model_status("en", *opening)[2:] == (4, 4, 12, "explain")  # a preset's tree selects the preset
    monkeypatch.setattr(MODEL, "tree", TreeChoice(parse_tree("cpu"), "cpu", reason="EAGLE_FIXED_TREE=1"))
    assert page.model_status("en", *opening)[2:] == (gr.skip(),) * 4


def test_the_model_line_says_which_tree_and_why():
    from eagle_app.tree_advice import choice_note

    chosen = TreeChoice(parse_tree("2,2,4"), "cpu", chosen=True, predicted=1.7, preset_predicted=1.5, t1_ms=12.0,
                        ratios={1: 1.0, 5: 1.05, 8: 1.1, 13: 1.4}, weights="gguf")
    en = choice_note(chosen, "en")
    assert en == ("**Tree 2,2,4** chosen for this machine (gguf weights): predicted 1.70× vanilla (the `cpu` preset "
                  "1.50×); measured t(1) 12.0 ms, t(5)/t(1) 1.05, t(13)/t(1) 1.40.")
    assert "2,2,4" in choice_note(chosen, "zh") and "1.70×" in choice_note(chosen, "zh")
    kept = choice_note(TreeChoice(parse_tree("cpu"), "cpu", reason="EAGLE_FIXED_TREE=1"), "en")
    assert kept == f"**Tree {parse_tree('cpu').text}**, the `cpu` preset: EAGLE_FIXED_TREE=1."
    assert choice_note(None) == ""
    assert PRESETS["cpu"]["total_tokens"] == parse_tree("cpu").total_tokens


def test_the_shipped_tau_record_gives_readable_candidates():
    """The candidates come from the shipped record (not typed here): trees of at most 12 drafts, the preset
    among them, each with its tau."""
    from eagle_core.machine import load_tau_table

    t = load_tau_table()
    trees = tc.candidates(t)
    assert parse_tree("cpu") in trees and all(x.total_tokens <= 12 for x in trees) and len(trees) >= 4
    assert all(x.text in t["tau"] for x in trees)
