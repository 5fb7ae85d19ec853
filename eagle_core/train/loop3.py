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
"""
from __future__ import annotations

import json
import os
import time
from collections import Counter

import torch

from ..drafting.head3 import Eagle3Config, Eagle3Head, save_head3
from .features import cached, cached_features, id_batch, teacher_forced
from .loop import GRAD_CLIP, LOG_EVERY, holdout_record, holdout_sets, make_batches
from .session import SaveClock, optimizer_and_resume

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
    w = target.lm_head.weight
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
    head.lm_head.weight.copy_(target.lm_head.weight[head.draft_ids().to(target.lm_head.weight.device)])
    head.norm.weight.copy_(target.body.norm.weight)
    w = torch.zeros_like(head.fc.weight)  # (H, len(layers) * H), blocks in `layers` order
    top = max(range(len(layers)), key=lambda i: layers[i])
    w[:, top * H:(top + 1) * H] = torch.eye(H)
    head.fc.weight.copy_(w)


def run_train3(args):
    """python -m eagle_core.train train3: resumable, checkpoints every few minutes, evaluates on the
    held-out set every --eval-every steps, exports the head (with the run's position in its meta)."""
    from ..target import load_target
    from .datasets import load_training_data

    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    target = load_target(args.model)
    records, hold = load_training_data(args.data, target, args.holdout_shards, args.max_shards, args.holdout_every)
    records = records[:getattr(args, "max_records", None)]  # a prefix: a feature cache's order is shuffled
    if not records:
        raise SystemExit(f"no training data in {args.data}: run `python -m eagle_core.train ids-fixed` or `gen` first")
    ckpt = os.path.join(args.out, "ckpt3.pt")
    head, carried = _initial_head3(args, target, records, ckpt)
    layers = head.config.layers_for(int(target.config.num_hidden_layers))
    total = len(make_batches(records, args.tokens_per_batch, args.max_seq, 0)) * args.epochs
    opt, sched, state, c = optimizer_and_resume(head, args.lr, total, ckpt)
    if c is not None:
        print(f"resumed at epoch {state['epoch']} batch {state['batch']}", flush=True)
    elif carried:  # --continue: a head exported by an earlier session's run of this command
        state.update(carried)
        sched.last_epoch = state["step"]  # the schedule where that run left it (Adam's moments restart)
        for g, lam, base in zip(opt.param_groups, sched.lr_lambdas, sched.base_lrs):
            g["lr"] = base * lam(state["step"])
        print(f"continuing at epoch {state['epoch']} batch {state['batch']} (step {state['step']})", flush=True)
    if _TrainRun3(args, target, head, layers, records, hold, opt, sched, state, ckpt).loop():
        print("training done", flush=True)


def _initial_head3(args, target, records, ckpt: str):
    """The head to train, and with --continue the run state its exporter recorded (else None)."""
    V = target.vocab_size
    vocab = draft_vocabulary3(records, min(args.draft_vocab or V, V), V)
    torch.manual_seed(args.seed)
    layers = tuple(args.layers) if getattr(args, "layers", None) else None
    head = Eagle3Head(Eagle3Config.for_target(target.config, draft_vocab_size=len(vocab), layers=layers))
    head = head.to(target.device)
    head.set_draft_vocab(vocab)
    init = getattr(args, "init", None)
    if init and not os.path.exists(ckpt):
        from ..drafting.head3 import load_head3

        head = load_head3(init, target, target.device, torch.float32).train()  # its draft vocabulary too
        print(f"initialised from {init}", flush=True)
        if layers:  # the same weights, read from other layers of the target
            head.config.layers = layers
    if layers:
        head.config.layers_for(int(target.config.num_hidden_layers))  # refuses layers the target lacks
    if not init and not getattr(args, "random_init", False):
        init_from_target(head, target, head.config.layers_for(int(target.config.num_hidden_layers)))
    carried = None
    if getattr(args, "continue_run", False):
        if not init:
            raise SystemExit("--continue needs --init: the head directory an earlier run exported")
        with open(os.path.join(init, "config.json")) as f:
            carried = json.load(f).get("eagle_explainer", {}).get("run_state")
        if carried is None:
            raise SystemExit(f"{init} records no run state: it was not exported by train3; drop --continue")
    return head, carried


class _TrainRun3:
    """One train3 run's loop: steps, logs, held-out evaluations, checkpoints and exports."""

    def __init__(self, args, target, head, layers, records, hold, opt, sched, state, ckpt):
        self.args, self.target, self.head, self.layers = args, target, head, layers
        self.records, self.hold, self.opt, self.sched, self.state, self.ckpt = records, hold, opt, sched, state, ckpt
        self.log = open(os.path.join(args.out, "log3.jsonl"), "a")

    def write(self, rec: dict) -> None:
        self.log.write(json.dumps(rec) + "\n"); self.log.flush()
        print(json.dumps(rec), flush=True)

    def save(self) -> None:
        """The checkpoint (resume on this machine) and the exported head with the run's position
        (carry on in a later session: --init <out>/head3 --continue)."""
        torch.save({"head": self.head.state_dict(), "opt": self.opt.state_dict(), "sched": self.sched.state_dict(),
                    "state": self.state}, self.ckpt + ".tmp")
        os.replace(self.ckpt + ".tmp", self.ckpt)
        st = self.state
        save_head3(self.head, os.path.join(self.args.out, "head3"),
                   meta={"epochs": st["epoch"] + st["batch"] / max(self.n_batches, 1), "steps": st["step"],
                         "sequences": len(self.records), "layers": list(self.layers),
                         "run_state": {k: st[k] for k in ("epoch", "batch", "step", "elapsed", "cpu") if k in st}})

    def evaluate(self, epoch_end: float) -> None:
        a = self.args
        ev = holdout_accuracies3(self.head, self.target, self.layers, self.hold, a.tokens_per_batch, a.max_seq, a.steps)
        self.write(holdout_record(round(epoch_end, 4), self.state, ev))

    def step(self, idx) -> None:
        a, st = self.args, self.state
        t0, c0 = time.time(), time.process_time()
        batch = target_batch(self.target, self.head, self.layers, self.records, idx, a.max_seq)
        loss, accs = ttt_loss(self.head, self.target.embed, batch, a.steps)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.head.parameters(), GRAD_CLIP)
        self.opt.step(); self.sched.step()
        st["batch"] += 1; st["step"] += 1; st["elapsed"] += time.time() - t0
        # CPU seconds too: on a shared machine the wall clock also counts the time spent waiting for a core
        st["cpu"] = st.get("cpu", 0.0) + time.process_time() - c0
        if st["step"] % LOG_EVERY == 0:
            self.write({"step": st["step"], "epoch": st["epoch"], "loss": loss.item(),
                        "acc_by_step": [round(x, 4) for x in accs], "elapsed_s": round(st["elapsed"], 1),
                        "cpu_s": round(st["cpu"], 1)})

    def loop(self) -> bool:
        """Train to the last epoch's end (True) or until --max-minutes (False, saved to resume)."""
        a, st = self.args, self.state
        clock = SaveClock(a.ckpt_minutes, a.max_minutes)
        self.head.train()
        if a.eval_every and st["step"] == 0:
            self.evaluate(0.0)  # where the curve starts: the initial (or warm-start) head
        while st["epoch"] < a.epochs:
            batches = make_batches(self.records, a.tokens_per_batch, a.max_seq, a.seed + st["epoch"])
            self.n_batches = len(batches)
            while st["batch"] < len(batches):
                self.step(batches[st["batch"]])
                if a.eval_every and st["step"] % a.eval_every == 0:
                    self.evaluate(st["epoch"] + st["batch"] / len(batches))
                if not clock.after_step(self.save):
                    return False
            st["epoch"] += 1; st["batch"] = 0
            self.evaluate(st["epoch"])
            self.save()
        return True
