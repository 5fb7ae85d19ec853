"""Training the EAGLE-3 head with the training-time test (arXiv:2503.01840, section 3).

EAGLE-3 drops EAGLE-1/2's feature regression and trains only on tokens, through several draft
steps unrolled in training ("training-time test"): step 0 reads the target's fused layer
features; step k reads the head's OWN step k-1 output, so the head learns from the inputs it
will really see at draft depth k + 1. Per sequence x_0 .. x_{T-1} and draft step k = 0 .. steps-1,
row t of step k:

    input   (h^{k-1}_t, x_{t+k+1})    h^{-1}_t = fc(a_t), a_t = target layer inputs at position t
    target  p_{t+k+1} = softmax(target logits at position t+k+1, restricted to the draft vocabulary)
    loss_k  = soft cross-entropy(p, q) over rows whose target argmax is in the draft vocabulary
              and whose predicted token is a response token
    loss    = sum_k 0.8^k loss_k                (the official trainer: 7 steps, weights 0.8^k)

Attention at step k: row t sees step 0's keys at rows <= t and its own earlier steps at row t
only (Eagle3Head.unrolled), which is what a draft node at depth k + 1 sees.

Data: token-id datasets (train/ids.py) or the shards `python -m eagle_core.train gen` writes
(their EAGLE-1/2 last-layer features are not what EAGLE-3 reads); either way the features are
recomputed by one batched teacher-forced forward of the target per batch (train/features.py),
which keeps the data small (token ids only) and uses the CPU far better than token-by-token decoding.

The resumable run (data, optimiser, checkpoints, the epoch loop) is loop.py's, shared with EAGLE-1/2;
`Eagle3Recipe` is what this head passes into it.
"""
from __future__ import annotations

import json
import os
from collections import Counter

import torch

from ..drafting.head import save_head
from ..drafting.head3 import Eagle3Config, Eagle3Head, load_head3
from .features import cached, cached_features, id_batch, teacher_forced
from .loop import Recipe, holdout_sets, make_batches, run_training

TTT_STEPS = 7  # unrolled draft steps (the official trainer's `length`)
TTT_DECAY = 0.8  # step k weighs 0.8^k
LOGIT_CHUNK = 1024  # rows per full-vocabulary LM-head product when finding the target's argmax


def draft_vocabulary3(records, n: int, vocab_size: int) -> list[int]:
    """The n most frequent RESPONSE tokens (the official trainer counts loss-masked tokens), padded
    with the most frequent prompt tokens and then unseen ids if the data is small; sorted."""
    resp, rest = Counter(), Counter()
    for r in records:
        ids = r["ids"].tolist()
        resp.update(ids[r["prompt_len"]:])
        rest.update(ids[:r["prompt_len"]])
    ranked = [t for t, _ in resp.most_common()]
    seen = set(ranked)
    ranked += [t for t, _ in rest.most_common() if t not in seen]
    seen = set(ranked)
    ranked += [t for t in range(vocab_size) if t not in seen]
    return sorted(ranked[:n])


@torch.no_grad()
def target_batch(target, head: Eagle3Head, layers, records, idx, max_seq: int):
    """One teacher-forced forward of the target over a right-padded batch.
    -> ids (B, T), captured (B, T, 3H), p (B, T, N) target distribution over the draft vocabulary
    at each position, weight (B, T) (1 where the position's next token is a real response token
    whose target argmax the head can draft)."""
    ib = id_batch(records, idx, max_seq)
    B, T = ib.ids.shape
    dev = target.device
    weight = torch.zeros(B, T)
    weight[:, :-1] = ib.answer[:, 1:].float()  # position j predicts x_{j+1}: weigh it if x_{j+1} is an answer token
    if cached(records, idx):
        final, captured = cached_features(records, idx, ib, tuple(layers), dev)
    else:
        final, captured = teacher_forced(target, ib, layers)
    draft_ids = head.draft_ids().to(dev)
    w = target.lm_head_weight
    p = torch.softmax((final @ w[draft_ids].T).float(), -1)  # (B, T, N)
    flat = final.reshape(B * T, -1)
    top = torch.cat([(flat[i:i + LOGIT_CHUNK] @ w.T).argmax(-1) for i in range(0, B * T, LOGIT_CHUNK)])
    weight = weight.to(dev) * head.t2d.to(dev)[top].view(B, T).float()
    return ib.ids.to(dev), captured, p, weight


