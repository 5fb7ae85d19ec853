"""Training the EAGLE-1/2 head (`python -m eagle_core.train train`): its recipe.

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
loop.py's, shared with EAGLE-3; `Eagle2Recipe` is what this head passes into it.
"""
from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..drafting.head import (DRAFT_VOCAB_FILE, EagleHead, HeadConfig, read_draft_vocab, save_head,
                             write_draft_vocab)
from .features import id_batch, teacher_forced
from .loop import Recipe, holdout_sets, make_batches, run_training

PROMPT_WEIGHT = 0.3  # loss weight of prompt positions (response positions weigh 1)
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


def coverage(records, vocab: list[int]) -> float:
    s = set(vocab)
    tot = hit = 0
    for r in records:
        resp = r["ids"][r["prompt_len"]:].tolist()
        tot += len(resp)
        hit += sum(t in s for t in resp)
    return hit / max(tot, 1)


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


class Eagle2Recipe(Recipe):
    """What the EAGLE-1/2 head passes into the shared loop (loop.py): a new head or a warm start (grown
    by identity layers if --layers asks for more), the target's last-layer features with noise as its
    input, `step_loss` as its loss, and its export (out/head) at each epoch's end."""

    ckpt_file, log_file = "ckpt.pt", "log.jsonl"

    def prepare(self, train, hold, excluded):
        a, V = self.args, self.target.vocab_size
        if getattr(a, "draft_vocab_from", None):  # a warm start trained on data of another kind keeps its tokens
            try:
                vocab = read_draft_vocab(a.draft_vocab_from, V)
            except ValueError as e:
                raise SystemExit(f"--draft-vocab-from {a.draft_vocab_from}: {e}") from None
            if vocab is None:
                raise SystemExit(f"--draft-vocab-from {a.draft_vocab_from}: no {DRAFT_VOCAB_FILE} there")
        elif a.draft_vocab:
            vocab = draft_vocabulary(train, a.draft_vocab, V)
        else:
            vocab = list(range(V))
        self.vocab = vocab
        self.lm_w = self.target.lm_head_weight.detach()[torch.tensor(vocab)].clone()
        self.info = {"sequences": len(train), "tokens": sum(len(r["ids"]) for r in train),
                     "response_tokens": sum(len(r["ids"]) - r["prompt_len"] for r in train), "holdout": len(hold),
                     "draft_vocab": len(vocab), "draft_vocab_coverage": coverage(hold, vocab),
                     "holdout_excluded": excluded}
        print(json.dumps(self.info), flush=True)

    def initial_head(self, train, resuming):
        a, target = self.args, self.target
        init_sd = init_state(a.init) if a.init else None
        layers = getattr(a, "layers", None) or (state_layers(init_sd) if init_sd else 1)
        head = EagleHead(HeadConfig.for_target(target.config, num_hidden_layers=layers)).to(target.device)
        new = None
        if init_sd is not None:
            new = warm_start(head, init_sd)  # a resumed run overwrites these weights
            if not resuming:
                print(f"initialised from {a.init}" + (f"; new: {len(new)} tensors of layers "
                      f"{state_layers(init_sd)}..{layers - 1}, starting as the identity" if new else ""), flush=True)
        return head, new, None

    def begin(self, run):
        with open(os.path.join(self.args.out, "info.json"), "w") as f:
            json.dump({**self.info, "args": vars(self.args)}, f, indent=2)
        write_draft_vocab(self.args.out, self.vocab)

    def loss(self, head, records, idx):
        a, t = self.args, self.target
        batch = collate(records, idx, a.max_seq, t.device, t)
        return step_loss(head, t.embed, self.lm_w, batch, a.noise, a.ce_weight, True, a.unroll, a.topk_loss,
                         a.topk_weight)

    def log_fields(self, window):
        s = sum(window, StepStats())
        return {"feat_loss": s.feat_loss / s.batches, "ce_loss": s.ce_loss / s.batches,
                "train_top1": s.top1 / max(s.count, 1)}

    def evaluate(self, head, hold):
        t = self.target
        return {name: holdout_accuracy(head, t.embed, self.lm_w, recs, self.args, t.device, t)
                for name, recs in holdout_sets(hold).items()}

    def export(self, run):
        export_head(run.head, self.vocab, os.path.join(self.args.out, "head"), self.info, run.state)


def run_train(args):
    run_training(args, Eagle2Recipe)


def export_head(head, vocab, out, info, state):
    save_head(head, out, draft_vocab=vocab, dtype=torch.float16,
              meta={"trained_on": info, "epochs": state["epoch"], "steps": state["step"]})


def run_export(args):
    """`export`: a run's checkpoint as a head directory (the EAGLE layout + its draft vocabulary)."""
    c = torch.load(os.path.join(args.run, "ckpt.pt"), weights_only=False)
    head = EagleHead(HeadConfig.from_json_dict(c["config"]))
    head.load_state_dict(c["head"])
    try:
        vocab = read_draft_vocab(os.path.join(args.run, DRAFT_VOCAB_FILE), head.config.vocab_size)
    except ValueError as e:
        raise SystemExit(f"export: {e}") from None
    with open(os.path.join(args.run, "info.json")) as f:
        info = json.load(f)
    info.pop("args", None)
    export_head(head, vocab, args.out, info, c["state"])
    print(f"wrote {args.out}")
