"""The one reader of prompt JSONL files: the benchmark, the training data and the evaluation use it.

A record has a `prompt` string, or `turns` (MT-bench / Spec-Bench: a list of user turns, of
which the first is used as the prompt), and optionally a `category`. Blank lines are skipped.
This module imports nothing from the engine, so the training code can use it without pulling
in the benchmark.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass

# The prompt sets shipped with the repository (sources and licences: assets/prompts/SOURCES.md)
SHIPPED_PROMPTS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                               "assets", "prompts")
MT_BENCH = os.path.join(SHIPPED_PROMPTS, "mt_bench_question.jsonl")  # the default of every --prompts

# MT-bench's eight categories; Spec-Bench reports them together as "multi-turn conversation".
MT_BENCH_CATEGORIES = ("writing", "roleplay", "reasoning", "math", "coding", "extraction", "stem", "humanities")


@dataclass(frozen=True)
class Prompt:
    index: int  # position in the selection (0-based)
    text: str
    category: str

    @property
    def key(self) -> str:
        """Identifies the prompt in a journal independently of its position in a selection."""
        return hashlib.sha1(self.text.encode("utf-8")).hexdigest()[:16]


def read_records(path: str):
    """Yield (line number, record dict) for every non-blank line of a JSONL file."""
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if line.strip():
                yield line_no, json.loads(line)


def first_turn(record: dict):
    """The record's prompt: its `prompt` field, else the first of its `turns`; None if neither."""
    if "prompt" in record:
        return record["prompt"]
    turns = record.get("turns")
    return turns[0] if turns else None


def all_turns(record: dict) -> list[str]:
    """Every user text of the record (`prompt` and all `turns`), for overlap checks."""
    texts = ([record["prompt"]] if record.get("prompt") else []) + list(record.get("turns") or [])
    return [t for t in texts if isinstance(t, str)]


def load_prompts(path: str, limit: int | None = None, merge_mt_bench: bool = False,
                 per_category: int | None = None, categories: list[str] | None = None) -> list[Prompt]:
    """The prompts of a JSONL file, in file order; `per_category` keeps the first N of each
    category; `categories` keeps only those categories (the name "mt_bench" stands for
    MT-bench's eight); `merge_mt_bench` reports MT-bench's eight as one "mt_bench" category.
    Raises ValueError on a record without a prompt, or when nothing is selected."""
    prompts = []
    seen: dict[str, int] = {}
    wanted = None
    if categories:
        wanted = set()
        for c in categories:
            wanted.update(MT_BENCH_CATEGORIES + ("mt_bench",) if c == "mt_bench" else (c,))
    for line_no, d in read_records(path):
        text = first_turn(d)
        if text is None:
            raise ValueError(f"{path}:{line_no}: expected a 'prompt' or 'turns' field")
        cat = str(d.get("category") or "all")
        if wanted is not None and cat not in wanted:
            continue
        if merge_mt_bench and cat in MT_BENCH_CATEGORIES:
            cat = "mt_bench"
        if per_category is not None and seen.get(cat, 0) >= per_category:
            continue
        seen[cat] = seen.get(cat, 0) + 1
        prompts.append(Prompt(len(prompts), text, cat))
        if limit is not None and len(prompts) >= limit:
            break
    if not prompts:
        raise ValueError(f"{path}: no prompts")
    return prompts
