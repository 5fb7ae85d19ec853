"""The engine on tiny random targets: EAGLE greedy == vanilla greedy (the oracle), tree-path
logits == sequential logits, sampling reproducibility, stop conditions and bad input."""
import threading

import pytest
import torch

from conftest import tiny_head, tiny_target
from eagle_core import DecodeSettings, Engine, run_from_json, run_to_json
from eagle_core.decode import compact_cache
from eagle_core.tree import root_to_leaf_paths, tree_attention_mask, tree_positions

TREES = {
    "eagle2": dict(method="eagle2", depth=4, tree_top_k=4, total_tokens=12),
    "eagle2-wide": dict(method="eagle2", depth=6, tree_top_k=8, total_tokens=40),
    "eagle1": dict(method="eagle1"),
    "chain": dict(method="chain", chain_length=5),
}
PROMPTS = ["a", "hello world", "the quick brown fox jumps over the lazy dog " * 3]


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
@pytest.mark.parametrize("tree", list(TREES))
@pytest.mark.parametrize("seed, vocab", [(0, 24), (1, 8), (2, 24), (3, 8)])
def test_eagle_greedy_equals_vanilla(kind, tree, seed, vocab):
    """The oracle: EAGLE greedy output is vanilla greedy output, token for token. With vocab 8
    and 8-way branching the drafts cover the whole vocabulary, so long accepted paths, cache
    compaction and the bonus after a fully accepted path are all exercised."""
    target = tiny_target(kind, seed=seed, vocab=vocab)
    engine = Engine(target, tiny_head(target, seed=seed + 10))
    for prompt in PROMPTS:
        van = engine.run(prompt, DecodeSettings(method="vanilla", max_new_tokens=40, chat_template=False))
        eag = engine.run(prompt, DecodeSettings(max_new_tokens=40, chat_template=False, **TREES[tree]))
        assert eag.summary.token_ids == van.summary.token_ids
        assert eag.summary.new_tokens == 40
        assert van.summary.tau == 1.0
        # committed tokens of all cycles (after the prefill's token) rebuild the output
        rebuilt = (eag.first_token_id,) + tuple(t for c in eag.cycles for t in c.committed_ids)
        assert rebuilt == eag.summary.token_ids


def test_untrained_head_still_accepts_on_tiny_vocab():
    """With 8 tokens and 8-way branching even a random head is often right: make sure the
    multi-token acceptance path (and cache compaction) is really exercised by the oracle test."""
    target = tiny_target("llama", seed=2, vocab=8)
    engine = Engine(target, tiny_head(target, seed=1))
    run = engine.run("hello", DecodeSettings(max_new_tokens=60, chat_template=False, **TREES["eagle2-wide"]))
    assert max(c.accepted_drafts for c in run.cycles) >= 3
    assert run.summary.tau > 2.0


def test_eager_attention_and_reduced_vocab_agree():
    target = tiny_target("llama", seed=5, attn="eager")
    van = Engine(target).run("abc", DecodeSettings(method="vanilla", max_new_tokens=30, chat_template=False))
    for vocab in (None, [1, 3, 5, 7, 9, 11, 13]):
        eng = Engine(target, tiny_head(target, seed=6), draft_vocab=vocab)
        run = eng.run("abc", DecodeSettings(max_new_tokens=30, chat_template=False, **TREES["eagle2"]))
        assert run.summary.token_ids == van.summary.token_ids
        if vocab:
            drafted = {n.token_id for c in run.cycles for n in c.nodes[1:]}
            assert drafted <= set(vocab)


@torch.inference_mode()
def test_tree_path_logits_match_sequential():
    """For every root-to-leaf path of a verified tree, the target's logits equal a sequential
    forward of that path."""
    target = tiny_target("llama", seed=7, vocab=50)
    prefix = torch.tensor([[5, 9, 13, 2, 7, 11]])
    parents = (-1, 0, 0, 1, 1, 2, 3, 3, 6)
    tokens = torch.tensor([[4, 8, 15, 16, 23, 42, 1, 17, 30]])
    cache = target.new_cache()
    target.forward(prefix, cache)
    L = prefix.shape[1]
    feats = target.forward(tokens, cache, tree_positions(parents, L)[None], tree_attention_mask(parents, L))
    tree_logits = target.logits(feats)[0]
    for path in root_to_leaf_paths(parents):
        seq = torch.cat([prefix, tokens[:, path]], dim=1)
        ref = target.model(seq).logits[0, L:]
        torch.testing.assert_close(tree_logits[path], ref, atol=1e-5, rtol=1e-5)


