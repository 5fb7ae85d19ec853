"""EAGLE-3 training-time test: its attention is the drafter's, and its loss goes down."""
import torch

from eagle_core.drafting.head3 import Eagle3Config, Eagle3Head
from eagle_core.train.eagle3 import draft_vocabulary3, target_batch, ttt_loss
from conftest import draft_chain
from test_head3 import tiny_target8


@torch.no_grad()
def test_unrolled_steps_see_what_a_draft_chain_sees():
    """Step k at row t of the unrolled training pass equals a draft node at depth k + 1 below
    position t, run through the head cache with the drafter's mask (committed context + ancestors)."""
    torch.manual_seed(0)
    target = tiny_target8()
    head = Eagle3Head(Eagle3Config.for_target(target.config))
    T, t, steps = 9, 5, 3
    fused, embeds = torch.randn(1, T, 64), [torch.randn(1, T, 64) for _ in range(steps)]
    outs = head.unrolled(embeds, fused, torch.arange(T))
    chain, _ = draft_chain(head, embeds, fused, t)
    torch.testing.assert_close(chain[0], outs[0][:, t:t + 1])
    for k in range(1, steps):
        torch.testing.assert_close(chain[k], outs[k][:, t:t + 1], atol=1e-5, rtol=1e-5)


def test_ttt_loss_decreases():
    target = tiny_target8(vocab=24, seed=1)
    g = torch.Generator().manual_seed(0)
    records = [{"ids": torch.randint(3, 24, (n,), generator=g), "prompt_len": 4} for n in (20, 24, 18, 22)]
    vocab = draft_vocabulary3(records, 16, 24)
    torch.manual_seed(0)
    head = Eagle3Head(Eagle3Config.for_target(target.config, draft_vocab_size=16))
    head.set_draft_vocab(vocab)
    layers = head.config.layers_for(8)
    batch = target_batch(target, head, layers, records, [0, 1, 2, 3], 64)
    assert batch[1].shape == (4, 24, 3 * 64) and batch[2].shape == (4, 24, 16)
    opt = torch.optim.AdamW(head.parameters(), lr=3e-3)
    losses = []
    for _ in range(40):
        loss, accs = ttt_loss(head, target.embed, batch, steps=7)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert len(accs) == 7
    assert sum(losses[-5:]) / 5 < 0.7 * sum(losses[:5]) / 5


@torch.no_grad()
def test_init_from_target_starts_as_the_targets_logit_lens():
    """With the decoder layer's two residual branches silenced, a target-initialised head's draft
    logits are the target's LM head over its final norm of the highest captured layer input,
    restricted to the draft vocabulary (rows in d2t order)."""
    from eagle_core.train.eagle3 import init_from_target

    torch.manual_seed(0)
    target = tiny_target8(vocab=24, seed=2)
    head = Eagle3Head(Eagle3Config.for_target(target.config, draft_vocab_size=10))
    head.set_draft_vocab([1, 3, 4, 7, 9, 11, 15, 18, 20, 23])
    layers = (5, 2, 4)  # not sorted: the identity block must follow the highest layer, not the last slot
    init_from_target(head, target, layers)
    head.midlayer.self_attn.o_proj.weight.zero_()
    head.midlayer.mlp.down_proj.weight.zero_()
    feats = torch.randn(1, 6, 3 * 64)
    h = head(target.embed(torch.randint(0, 24, (1, 6))), head.fuse(feats), torch.arange(6))
    top = feats[..., 0:64]  # layer 5 is in slot 0
    want = target.lm_head(target.body.norm(top))[..., head.draft_ids()]
    torch.testing.assert_close(head.logits(h), want, atol=1e-5, rtol=1e-5)


def test_heldout_sets_scored_in_one_pass_match_scoring_each_set_alone():
    """holdout_accuracies3 runs each held-out record once and adds up its groups' counts: the
    result must be what scoring "all", "chat", "self" and "fixed" one by one gives."""
    from eagle_core.train.loop import holdout_sets
    from eagle_core.train.eagle3 import holdout_accuracies3, holdout_accuracy3

    target = tiny_target8(vocab=24, seed=1)
    g = torch.Generator().manual_seed(2)
    kinds = [("oasst_prompts_en.jsonl", True), ("gsm8k.jsonl", True), ("gsm8k.jsonl", False)]
    records = [{"ids": torch.randint(3, 24, (int(n),), generator=g), "prompt_len": 4, "source": kinds[i % 3][0],
                "own": kinds[i % 3][1]} for i, n in enumerate(torch.randint(10, 30, (12,), generator=g))]
    head = Eagle3Head(Eagle3Config.for_target(target.config, draft_vocab_size=16))
    head.set_draft_vocab(draft_vocabulary3(records, 16, 24))
    layers = head.config.layers_for(8)
    sets = holdout_sets(records)
    assert set(sets) == {"all", "self", "fixed", "chat"}
    got = holdout_accuracies3(head, target, layers, records, 96, 64, 3)
    for name, recs in sets.items():
        want = holdout_accuracy3(head, target, layers, recs, 96, 64, 3)
        assert got[name]["positions"] == want["positions"] > 0, name
        assert abs(got[name]["top1"] - want["top1"]) < 1e-9 and got[name]["acc_by_step"] == want["acc_by_step"], name
