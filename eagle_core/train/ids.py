"""Token-id datasets: small, committed, reproducible training data (no features).

A dataset is a directory with `manifest.json` and one or more part files (`*.npz`, written by
numpy, no pickles). A part holds N sequences, each one chat-template-rendered exchange
"user prompt -> assistant answer":

    tokens      (sum of lengths,)  uint16 (int32 if the vocabulary exceeds 65,535)  all sequences, concatenated
    offsets     (N + 1,)  int64    sequence i is tokens[offsets[i]:offsets[i + 1]]
    prompt_len  (N,)      int32    the first prompt_len tokens are the rendered prompt; the rest
                                   (the answer and its end-of-turn token) is what the loss covers
    source      (N,)      int32    index into `source_names`
    source_names (S,)     str      training file names, e.g. "gsm8k_train.part1.jsonl"
    line        (N,)      int32    1-based line of the prompt's record in that file
    temperature (N,)      float32  self-distilled parts only: 0 = greedy, else the sampling temperature
    done_source, done_line         self-distilled parts only: every prompt the part accounts for,
                                   including those skipped (too long, empty answer), for resuming

The manifest says what made the data (command, tokenizer fingerprint, template rule), and per
part file and per source: counts and licences. Features are NOT stored; the trainers recompute
them by batched teacher-forced forwards of the target (train/features.py). At 2 bytes a token,
compressed, a million tokens take about 1.5-2 MB.

Held-out sequences are chosen by a hash of (source, line), not by position, so a prompt is
held out in every dataset and every size of it: adding data never leaks into the held-out set.
"""
from __future__ import annotations

import hashlib
import json
import os
import zlib

import numpy as np
import torch

FORMAT = "eagle-token-ids/1"
MANIFEST = "manifest.json"
SELF_DISTILLED = "self-distilled"  # manifest "kind" of the target's own answers (ids-gen)
HOLDOUT_EVERY = 50  # 1 prompt in 50 (by hash) is held out of training


def tokenizer_fingerprint(target) -> dict:
    """What must match between the data and the target that trains on it."""
    tok = target.tokenizer
    template = getattr(tok, "chat_template", None) or ""
    return {"name": str(getattr(tok, "name_or_path", "") or target.name), "vocab_size": int(target.vocab_size),
            "chat_template_sha256": hashlib.sha256(template.encode("utf-8")).hexdigest(),
            "eos_ids": [int(e) for e in target.eos_ids]}


def is_id_dataset(path: str) -> bool:
    return os.path.isfile(os.path.join(path, MANIFEST))


