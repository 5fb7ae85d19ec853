"""Training the EAGLE-1/2 head, resumable at any point.

The recipe is the EAGLE paper's (Li et al. 2024, arXiv:2401.15077): regress the next feature
with SmoothL1, add a small cross-entropy through the frozen LM head, and put uniform noise on
the input features so the head tolerates its own errors at draft time.

Per sequence (ids x_0..x_{T-1}, features f_0..f_{T-2} captured during generation):
    input  at t : (f_t + U(-noise, noise), x_{t+1})          t = 0 .. T-2
    target at t : f_{t+1} and p_{t+1} = softmax(lm_head(f_{t+1}))   (t <= T-3)
    loss        = SmoothL1(f̂_{t+1}, f_{t+1}) + ce_weight · CE(p_{t+1}, softmax(lm_head(f̂_{t+1})))
The loss covers response tokens; prompt tokens (the target's features on user text) count
with weight `prompt_weight`, since on a CPU budget every real feature transition helps.
The soft cross-entropy runs over the reduced draft vocabulary the head will draft from.
`--unroll K` adds the training-time test: K - 1 more draft steps in which the head reads its own
predicted features, attending as a draft node deeper in the tree does (`step_loss`).
`--topk-loss K` adds an objective aimed at acceptance rather than imitation: the cross-entropy
restricted to the target's K most likely tokens (HASS's "harmonised objective distillation",
arXiv:2408.15766), i.e. the tokens a tree drafts from; K = 1 is the hard cross-entropy on the
target's greedy token weighted by its probability. The held-out scores say what acceptance
needs: top-2 (a greedy CPU-tree draft is accepted at depth 1 when the target's token is among the
head's 2 children) and sum(min(p, q)) (the chance that one token sampled from q is accepted at T = 1).

The resumable run that applies this recipe (data, optimiser, checkpoints, the epoch loop) is
session.py's.
"""
from __future__ import annotations

import json
import os
import random
from collections import Counter
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..drafting.head import DRAFT_VOCAB_FILE, EagleHead
from ..drafting.head import read_draft_vocab as head_read_draft_vocab
from .features import id_batch, length_batches, teacher_forced
from .sources import CHAT_SOURCES

PROMPT_WEIGHT = 0.3  # loss weight of prompt positions (response positions weigh 1)
ADAM_BETAS = (0.9, 0.95)  # the EAGLE recipe's AdamW betas
WARMUP_DIVISOR = 50  # linear learning-rate warm-up over the first 1/50 of the steps
LR_FLOOR = 0.1  # the cosine decay ends at 10% of the peak learning rate
GRAD_CLIP = 0.5  # max gradient norm
LOG_EVERY = 10  # steps between two log lines
HOLDOUT_STEPS = 3  # held-out top-1 is also scored at draft depths 2 and 3
TTT_DECAY = 0.8  # the training-time test's loss weight of step k is TTT_DECAY ** k (EAGLE-3's 0.8)


@dataclass
class StepStats:
    """What `step_loss` measured on one batch, or summed over several (`+`)."""

    top1: int = 0  # response positions whose target argmax is the head's top-1 draft
    top5: int = 0  # ... within the head's top 5
    count: int = 0  # response positions counted
    feat_loss: float = 0.0  # SmoothL1 feature loss (summed over batches)
    ce_loss: float = 0.0  # soft cross-entropy (summed over batches)
    batches: int = 0
    deep: tuple = ()  # training-time test steps 1, 2, ..: (top-1 hits, count) each
    top2: int = 0  # response positions whose target argmax is among the head's top 2
    accept: float = 0.0  # sum over response positions of sum_i min(p_i, q_i) over the draft vocabulary

    def __add__(self, o: "StepStats") -> "StepStats":
        deep = tuple((a[0] + b[0], a[1] + b[1]) for a, b in zip(self.deep, o.deep)) if self.deep and o.deep \
            else self.deep or o.deep
        return StepStats(self.top1 + o.top1, self.top5 + o.top5, self.count + o.count,
                         self.feat_loss + o.feat_loss, self.ce_loss + o.ce_loss, self.batches + o.batches, deep,
                         self.top2 + o.top2, self.accept + o.accept)


