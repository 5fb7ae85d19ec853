"""Acceptance rules: hand-worked greedy walks, exact enumeration and a seeded statistical test
that the sampled output is distributed exactly as the target's distribution p."""
import itertools

import pytest
import torch

from eagle_core import verify
from eagle_core.trace import ACCEPTED, NOT_REACHED, REJECTED
from eagle_core.verify import logits_to_probs, verify_greedy, verify_point_mass, verify_ratio

#   root(0) -> [1: tok 5, 2: tok 7]; 1 -> [3: tok 2, 4: tok 9]; 2 -> [5: tok 1]
TOKENS = (0, 5, 7, 2, 9, 1)
PARENTS = (-1, 0, 0, 1, 1, 2)


def test_greedy_walk_known_answer():
    argmax = {0: 5, 1: 9, 4: 3}.__getitem__
    v = verify_greedy(TOKENS, PARENTS, argmax)
    assert v.accepted == (0, 1, 4)
    assert v.bonus_token == 3
    assert v.decisions == (ACCEPTED, ACCEPTED, REJECTED, REJECTED, ACCEPTED, NOT_REACHED)


def test_greedy_all_rejected():
    v = verify_greedy(TOKENS, PARENTS, {0: 4}.__getitem__)
    assert v.accepted == (0,) and v.bonus_token == 4
    assert v.decisions[1:] == (REJECTED, REJECTED, NOT_REACHED, NOT_REACHED, NOT_REACHED)


def test_logits_to_probs_filters():
    logits = torch.tensor([2.0, 1.0, 0.5, -1.0])
    p = logits_to_probs(logits, 1.0, top_k=2)
    assert p[2] == 0 and p[3] == 0 and torch.isclose(p.sum(), torch.tensor(1.0))
    p = logits_to_probs(logits, 1.0, top_p=0.5)
    assert p[0] == 1.0  # softmax mass of token 0 is ~0.6 >= 0.5: the nucleus is just token 0
    assert torch.equal(logits_to_probs(logits, 0.0), torch.tensor([1.0, 0, 0, 0]))
    hot = logits_to_probs(logits, 0.5)
    assert hot[0] > torch.softmax(logits, -1)[0]


# ---- exact enumeration ------------------------------------------------------------------------
def _enumerate(run, monkeypatch, vocab):
    """Run a verifier over every branch of its random choices; return {output tuple: probability}.

    `uniform` draws are replaced by scripted outcomes (0.0 = accept whenever p_test > 0, 1.0 =
    reject) and `sample` by scripted tokens; each branch's probability is computed from first
    principles: p_test for an accept, 1 - p_test for a reject, the sampling distribution's mass
    for a sampled token.
    """
    out = {}
    stack = [[]]
    while stack:
        script = stack.pop()
        log, pos = [], [0]

        def uniform(_g):
            i = pos[0]; pos[0] += 1
            if i < len(script):
                return script[i][1]
            raise _Branch("u")

        def sample(probs, _g):
            i = pos[0]; pos[0] += 1
            if i < len(script):
                log.append(float(probs[script[i][1]]))
                return script[i][1]
            raise _Branch(("s", probs.clone()))

        monkeypatch.setattr(verify, "uniform", uniform)
        monkeypatch.setattr(verify, "sample", sample)
        try:
            verdict, tokens = run()
        except _Branch as b:
            if b.what == "u":
                stack += [script + [("u", 0.0)], script + [("u", 1.0)]]
            else:
                probs = b.what[1]
                stack += [script + [("s", t)] for t in range(vocab) if probs[t] > 0]
            continue
        prob = 1.0
        us = [s for s in script if s[0] == "u"]
        tested = [i for i in range(len(tokens)) if verdict.u[i] is not None]
        assert len(us) == len(tested)
        for i in tested:
            prob *= verdict.p_test[i] if verdict.decisions[i] == ACCEPTED else 1 - verdict.p_test[i]
        for q in log:
            prob *= q
        key = tuple(tokens[i] for i in verdict.accepted[1:]) + (verdict.bonus_token,)
        out[key] = out.get(key, 0.0) + prob
    return out


