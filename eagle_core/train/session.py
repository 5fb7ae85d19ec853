"""The resumable run that trains an EAGLE-1/2 head (`python -m eagle_core.train train`): its data,
optimiser and learning-rate schedule, checkpoints, log and epoch loop. The recipe itself (the
losses, the batches, the held-out scores, warm starts) is loop.py's.

A checkpoint (head, optimiser, schedule, position in the epoch, RNG) is written atomically
every few minutes; rerunning the same command resumes exactly where it stopped.
"""
from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass

import torch

from ..drafting.head import DRAFT_VOCAB_FILE, EagleHead, HeadConfig, save_head, write_draft_vocab
from ..drafting.head import read_draft_vocab as head_read_draft_vocab
from ..target import load_target
from .datasets import load_training_data
from .loop import (ADAM_BETAS, GRAD_CLIP, LOG_EVERY, LR_FLOOR, WARMUP_DIVISOR, StepStats, collate, coverage,
                   draft_vocabulary, drop_excluded, holdout_accuracy, holdout_record, holdout_sets, init_state,
                   make_batches, read_draft_vocab, state_layers, step_loss, warm_start)


def lr_factor(step: int, total_steps: int) -> float:
    """Learning-rate multiplier: linear warm-up, then cosine decay from 1 to LR_FLOOR."""
    warm = max(1, total_steps // WARMUP_DIVISOR)
    cos = math.cos(math.pi * min(step, total_steps) / total_steps)
    return min(1.0, (step + 1) / warm) * (LR_FLOOR + (1 - LR_FLOOR) * 0.5 * (1 + cos))


def optimizer_and_resume(head, lr: float, total_steps: int, ckpt: str, new: set[str] | None = None,
                         old_lr_scale: float = 1.0):
    """AdamW with the recipe's betas, the warm-up/cosine schedule over `total_steps`, and the loop
    state; restored from `ckpt` if it exists. Returns (opt, sched, state, checkpoint or None).
    With `new` (names of parameters a warm start lacked), the others learn at lr * old_lr_scale."""
    named = list(head.named_parameters())
    if new is None or old_lr_scale == 1.0:
        groups = [{"params": [p for _, p in named]}]
    else:
        groups = [{"params": [p for n, p in named if n in new]},
                  {"params": [p for n, p in named if n not in new], "lr": lr * old_lr_scale}]
    opt = torch.optim.AdamW(groups, lr=lr, betas=ADAM_BETAS, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: lr_factor(s, total_steps))
    state = {"epoch": 0, "batch": 0, "step": 0, "elapsed": 0.0}
    if not os.path.exists(ckpt):
        return opt, sched, state, None
    c = torch.load(ckpt, weights_only=False)
    head.load_state_dict(c["head"]); opt.load_state_dict(c["opt"]); sched.load_state_dict(c["sched"])
    return opt, sched, c["state"], c


class SaveClock:
    """When a run saves: a checkpoint every `ckpt_minutes`, and a stop (saved, resumable) once
    `max_minutes` (0: no limit) have passed since `t_session`. Shared by `train` and `train3`."""

    def __init__(self, ckpt_minutes: float, max_minutes: float, t_session: float | None = None):
        self.ckpt_s, self.max_s = ckpt_minutes * 60, max_minutes * 60
        self.t_ckpt = time.time()
        self.t_session = self.t_ckpt if t_session is None else t_session

    def after_step(self, save) -> bool:
        """Call after each step; False once the time budget ran out (saved by then)."""
        if time.time() - self.t_ckpt > self.ckpt_s:
            save(); self.t_ckpt = time.time()
        if self.max_s and time.time() - self.t_session > self.max_s:
            save()
            print("time budget reached; rerun the same command to resume", flush=True)
            return False
        return True


@dataclass
class TrainingSet:
    """The records to train on, the held-out ones, the draft vocabulary and a summary of them."""

    train: list[dict]
    hold: list[dict]
    vocab: list[int]
    info: dict


def training_set(args, target) -> TrainingSet:
    # the first `holdout_shards` shards are never trained on (held-out accuracy), whatever
    # else is added later, so warm starts from earlier runs cannot leak into the held-out set
    # (token-id datasets: 1 prompt in --holdout-every, by hash of its source and line)
    train_recs, hold_recs = load_training_data(args.data, target, args.holdout_shards, args.max_shards,
                                               args.holdout_every)
    if not train_recs:
        raise SystemExit(f"no training data in {args.data}: run `python -m eagle_core.train ids-fixed` or `gen` first")
    hold_recs, excluded = drop_excluded(hold_recs, getattr(args, "holdout_exclude", None))
    train_recs = train_recs[:getattr(args, "max_records", None)]  # a prefix: a feature cache's order is shuffled
    V = target.vocab_size
    if getattr(args, "draft_vocab_from", None):
        vocab = read_draft_vocab(args.draft_vocab_from, V)
    elif args.draft_vocab:
        vocab = draft_vocabulary(train_recs, args.draft_vocab, V)
    else:
        vocab = list(range(V))
    n_tok = sum(len(r["ids"]) for r in train_recs)
    n_resp = sum(len(r["ids"]) - r["prompt_len"] for r in train_recs)
    info = {"sequences": len(train_recs), "tokens": n_tok, "response_tokens": n_resp, "holdout": len(hold_recs),
            "draft_vocab": len(vocab), "draft_vocab_coverage": coverage(hold_recs, vocab),
            "holdout_excluded": excluded}
    return TrainingSet(train_recs, hold_recs, vocab, info)


def initial_head(args, target, ckpt: str) -> tuple[EagleHead, set[str] | None]:
    """A new head, or the warm start `args.init` (grown by identity layers if --layers asks for
    more); with the names of the parameters a warm start lacked (None without one)."""
    torch.manual_seed(args.seed)
    init_sd = init_state(args.init) if args.init else None
    layers = getattr(args, "layers", None) or (state_layers(init_sd) if init_sd else 1)
    head = EagleHead(HeadConfig.for_target(target.config, num_hidden_layers=layers)).to(target.device)
    new = None
    if init_sd is not None:
        new = warm_start(head, init_sd)  # a resumed run overwrites these weights below
        if not os.path.exists(ckpt):
            print(f"initialised from {args.init}" + (f"; new: {len(new)} tensors of layers "
                  f"{state_layers(init_sd)}..{layers - 1}, starting as the identity" if new else ""), flush=True)
    return head, new


class Session:
    """One training run in progress: the head, its optimiser and schedule, the loop state, the log."""

    def __init__(self, args, target, data: TrainingSet, head: EagleHead, ckpt: str, new: set[str] | None):
        self.args, self.target, self.data, self.head, self.ckpt = args, target, data, head, ckpt
        self.lm_w = target.lm_head.weight.detach()[torch.tensor(data.vocab)].clone()
        per_epoch = len(make_batches(data.train, args.tokens_per_batch, args.max_seq, 0))
        self.opt, self.sched, self.state, c = optimizer_and_resume(
            head, args.lr, per_epoch * args.epochs, ckpt, new, getattr(args, "init_lr_scale", 1.0))
        self.resumed = c is not None
        if c is not None:
            torch.set_rng_state(c["rng"])
            s = self.state
            print(f"resumed at epoch {s['epoch']} batch {s['batch']} (step {s['step']})", flush=True)
        self.log = open(os.path.join(args.out, "log.jsonl"), "a")

    def save(self) -> None:
        tmp = self.ckpt + ".tmp"
        torch.save({"head": self.head.state_dict(), "opt": self.opt.state_dict(), "sched": self.sched.state_dict(),
                    "state": self.state, "rng": torch.get_rng_state(), "config": self.head.config.to_json_dict()},
                   tmp)
        os.replace(tmp, self.ckpt)

    def write(self, rec: dict) -> None:
        self.log.write(json.dumps(rec) + "\n"); self.log.flush()
        print(json.dumps(rec), flush=True)

    def evaluate(self, epoch_end: int) -> None:
        ev = {name: holdout_accuracy(self.head, self.target.embed, self.lm_w, recs, self.args, self.target.device,
                                     self.target)
              for name, recs in holdout_sets(self.data.hold).items()}
        self.write(holdout_record(epoch_end, self.state, ev))

    def step(self, batch) -> StepStats:
        """One optimiser step on `batch`."""
        a = self.args
        loss, st = step_loss(self.head, self.target.embed, self.lm_w, batch, a.noise, a.ce_weight, True, a.unroll,
                             a.topk_loss, a.topk_weight)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.head.parameters(), GRAD_CLIP)
        self.opt.step(); self.sched.step()
        return st

    def epoch(self, t_session: float) -> bool:
        """The rest of the current epoch; False if the time budget ran out first (checkpoint saved)."""
        a, state = self.args, self.state
        batches = make_batches(self.data.train, a.tokens_per_batch, a.max_seq, a.seed + state["epoch"])
        since_log, clock = StepStats(), SaveClock(a.ckpt_minutes, a.max_minutes, t_session)
        while state["batch"] < len(batches):
            t0 = time.time()
            since_log += self.step(collate(self.data.train, batches[state["batch"]], a.max_seq, self.target.device,
                                           self.target))
            state["batch"] += 1; state["step"] += 1
            state["elapsed"] += time.time() - t0
            if state["step"] % LOG_EVERY == 0:
                n = since_log.batches
                self.write({"step": state["step"], "epoch": state["epoch"] + state["batch"] / len(batches),
                            "feat_loss": since_log.feat_loss / n, "ce_loss": since_log.ce_loss / n,
                            "train_top1": since_log.top1 / max(since_log.count, 1),
                            "lr": self.sched.get_last_lr()[0], "elapsed_s": round(state["elapsed"], 1)})
                since_log = StepStats()
            if not clock.after_step(self.save):
                return False
        return True


