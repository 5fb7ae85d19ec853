"""A drafting pass as one kernel call (eagle_core.cpu.fused_pass): for EAGLE-1/2 the same trees, q
values and scores, bit for bit, as the head pass's separate calls, for several tree shapes and for
every storage of the head's products and of the draft LM head; for EAGLE-3 the same trees and
output, q to float32 rounding (its norms in C); the head pass wherever it does not apply; clear
errors for what the kernel refuses."""
import pytest
import torch

from test_head_pass import INT8_TOL, _eagle2, _eagle3, _float16_values, _target
from eagle_core import DecodeSettings, Engine

from test_kernels import needs_smallgemm

pytestmark = needs_smallgemm
TREES = [(2, 2, 3), (3, 3, 8), (4, 4, 12), (5, 2, 9)]


def _nodes(run):
    return [[(n.token_id, n.parent, n.q, n.score) for n in c.nodes] for c in run.cycles]


def _without_fused(d, run):
    """run() with the drafter's fused pass taken away: the head pass's separate calls draft."""
    saved, d.cpu.fused = d.cpu.fused, None
    try:
        return run()
    finally:
        d.cpu.fused = saved


def _both(e, prompt, s, monkeypatch):
    """The run with the fused pass, then with the head pass's separate calls."""
    d = e.drafter3 if s.method == "eagle3" else e.drafter
    calls = []
    real = d.cpu.fused.run
    monkeypatch.setattr(d.cpu.fused, "run", lambda *a, **k: (calls.append(1), real(*a, **k))[1])
    fused = e.run(prompt, s)
    assert calls, "the fused pass did not run"
    n = len(calls)
    separate = _without_fused(d, lambda: e.run(prompt, s))
    assert len(calls) == n, "the fused pass ran after it was taken away"
    return fused, separate


def _over_trees(e, method, monkeypatch):
    """For each tree shape: (its total, the fused run, the separate calls' run), both checked
    identical to vanilla."""
    van = e.run("abcab", DecodeSettings(method="vanilla", max_new_tokens=40)).summary.token_ids
    for depth, width, total in TREES:
        s = DecodeSettings(method=method, depth=depth, tree_top_k=width, total_tokens=total, max_new_tokens=40)
        fused, separate = _both(e, "abcab", s, monkeypatch)
        assert fused.summary.token_ids == separate.summary.token_ids == van
        yield total, fused, separate


@pytest.mark.parametrize("weights", ["int8", "as loaded"])
@pytest.mark.parametrize("vocab", [None, "reduced"])
def test_fused_pass_drafts_the_lean_pass_bits(weights, vocab, monkeypatch):
    t = _target(head_weights=weights)
    head = _float16_values(_eagle2(t))
    draft_vocab = None if vocab is None else [3, 1, 4, 15, 9, 2, 6, 5, 30, 8, 28, 7, 11, 19, 21, 0]
    e = Engine(t, head) if vocab is None else Engine(t, head, draft_vocab)
    assert e.drafter.cpu.fused is not None, e.drafter.cpu.fused_note
    for total, fused, separate in _over_trees(e, "eagle2", monkeypatch):
        assert _nodes(fused) == _nodes(separate)  # tokens, parents, q and scores: the same bits
        assert any(len(c.nodes) > 3 for c in fused.cycles) or total <= 3


@pytest.mark.parametrize("norm_before_residual", [False, True])
@pytest.mark.parametrize("weights", ["int8", "as loaded"])
def test_fused_eagle3_pass_drafts_the_lean_pass_trees(weights, norm_before_residual, monkeypatch):
    t = _target(head_weights=weights)
    e = Engine(t, head3=_float16_values(_eagle3(t, norm_before_residual)))
    assert e.drafter3.cpu.fused is not None, e.drafter3.cpu.fused_note
    for _, fused, separate in _over_trees(e, "eagle3", monkeypatch):
        for a, b in zip(_nodes(fused), _nodes(separate), strict=True):
            assert [n[:2] for n in a] == [n[:2] for n in b]  # tokens and parents
            assert [n[2] for n in a] == pytest.approx([n[2] for n in b], rel=INT8_TOL, abs=1e-5)


