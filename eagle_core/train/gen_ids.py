"""Source (1): self-distilled answers of the target, generated in batches, stored as token ids.

The target answers every redistributable training prompt (sources.py) in its chat template, B
prompts at a time: left-padded, with an attention mask, through the target's own `generate`
(data.generate_batch), which keeps the CPU's matrix units far busier than one prompt at a time.
Prompts are shuffled by `--seed` once; each part of `--part-size` prompts is sorted by prompt
length before it is cut into batches, so a batch pads little. Every `--sample-every`-th batch is
sampled at `--temperature`, the rest greedy.

Two generators: `engine` (the default) decodes the batch itself, step by step through the
target's forward (on a CPU the CPU decoder (cpu/forward.py) and the engine's kernels, the same path vanilla decoding
uses), drops the rows that have finished from the batch and its cache, and can keep the features
it computes on the way (`--features DIR`: a feature cache the trainers read directly, so the
answers need no second, teacher-forced pass); `stock` is transformers' `generate` (slower here:
docs/training.md, "Source (1): the target's own answers").

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
from . import featcache
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


@torch.inference_mode()
def engine_generate(target, encoded: list[list[int]], max_new_tokens: int, temperature: float, seed: int,
                    layers: tuple[int, ...] | None = None):
    """Answer the encoded prompts in ONE left-padded batch, decoding step by step through
    `target.forward` (greedy at temperature 0, else plain temperature sampling, as `generate` does
    with no top-k/top-p). -> (responses: one id list per prompt, cut after its first EOS token,
    which is kept; features: None, or with `layers` one (final (T, H), captured (T, len(layers) * H))
    float16 pair per prompt, T = prompt + response length: the features of every token of the
    sequence, the last one included, as a teacher-forced forward of it would give them up to float
    rounding).

    Left padding with an attention mask and per-row positions (cumulative mask - 1), so a row's
    answer does not depend on its neighbours. A finished row leaves the batch: its cache rows, mask
    and positions are dropped once a quarter of the batch has finished (a copy of the cache each
    time), so a batch does not keep paying for its short answers. The prompt is prefilled with the
    stock kernels (big matrix products); the steps use the target's own kernels."""
    dev = target.device
    tok = target.tokenizer
    pad = tok.pad_token_id if tok.pad_token_id is not None else target.eos_ids[0]
    B, P = len(encoded), max(len(e) for e in encoded)
    ids = torch.full((B, P), pad, dtype=torch.long)
    attn = torch.zeros_like(ids)
    for i, e in enumerate(encoded):
        ids[i, P - len(e):] = torch.tensor(e)
        attn[i, P - len(e):] = 1
    ids, attn = ids.to(dev), attn.to(dev)
    pos = (attn.cumsum(1) - 1).clamp(min=0)
    gen = torch.Generator(device="cpu").manual_seed(seed)
    eos = torch.tensor(sorted(target.eos_ids), dtype=torch.long)
    want = layers is not None
    cache = target.new_cache()

    def run(x, p, a):
        if want:
            return target.forward_layers(x, tuple(layers), cache, position_ids=p, attention_mask=a)
        return target.forward(x, cache, position_ids=p, attention_mask=a), None

    with target.stock_kernels():
        final, captured = run(ids, pos, attn)
    feats = [[] for _ in range(B)]  # per row: (final, captured) chunks, fp16 on the CPU
    if want:
        for i, e in enumerate(encoded):
            feats[i].append((final[i, P - len(e):].to(torch.float16).cpu(), captured[i, P - len(e):].to(torch.float16).cpu()))
    responses = [[] for _ in range(B)]
    rows = list(range(B))  # batch row -> prompt index
    alive = torch.ones(B, dtype=torch.bool)  # rows still answering (finished ones wait to be dropped)
    logits = target.logits(final[:, -1]).float().cpu()
    last_pos = pos[:, -1:]
    while True:
        nxt = sample_rows(logits, temperature, gen)
        for j in alive.nonzero()[:, 0].tolist():
            responses[rows[j]].append(int(nxt[j]))
        ended = alive & (torch.isin(nxt, eos) | torch.tensor([len(responses[r]) >= max_new_tokens for r in rows]))
        # with features a row that just ended still needs one forward of its last token (the
        # feature the head's last prediction is trained against); without, only rows going on do
        fed = alive if want else alive & ~ended
        alive = alive & ~ended
        if fed.any():
            attn = torch.cat([attn, torch.ones_like(attn[:, :1])], 1)
            last_pos = last_pos + 1
            final, captured = run(nxt.view(-1, 1).to(dev), last_pos, attn)
            if want:
                for j in fed.nonzero()[:, 0].tolist():
                    feats[rows[j]].append((final[j].to(torch.float16).cpu(), captured[j].to(torch.float16).cpu()))
            logits = target.logits(final[:, -1]).float().cpu()
        if not alive.any():
            break
        if 4 * int((~alive).sum()) >= len(rows):  # a quarter finished: drop them, cache included
            idx = alive.nonzero()[:, 0]
            cache.batch_select_indices(idx.to(dev))  # the next update re-buffers them
            attn, last_pos, logits = attn[idx.to(dev)], last_pos[idx.to(dev)], logits[idx]
            rows = [rows[j] for j in idx.tolist()]
            alive = torch.ones(len(rows), dtype=torch.bool)
    if not want:
        return responses, None
    out = []
    for i in range(B):
        f = torch.cat([a for a, _ in feats[i]]), torch.cat([c for _, c in feats[i]])
        assert f[0].shape[0] == len(encoded[i]) + len(responses[i])
        out.append(f)
    return responses, out


