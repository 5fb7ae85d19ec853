"""The one resumable training loop, for the EAGLE-1/2 head (`python -m eagle_core.train train`,
recipe in eagle2.py) and the EAGLE-3 head (`train3`, recipe in eagle3.py).

The loop owns what both runs do the same way: the data (held-out split, --max-records), AdamW with
a linear warm-up and cosine decay, the epoch loop over length-grouped batches, gradient clipping,
the log (one line every LOG_EVERY steps, one held-out record at each epoch's end and every
--eval-every steps), and checkpoints. A `Recipe` passes in what differs between the heads: which
head starts the run, the features it reads and the loss it is trained on (for EAGLE-3 the
training-time test), how the held-out sets are scored, and what is exported.

A checkpoint (head, optimiser, schedule, position in the epoch, RNG) is written atomically every
--ckpt-minutes; rerunning the same command resumes exactly where it stopped. Checkpoints written
before the loop was shared still resume (an EAGLE-3 one holds no RNG state: its loss draws no
random numbers, so none is needed).
"""
from __future__ import annotations

import json
import math
import os
import random
import time

import torch

from .features import length_batches
from .sources import CHAT_SOURCES

ADAM_BETAS = (0.9, 0.95)  # the EAGLE recipe's AdamW betas
WARMUP_DIVISOR = 50  # linear learning-rate warm-up over the first 1/50 of the steps
LR_FLOOR = 0.1  # the cosine decay ends at 10% of the peak learning rate
GRAD_CLIP = 0.5  # max gradient norm
LOG_EVERY = 10  # steps between two log lines


class Recipe:
    """What one head's training passes into the loop (eagle2.Eagle2Recipe, eagle3.Eagle3Recipe).
    Built with the run's args and target; `prepare` and `initial_head` are called once, in that
    order, before the loop; the rest at every step, evaluation and save."""

    ckpt_file = "ckpt.pt"  # under --out
    log_file = "log.jsonl"  # under --out
    export_with_every_checkpoint = False  # True: `export` at every save; False: at epoch ends only

    def __init__(self, args, target):
        self.args, self.target = args, target

    def prepare(self, train: list[dict], hold: list[dict], excluded: int) -> None:
        """Look at the data once (e.g. choose the draft vocabulary)."""

    def initial_head(self, train: list[dict], resuming: bool):
        """-> (head, names of parameters a warm start lacked or None, run state to carry on or None);
        called right after torch.manual_seed(--seed). `resuming`: a checkpoint will overwrite the weights."""
        raise NotImplementedError

    def begin(self, run: "TrainingRun") -> None:
        """Once the optimiser is set up (resumed or not), before the first step."""

    def loss(self, head, records: list[dict], idx: list[int]):
        """-> (loss to minimise, this step's stats) on the batch of records[idx]: the features the head
        reads and the targets it is scored against are the recipe's."""
        raise NotImplementedError

    def log_fields(self, window: list) -> dict:
        """The fields of a log line from the stats of the steps since the previous line."""
        raise NotImplementedError

    def evaluate(self, head, hold: list[dict]) -> dict[str, dict]:
        """Held-out scores per set of holdout_sets(hold)."""
        raise NotImplementedError

    def export(self, run: "TrainingRun") -> None:
        """Write the head where it is used from."""


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
    `max_minutes` (0: no limit) have passed since the clock started."""

    def __init__(self, ckpt_minutes: float, max_minutes: float):
        self.ckpt_s, self.max_s = ckpt_minutes * 60, max_minutes * 60
        self.t_ckpt = self.t_start = time.time()

    def after_step(self, save) -> bool:
        """Call after each step; False once the time budget ran out (saved by then)."""
        if time.time() - self.t_ckpt > self.ckpt_s:
            save(); self.t_ckpt = time.time()
        if self.max_s and time.time() - self.t_start > self.max_s:
            save()
            print("time budget reached; rerun the same command to resume", flush=True)
            return False
        return True


def make_batches(records, tokens_per_batch: int, max_seq: int, seed: int) -> list[list[int]]:
    """Group sequences of similar length so padding stays small; order shuffled by seed."""
    batches = length_batches(records, range(len(records)), tokens_per_batch, max_seq)
    random.Random(seed).shuffle(batches)
    return batches


def drop_excluded(hold: list[dict], path: str | None) -> tuple[list[dict], int]:
    """Held-out records minus those whose prompt (source, line) is listed in the JSON file `path`
    ({"keys": [[source, line], ...]}): the prompts a warm-start head was trained on. -> (kept, dropped)."""
    if not path:
        return hold, 0
    with open(path, encoding="utf-8") as f:
        keys = {(str(s), int(l)) for s, l in json.load(f)["keys"]}
    kept = [r for r in hold if (r.get("source"), r.get("line")) not in keys]
    return kept, len(hold) - len(kept)


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


def holdout_record(epoch_end, state: dict, ev: dict[str, dict]) -> dict:
    """One log line of held-out results per set: the "all" set's keys plain, the others suffixed."""
    return {"epoch_end": epoch_end, "step": state["step"], "elapsed_s": round(state["elapsed"], 1),
            **({"cpu_s": round(state["cpu"], 1)} if "cpu" in state else {}),
            **{f"{k}_{name}" if name != "all" else k: v for name, e in ev.items() for k, v in e.items()}}