def run_train(args):
    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    target = load_target()
    data = training_set(args, target)
    print(json.dumps(data.info), flush=True)
    ckpt = os.path.join(args.out, "ckpt.pt")
    head, new = initial_head(args, target, ckpt)
    run = Session(args, target, data, head, ckpt, new)
    with open(os.path.join(args.out, "info.json"), "w") as f:
        json.dump({**data.info, "args": vars(args)}, f, indent=2)
    write_draft_vocab(args.out, data.vocab)
    if args.init and not run.resumed and data.hold:
        run.evaluate(0)  # the warm start itself, on the same held-out sets: the baseline of this run
    t_session = time.time()
    head.train()
    while run.state["epoch"] < args.epochs:
        if not run.epoch(t_session):
            return
        run.evaluate(run.state["epoch"] + 1)
        run.state["epoch"] += 1; run.state["batch"] = 0
        run.save()
        run_export_from(head, data.vocab, os.path.join(args.out, "head"), data.info, run.state)
    print("training done", flush=True)


def run_export_from(head, vocab, out, info, state):
    save_head(head, out, draft_vocab=vocab, dtype=torch.float16,
              meta={"trained_on": info, "epochs": state["epoch"], "steps": state["step"]})


def run_export(args):
    c = torch.load(os.path.join(args.run, "ckpt.pt"), weights_only=False)
    head = EagleHead(HeadConfig.from_json_dict(c["config"]))
    head.load_state_dict(c["head"])
    try:
        vocab = head_read_draft_vocab(os.path.join(args.run, DRAFT_VOCAB_FILE), head.config.vocab_size)
    except ValueError as e:
        raise SystemExit(f"export: {e}") from None
    with open(os.path.join(args.run, "info.json")) as f:
        info = json.load(f)
    info.pop("args", None)
    run_export_from(head, vocab, args.out, info, c["state"])
    print(f"wrote {args.out}")