def sample_rows(logits: torch.Tensor, temperature: float, gen: torch.Generator) -> torch.Tensor:
    """One token per row: argmax at temperature 0, else a draw from softmax(logits / T) by the
    exponential race (argmax of p_i / E_i with E_i ~ Exp(1) is i with probability p_i): exact, and
    on a CPU several times cheaper than torch.multinomial over a 49k vocabulary."""
    if temperature <= 0:
        return logits.argmax(-1)
    p = torch.softmax(logits / temperature, -1)
    return (p / torch.empty_like(p).exponential_(generator=gen)).argmax(-1)


def source_filter(names: list[str], known: set[str]) -> set[str]:
    """`--sources`: training files named with or without `.jsonl`; an unknown name is an error that
    lists the known ones (a typo must not silently answer nothing)."""
    chosen = set()
    for n in names:
        f = n if n.endswith(".jsonl") else n + ".jsonl"
        if f not in known:
            raise SystemExit(f"--sources: no training prompts from {n!r}; known: {', '.join(sorted(known))}")
        chosen.add(f)
    return chosen


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


def generate_part(target, prompts, batch: int, settings: dict, first_batch: int, report, generator: str = "engine",
                  layers: tuple[int, ...] | None = None) -> dict:
    """Answer one part's prompts in length-sorted batches; -> the arrays of write_part's arguments
    (and with `layers`, the engine generator's features of each kept sequence)."""
    enc = [(p, target.encode_prompt(p.text)) for p in prompts]
    skipped = [p for p, e in enc if len(e) > settings["max_prompt_tokens"]]
    enc = sorted(((p, e) for p, e in enc if len(e) <= settings["max_prompt_tokens"]), key=lambda pe: len(pe[1]))
    seqs, plens, srcs, lines, temps, feats = [], [], [], [], [], []
    for j in range(0, len(enc), batch):
        chunk = enc[j:j + batch]
        b = first_batch + j // batch
        every = settings["sample_every"]
        temp = settings["temperature"] if every and b % every == every - 1 else 0.0
        t0 = time.time()
        args = ([e for _, e in chunk], settings["max_new_tokens"], temp, settings["seed"] * 100003 + b)
        if generator == "stock":
            responses, f = generate_batch(target, *args)[0], None
        else:
            responses, f = engine_generate(target, *args, layers=layers)
        for k, ((p, e), resp) in enumerate(zip(chunk, responses)):
            if resp:
                seqs.append(e + resp); plens.append(len(e)); srcs.append(p.source); lines.append(p.line); temps.append(temp)
                if f is not None:
                    feats.append(f[k])
        report(len(chunk), sum(len(r) for r in responses), time.time() - t0, temp)
    return {"seqs": seqs, "plens": plens, "srcs": srcs, "lines": lines, "temps": temps, "feats": feats,
            "done": [p.key for p in prompts], "batches": -(-len(enc) // batch), "skipped_long": len(skipped)}


def add_part(out: str, manifest: dict, part: dict, vocab_size: int, generator: str, seconds: float):
    """Write one generated part (generate_part's result) as the next part file of `out` and record
    it in the manifest (written atomically). -> (the part's number, its manifest entry)."""
    n = len(manifest["files"])
    path = os.path.join(out, f"part_{n:05d}.npz")
    names = sorted({s for s, _ in part["done"]} | set(part["srcs"]))
    entry = write_part(path, part["seqs"], part["plens"], part["srcs"], part["lines"], vocab_size,
                       temperature=np.array(part["temps"], dtype=np.float32),
                       done_source=np.array([names.index(s) for s, _ in part["done"]], dtype=np.int32),
                       done_line=np.array([l for _, l in part["done"]], dtype=np.int32),
                       done_source_names=np.array(names, dtype=str))
    entry.update(prompts=len(part["done"]), skipped_long_prompt=part["skipped_long"], seconds=round(seconds, 1),
                 generator=generator)
    manifest["files"].append(entry)
    manifest["batches"] += part["batches"]
    manifest["generation_s"] = round(manifest["generation_s"] + entry["seconds"], 1)
    manifest["totals"] = summarize(manifest["files"])
    manifest["sources"] = {k: {**v, "licence": source_info(k).licence} for k, v in per_source(manifest["files"]).items()}
    manifest["command"] = "python -m eagle_core.train " + " ".join(sys.argv[1:])
    write_manifest(out, manifest)
    return n, entry


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
    generator = getattr(args, "generator", "engine")
    feat_dir = getattr(args, "features", None)
    layers, fm = None, None
    if feat_dir:
        if generator != "engine":
            raise SystemExit("--features needs the engine generator (--generator engine)")
        layers = featcache.default_layers(target)
        fm = featcache.open_captured(feat_dir, target, layers, os.path.normpath(args.out))
    done = done_keys(args.out, manifest)
    todo = [p for p in prompts if p.key not in done]
    only = getattr(args, "sources", None)
    if only:
        chosen = source_filter(only, {q.source for q in prompts})
        todo = [p for p in todo if p.source in chosen]
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
        part = generate_part(target, todo[start:start + args.part_size], args.batch, settings, manifest["batches"], report,
                             generator, layers)
        n, entry = add_part(args.out, manifest, part, target.vocab_size, generator, time.time() - t0)
        if fm is not None and part["seqs"]:
            recs = [{"ids": torch.tensor(q), "prompt_len": pl, "source": src, "line": ln, "own": True,
                     "final": f[0], "captured": f[1]}
                    for q, pl, src, ln, f in zip(part["seqs"], part["plens"], part["srcs"], part["lines"], part["feats"])]
            featcache.add_captured(feat_dir, fm, f"fshard_{n:05d}.pt", recs, entry["seconds"])
        if args.minutes and time.time() - t_start > args.minutes * 60:
            print("time budget reached; rerun the same command to resume", flush=True)
            break
    tot = manifest.get("totals", {"sequences": 0, "answer_tokens": 0})
    print(f"{args.out}: {tot['sequences']} sequences, {tot['answer_tokens']} answer tokens in total", flush=True)
    return manifest