def draft_vocabulary(records, n: int, vocab_size: int) -> list[int]:
    """The n most frequent tokens of the generated data (responses and prompts)."""
    counts = Counter()
    for r in records:
        counts.update(r["ids"].tolist())
    ranked = [t for t, _ in counts.most_common()]
    rest = [t for t in range(vocab_size) if t not in counts]  # pad with unseen ids if data is tiny
    return sorted((ranked + rest)[:n])


def read_draft_vocab(path: str, vocab_size: int) -> list[int]:
    """`--draft-vocab-from`: the draft vocabulary of a head or run directory (its draft_vocab.json),
    or of such a file, so a warm start trained on data of another kind keeps drafting the tokens it
    drafted (a vocabulary counted on new data alone would drop the rest)."""
    try:
        ids = head_read_draft_vocab(path, vocab_size)
    except ValueError as e:
        raise SystemExit(f"--draft-vocab-from {path}: {e}") from None
    if ids is None:
        raise SystemExit(f"--draft-vocab-from {path}: no {DRAFT_VOCAB_FILE} there")
    return ids


def coverage(records, vocab: list[int]) -> float:
    s = set(vocab)
    tot = hit = 0
    for r in records:
        resp = r["ids"][r["prompt_len"]:].tolist()
        tot += len(resp)
        hit += sum(t in s for t in resp)
    return hit / max(tot, 1)


def make_batches(records, tokens_per_batch: int, max_seq: int, seed: int) -> list[list[int]]:
    """Group sequences of similar length so padding stays small; order shuffled by seed."""
    batches = length_batches(records, range(len(records)), tokens_per_batch, max_seq)
    random.Random(seed).shuffle(batches)
    return batches


def collate(records, idx, max_seq, device, target=None):
    """-> ids_next (B, n), feats_in (B, n, H), feats_tgt (B, n, H), weight (B, n). Records from
    `gen` shards carry their features; for token-id records (train/ids.py) one batched
    teacher-forced forward of `target` computes them."""
    seqs = [records[i] for i in idx]
    n = max(min(len(r["ids"]), max_seq) - 1 for r in seqs)  # input pairs per sequence
    if all("feats" in r for r in seqs):
        feats = [r["feats"] for r in seqs]
    else:
        final, _ = teacher_forced(target, id_batch(records, idx, max_seq))  # (B, T, H)
        feats = final.float().cpu()
    H = feats[0].shape[-1]
    B = len(seqs)
    ids_next = torch.zeros(B, n, dtype=torch.long)
    f_in = torch.zeros(B, n, H)
    f_tgt = torch.zeros(B, n, H)
    w = torch.zeros(B, n)
    for b, r in enumerate(seqs):
        T = min(len(r["ids"]), max_seq)
        f = feats[b][:T - 1].float()  # f_0 .. f_{T-2}
        ids_next[b, :T - 1] = r["ids"][1:T].long()
        f_in[b, :T - 1] = f
        f_tgt[b, :T - 2] = f[1:]
        pos_next = torch.arange(1, T - 1)  # position of the predicted feature, t + 1
        w[b, :T - 2] = torch.where(pos_next >= r["prompt_len"], 1.0, PROMPT_WEIGHT)
    return ids_next.to(device), f_in.to(device), f_tgt.to(device), w.to(device)


def _losses(pred, f_tgt, p_tgt, lm_w, w, wsum):
    l_feat = (F.smooth_l1_loss(pred, f_tgt, reduction="none").mean(-1) * w).sum() / wsum
    logq = torch.log_softmax(pred @ lm_w.T, -1)
    l_ce = (-(p_tgt * logq).sum(-1) * w).sum() / wsum
    return l_feat, l_ce, logq


def topk_loss(p_tgt, logq, w, wsum, k: int):
    """-sum over the target's k most likely tokens i of p_i log q_i, weighted per position by w."""
    p_top, idx = p_tgt.topk(k, -1)
    return (-(p_top * logq.gather(-1, idx)).sum(-1) * w).sum() / wsum


