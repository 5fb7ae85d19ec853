"""EAGLE-1/2 training-time test (`train --unroll K`): its attention is the drafter's, step 0 is the
ordinary teacher-forced loss, and training on it raises the head's accuracy at depth 2."""
import pytest
import torch

from conftest import draft_chain, draft_node_mask, tiny_head, tiny_target
from eagle_core.drafting.head import EagleHead, HeadConfig
from eagle_core.train.eagle2 import collate, step_loss


def _head(target, seed=0):
    torch.manual_seed(seed)
    return EagleHead(HeadConfig.for_target(target.config))


@pytest.mark.parametrize("layers", [1, 2])
@torch.no_grad()
def test_unrolled_steps_see_what_a_draft_chain_sees(layers):
    """Step k at row t of the unrolled pass equals a draft node at depth k + 1 below position t,
    run through the head cache with the drafter's mask (committed context + ancestors only), its
    input feature being the head's own prediction one depth up. With two decoder layers, each
    layer keeps its own keys, in the cache and in the unrolled pass."""
    target = tiny_target()
    head = _head(target) if layers == 1 else tiny_head(target, layers=layers)
    H = head.config.hidden_size
    T, t, steps = 10, 6, 4
    feats = torch.randn(1, T, H)
    embeds = [torch.randn(1, T, H) for _ in range(steps)]
    outs = head.unrolled(embeds, feats, torch.arange(T))
    assert len(outs) == steps and all(o.shape == (1, T, H) for o in outs)
    torch.testing.assert_close(outs[0], head(embeds[0], feats, torch.arange(T)))  # step 0: teacher forcing
    chain, cache = draft_chain(head, embeds, feats, t)
    assert len(cache.layers) == layers and all(c.length == t + steps for c in cache.layers)
    torch.testing.assert_close(chain[0], outs[0][:, t:t + 1])
    for k in range(1, steps):
        torch.testing.assert_close(chain[k], outs[k][:, t:t + 1], atol=1e-5, rtol=1e-5)
    # and a sibling branch (another token at depth 2) does not see the first branch
    mask = draft_node_mask(cache.length + 1, t + 1, [])
    sib = head(embeds[1][:, t:t + 1], outs[0][:, t:t + 1], torch.tensor([t + 1]), mask=mask, cache=cache)
    torch.testing.assert_close(sib, outs[1][:, t:t + 1], atol=1e-5, rtol=1e-5)


def _records(vocab, n_seq=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    # a learnable sequence: mostly x_{t+1} = x_t + 1 (mod), so the target's features carry it
    recs = []
    for n in range(n_seq):
        start = int(torch.randint(3, vocab, (1,), generator=g))
        ids = torch.tensor([3 + (start + i) % (vocab - 3) for i in range(18 + n)])
        recs.append({"ids": ids, "prompt_len": 3})
    return recs


def test_unroll_one_is_the_plain_loss_and_steps_are_scored():
    target = tiny_target()
    head = _head(target)
    recs = _records(target.vocab_size)
    batch = collate(recs, list(range(len(recs))), 64, "cpu", target)
    lm_w = target.lm_head.weight.detach()
    l1, st1 = step_loss(head, target.embed, lm_w, batch, 0, 0.1, False, 1)
    l3, st3 = step_loss(head, target.embed, lm_w, batch, 0, 0.1, False, 3)
    assert st1.deep == () and len(st3.deep) == 2
    assert (st3.top1, st3.top5, st3.count) == (st1.top1, st1.top5, st1.count)  # step 0 is unchanged
    n_resp = sum(len(r["ids"]) - 2 - r["prompt_len"] + 1 for r in recs)  # response targets at step 0
    assert st1.count == n_resp
    # every answer token is also drafted at depth 2 and 3 (from 1 and 2 rows earlier: the prompts
    # are 3 tokens long), and nothing past a sequence's end is scored
    assert st3.deep[0][1] == st3.deep[1][1] == n_resp
    assert l3.item() > l1.item()
    assert (st1 + st3).deep == st3.deep  # summing stats keeps the steps of the side that has them


def test_training_time_test_raises_depth_two_accuracy():
    """Trained with the same budget, unroll 3 beats unroll 1 at depth 2 (step 1) on the training batch."""
    target = tiny_target(vocab=40, seed=2)
    recs = _records(target.vocab_size, n_seq=8, seed=1)
    batch = collate(recs, list(range(len(recs))), 64, "cpu", target)
    lm_w = target.lm_head.weight.detach()
    depth2 = {}
    for unroll in (1, 3):
        head = _head(target, seed=3)
        opt = torch.optim.AdamW(head.parameters(), lr=3e-3)
        for _ in range(60):
            loss, _ = step_loss(head, target.embed, lm_w, batch, 0.0, 1.0, True, unroll)
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            st = step_loss(head, target.embed, lm_w, batch, 0, 0, False, 3)[1]
        depth2[unroll] = st.deep[0][0] / st.deep[0][1]
    assert depth2[3] > depth2[1] + 0.05, depth2
