"""Sampled verification without a full sort (issue 54, item 5): the bounded top-p nucleus equals the
full sort's bit for bit, and the walk processes only the rows it reaches."""
from __future__ import annotations

import pytest
import torch

from eagle_core import verify
from eagle_core.bench.sampling_cost import full_sort_probs  # the definition: a stable sort of all V
from eagle_core.config import DecodeSettings
from eagle_core.tree import DraftTree
from eagle_core.verify import FIRST_CANDIDATES, accept, logits_to_probs, nucleus, row_dists

V = 49152  # the default model's vocabulary


def logit_sets():
    g = torch.Generator().manual_seed(54)
    yield "normal", torch.randn(2, V, generator=g) * 3
    yield "peaked", torch.randn(2, V, generator=g) * 12
    yield "flat", torch.randn(2, V, generator=g) * 0.05
    # ties everywhere: a few distinct values, so the nucleus edge falls inside a run of equal p
    yield "ties", torch.randint(0, 6, (2, V), generator=g).float()
    yield "tied_top", torch.cat([torch.full((1, 40), 5.0), torch.randn(1, V - 40, generator=g)], 1)
    yield "small_vocab", torch.randint(0, 3, (6, 10), generator=g).float()


@pytest.mark.parametrize("temperature", [1e-4, 0.05, 0.8, 1.0, 5.0, 100.0])
@pytest.mark.parametrize("top_p", [1e-6, 0.05, 0.3, 0.9, 0.95, 0.999, 0.9999999, 1.0])
def test_bounded_nucleus_equals_full_sort_bit_for_bit(temperature, top_p):
    for name, logits in logit_sets():
        for top_k in (0, 1, 50):
            got = logits_to_probs(logits, temperature, top_p, top_k)
            want = full_sort_probs(logits, temperature, top_p, top_k)
            assert torch.equal(got, want), (name, temperature, top_p, top_k)
            one = logits_to_probs(logits[0], temperature, top_p, top_k)  # a single row (vanilla, prefill)
            assert torch.equal(one, full_sort_probs(logits[0], temperature, top_p, top_k)), (name, "row")


def test_ties_at_the_edge_keep_lower_ids_first():
    """Ten equal tokens, top_p 0.35: the mass before the 4th is 0.3 < 0.35, before the 5th 0.4, so ids 0-3."""
    p = logits_to_probs(torch.zeros(10), 1.0, top_p=0.35)
    assert torch.equal(p > 0, torch.arange(10) < 4)
    assert torch.allclose(p[:4], torch.full((4,), 0.25))
    big = torch.zeros(V)
    big[[7, 900, 30000]] = 20.0  # three tied leaders hold nearly all the mass: each has ~1/3
    assert nucleus(torch.softmax(big, -1), 0.5).tolist() == [7, 900]


def test_nucleus_does_not_sort_the_vocabulary(monkeypatch):
    """The work the bounded nucleus does: its candidates (what it sorts) on a peaked row stay a small
    fraction of the vocabulary; on a near-uniform row it may sort all of it (and is still exact)."""
    sizes = []
    real_sort = torch.sort
    monkeypatch.setattr(verify.torch, "sort", lambda x, *a, **k: sizes.append(x.shape[-1]) or real_sort(x, *a, **k))
    g = torch.Generator().manual_seed(1)
    p = torch.softmax(torch.randn(V, generator=g) * 6 / 0.8, -1)
    nucleus(p, 0.95)
    assert sizes and max(sizes) < V // 16 and sizes[0] >= FIRST_CANDIDATES


def test_row_dists_processes_only_the_rows_the_walk_reaches(monkeypatch):
    """A sampled verify of a 13-node tree makes p for the accepted path's nodes only, each once."""
    made = []
    real = verify.logits_to_probs
    monkeypatch.setattr(verify, "logits_to_probs", lambda x, *a: made.append(x.shape) or real(x, *a))
    parents = [-1, 0, 0, 0, 1, 1, 2, 4, 4, 5, 7, 7, 8]
    tree = DraftTree(tokens=list(range(100, 113)), parents=parents, q=[1.0] * 13, scores=[0.0] * 13)
    rows = torch.full((13, 300), -10.0)
    for node, child in ((0, 1), (1, 4), (4, 7)):  # the target all but insists on 0 -> 1 -> 4 -> 7
        rows[node, 100 + child] = 30.0
    s = DecodeSettings(method="eagle2", temperature=0.8, top_p=0.95, seed=0)
    verdict, rule = accept(tree, rows, s, torch.Generator().manual_seed(0))
    assert rule == "point_mass" and verdict.accepted == (0, 1, 4, 7)
    assert len(made) == 4  # the root and three accepted drafts; the other 9 rows never processed
    dist = row_dists(rows, s)
    assert dist(3) is dist(3)  # kept, not made again
    assert torch.equal(dist(3), full_sort_probs(rows[3], 0.8, 0.95))


def test_sampling_cost_bench_runs_on_the_default_model(default_target):
    """The micro-benchmark's command (its numbers are for docs/performance.md, on a quiet machine)."""
    from eagle_core.bench.sampling_cost import measure, table

    rows = measure(default_target, rows=(5,), depth=3, repeats=1)
    assert [r["rows"] for r in rows] == [1, 5]
    assert rows[0]["rows_made"] == 1 and 1 <= rows[1]["rows_made"] <= 4  # root + at most the 3-deep chain
    assert all(r["greedy_ms"] > 0 and r["sampled_ms"] > 0 and r["full_sort_ms"] > 0 for r in rows)
    assert "verify, 5-row tree" in table(rows, "header")
