"""Self-distillation data for the EAGLE head.

The target answers training prompts with its own chat template (greedy for most, sampled for
the rest); the features the head learns from are captured DURING generation by a hook on the
target's final norm, so no second forward is needed: for every position t we keep the last
hidden state after the final norm (what the LM head consumes). A shard holds, per sequence,
the token ids, the fp16 features of every position but the last, and the prompt length (the
loss covers response tokens only).

Eval prompts (the --eval-dir set, e.g. assets/prompts) must never be trained on: every training prompt is checked
against them and any exact (whitespace/case-normalised) match is dropped and counted.
"""
from __future__ import annotations

import glob
import json
import os
import random
import time
from dataclasses import dataclass, field

import torch

from ..bench.prompts import all_turns, first_turn, read_records
from ..target import load_target


def _norm(s: str) -> str:
    return " ".join(s.lower().split())


@dataclass(frozen=True)
class TrainPrompt:
    """One training prompt and where it came from (the record keeps the source's own fields,
    e.g. a reference answer)."""

    text: str
    source: str  # file name in the train directory, e.g. "gsm8k_train.part1.jsonl"
    line: int  # 1-based line of the record in that file
    record: dict = field(compare=False, repr=False)

    @property
    def key(self) -> tuple[str, int]:
        return (self.source, self.line)


def read_prompts(path: str) -> list[TrainPrompt]:
    """The prompts of a JSONL prompt file (records without a prompt are skipped)."""
    out = []
    for line, r in read_records(path):
        p = first_turn(r)
        if isinstance(p, str) and p.strip():
            out.append(TrainPrompt(p, os.path.basename(path), line, r))
    return out


def eval_prompt_set(eval_dir: str) -> set[str]:
    """Every user text (all turns) of every eval file, normalised, for the overlap check."""
    return {_norm(t) for path in glob.glob(os.path.join(eval_dir, "*.jsonl"))
            for _, r in read_records(path) for t in all_turns(r)}


def train_prompts(train_dir: str, eval_dir: str) -> tuple[list[TrainPrompt], dict]:
    """Every training prompt in file order, minus those that also appear in the eval sets (the one
    overlap check: `gen`, `ids-fixed` and `ids-gen` all come through here). Refuses an eval
    directory as training data, and refuses to run when the eval prompts cannot be read."""
    if os.path.realpath(train_dir) == os.path.realpath(eval_dir) or "/eval" in os.path.realpath(train_dir):
        raise ValueError(f"refusing to train on {train_dir}: it is an eval set")
    banned = eval_prompt_set(eval_dir) if os.path.isdir(eval_dir) else set()
    if not banned:
        raise ValueError(f"no eval prompts found in {eval_dir}: cannot check for overlap, refusing to continue")
    prompts, dropped = [], 0
    for path in sorted(glob.glob(os.path.join(train_dir, "*.jsonl"))):
        for p in read_prompts(path):
            if _norm(p.text) in banned:
                dropped += 1
                continue
            prompts.append(p)
    return prompts, {"train_prompts": len(prompts), "dropped_eval_overlap": dropped}


def collect_prompts(train_dir: str, eval_dir: str, seed: int) -> tuple[list[tuple[str, str]], dict]:
    """(prompt, source) pairs of `train_prompts`, shuffled by `seed` (the order `gen` answers them)."""
    prompts, info = train_prompts(train_dir, eval_dir)
    pairs = [(p.text, p.source) for p in prompts]
    random.Random(seed).shuffle(pairs)
    return pairs, info


class FeatureRecorder:
    """Forward hook on the final norm: collects (B, t, H) outputs of every forward call."""

    def __init__(self, norm_module):
        self.chunks: list[torch.Tensor] = []
        self.handle = norm_module.register_forward_hook(lambda m, i, o: self.chunks.append(o.detach()))

    def take(self) -> torch.Tensor:
        out = torch.cat(self.chunks, dim=1)
        self.chunks = []
        return out

    def close(self):
        self.handle.remove()