class _Branch(Exception):
    def __init__(self, what):
        self.what = what


def _joint(p_root, p_child, prefix_len):
    """Target's distribution over the first `prefix_len` tokens (prefix_len 1 or 2)."""
    if prefix_len == 1:
        return {(t,): float(p_root[t]) for t in range(len(p_root)) if p_root[t] > 0}
    return {(a, b): float(p_root[a] * p_child(a)[b]) for a in range(len(p_root)) for b in range(len(p_root))
            if p_root[a] * p_child(a)[b] > 0}


def _collapse(dist, n):
    out = {}
    for k, v in dist.items():
        out[k[:n]] = out.get(k[:n], 0.0) + v
    return out


@pytest.mark.parametrize("children", [(2,), (2, 0), (3, 1, 0), (1, 2, 3, 0)])
def test_point_mass_exact_one_level(monkeypatch, children):
    p = torch.tensor([0.1, 0.2, 0.3, 0.4])
    tokens = (9,) + children
    parents = (-1,) + (0,) * len(children)
    res = _enumerate(lambda: (verify_point_mass(tokens, parents, lambda i: p, None), tokens), monkeypatch, 4)
    got = _collapse(res, 1)
    for (t,), prob in _joint(p, None, 1).items():
        assert got.get((t,), 0.0) == pytest.approx(prob, abs=1e-6)


def test_point_mass_exact_two_levels(monkeypatch):
    p0 = torch.tensor([0.5, 0.3, 0.2, 0.0])
    p_at = {1: torch.tensor([0.1, 0.6, 0.1, 0.2]), 2: torch.tensor([0.25, 0.25, 0.25, 0.25])}
    # root -> [1: tok 0, 2: tok 1]; 1 -> [3: tok 1, 4: tok 3]; 2 -> [5: tok 2]
    tokens, parents = (9, 0, 1, 1, 3, 2), (-1, 0, 0, 1, 1, 2)
    after = {0: torch.tensor([0.1, 0.6, 0.1, 0.2]), 1: torch.tensor([0.25] * 4), 2: torch.tensor([0.7, 0.1, 0.1, 0.1]),
             3: torch.tensor([0.3, 0.3, 0.3, 0.1])}

    def dist(i):  # node i's distribution; leaves/unexpanded: by the token on the path
        return p0 if i == 0 else p_at.get(i, after[tokens[i]])

    res = _enumerate(lambda: (verify_point_mass(tokens, parents, dist, None), tokens), monkeypatch, 4)
    # extend outputs that stopped after one token with the target's next-token distribution
    joint = {}
    for k, v in res.items():
        if len(k) >= 2:
            joint[k[:2]] = joint.get(k[:2], 0.0) + v
        else:
            for b in range(4):
                joint[(k[0], b)] = joint.get((k[0], b), 0.0) + v * float(after[k[0]][b])
    want = _joint(p0, lambda a: after[a], 2)
    assert set(k for k, v in joint.items() if v > 1e-12) == set(want)
    for k, v in want.items():
        assert joint[k] == pytest.approx(v, abs=1e-6)


def test_ratio_rule_exact(monkeypatch):
    p = torch.tensor([0.1, 0.2, 0.3, 0.4])
    q = torch.tensor([0.4, 0.4, 0.1, 0.1])
    total = {}
    for x in range(4):  # the draft token x is drawn from q: weight each branch by q(x)
        tokens, parents = (9, x), (-1, 0)
        res = _enumerate(lambda: (verify_ratio(tokens, parents, lambda i: p, (None, q), None), tokens), monkeypatch, 4)
        for k, v in _collapse(res, 1).items():
            total[k] = total.get(k, 0.0) + float(q[x]) * v
    for t in range(4):
        assert total[(t,)] == pytest.approx(float(p[t]), abs=1e-6)