def _ahead(x: torch.Tensor, k: int) -> torch.Tensor:
    """x (B, n, ...) moved k rows up along dim 1, zero-filled at the end: row t holds row t + k."""
    if k == 0:
        return x
    return torch.cat([x[:, k:], torch.zeros_like(x[:, :k])], dim=1)


def step_loss(head, embed, lm_w, batch, noise: float, ce_weight: float, train: bool, unroll: int = 1,
              topk: int = 0, topk_weight: float = 0.0):
    """Loss of one batch. unroll = K > 1 is the training-time test (EagleHead.unrolled): K draft
    steps, step k reading the head's own step k-1 prediction, attending as a draft node at depth
    k + 1 does, and scored against the target's f_{t+k+1} and p_{t+k+1} (weight TTT_DECAY**k, the
    EAGLE-3 recipe's). topk > 0 adds topk_weight x `topk_loss` to every step's loss. stats.deep
    holds (top-1 hits, count) of steps 1 .. K-1."""
    ids_next, f_in, f_tgt, w = batch
    if train and noise > 0:
        f_in = f_in + (torch.rand_like(f_in) * 2 - 1) * noise
    with torch.no_grad():
        emb = embed(ids_next)
        p_tgt = torch.softmax(f_tgt @ lm_w.T, -1)  # (B, n, N) the target's next-token distribution
    n = f_in.shape[1]
    pos = torch.arange(n, device=f_in.device)
    if unroll <= 1:
        preds = [head(emb, f_in, pos)]  # (B, n, H)
    else:
        preds = head.unrolled([_ahead(emb, k) for k in range(unroll)], f_in, pos)
    loss, deep = 0.0, []
    for k, pred in enumerate(preds):
        wk = _ahead(w, k)
        pk = _ahead(p_tgt, k)
        wsum = wk.sum().clamp(min=1.0)
        l_feat_k, l_ce_k, logq_k = _losses(pred, _ahead(f_tgt, k), pk, lm_w, wk, wsum)
        l_k = l_feat_k + ce_weight * l_ce_k
        if topk > 0 and topk_weight > 0:
            l_k = l_k + topk_weight * topk_loss(pk, logq_k, wk, wsum, topk)
        loss = loss + TTT_DECAY ** k * l_k
        if k == 0:
            l_feat, l_ce, logq = l_feat_k, l_ce_k, logq_k
        else:
            with torch.no_grad():
                resp = wk == 1.0
                hit = (logq_k.argmax(-1) == pk.argmax(-1)) & resp
                deep.append((hit.sum().item(), resp.sum().item()))
    with torch.no_grad():
        resp = w == 1.0
        top = logq.topk(5, -1).indices
        tgt = p_tgt.argmax(-1, keepdim=True)
        top1 = ((top[..., :1] == tgt).squeeze(-1) & resp).sum().item()
        top2 = ((top[..., :2] == tgt).any(-1) & resp).sum().item()
        top5 = ((top == tgt).any(-1) & resp).sum().item()
        count = resp.sum().item()
        accept = (torch.minimum(p_tgt, logq.exp()).sum(-1) * resp).sum().item()
    return loss, StepStats(top1, top5, count, l_feat.item(), l_ce.item(), 1, tuple(deep), top2, accept)


def holdout_accuracy(head, embed, lm_w, records, args, device, target=None) -> dict:
    """Held-out top-1 / top-5 and feature loss over `records` (the target's features, no noise), and
    top-1 at training-time-test steps 1 .. HOLDOUT_STEPS - 1 (the head reading its own predictions,
    as at draft depths 2, 3, ..), whatever --unroll the run trains with."""
    head.eval()
    st = StepStats()
    with torch.no_grad():
        for idx in make_batches(records, args.tokens_per_batch, args.max_seq, 0):
            batch = collate(records, idx, args.max_seq, device, target)
            st += step_loss(head, embed, lm_w, batch, 0, 0, False, HOLDOUT_STEPS)[1]
    head.train()
    return {"top1": st.top1 / max(st.count, 1), "top2": st.top2 / max(st.count, 1), "top5": st.top5 / max(st.count, 1),
            "accept": st.accept / max(st.count, 1), "feat_loss": st.feat_loss / max(st.batches, 1),
            **{f"top1_step{k + 1}": hit / max(cnt, 1) for k, (hit, cnt) in enumerate(st.deep)}}


