"""A local feature cache: the target's features of token-id datasets, computed once, read every epoch.

On a CPU the target's teacher-forced forward is the expensive part of training (near the
arithmetic peak already: docs/training.md, "The feature cache"), several times the head's own
training step. Without a cache each epoch pays it again; with one, only the
first pass does. The cache is local (`data/`, not committed): the token ids that make it are
committed (train/ids.py), so it can always be rebuilt.

    python -m eagle_core.train features --data train_data/fixed --out data/feats --minutes 60

Layout of the output directory:
    features.json   what made it (datasets, target fingerprint, layers, max_seq, order seed) and
                    the list of shards written so far
    fshard_NNNNN.pt one shard of `--shard-seqs` sequences (torch.save, tensors only):
        tokens (sum T,) int32, offsets (n + 1,) int64, prompt_len (n,) int32, line (n,) int32,
        own (n,) bool (a self-distilled answer of the target, not a reference answer),
        source (n,) int32 into source_names, final (sum T, H) fp16 (the last hidden state after the
        final norm: what EAGLE-1/2 reads and the LM head turns into the target's distribution),
        layers (sum T, len(layers) * H) fp16 (the residual stream entering each captured layer:
        what EAGLE-3 reads), with T = min(sequence length, max_seq)

The sequences of all the given datasets (training and held-out alike; the trainers hold out by
the same hash of source and line as for token ids) are shuffled once by `--seed`, so any prefix
of shards is a sample of every source. Each shard is written atomically and then recorded in
the manifest; a rerun of the same command resumes after the last shard. The cache is local and
a machine may not keep it (a session here loses `data/`): `--start-shard S` begins at shard S,
so a later session can cache the next slice of the same order and continue training the
committed head on data it has not seen (the heads' sections in docs/data/journal/history.md list which
shards each head saw).
`--parts 17-22` caches only the parts at those positions of each dataset's manifest: the parts a
head has not been trained on yet, without recomputing the ones it has.
"""
from __future__ import annotations

import contextlib
import json
import os
import random
import sys
import time

import torch

from .features import id_batch, length_batches, teacher_forced
from .ids import check_fits, load_id_dataset, parse_parts, tokenizer_fingerprint, write_manifest

MANIFEST = "features.json"
FORMAT = "eagle-feature-cache/1"
SETTINGS = ("max_seq", "seed", "shard_seqs", "layers")  # fixed for a directory


def shard_name(s: int) -> str:
    return f"fshard_{s:05d}.pt"


def is_feature_cache(path: str) -> bool:
    return os.path.isfile(os.path.join(path, MANIFEST))


def sequence_order(records: list[dict], seed: int) -> list[int]:
    order = list(range(len(records)))
    random.Random(seed).shuffle(order)
    return order


def compute_shard(target, records, idx: list[int], layers: tuple[int, ...], max_seq: int,
                  tokens_per_batch: int, precision: str = "fp32") -> dict:
    """The features of records `idx` (in that order) as one shard's tensors; the forwards in
    `precision` (see `autocast`)."""
    final_of, layers_of = {}, {}
    for b in length_batches(records, idx, tokens_per_batch, max_seq):
        ib = id_batch(records, b, max_seq)
        with autocast(target, precision):
            final, captured = teacher_forced(target, ib, layers)
        for row, (i, n) in enumerate(zip(b, ib.lengths)):
            final_of[i] = final[row, :n].to(torch.float16).cpu()
            layers_of[i] = captured[row, :n].to(torch.float16).cpu()
    return assemble_shard([dict(records[i], final=final_of[i], captured=layers_of[i]) for i in idx], max_seq)


