"""Source (1): self-distilled answers of the target, generated in batches, stored as token ids.

The target answers every redistributable training prompt (sources.py) in its chat template, B
prompts at a time: left-padded, with an attention mask, through the target's own `generate`
(data.generate_batch), which keeps the CPU's matrix units far busier than one prompt at a time.
Prompts are shuffled by `--seed` once; each part of `--part-size` prompts is sorted by prompt
length before it is cut into batches, so a batch pads little. Every `--sample-every`-th batch is
sampled at `--temperature`, the rest greedy.

Resumable: each part is written atomically with the list of prompts it accounts for (kept or
skipped), and the manifest after it; a rerun skips every prompt already done. Progress lines give
prompts/s, answer tokens/s and the ETA. `--minutes` stops after the part in progress.
"""
from __future__ import annotations

import os
import random
import sys
import time

import numpy as np
import torch

from .data import generate_batch, train_prompts
from .ids import (FORMAT, MANIFEST, SELF_DISTILLED, check_fits, is_heldout, per_source, read_manifest, read_part, summarize,
                  tokenizer_fingerprint, write_manifest, write_part)
from .sources import source_info

SETTINGS = ("max_new_tokens", "max_prompt_tokens", "temperature", "sample_every", "seed")  # fixed for a directory


def prompt_order(train_dir: str, eval_dir: str, seed: int, heldout_only: bool = False):
    """The redistributable training prompts (eval overlap dropped), shuffled by `seed`; with
    `heldout_only`, only the prompts every trainer holds out (ids.is_heldout), for a
    self-distilled accuracy set that no training data can leak into."""
    prompts, info = train_prompts(train_dir, eval_dir)
    kept = [p for p in prompts if source_info(p.source).redistribute]
    info["excluded_by_licence"] = len(prompts) - len(kept)
    if heldout_only:
        kept = [p for p in kept if is_heldout(p.source, p.line)]
        info["heldout_only"] = True
    random.Random(seed).shuffle(kept)
    return kept, info


def done_keys(out: str, manifest: dict) -> set[tuple[str, int]]:
    done = set()
    for entry in manifest["files"]:
        part = read_part(os.path.join(out, entry["path"]))
        names = part["done_source_names"]
        done.update((str(names[s]), int(l)) for s, l in zip(part["done_source"], part["done_line"]))
    return done


def _new_manifest(target, settings: dict, info: dict) -> dict:
    return {"format": FORMAT, "kind": SELF_DISTILLED, "tokenizer": tokenizer_fingerprint(target),
            "template": "user prompt -> the target's own answer, prompt as Target.encode_prompt, the answer as "
                        "generated (ending with the EOS token it generated, if any); loss on ids[prompt_len:]",
            "settings": settings, "overlap_check": info, "batches": 0, "generation_s": 0.0, "files": []}


