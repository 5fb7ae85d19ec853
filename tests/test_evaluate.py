"""The evaluation metrics on hand-built cycles with known answers."""
from eagle_core.trace import ACCEPTED, NOT_REACHED, REJECTED, CycleRecord, DraftNode
from eagle_core.train.evaluate import depth_acceptance, load_eval_prompts


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
    acc = depth_acceptance([c1, c2, c3])
    # depth 1: reached by 3 cycles, accepted by 2; depth 2: reached by c1 and c3, accepted by c1;
    # depth 3: reached only by c1 (c3's tree is 2 deep), rejected there
    assert acc == {1: 2 / 3, 2: 1 / 2, 3: 0.0}


def test_load_eval_prompts_per_category(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text('{"turns": ["a1", "a2"], "category": "x"}\n{"prompt": "b", "category": "x"}\n'
                 '{"prompt": "c", "category": "y"}\n')
    assert load_eval_prompts(str(f), per_category=1) == [("x", "a1"), ("y", "c")]
    assert len(load_eval_prompts(str(f))) == 3