# ---- seeded statistical test ------------------------------------------------------------------
N_DRAWS = 100_000


def _tv(counts, p):
    emp = counts / counts.sum()
    return 0.5 * float((emp - p).abs().sum())


def test_point_mass_statistical():
    g = torch.Generator().manual_seed(1234)
    p = torch.tensor([0.05, 0.4, 0.25, 0.2, 0.1])
    tokens, parents = (9, 1, 3, 0), (-1, 0, 0, 0)
    counts = torch.zeros(5)
    for _ in range(N_DRAWS):
        v = verify_point_mass(tokens, parents, lambda i: p, g)
        first = tokens[v.accepted[1]] if len(v.accepted) > 1 else v.bonus_token
        counts[first] += 1
    # TV distance of 1e5 draws from a 5-outcome distribution is ~0.003; a wrong rule is far off
    assert _tv(counts, p) < 0.01


def test_ratio_statistical():
    g = torch.Generator().manual_seed(99)
    p = torch.tensor([0.1, 0.5, 0.1, 0.3])
    q = torch.tensor([0.6, 0.1, 0.2, 0.1])
    counts = torch.zeros(4)
    for _ in range(N_DRAWS):
        x = int(torch.multinomial(q, 1, generator=g))
        v = verify_ratio((9, x), (-1, 0), lambda i: p, (None, q), g)
        counts[x if len(v.accepted) > 1 else v.bonus_token] += 1
    assert _tv(counts, p) < 0.01
    # and the naive rule "accept if p(x) > q(x), else resample from p" would fail this test:
    naive = torch.zeros(4)
    for _ in range(N_DRAWS // 10):
        x = int(torch.multinomial(q, 1, generator=g))
        naive[x if p[x] > q[x] else int(torch.multinomial(p, 1, generator=g))] += 1
    assert _tv(naive, p) > 0.025  # its exact TV distance from p is 0.04


def test_accept_decides_a_hand_built_tree_in_one_place():
    """verify.accept, the one place a cycle's acceptance is decided: root 0 with children 1 (token 3) and
    2 (token 4), node 1 with child 3 (token 2). The target's argmax: 3 at the root, 2 at node 1, 4 at
    node 3; so greedy accepts 0 -> 1 -> 3, rejects node 2, and the bonus is 4, with p read off the logits."""
    from types import SimpleNamespace

    from eagle_core.tree import DraftTree
    from eagle_core.verify import accept, rule_for

    tree = DraftTree(tokens=(1, 3, 4, 2), parents=(-1, 0, 0, 1), q=(1.0, 0.6, 0.3, 0.5), scores=(0.0, -0.5, -1.2, -1.2))
    rows = torch.full((4, 6), -4.0)
    rows[0, 3], rows[1, 2], rows[3, 4], rows[2, 5] = 3.0, 2.0, 5.0, 1.0
    greedy = SimpleNamespace(greedy=True, method="eagle2", temperature=0.0, top_p=1.0, top_k=0)
    v, rule = accept(tree, rows, greedy, torch.Generator().manual_seed(0))
    assert rule == "greedy" and v.accepted == (0, 1, 3) and v.bonus_token == 4
    assert v.decisions[2] == REJECTED
    assert v.p[1] == pytest.approx(torch.softmax(rows[0], -1)[3].item())
    sampled = SimpleNamespace(greedy=False, method="chain", temperature=1.0, top_p=1.0, top_k=0)
    assert rule_for(sampled) == "ratio" and rule_for(SimpleNamespace(greedy=False, method="eagle1")) == "point_mass"
    v2, rule2 = accept(tree, rows, SimpleNamespace(**{**vars(sampled), "method": "eagle2"}), torch.Generator().manual_seed(0))
    assert rule2 == "point_mass" and v2.accepted[0] == 0