def assemble_shard(recs: list[dict], max_seq: int) -> dict:
    """One shard's tensors from records that carry their features: ids, prompt_len, source,
    line, own, final (T, H) and captured (T, C), with T >= min(len(ids), max_seq)."""
    names = sorted({r["source"] for r in recs})
    lengths = torch.tensor([min(len(r["ids"]), max_seq) for r in recs])
    shard = {
        "tokens": torch.cat([torch.as_tensor(r["ids"][:max_seq]).to(torch.int32) for r in recs]),
        "offsets": torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)]),
        "prompt_len": torch.tensor([min(r["prompt_len"], max_seq) for r in recs], dtype=torch.int32),
        "line": torch.tensor([r["line"] for r in recs], dtype=torch.int32),
        "own": torch.tensor([bool(r.get("own")) for r in recs]),
        "source": torch.tensor([names.index(r["source"]) for r in recs], dtype=torch.int32),
        "source_names": names,
        "final": torch.cat([r["final"][:n].to(torch.float16) for r, n in zip(recs, lengths.tolist())]),
        "layers": torch.cat([r["captured"][:n].to(torch.float16) for r, n in zip(recs, lengths.tolist())]),
    }
    for k in ("final", "layers"):
        if not torch.isfinite(shard[k]).all():
            raise FloatingPointError(f"the target's {k} features overflow float16; this cache cannot hold them")
    return shard


def save_shard(out: str, name: str, shard: dict) -> None:
    tmp = os.path.join(out, name + ".tmp")
    torch.save(shard, tmp)
    os.replace(tmp, os.path.join(out, name))


def shard_records(shard: dict, layers: tuple[int, ...]) -> list[dict]:
    """A shard's sequences as training records: ids, prompt_len, source, line, feats (T, H) fp16
    (the final features) and layers (T, 3H) fp16, views into the shard's tensors, and layer_ids."""
    off = shard["offsets"].tolist()
    out = []
    for j in range(len(off) - 1):
        a, b = off[j], off[j + 1]
        out.append({"ids": shard["tokens"][a:b], "prompt_len": int(shard["prompt_len"][j]),
                    "source": shard["source_names"][int(shard["source"][j])], "line": int(shard["line"][j]),
                    "own": bool(shard["own"][j]),
                    "feats": shard["final"][a:b], "layers": shard["layers"][a:b], "layer_ids": layers})
    return out


def load_feature_cache(path: str, target=None) -> tuple[list[dict], dict]:
    """-> (records of every shard written so far, the manifest); shards are memory-mapped."""
    with open(os.path.join(path, MANIFEST), encoding="utf-8") as f:
        m = json.load(f)
    if m.get("format") != FORMAT:
        raise ValueError(f"{path}: format {m.get('format')!r}, expected {FORMAT!r}")
    if target is not None:
        check_fits(m, target, path)
    recs = []
    for name in m["shards"]:
        shard = torch.load(os.path.join(path, name), mmap=True, weights_only=True)
        recs.extend(shard_records(shard, tuple(m["settings"]["layers"])))
    return recs, m


def open_manifest(out: str, target, settings: dict, datasets: list[str], hint: str, **fresh) -> dict:
    """The manifest of the feature cache in `out`: resumed if it was made for this tokenizer with the
    same settings from the same datasets (anything else is refused, naming `hint`), else a new one
    (with the extra fields `fresh`)."""
    os.makedirs(out, exist_ok=True)
    mpath = os.path.join(out, MANIFEST)
    if os.path.exists(mpath):
        with open(mpath, encoding="utf-8") as f:
            m = json.load(f)
        check_fits(m, target, out)
        if m["settings"] != settings or m["datasets"] != datasets:
            raise SystemExit(f"{out} holds features made with {m['settings']} from {m['datasets']}; {hint}")
        return m
    return {"format": FORMAT, "tokenizer": tokenizer_fingerprint(target), "model": str(target.name),
            "datasets": datasets, "settings": settings, **fresh, "shards": [], "sequences": 0, "tokens": 0,
            "seconds": 0.0}


def open_captured(out: str, target, layers: tuple[int, ...], dataset: str) -> dict:
    """The manifest of a cache that `ids-gen --features` fills as it generates (the features the
    engine computed while decoding, one shard per part of `dataset`), new or resumed."""
    settings = {"layers": list(layers), "captured_by": "ids-gen (engine generator)"}
    return open_manifest(out, target, settings, [dataset], "use another --features")


def add_captured(out: str, m: dict, name: str, recs: list[dict], seconds: float) -> None:
    """Write one shard of captured features and record it in the manifest."""
    shard = assemble_shard(recs, max_seq=1 << 30)
    save_shard(out, name, shard)
    if name not in m["shards"]:
        m["shards"].append(name)
        m["sequences"] += len(recs); m["tokens"] += int(shard["offsets"][-1])
        m["seconds"] = round(m["seconds"] + seconds, 1)
    write_manifest(out, m, MANIFEST)