@pytest.mark.parametrize("s", [DecodeSettings(method="chain", chain_length=4, max_new_tokens=30),
                               DecodeSettings(method="eagle1", max_new_tokens=30)], ids=["chain", "eagle1"])
def test_greedy_chains_and_eagle1_draft_through_the_fused_pass_with_the_lean_pass_bits(s, monkeypatch):
    """Every greedy tree the app offers drafts through the one-call pass: EAGLE-1's static tree and
    the chain too, with the separate calls' trees, q and scores, bit for bit, and vanilla's output."""
    t = _target()
    e = Engine(t, _eagle2(t))
    van = e.run("abcab", DecodeSettings(method="vanilla", max_new_tokens=30)).summary.token_ids
    fused, separate = _both(e, "abcab", s, monkeypatch)
    assert fused.summary.token_ids == separate.summary.token_ids == van
    assert _nodes(fused) == _nodes(separate)
    assert max(len(c.nodes) for c in fused.cycles) > 2


def test_sampled_chains_still_draft_through_the_lean_pass():
    """A sampled chain draws from the head's whole q (the head pass); the root's top k of a sampled
    EAGLE-2 run goes through lm_top: each the separate calls' bits."""
    t = _target()
    e = Engine(t, _eagle2(t))
    for s in (DecodeSettings(method="chain", chain_length=3, temperature=1.0, seed=2, max_new_tokens=30),
              DecodeSettings(method="eagle2", depth=3, tree_top_k=2, total_tokens=5, temperature=1.0, seed=3,
                             max_new_tokens=30)):
        a = e.run("abcab", s)
        b = _without_fused(e.drafter, lambda: e.run("abcab", s))
        assert a.summary.token_ids == b.summary.token_ids
        assert _nodes(a) == _nodes(b)


def test_fused_pass_refuses_what_it_cannot_read():
    t = _target()
    e = Engine(t, _eagle2(t))
    d = e.drafter
    cache = d.new_cache(16)
    feats = torch.randn(2, 64)
    with torch.inference_mode():
        with pytest.raises(RuntimeError, match="token id outside the embedding table"):
            d.cpu.fused.run([1, 99], list(feats), 0, 1, cache, None)
        with pytest.raises(ValueError, match="head cache full"):
            d.cpu.fused.run([1] * 17, list(torch.randn(17, 64)), 0, 1, cache, None)
        with pytest.raises(ValueError, match="each feature must be 64 contiguous float32 values"):
            d.cpu.fused.run([1, 2], [feats[0], torch.zeros(32)], 0, 1, cache, None)
        assert cache.length == 0  # nothing written by a refused call
        # a row the top-k kernel cannot serve (NaN): the fused call returns the features, no top k,
        # and the drafter's torch path decides, as without the fused pass
        h, top = d.cpu.fused.run([1, 2], [feats[0], torch.full((64,), float("nan"))], 0, 1, cache, None, k=2)
        assert top is None and h.shape == (2, 64) and cache.length == 2
        assert d.cpu.fused.top(torch.full((1, 64), float("nan")), 2) is None


def test_where_the_fused_pass_does_not_apply_the_drafter_says_why():
    t = _target()
    e = Engine(t, _eagle2(t, layers=2))
    assert e.drafter.cpu.fused is None and "one layer.c layer" in e.drafter.cpu.fused_note
    ops = _target(passes="ops")
    assert Engine(ops, _eagle2(ops)).drafter.cpu.fused is None
    layers = _target(passes="layers")
    assert Engine(layers, _eagle2(layers)).drafter.cpu.fused is None
    e = Engine(t, _eagle2(t))
    e.drafter.cpu.head_pass.c_layers = False  # switched off after load: the head pass's torch operations run
    s = DecodeSettings(method="eagle2", depth=2, tree_top_k=2, total_tokens=3, max_new_tokens=20)
    assert not e.drafter.cpu.fused.applies(torch.zeros(64))
    assert e.run("abcab", s).summary.token_ids == e.run("abcab", DecodeSettings(method="vanilla",
                                                                               max_new_tokens=20)).summary.token_ids