@torch.inference_mode()
def generate_batch(target, encoded: list[list[int]], max_new_tokens: int, temperature: float, seed: int):
    """Answer the encoded prompts in ONE left-padded batch with the target's own `generate`
    (greedy at temperature 0). -> (responses: one id list per prompt, cut after its first EOS
    token, which is kept; P: the padded prompt width). Left padding keeps every row's last prompt
    token in the same column; the attention mask hides the padding and `generate` derives each
    row's positions from it, so a row's answer does not depend on its neighbours."""
    tok = target.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else target.eos_ids[0]
    P = max(len(e) for e in encoded)
    ids = torch.full((len(encoded), P), pad, dtype=torch.long)
    attn = torch.zeros_like(ids)
    for i, e in enumerate(encoded):
        ids[i, P - len(e):] = torch.tensor(e)
        attn[i, P - len(e):] = 1
    torch.manual_seed(seed)
    # stock kernels: the CPU attention of eagle_core.cpu.kernels gets no padding mask from transformers
    # (it builds none for an attention name it does not know), so left-padded rows would attend
    # to their padding; stock SDPA gets the mask, and batched == one prompt at a time (tested)
    with target.stock_kernels():
        out = target.model.generate(
            input_ids=ids.to(target.device), attention_mask=attn.to(target.device), max_new_tokens=max_new_tokens,
            do_sample=temperature > 0, temperature=temperature if temperature > 0 else None, top_p=None, top_k=None,
            eos_token_id=list(target.eos_ids), pad_token_id=pad,
        )
    eos = set(target.eos_ids)
    responses = []
    for i in range(len(encoded)):
        resp = out[i, P:].tolist()
        end = next((j + 1 for j, t in enumerate(resp) if t in eos), len(resp))  # keep the EOS token
        responses.append(resp[:end])
    return responses, P


@torch.inference_mode()
def generate_shard(target, prompts: list[str], max_new_tokens: int, temperature: float, max_prompt_tokens: int,
                   seed: int) -> list[dict]:
    """Answer `prompts` in one left-padded batch; return one record per kept sequence, with the
    features captured during generation."""
    encoded = [(i, target.encode_prompt(p)) for i, p in enumerate(prompts)]
    kept_idx = [i for i, e in encoded if len(e) <= max_prompt_tokens]  # long prompts are skipped
    encoded = [e for _, e in encoded if len(e) <= max_prompt_tokens]
    if not encoded:
        return []
    rec = FeatureRecorder(target.body.norm)
    try:
        responses, P = generate_batch(target, encoded, max_new_tokens, temperature, seed)
        feats = rec.take()  # (B, P + T - 1, H): features of every position but the last generated one
    finally:
        rec.close()
    records = []
    for i, (e, resp, prompt_idx) in enumerate(zip(encoded, responses, kept_idx)):
        if not resp:
            continue
        seq = e + resp
        f = feats[i, P - len(e):P - len(e) + len(seq) - 1]  # features for positions 0 .. len(seq) - 2
        assert f.shape[0] == len(seq) - 1
        records.append({"ids": torch.tensor(seq, dtype=torch.int32), "feats": f.to(torch.float16).cpu(),
                        "prompt_len": len(e), "prompt_index": prompt_idx})
    return records


def run_gen(args) -> None:
    torch.set_num_threads(args.threads)
    prompts, info = collect_prompts(args.train_dir, args.eval_dir, args.seed)
    os.makedirs(args.out, exist_ok=True)
    n_shards = min(args.max_prompts, len(prompts)) // args.shard_size
    print(f"{info['train_prompts']} training prompts ({info['dropped_eval_overlap']} dropped: also in eval); "
          f"{n_shards} shards of {args.shard_size}", flush=True)
    target = load_target(args.model, device=args.device)
    with open(os.path.join(args.out, "info.json"), "w") as f:
        json.dump({**info, **vars(args)}, f, indent=2)
    t_start = time.time()
    done_tokens = 0
    for s in range(n_shards):
        path = os.path.join(args.out, f"shard_{s:05d}.pt")
        if os.path.exists(path):
            continue  # resume: shards are written atomically
        chunk = prompts[s * args.shard_size:(s + 1) * args.shard_size]
        # every `sample_every`-th shard is sampled at temperature `temperature`, the rest greedy
        temp = args.temperature if args.sample_every and s % args.sample_every == args.sample_every - 1 else 0.0
        t0 = time.time()
        recs = generate_shard(target, [p for p, _ in chunk], args.max_new_tokens, temp, args.max_prompt_tokens,
                              args.seed * 100003 + s)
        for r in recs:
            r["source"] = chunk[r["prompt_index"]][1]
        torch.save({"records": recs, "temperature": temp, "shard": s}, path + ".tmp")
        os.replace(path + ".tmp", path)
        ntok = sum(len(r["ids"]) - r["prompt_len"] for r in recs)
        done_tokens += ntok
        el = time.time() - t0
        print(f"shard {s + 1}/{n_shards}: {len(recs)} seqs, {ntok} response tokens, T={temp}, {el:.0f}s "
              f"({ntok / el:.0f} tok/s), total {done_tokens} tokens in {time.time() - t_start:.0f}s", flush=True)


def load_shards(data_dir: str, limit: int | None = None, skip: int = 0) -> list[dict]:
    paths = sorted(glob.glob(os.path.join(data_dir, "shard_*.pt")))[skip:][:limit]
    recs = []
    for p in paths:
        recs.extend(torch.load(p, weights_only=False)["records"])
    return recs
