"""EAGLE-3 training-time test: its attention is the drafter's, and its loss goes down."""
import torch

from eagle_core.head3 import Eagle3Config, Eagle3Head
from eagle_core.train.loop3 import draft_vocabulary3, target_batch, ttt_loss
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
    from eagle_core.train.loop3 import init_from_target

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
