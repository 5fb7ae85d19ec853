"""How much of the target's own output a head could ever draft: the share of the tokens vanilla
generated in a benchmark journal that lie outside each head's draft vocabulary, per category.

A token outside the draft vocabulary cannot be drafted, so the cycle that meets it accepts
nothing past it; this is the ceiling a larger vocabulary could lift (how much of it the head
would then actually draft is what `train eval --draft-vocab full` measures). No model is loaded.

    python -m eagle_core.bench.coverage docs/data/bench/mt_bench_zen4.jsonl \
        --heads assets/head-smollm2-135m assets/head3-smollm2-135m
"""
from __future__ import annotations

import argparse
import json
import os
from collections import Counter

import torch

from .journal import sample_from_dict


def draft_vocab_of(path: str) -> set[int]:
    """The target ids a head directory may draft: its draft_vocab.json (EAGLE-1/2) or its d2t (EAGLE-3)."""
    from ..drafting.head import read_draft_vocab
    from ..drafting.head3 import is_eagle3_dir

    if is_eagle3_dir(path):
        from safetensors import safe_open

        with safe_open(os.path.join(path, "model.safetensors"), "pt") as f:
            d2t = f.get_tensor("d2t")
        return set((torch.arange(len(d2t)) + d2t).tolist())
    with open(os.path.join(path, "config.json")) as f:
        vocab_size = json.load(f)["vocab_size"]
    ids = read_draft_vocab(path, vocab_size)
    if ids is None:
        raise SystemExit(f"{path} has no reduced draft vocabulary (it drafts from all tokens)")
    return set(ids)


def vanilla_tokens(journal: str) -> dict[str, list[int]]:
    """Every token vanilla generated in the journal, by category (first repeat of each prompt)."""
    out: dict[str, list[int]] = {}
    with open(journal, encoding="utf-8") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except ValueError:
                continue  # a torn last line
            for d in rec.get("samples", []):
                s = sample_from_dict(d)
                if s.method == "vanilla" and s.repeat == 0:
                    out.setdefault(s.category, []).extend(s.token_ids)
    if not out:
        raise SystemExit(f"{journal}: no vanilla samples with token ids")
    return out


def outside_shares(tokens: dict[str, list[int]], vocab: set[int]) -> dict[str, float]:
    """Share of tokens outside `vocab`, per category and over all ("all")."""
    miss, total = Counter(), Counter()
    for cat, ids in tokens.items():
        total[cat] = len(ids)
        miss[cat] = sum(t not in vocab for t in ids)
    shares = {cat: miss[cat] / total[cat] for cat in sorted(tokens)}
    shares["all"] = sum(miss.values()) / sum(total.values())
    return shares


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("journal", help="a benchmark journal (python -m eagle_core.bench --journal) with vanilla runs")
    p.add_argument("--heads", nargs="+", required=True, help="head directories with a reduced draft vocabulary")
    a = p.parse_args(argv)
    tokens = vanilla_tokens(a.journal)
    cols = {h: outside_shares(tokens, draft_vocab_of(h)) for h in a.heads}
    print("| category | tokens | " + " | ".join(f"outside {os.path.basename(h.rstrip('/'))}" for h in a.heads) + " |")
    print("|---|---|" + "---|" * len(a.heads))
    for cat in [*sorted(tokens), "all"]:
        n = sum(map(len, tokens.values())) if cat == "all" else len(tokens[cat])
        print(f"| {cat} | {n} | " + " | ".join(f"{cols[h][cat]:.1%}" for h in a.heads) + " |")


if __name__ == "__main__":
    main()