@torch.inference_mode()
def test_compact_cache_keeps_accepted_path():
    target = tiny_target("llama", seed=8)
    prefix = torch.tensor([[3, 4, 5]])
    parents = (-1, 0, 0, 2, 3)
    tokens = torch.tensor([[6, 7, 8, 9, 10]])
    cache = target.new_cache()
    target.forward(prefix, cache)
    target.forward(tokens, cache, tree_positions(parents, 3)[None], tree_attention_mask(parents, 3))
    compact_cache(cache, 3, [0, 2, 3])
    nxt = target.logits(target.forward(torch.tensor([[11]]), cache))[0, -1]
    ref = target.model(torch.tensor([[3, 4, 5, 6, 8, 9, 11]])).logits[0, -1]
    torch.testing.assert_close(nxt, ref, atol=1e-5, rtol=1e-5)


def test_sampling_reproducible_and_seed_dependent():
    target = tiny_target("llama", seed=9)
    engine = Engine(target, tiny_head(target))
    # sampled trees of top-k drafts use the point-mass rule, sampled chains min(1, p/q); vanilla
    # verifies the root alone, which the point-mass rule does (its bonus is sampled from p)
    for method, rule in (("eagle2", "point_mass"), ("chain", "ratio"), ("vanilla", "point_mass")):
        s = DecodeSettings(method=method, max_new_tokens=30, temperature=1.0, top_p=0.95, seed=11, chat_template=False)
        a, b = engine.run("hi", s), engine.run("hi", s)
        assert a.summary.token_ids == b.summary.token_ids
        c = engine.run("hi", s.with_(seed=12))
        assert c.summary.token_ids != a.summary.token_ids
        assert {cyc.rule for cyc in a.cycles} == {rule}, method


def test_sampled_rules_recorded():
    target = tiny_target("llama", seed=10)
    engine = Engine(target, tiny_head(target))
    run = engine.run("hi", DecodeSettings(method="chain", chain_length=3, max_new_tokens=20, temperature=0.8,
                                          chat_template=False))
    assert {c.rule for c in run.cycles} == {"ratio"}
    tested = [n for c in run.cycles for n in c.nodes[1:] if n.decision != "not_reached"]
    assert tested and all(n.u is not None and 0 <= n.p_test <= 1 for n in tested)


def test_stop_conditions():
    target = tiny_target("llama", seed=11, ctx=48)
    engine = Engine(target, tiny_head(target))
    run = engine.run("x" * 40, DecodeSettings(max_new_tokens=40, chat_template=False, **TREES["eagle2"]))
    assert run.summary.stop_reason == "context_full"
    assert run.summary.prompt_tokens + run.summary.new_tokens <= 48 + 1
    van = engine.run("x" * 40, DecodeSettings(method="vanilla", max_new_tokens=40, chat_template=False))
    assert van.summary.token_ids == run.summary.token_ids
    one = engine.run("abc", DecodeSettings(max_new_tokens=1, chat_template=False))
    assert one.summary.new_tokens == 1 and one.summary.stop_reason == "max_new_tokens" and not one.cycles
    # EOS: pick the token vanilla emits 5th as EOS, then generation must stop right before it
    plain = Engine(target).run("abc", DecodeSettings(method="vanilla", max_new_tokens=12, chat_template=False))
    eos = plain.summary.token_ids[4]
    first = plain.summary.token_ids.index(eos)
    t2 = tiny_target("llama", seed=11, ctx=48, eos=eos)
    for s in (DecodeSettings(method="vanilla", max_new_tokens=12, chat_template=False),
              DecodeSettings(max_new_tokens=12, chat_template=False, **TREES["eagle2"])):
        r = Engine(t2, tiny_head(t2)).run("abc", s)
        assert r.summary.stop_reason == "eos" and r.summary.token_ids == plain.summary.token_ids[:first]


