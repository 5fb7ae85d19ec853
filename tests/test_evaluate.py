"""The run metrics (eagle_core.trace) on hand-built cycles with known answers, and the app's
charts and the training report agreeing on the same real run."""
import pytest

from eagle_core import DecodeSettings, Engine
from eagle_core.trace import (ACCEPTED, NOT_REACHED, REJECTED, CycleRecord, DepthAcceptance, DraftNode,
                              acceptance_by_depth, acceptance_rates, tau)
from eagle_core.train.evaluate import load_eval_prompts, summarize
from tests.conftest import tiny_head, tiny_target


def _cycle(step, depths_decisions, accepted):
    nodes = [DraftNode(0, 1, "r", -1, 0, 1.0, 0.0, None, ACCEPTED)]
    for i, (parent, depth, decision) in enumerate(depths_decisions, 1):
        nodes.append(DraftNode(i, 10 + i, "t", parent, depth, 0.5, -0.7, 0.5, decision))
    return CycleRecord(step, 5, tuple(nodes), accepted, 7, "b", (), "", 1.0, 2.0, "greedy")


def test_depth_acceptance_known_answer():
    chain3 = [(0, 1, ACCEPTED), (1, 2, ACCEPTED), (2, 3, REJECTED)]
    c1 = _cycle(0, chain3, (0, 1, 2))  # accepted depths 1 and 2, rejected at 3
    c2 = _cycle(1, [(0, 1, REJECTED), (1, 2, NOT_REACHED), (2, 3, NOT_REACHED)], (0,))  # nothing
    c3 = _cycle(2, [(0, 1, ACCEPTED), (1, 2, REJECTED)], (0, 1))  # depth 1 only, tree 2 deep
    # depth 1: drafted and reached by 3 cycles, accepted by 2; depth 2: drafted by 3, reached by
    # c1 and c3, accepted by c1; depth 3: drafted by c1 and c2, reached only by c1, rejected there
    assert acceptance_by_depth([c1, c2, c3]) == [DepthAcceptance(1, 3, 3, 2), DepthAcceptance(2, 3, 2, 1),
                                                 DepthAcceptance(3, 2, 1, 0)]
    assert acceptance_rates([c1, c2, c3]) == {1: 2 / 3, 2: 1 / 2, 3: 0.0}
    assert tau([c1, c2, c3]) == pytest.approx((3 + 1 + 2) / 3)
    assert tau([]) == 0.0 and acceptance_by_depth([]) == []


def test_load_eval_prompts_per_category(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text('{"turns": ["a1", "a2"], "category": "x"}\n{"prompt": "b", "category": "x"}\n'
                 '{"prompt": "c", "category": "y"}\n')
    assert load_eval_prompts(str(f), per_category=1) == [("x", "a1"), ("y", "c")]
    assert len(load_eval_prompts(str(f))) == 3


def test_app_charts_and_training_report_agree_on_one_run():
    """tau and acceptance by depth: the engine's summary (which the app's status line shows), the
    training report (train.evaluate) and the app's charts (viz.charts) give the same numbers."""
    import viz

    target = tiny_target("llama", seed=3)
    run = Engine(target, tiny_head(target)).run("abcabcabc", DecodeSettings(
        method="eagle2", depth=3, tree_top_k=3, total_tokens=8, max_new_tokens=40, chat_template=False))
    report = summarize([run])
    assert len(report["acceptance_by_depth"]) >= 2 and any(0 < r < 1 for r in report["acceptance_by_depth"].values())

    bars = viz.acceptance_by_depth_figure(run.cycles).data[0]
    chart = {int(x.split()[1]): y for x, y in zip(bars.x, bars.y)}
    assert chart == pytest.approx(report["acceptance_by_depth"])

    title = viz.accepted_length_figure(run.cycles).layout.title.text
    assert f"τ = {report['tau']:.2f}" in title
    assert run.summary.tau == pytest.approx(report["tau"])


@pytest.mark.parametrize("method", ["eagle2", "eagle3"])
def test_eval_command_runs_either_head(method, tmp_path, monkeypatch):
    """`eval --method eagle3 --head DIR` evaluates an EAGLE-3 head (here random, saved in the
    official layout), `--method eagle2` an EAGLE-1/2 head; both report tau over the prompts."""
    import argparse
    import json

    from eagle_core.config import parse_tree
    from eagle_core.drafting.head import save_head
    from eagle_core.drafting.head3 import save_head3
    from eagle_core.train import evaluate
    from test_head3 import tiny_head3, tiny_target8

    target = tiny_target8()
    monkeypatch.setattr(evaluate, "load_target", lambda *a, **k: target)
    head_dir = str(tmp_path / "head")
    if method == "eagle3":
        save_head3(tiny_head3(target), head_dir)
    else:
        save_head(tiny_head(target), head_dir)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "abcabc", "category": "x"}\n{"prompt": "hello", "category": "y"}\n')
    out = tmp_path / "r.json"
    args = argparse.Namespace(head=head_dir, method=method, prompts=[str(prompts)], limit=None, per_category=None,
                              max_new_tokens=6, temperatures=[0.0], tree=[parse_tree("2,2,4")], draft_vocab="head",
                              threads=1, json_out=str(out))
    evaluate.run_eval(args)
    res = json.loads(out.read_text())
    assert res["method"] == method and res["head"] == head_dir
    o = res["runs"][0]["overall"]
    assert o["prompts"] == 2 and o["tau"] >= 1.0


def test_eval_cut_short_keeps_the_sets_it_finished(tmp_path, monkeypatch):
    """The JSON is written after every (tree, T, prompt file) set: an evaluation of 80 prompts x
    several trees takes an hour here, and one stopped in the second set keeps the first."""
    import argparse
    import json

    from eagle_core.config import parse_tree
    from eagle_core.drafting.head import save_head
    from eagle_core.train import evaluate
    from test_head3 import tiny_target8

    target = tiny_target8()
    monkeypatch.setattr(evaluate, "load_target", lambda *a, **k: target)
    head_dir = str(tmp_path / "head")
    save_head(tiny_head(target), head_dir)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "abcabc", "category": "x"}\n')
    real, calls = evaluate.evaluate_prompts, []

    def stopped_in_second_set(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(evaluate, "evaluate_prompts", stopped_in_second_set)
    out = tmp_path / "r.json"
    args = argparse.Namespace(head=head_dir, method="eagle2", prompts=[str(prompts)], limit=None, per_category=None,
                              max_new_tokens=4, temperatures=[0.0, 1.0], tree=[parse_tree("2,2,4")],
                              draft_vocab="head", threads=1, json_out=str(out))
    with pytest.raises(KeyboardInterrupt):
        evaluate.run_eval(args)
    res = json.loads(out.read_text())
    assert [r["temperature"] for r in res["runs"]] == [0.0]