def ttt_loss(head: Eagle3Head, embed, batch, steps: int = TTT_STEPS, decay: float = TTT_DECAY, counts=None):
    """The training-time-test loss of one batch; returns (loss, per-step top-1 accuracies). If
    `counts` (a list of [hits, weight] pairs, one per step) is given, each step's weighted hits and
    weight are added to it."""
    ids, captured, p, weight = batch
    B, T = ids.shape
    pad = torch.zeros(B, steps + 1, dtype=ids.dtype, device=ids.device)
    ids_ext = torch.cat([ids, pad], dim=1)
    p_ext = torch.cat([p, torch.zeros(B, steps + 1, p.shape[-1], device=p.device)], dim=1)
    w_ext = torch.cat([weight, torch.zeros(B, steps + 1, device=weight.device)], dim=1)
    with torch.no_grad():
        embeds = [embed(ids_ext[:, k + 1:k + 1 + T]) for k in range(steps)]  # step k, row t: x_{t+k+1}
    fused = head.fuse(captured.to(head.fc.weight.dtype))
    outs = head.unrolled([e.to(fused.dtype) for e in embeds], fused, torch.arange(T, device=ids.device))
    loss, accs = 0.0, []
    for k, h in enumerate(outs):
        tgt, w = p_ext[:, k + 1:k + 1 + T], w_ext[:, k + 1:k + 1 + T]  # the distribution at t + k + 1
        logq = torch.log_softmax(head.logits(h).float(), -1)
        wsum = w.sum().clamp(min=1.0)
        loss = loss + decay ** k * (-(tgt * logq).sum(-1) * w).sum() / wsum
        with torch.no_grad():
            hits = ((logq.argmax(-1) == tgt.argmax(-1)).float() * w).sum()
            accs.append(float(hits / wsum))
            if counts is not None:
                counts[k][0] += float(hits); counts[k][1] += float(w.sum())
    return loss, accs


@torch.no_grad()
def holdout_counts3(head: Eagle3Head, target, layers, records, tokens_per_batch: int, max_seq: int,
                    steps: int) -> tuple[list[list[float]], int]:
    """([hits, positions] per draft step, response positions) over `records` (see holdout_accuracy3)."""
    head.eval()
    counts = [[0.0, 0.0] for _ in range(steps)]
    responses = 0
    for idx in make_batches(records, tokens_per_batch, max_seq, 0):
        batch = target_batch(target, head, layers, records, idx, max_seq)
        ttt_loss(head, target.embed, batch, steps, counts=counts)
        responses += int(id_batch(records, idx, max_seq).answer[:, 1:].sum())
    head.train()
    return counts, responses


def accuracy_of(counts, responses: int) -> dict:
    """top1: the head's first draft token equals the target's argmax, over EVERY position whose next
          token is a response token (a target argmax outside the draft vocabulary counts as a miss),
          the same measure as EAGLE-2's held-out top-1;
    acc_by_step: step k's top-1 when it reads its own k earlier outputs (training-time test), over
          positions whose target argmax it can draft."""
    return {"top1": counts[0][0] / max(responses, 1), "positions": responses,
            "acc_by_step": [round(h / max(w, 1.0), 4) for h, w in counts]}


def holdout_accuracy3(head: Eagle3Head, target, layers, records, tokens_per_batch: int, max_seq: int,
                      steps: int) -> dict:
    """Held-out accuracy with the target's features as step 0's input (accuracy_of says what is counted)."""
    return accuracy_of(*holdout_counts3(head, target, layers, records, tokens_per_batch, max_seq, steps))


def holdout_accuracies3(head: Eagle3Head, target, layers, hold, tokens_per_batch: int, max_seq: int,
                        steps: int) -> dict[str, dict]:
    """holdout_accuracy3 for each of holdout_sets(hold) ("all", "chat", ...), each record run once:
    the records are grouped by which sets hold them, and a set's counts are the sum of its groups'."""
    sets = holdout_sets(hold)
    member = {name: {id(r) for r in recs} for name, recs in sets.items()}
    groups: dict[frozenset, list[dict]] = {}
    for r in hold:
        groups.setdefault(frozenset(n for n in sets if id(r) in member[n]), []).append(r)
    raw = {key: holdout_counts3(head, target, layers, recs, tokens_per_batch, max_seq, steps)
           for key, recs in groups.items()}
    out = {}
    for name in sets:
        use = [raw[key] for key in raw if name in key]
        counts = [[sum(c[s][i] for c, _ in use) for i in (0, 1)] for s in range(steps)]
        out[name] = accuracy_of(counts, sum(n for _, n in use))
    return out


