"""The EAGLE-1/2 trainer's acceptance-aware pieces: the top-K objective (`train --topk-loss K`) and
the held-out scores aimed at acceptance (top-2 and sum(min(p, q))), checked against values worked
out by hand and against a head that predicts the target's features exactly."""
import math

import torch

from conftest import tiny_target
from eagle_core.drafting.head import EagleHead, HeadConfig
from eagle_core.train.eagle2 import collate, step_loss, topk_loss


def test_topk_loss_by_hand():
    p = torch.tensor([[[0.5, 0.3, 0.2]], [[0.1, 0.1, 0.8]]])  # (B=2, n=1, N=3)
    q = torch.tensor([[[0.2, 0.6, 0.2]], [[0.3, 0.3, 0.4]]])
    logq, w = q.log(), torch.tensor([[1.0], [0.5]])
    wsum = w.sum()
    # K = 1: the target's most likely token only, weighted by its probability
    k1 = (0.5 * -math.log(0.2) * 1.0 + 0.8 * -math.log(0.4) * 0.5) / 1.5
    assert math.isclose(topk_loss(p, logq, w, wsum, 1).item(), k1, rel_tol=1e-6)
    # K = 2 adds the second most likely token
    k2 = ((0.5 * -math.log(0.2) + 0.3 * -math.log(0.6)) * 1.0
          + (0.8 * -math.log(0.4) + 0.1 * -math.log(0.3)) * 0.5) / 1.5
    assert math.isclose(topk_loss(p, logq, w, wsum, 2).item(), k2, rel_tol=1e-6)
    # K = N is the whole soft cross-entropy
    full = ((-(p * logq).sum(-1)) * w).sum() / wsum
    torch.testing.assert_close(topk_loss(p, logq, w, wsum, 3), full)


class _Oracle(torch.nn.Module):
    """A "head" that returns the target's true next features: q equals p everywhere."""

    def __init__(self, f_tgt):
        super().__init__()
        self.f_tgt = f_tgt

    def forward(self, emb, feats, pos):
        return self.f_tgt


def _batch(target, n_seq=4):
    g = torch.Generator().manual_seed(0)
    recs = [{"ids": torch.randint(3, target.vocab_size, (12 + i,), generator=g), "prompt_len": 3}
            for i in range(n_seq)]
    return collate(recs, list(range(n_seq)), 64, "cpu", target)


@torch.no_grad()
def test_acceptance_scores_of_an_exact_head_are_one():
    target = tiny_target()
    batch = _batch(target)
    lm_w = target.lm_head.weight.detach()
    _, st = step_loss(_Oracle(batch[2]), target.embed, lm_w, batch, 0, 0.1, False)
    assert st.count > 0
    assert st.top1 == st.top2 == st.top5 == st.count
    assert math.isclose(st.accept, st.count, rel_tol=1e-5)


@torch.no_grad()
def test_acceptance_scores_of_a_real_head_match_a_direct_count():
    target = tiny_target()
    torch.manual_seed(1)
    head = EagleHead(HeadConfig.for_target(target.config))
    batch = _batch(target)
    ids_next, f_in, f_tgt, w = batch
    lm_w = target.lm_head.weight.detach()
    _, st = step_loss(head, target.embed, lm_w, batch, 0, 0.1, False)
    p = torch.softmax(f_tgt @ lm_w.T, -1)
    q = torch.softmax(head(target.embed(ids_next), f_in, torch.arange(f_in.shape[1])) @ lm_w.T, -1)
    resp = w == 1.0
    rank = (q > q.gather(-1, p.argmax(-1, keepdim=True))).sum(-1)  # how many tokens the head puts above the target's
    assert st.top1 == int(((rank < 1) & resp).sum())
    assert st.top2 == int(((rank < 2) & resp).sum())
    assert st.top1 <= st.top2 <= st.top5 <= st.count
    assert math.isclose(st.accept, float((torch.minimum(p, q).sum(-1) * resp).sum()), rel_tol=1e-5)
    assert 0 < st.accept < st.count
    # the stats add up like the others
    both = st + st
    assert (both.top2, both.accept) == (2 * st.top2, 2 * st.accept)


def test_topk_objective_is_added_at_every_step():
    target = tiny_target()
    torch.manual_seed(2)
    head = EagleHead(HeadConfig.for_target(target.config))
    batch = _batch(target)
    lm_w = target.lm_head.weight.detach()
    with torch.no_grad():
        plain = step_loss(head, target.embed, lm_w, batch, 0, 0.1, False, 2)[0]
        with_k = step_loss(head, target.embed, lm_w, batch, 0, 0.1, False, 2, topk=1, topk_weight=0.5)[0]
        off = step_loss(head, target.embed, lm_w, batch, 0, 0.1, False, 2, topk=1, topk_weight=0.0)[0]
    assert with_k.item() > plain.item()
    assert off.item() == plain.item()
    # the added term is 0.5 x the top-1 loss at step 0 plus 0.8 x 0.5 x the top-1 loss at step 1
    ids_next, f_in, f_tgt, w = batch
    with torch.no_grad():
        preds = head.unrolled([target.embed(ids_next), torch.cat([target.embed(ids_next)[:, 1:],
                               torch.zeros_like(target.embed(ids_next)[:, :1])], 1)], f_in, torch.arange(f_in.shape[1]))
        p = torch.softmax(f_tgt @ lm_w.T, -1)
        extra = 0.0
        for k, pred in enumerate(preds):
            pk = torch.cat([p[:, k:], torch.zeros_like(p[:, :k])], 1)
            wk = torch.cat([w[:, k:], torch.zeros_like(w[:, :k])], 1)
            extra += 0.8 ** k * 0.5 * topk_loss(pk, torch.log_softmax(pred @ lm_w.T, -1), wk, wk.sum(), 1).item()
    assert math.isclose(with_k.item() - plain.item(), extra, rel_tol=1e-4)