def default_layers(target) -> tuple[int, ...]:
    from ..drafting.head3 import Eagle3Config

    return tuple(Eagle3Config.for_target(target.config).layers_for(int(target.config.num_hidden_layers)))


def autocast(target, precision: str):
    """The context the teacher-forced forwards run in: nothing for fp32; for bf16, autocast (matrix
    products in bfloat16 with float32 accumulation, norms and softmax in float32, the weights kept in
    float32). On a CPU with bfloat16 matrix units (AMX) this caches about twice as fast; the features
    differ from fp32 by ~1% (relative norm of the difference) and the target's argmax agrees on 99.3% of
    positions (docs/training.md, "The feature cache"). Training adds +-0.1 noise to input features
    anyway; held-out scores should be compared on one cache."""
    if precision == "fp32":
        return contextlib.nullcontext()
    if precision != "bf16":
        raise ValueError(f"precision {precision!r}: use fp32 or bf16")
    return torch.autocast(torch.device(target.device).type, dtype=torch.bfloat16)


def run_features(args, target=None) -> dict:
    """python -m eagle_core.train features; `target` (tests) replaces loading args.model. -> the manifest."""
    from ..target import load_target

    torch.set_num_threads(args.threads)
    target = target or load_target(args.model)
    layers = tuple(args.layers) if args.layers else default_layers(target)
    settings = {"max_seq": args.max_seq, "seed": args.seed, "shard_seqs": args.shard_seqs, "layers": list(layers)}
    precision = getattr(args, "precision", "fp32")
    if precision != "fp32":  # absent means fp32, so caches made before the option still resume
        settings["precision"] = precision
    datasets = [os.path.normpath(p) for p in args.data]
    records = []
    try:  # bad --parts, or data made with another tokenizer: a message, not a traceback
        parts = parse_parts(args.parts) if args.parts else None
        for p in datasets:
            records.extend(load_id_dataset(p, target, parts))
    except ValueError as e:
        raise SystemExit(str(e)) from None
    if parts is not None:
        settings["parts"] = list(parts)  # a cache of some parts only; resuming needs the same ones
    m = open_manifest(args.out, target, settings, datasets, "rerun with those or use another --out",
                      sequences_total=len(records))
    order = sequence_order(records, args.seed)
    n_shards = -(-len(order) // args.shard_seqs)
    done = set(m["shards"])
    todo = [s for s in range(args.start_shard, n_shards) if shard_name(s) not in done]
    print(f"{len(records)} sequences in {n_shards} shards; {len(done)} done here, {len(todo)} to do from shard "
          f"{args.start_shard}", flush=True)
    t_start = time.time()
    # the stock transformers path: big batches are far past the engine's small-row kernels, and
    # bitwise batch invariance does not matter for training features
    with target.stock_kernels():
        for s in todo:
            t0 = time.time()
            idx = order[s * args.shard_seqs:(s + 1) * args.shard_seqs]
            shard = compute_shard(target, records, idx, layers, args.max_seq, args.tokens_per_batch, precision)
            name = shard_name(s)
            save_shard(args.out, name, shard)
            dt = time.time() - t0
            n_tok = int(shard["offsets"][-1])
            m["shards"].append(name)
            m["sequences"] += len(idx); m["tokens"] += n_tok; m["seconds"] = round(m["seconds"] + dt, 1)
            m["command"] = "python -m eagle_core.train " + " ".join(sys.argv[1:])
            write_manifest(args.out, m, MANIFEST)
            left = (len(todo) - todo.index(s) - 1) * dt
            print(f"shard {s + 1}/{n_shards}: {len(idx)} sequences, {n_tok} tokens in {dt:.0f}s "
                  f"({n_tok / dt:.0f} tok/s); {m['tokens']} tokens cached; ETA {left / 60:.0f} min", flush=True)
            if args.minutes and time.time() - t_start > args.minutes * 60:
                print("time budget reached; rerun the same command to resume", flush=True)
                break
    return m