@torch.no_grad()
def init_from_target(head: Eagle3Head, target, layers) -> None:
    """Start a new head in the target's own spaces instead of from noise (this project's choice,
    not the official trainer's, which starts `fc`, `norm` and `lm_head` at random):
      - lm_head: the target's LM-head rows of the draft vocabulary, norm: the target's final norm,
        so the head's output space is the target's from step 0 (8,192 x 576 of its ~13 M weights);
      - fc: the identity on the highest captured layer (the input of layer N-3) and zero on the
        other two, so the fused feature starts as a late residual state of the target, the kind
        of vector that final norm and LM head decode; training then mixes in the lower layers.
    The decoder layer keeps its random initialisation: it learns the one-token step ahead."""
    H = head.config.hidden_size
    head.lm_head.weight.copy_(target.lm_head_weight[head.draft_ids().to(target.lm_head_weight.device)])
    head.norm.weight.copy_(target.body.norm.weight)
    w = torch.zeros_like(head.fc.weight)  # (H, len(layers) * H), blocks in `layers` order
    top = max(range(len(layers)), key=lambda i: layers[i])
    w[:, top * H:(top + 1) * H] = torch.eye(H)
    head.fc.weight.copy_(w)


class Eagle3Recipe(Recipe):
    """What the EAGLE-3 head passes into the shared loop (loop.py): a head initialised from the target
    (or --init, or --random-init), its captured layer features and the training-time test as its loss,
    per-step held-out accuracies, and an export (out/head3, with the run's position) at every save,
    so a later session can carry on from it (--init <out>/head3 --continue)."""

    ckpt_file, log_file = "ckpt3.pt", "log3.jsonl"
    export_with_every_checkpoint = True

    def initial_head(self, train, resuming):
        a, target = self.args, self.target
        n_layers = int(target.config.num_hidden_layers)
        V = target.vocab_size
        vocab = draft_vocabulary3(train, min(a.draft_vocab or V, V), V)
        layers = tuple(a.layers) if getattr(a, "layers", None) else None
        head = Eagle3Head(Eagle3Config.for_target(target.config, draft_vocab_size=len(vocab), layers=layers))
        head = head.to(target.device)
        head.set_draft_vocab(vocab)
        init = getattr(a, "init", None)
        if init and not resuming:
            head = load_head3(init, target, target.device, torch.float32).train()  # its draft vocabulary too
            print(f"initialised from {init}", flush=True)
            if layers:  # the same weights, read from other layers of the target
                head.config.layers = layers
        if layers:
            head.config.layers_for(n_layers)  # refuses layers the target lacks
        if not init and not getattr(a, "random_init", False):
            init_from_target(head, target, head.config.layers_for(n_layers))
        carried = None
        if getattr(a, "continue_run", False):
            if not init:
                raise SystemExit("--continue needs --init: the head directory an earlier run exported")
            with open(os.path.join(init, "config.json")) as f:
                carried = json.load(f).get("eagle_explainer", {}).get("run_state")
            if carried is None:
                raise SystemExit(f"{init} records no run state: it was not exported by train3; drop --continue")
        self.layers = head.config.layers_for(n_layers)
        return head, None, carried

    def loss(self, head, records, idx):
        a = self.args
        batch = target_batch(self.target, head, self.layers, records, idx, a.max_seq)
        loss, accs = ttt_loss(head, self.target.embed, batch, a.steps)
        return loss, (loss.item(), accs)

    def log_fields(self, window):
        loss, accs = window[-1]  # the last step's, as this head's logs always showed
        return {"loss": loss, "acc_by_step": [round(x, 4) for x in accs]}

    def evaluate(self, head, hold):
        a = self.args
        return holdout_accuracies3(head, self.target, self.layers, hold, a.tokens_per_batch, a.max_seq, a.steps)

    def export(self, run):
        st = run.state
        save_head(run.head, os.path.join(self.args.out, "head3"),
                  meta={"epochs": st["epoch"] + st["batch"] / max(run.n_batches, 1), "steps": st["step"],
                        "sequences": len(run.train), "layers": list(self.layers),
                        "run_state": {k: st[k] for k in ("epoch", "batch", "step", "elapsed", "cpu") if k in st}})


def run_train3(args):
    """python -m eagle_core.train train3: resumable, checkpoints every few minutes, evaluates on the
    held-out set every --eval-every steps, exports the head (with the run's position in its meta)."""
    run_training(args, Eagle3Recipe)