def generate_part(target, prompts, batch: int, settings: dict, first_batch: int, report) -> dict:
    """Answer one part's prompts in length-sorted batches; -> the arrays of write_part's arguments."""
    enc = [(p, target.encode_prompt(p.text)) for p in prompts]
    skipped = [p for p, e in enc if len(e) > settings["max_prompt_tokens"]]
    enc = sorted(((p, e) for p, e in enc if len(e) <= settings["max_prompt_tokens"]), key=lambda pe: len(pe[1]))
    seqs, plens, srcs, lines, temps = [], [], [], [], []
    for j in range(0, len(enc), batch):
        chunk = enc[j:j + batch]
        b = first_batch + j // batch
        every = settings["sample_every"]
        temp = settings["temperature"] if every and b % every == every - 1 else 0.0
        t0 = time.time()
        responses, _ = generate_batch(target, [e for _, e in chunk], settings["max_new_tokens"], temp,
                                      settings["seed"] * 100003 + b)
        for (p, e), resp in zip(chunk, responses):
            if resp:
                seqs.append(e + resp); plens.append(len(e)); srcs.append(p.source); lines.append(p.line); temps.append(temp)
        report(len(chunk), sum(len(r) for r in responses), time.time() - t0, temp)
    return {"seqs": seqs, "plens": plens, "srcs": srcs, "lines": lines, "temps": temps,
            "done": [p.key for p in prompts], "batches": -(-len(enc) // batch), "skipped_long": len(skipped)}


def run_ids_gen(args, target=None) -> dict:
    """python -m eagle_core.train ids-gen; `target` (tests) replaces loading args.model. -> the manifest."""
    from ..target import load_target

    torch.set_num_threads(args.threads)
    settings = {k: getattr(args, k) for k in SETTINGS}
    heldout_only = getattr(args, "heldout_only", False)
    if heldout_only:
        settings["heldout_only"] = True  # absent (not False) otherwise, so older directories still resume
    prompts, info = prompt_order(args.train_dir, args.eval_dir, args.seed, heldout_only)
    os.makedirs(args.out, exist_ok=True)
    target = target or load_target(args.model)
    if os.path.exists(os.path.join(args.out, MANIFEST)):
        manifest = read_manifest(args.out)
        check_fits(manifest, target, args.out)
        if manifest["settings"] != settings:
            raise SystemExit(f"{args.out} was generated with {manifest['settings']}; rerun with those settings "
                             f"or another --out")
    else:
        manifest = _new_manifest(target, settings, info)
    done = done_keys(args.out, manifest)
    todo = [p for p in prompts if p.key not in done]
    if args.limit is not None:
        todo = todo[:args.limit]
    print(f"{len(prompts)} prompts ({info['dropped_eval_overlap']} dropped: also in eval; "
          f"{info['excluded_by_licence']} excluded by licence); {len(done)} done, {len(todo)} to do now", flush=True)
    t_start, stats = time.time(), {"prompts": 0, "tokens": 0}

    def report(n_prompts, n_tokens, seconds, temp):
        stats["prompts"] += n_prompts; stats["tokens"] += n_tokens
        el = time.time() - t_start
        pps = stats["prompts"] / el
        eta = (len(todo) - stats["prompts"]) / pps if pps else 0
        print(f"batch of {n_prompts} (T={temp}): {n_tokens} tokens in {seconds:.1f}s ({n_tokens / seconds:.0f} tok/s); "
              f"{stats['prompts']}/{len(todo)} prompts, {pps:.2f} prompts/s, {stats['tokens'] / el:.0f} tok/s, "
              f"ETA {eta / 60:.0f} min", flush=True)

    for start in range(0, len(todo), args.part_size):
        t0 = time.time()
        part = generate_part(target, todo[start:start + args.part_size], args.batch, settings, manifest["batches"], report)
        n = len(manifest["files"])
        path = os.path.join(args.out, f"part_{n:05d}.npz")
        names = sorted({s for s, _ in part["done"]} | set(part["srcs"]))
        entry = write_part(path, part["seqs"], part["plens"], part["srcs"], part["lines"], target.vocab_size,
                           temperature=np.array(part["temps"], dtype=np.float32),
                           done_source=np.array([names.index(s) for s, _ in part["done"]], dtype=np.int32),
                           done_line=np.array([l for _, l in part["done"]], dtype=np.int32),
                           done_source_names=np.array(names, dtype=str))
        entry.update(prompts=len(part["done"]), skipped_long_prompt=part["skipped_long"], seconds=round(time.time() - t0, 1))
        manifest["files"].append(entry)
        manifest["batches"] += part["batches"]
        manifest["generation_s"] = round(manifest["generation_s"] + entry["seconds"], 1)
        manifest["totals"] = summarize(manifest["files"])
        manifest["sources"] = {k: {**v, "licence": source_info(k).licence} for k, v in per_source(manifest["files"]).items()}
        manifest["command"] = "python -m eagle_core.train " + " ".join(sys.argv[1:])
        write_manifest(args.out, manifest)
        if args.minutes and time.time() - t_start > args.minutes * 60:
            print("time budget reached; rerun the same command to resume", flush=True)
            break
    tot = manifest.get("totals", {"sequences": 0, "answer_tokens": 0})
    print(f"{args.out}: {tot['sequences']} sequences, {tot['answer_tokens']} answer tokens in total", flush=True)
    return manifest