def write_part(path: str, seqs: list[list[int]], prompt_lens: list[int], sources: list[str], lines: list[int],
               vocab_size: int, **extra: np.ndarray) -> dict:
    """Write one part atomically; -> its manifest entry (counts and sha256)."""
    names = sorted(set(sources))
    dtype = np.uint16 if vocab_size <= np.iinfo(np.uint16).max + 1 else np.int32
    lengths = np.array([len(s) for s in seqs], dtype=np.int64)
    arrays = {
        "tokens": np.array([t for s in seqs for t in s], dtype=dtype),
        "offsets": np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
        "prompt_len": np.array(prompt_lens, dtype=np.int32),
        "source": np.array([names.index(s) for s in sources], dtype=np.int32),
        "source_names": np.array(names, dtype=str),
        "line": np.array(lines, dtype=np.int32),
        **extra,
    }
    assert all(0 < p <= len(s) for p, s in zip(prompt_lens, seqs)), "prompt_len must lie within its sequence"
    tmp = path + ".tmp.npz"
    np.savez_compressed(tmp, **arrays)
    os.replace(tmp, path)
    with open(path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    by_source = {n: {"sequences": 0, "prompt_tokens": 0, "answer_tokens": 0} for n in names}
    for s, p, src in zip(seqs, prompt_lens, sources):
        c = by_source[src]
        c["sequences"] += 1; c["prompt_tokens"] += p; c["answer_tokens"] += len(s) - p
    return {"path": os.path.basename(path), "sha256": sha, **_counts(by_source.values()), "by_source": by_source}


def _counts(entries) -> dict:
    entries = list(entries)
    return {k: int(sum(e[k] for e in entries)) for k in ("sequences", "prompt_tokens", "answer_tokens")}


def read_part(path: str) -> dict:
    """-> the part's arrays (a plain dict of numpy arrays)."""
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def part_records(part: dict) -> list[dict]:
    """The sequences of a part as training records: ids (int32 tensor), prompt_len, source, line."""
    tokens = torch.from_numpy(part["tokens"].astype(np.int32))
    off, names = part["offsets"], part["source_names"]
    temps = part.get("temperature")
    out = []
    for i in range(len(part["prompt_len"])):
        r = {"ids": tokens[off[i]:off[i + 1]], "prompt_len": int(part["prompt_len"][i]),
             "source": str(names[part["source"][i]]), "line": int(part["line"][i])}
        if temps is not None:
            r["temperature"] = round(float(temps[i]), 4)  # stored as float32
        out.append(r)
    return out


def write_manifest(out_dir: str, manifest: dict, name: str = MANIFEST) -> None:
    """Write `out_dir/name` atomically (token-id datasets; feature caches name their own)."""
    tmp = os.path.join(out_dir, name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, os.path.join(out_dir, name))


def read_manifest(path: str) -> dict:
    with open(os.path.join(path, MANIFEST), encoding="utf-8") as f:
        m = json.load(f)
    if m.get("format") != FORMAT:
        raise ValueError(f"{path}: format {m.get('format')!r}, expected {FORMAT!r}")
    return m


def check_fits(manifest: dict, target, path: str) -> None:
    """Token ids mean nothing under another tokenizer or template: refuse a mismatch."""
    want, have = manifest["tokenizer"], tokenizer_fingerprint(target)
    for k in ("vocab_size", "chat_template_sha256"):
        if want[k] != have[k]:
            raise ValueError(f"{path}: made with a different tokenizer ({k} {want[k]!r}, the target's {have[k]!r})")


def parse_parts(spec: str) -> tuple[int, int]:
    """"17-22" -> (17, 22), "5" -> (5, 5): an inclusive range of part positions in a manifest."""
    try:
        a, _, b = spec.partition("-")
        first, last = int(a), int(b or a)
    except ValueError:
        raise ValueError(f"--parts {spec!r}: expected FIRST-LAST, e.g. 17-22") from None
    if first < 0 or last < first:
        raise ValueError(f"--parts {spec!r}: expected 0 <= FIRST <= LAST")
    return first, last


def load_id_dataset(path: str, target=None, parts: tuple[int, int] | None = None) -> list[dict]:
    """Every sequence of a token-id dataset (parts in manifest order), or of the parts at manifest
    positions parts[0]..parts[1] (inclusive); checked against `target`."""
    m = read_manifest(path)
    if target is not None:
        check_fits(m, target, path)
    files = m["files"]
    if parts is not None:
        if parts[1] >= len(files):
            raise ValueError(f"{path} has parts 0-{len(files) - 1}; asked for {parts[0]}-{parts[1]}")
        files = files[parts[0]:parts[1] + 1]
    recs = []
    own = m.get("kind") == SELF_DISTILLED
    for entry in files:
        recs.extend(part_records(read_part(os.path.join(path, entry["path"]))))
    for r in recs:
        r["own"] = own  # the target's own answer (self-distilled), not a reference answer
    return recs


def is_heldout(source: str, line: int, every: int = HOLDOUT_EVERY) -> bool:
    return every > 0 and zlib.crc32(f"{source}:{line}".encode("utf-8")) % every == 0


def summarize(files: list[dict]) -> dict:
    """Totals over a manifest's part entries."""
    return _counts(files)


def per_source(files: list[dict]) -> dict[str, dict]:
    """Counts per source file over a manifest's part entries."""
    out: dict[str, list] = {}
    for f in files:
        for name, c in f["by_source"].items():
            out.setdefault(name, []).append(c)
    return {name: _counts(cs) for name, cs in sorted(out.items())}