def test_stop_event():
    target = tiny_target("llama", seed=12)
    engine = Engine(target, tiny_head(target))
    stop = threading.Event()
    gen = engine.generate("hello", DecodeSettings(max_new_tokens=200, chat_template=False), stop=stop)
    for i, _ in enumerate(gen):
        if i == 2:
            stop.set()
    assert gen.run.summary.stop_reason == "stopped"
    assert len(gen.run.cycles) == 3


@pytest.mark.parametrize("bad, msg", [
    (dict(max_new_tokens=0), "max_new_tokens"),
    (dict(max_new_tokens=10**6), "context"),
    (dict(temperature=-1.0), "temperature"),
    (dict(top_p=0.0), "top_p"),
    (dict(top_p=1.5), "top_p"),
    (dict(top_k=-2), "top_k"),
    (dict(depth=0), "depth"),
    (dict(tree_top_k=1000), "top_k"),
    (dict(total_tokens=0), "total_tokens"),
    (dict(method="medusa"), "unknown method"),
    (dict(static_tree=((0, 1),)), "parent"),
])
def test_bad_settings(bad, msg):
    target = tiny_target("llama")
    with pytest.raises(ValueError, match=msg):
        Engine(target, tiny_head(target)).generate("hi", DecodeSettings(chat_template=False, **bad))


def test_bad_prompts():
    target = tiny_target("llama", ctx=64)
    engine = Engine(target, tiny_head(target))
    for p in ("", "   \n\t"):
        with pytest.raises(ValueError, match="empty"):
            engine.generate(p, DecodeSettings(max_new_tokens=16, chat_template=False))
    with pytest.raises(ValueError, match="100 tokens long.*64 tokens"):
        engine.generate("y" * 100, DecodeSettings(max_new_tokens=16, chat_template=False))
    with pytest.raises(ValueError, match="head"):
        Engine(target).generate("hi", DecodeSettings(method="eagle2", max_new_tokens=16, chat_template=False))


def test_head_target_mismatch():
    small, other = tiny_target("llama"), tiny_target("llama", vocab=30)
    with pytest.raises(ValueError, match="vocabulary 30"):
        Engine(small, tiny_head(other))


def test_trace_json_round_trip():
    target = tiny_target("llama", seed=13)
    run = Engine(target, tiny_head(target)).run("hey", DecodeSettings(max_new_tokens=15, temperature=0.7,
                                                                      chat_template=False))
    again = run_from_json(run_to_json(run))
    assert again == run
    with pytest.raises(ValueError):
        run_from_json("{not json")
    with pytest.raises(ValueError):
        run_from_json('{"summary": {}, "cycles": []}')


def test_generate_takes_the_ids_check_returned(monkeypatch):
    """A caller that checked the request passes the ids on; the prompt is not tokenized again and
    the run is the same as without them."""
    target = tiny_target("llama", seed=3)
    engine = Engine(target, tiny_head(target))
    s = DecodeSettings(max_new_tokens=10, chat_template=False)
    ids = engine.check("abc", s)
    plain = engine.run("abc", s)
    monkeypatch.setattr(target, "encode_prompt", lambda *a, **k: pytest.fail("tokenized again"))
    g = engine.generate("abc", s, prompt_ids=ids)
    for _ in g:
        pass
    assert g.run.summary.token_ids == plain.summary.token_ids and g.run.summary.prompt_tokens == len(ids)


def test_load_engine_loads_the_heads_the_methods_need():
    from eagle_core import load_engine
    from eagle_core.drafting.head3 import Eagle3Head

    from test_head3 import tiny_target8

    target = tiny_target8(seed=4)
    both = load_engine(target)
    assert both.drafter is not None and isinstance(both.drafter3.head, Eagle3Head) and "random" in both.head3_name
    only2 = load_engine(target, methods=("eagle2",))
    assert only2.drafter is not None and only2.drafter3 is None
    assert load_engine(target, methods=("vanilla",)).drafter is None
    with pytest.raises(ValueError, match="unknown method"):
        load_engine(target, methods=("eagle9",))
    with pytest.raises(TypeError, match="head3"):
        Engine(target, both.drafter3.head)  # an EAGLE-3 head in the EAGLE-1/2 slot
    shallow = tiny_target("llama", seed=4)  # 2 layers: too few for an EAGLE-3 head
    assert load_engine(shallow).drafter3 is None
    with pytest.raises(ValueError, match="the target has 2 layers"):
        load_engine(shallow, methods=("eagle3",))