class TrainingRun:
    """One run in progress: the head, its optimiser and schedule, the loop state, the log."""

    def __init__(self, args, recipe: Recipe, head, train: list[dict], hold: list[dict], ckpt: str,
                 new: set[str] | None = None, carried: dict | None = None):
        self.args, self.recipe, self.head, self.train, self.hold, self.ckpt = args, recipe, head, train, hold, ckpt
        self.n_batches = len(make_batches(train, args.tokens_per_batch, args.max_seq, 0))  # per epoch
        self.opt, self.sched, self.state, c = optimizer_and_resume(
            head, args.lr, self.n_batches * args.epochs, ckpt, new, getattr(args, "init_lr_scale", 1.0))
        self.resumed = c is not None
        s = self.state
        if c is not None:
            if "rng" in c:
                torch.set_rng_state(c["rng"])
            print(f"resumed at epoch {s['epoch']} batch {s['batch']} (step {s['step']})", flush=True)
        elif carried:  # train3 --continue: the state an earlier run exported with its head
            s.update(carried)
            self.sched.last_epoch = s["step"]  # the schedule where that run left it (Adam's moments restart)
            for g, lam, base in zip(self.opt.param_groups, self.sched.lr_lambdas, self.sched.base_lrs):
                g["lr"] = base * lam(s["step"])
            print(f"continuing at epoch {s['epoch']} batch {s['batch']} (step {s['step']})", flush=True)
        self.log = open(os.path.join(args.out, recipe.log_file), "a")

    def write(self, rec: dict) -> None:
        self.log.write(json.dumps(rec) + "\n"); self.log.flush()
        print(json.dumps(rec), flush=True)

    def save(self) -> None:
        tmp = self.ckpt + ".tmp"
        torch.save({"head": self.head.state_dict(), "opt": self.opt.state_dict(), "sched": self.sched.state_dict(),
                    "state": self.state, "rng": torch.get_rng_state(), "config": self.head.config.to_json_dict()},
                   tmp)
        os.replace(tmp, self.ckpt)
        if self.recipe.export_with_every_checkpoint:
            self.recipe.export(self)

    def evaluate(self, epoch_end) -> None:
        self.write(holdout_record(epoch_end, self.state, self.recipe.evaluate(self.head, self.hold)))

    def step(self, idx):
        """One optimiser step on the batch of records `idx`; -> the recipe's stats of it."""
        st = self.state
        t0, c0 = time.time(), time.process_time()
        loss, stats = self.recipe.loss(self.head, self.train, idx)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.head.parameters(), GRAD_CLIP)
        self.opt.step(); self.sched.step()
        st["batch"] += 1; st["step"] += 1; st["elapsed"] += time.time() - t0
        # CPU seconds too: on a shared machine the wall clock also counts the time spent waiting for a core
        st["cpu"] = st.get("cpu", 0.0) + time.process_time() - c0
        return stats

    def loop(self) -> bool:
        """Train to the last epoch's end (True) or until --max-minutes (False, saved to resume)."""
        a, st = self.args, self.state
        eval_every = getattr(a, "eval_every", 0)
        clock = SaveClock(a.ckpt_minutes, a.max_minutes)
        self.head.train()
        if st["step"] == 0 and not self.resumed and (eval_every or getattr(a, "init", None)) and self.hold:
            self.evaluate(0)  # where the curve starts: the initial (or warm-start) head, on the same held-out sets
        while st["epoch"] < a.epochs:
            batches = make_batches(self.train, a.tokens_per_batch, a.max_seq, a.seed + st["epoch"])
            window = []  # the steps since the last log line
            while st["batch"] < len(batches):
                window.append(self.step(batches[st["batch"]]))
                epoch = st["epoch"] + st["batch"] / len(batches)
                if st["step"] % LOG_EVERY == 0:
                    self.write({"step": st["step"], "epoch": epoch, **self.recipe.log_fields(window),
                                "lr": self.sched.get_last_lr()[0], "elapsed_s": round(st["elapsed"], 1),
                                "cpu_s": round(st["cpu"], 1)})
                    window = []
                if eval_every and st["step"] % eval_every == 0:
                    self.evaluate(round(epoch, 4))
                if not clock.after_step(self.save):
                    return False
            st["epoch"] += 1; st["batch"] = 0
            self.evaluate(st["epoch"])
            self.save()
            if not self.recipe.export_with_every_checkpoint:
                self.recipe.export(self)
        return True


def run_training(args, recipe_class) -> None:
    """`train` and `train3`: load the target and the data, start (or resume) the head, run the loop."""
    from .. import target as target_module  # here, so a test can stand a tiny target in for it
    from .datasets import load_training_data

    torch.set_num_threads(args.threads)
    os.makedirs(args.out, exist_ok=True)
    target = target_module.load_target(getattr(args, "model", None))
    recipe = recipe_class(args, target)
    # the first `holdout_shards` shards are never trained on (held-out accuracy), whatever else is
    # added later, so warm starts from earlier runs cannot leak into the held-out set (token-id
    # datasets and feature caches: 1 prompt in --holdout-every, by hash of its source and line)
    train, hold = load_training_data(args.data, target, args.holdout_shards, args.max_shards, args.holdout_every)
    hold, excluded = drop_excluded(hold, getattr(args, "holdout_exclude", None))
    train = train[:getattr(args, "max_records", None)]  # a prefix: a feature cache's order is shuffled
    if not train:
        raise SystemExit(f"no training data in {args.data}: run `python -m eagle_core.train ids-fixed` or `gen` first")
    recipe.prepare(train, hold, excluded)
    ckpt = os.path.join(args.out, recipe.ckpt_file)
    torch.manual_seed(args.seed)
    head, new, carried = recipe.initial_head(train, resuming=os.path.exists(ckpt))
    run = TrainingRun(args, recipe, head, train, hold, ckpt, new, carried)
    recipe.begin(run)
    if run.loop():
        print("training done", flush=True)