def drop_excluded(hold: list[dict], path: str | None) -> tuple[list[dict], int]:
    """Held-out records minus those whose prompt (source, line) is listed in the JSON file `path`
    ({"keys": [[source, line], ...]}): the prompts a warm-start head was trained on. -> (kept, dropped)."""
    if not path:
        return hold, 0
    with open(path, encoding="utf-8") as f:
        keys = {(str(s), int(l)) for s, l in json.load(f)["keys"]}
    kept = [r for r in hold if (r.get("source"), r.get("line")) not in keys]
    return kept, len(hold) - len(kept)


def init_state(path: str) -> dict:
    """A warm start's weights: a run's ckpt.pt, or an exported head directory (config.json + weights)."""
    if os.path.isdir(path):
        from ..drafting.head import load_head

        return load_head(path)[0].float().state_dict()
    return torch.load(path, weights_only=False)["head"]


def state_layers(sd: dict) -> int:
    """Decoder layers in an EAGLE-1/2 state dict (keys layers.0.*, layers.1.*, ..)."""
    return 1 + max(int(k.split(".")[1]) for k in sd if k.startswith("layers."))


def warm_start(head: EagleHead, sd: dict) -> set[str]:
    """Load the warm start `sd` into `head`, which may have more decoder layers than `sd`: those
    extra layers start as the identity (o_proj and down_proj zero, so each adds nothing to the
    residual stream) and the grown head computes exactly what the warm start did; training then
    moves them off zero. Returns the names of the parameters `sd` did not have."""
    have, want = state_layers(sd), len(head.layers)
    if have > want:
        raise ValueError(f"the warm start has {have} decoder layers, the head {want}: a head cannot shrink")
    own = head.state_dict()
    new = set(own) - set(sd)
    unexpected = set(sd) - set(own)
    missing = {k for k in new if not (k.startswith("layers.") and int(k.split(".")[1]) >= have)}  # not a new layer's
    if unexpected or missing:
        raise ValueError(f"warm start does not fit the head: missing keys {sorted(missing)}, "
                         f"unexpected keys {sorted(unexpected)}")
    with torch.no_grad():
        head.load_state_dict({**own, **sd}, strict=True)
        for i in range(have, want):
            head.layers[i].self_attn.o_proj.weight.zero_()
            head.layers[i].mlp.down_proj.weight.zero_()
    return new


def holdout_sets(hold: list[dict]) -> dict[str, list[dict]]:
    """The held-out records as "all", and, when both kinds are present, "self" (the target's own
    answers, from `gen`/`ids-gen`: what drafting at run time looks like) and "fixed" (teacher-forced
    reference answers); and "chat", the target's own answers to open-ended English requests
    (sources.CHAT_SOURCES), when the set holds others too."""
    own = [r for r in hold if r.get("own")]
    fixed = [r for r in hold if not r.get("own")]
    chat = [r for r in own if r.get("source") in CHAT_SOURCES]
    return {"all": hold, **({"self": own, "fixed": fixed} if own and fixed else {}),
            **({"chat": chat} if chat and len(chat) < len(hold) else {})}


def holdout_record(epoch_end: int, state: dict, ev: dict[str, dict]) -> dict:
    """One log line of held-out results per set: the "all" set's keys plain, the others suffixed."""
    return {"epoch_end": epoch_end, "step": state["step"], "elapsed_s": round(state["elapsed"], 1),
            **({"cpu_s": round(state["cpu"], 1)} if "cpu" in state else {}),
            **{f"{k}_{name}" if name != "all" else k: v for name, e in ev.items() for k, v in e.items()}}
