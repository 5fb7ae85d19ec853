"""The training files, their licences (as their source repositories state them) and their reference answers.

Token ids decode back to the text they encode, so committing a dataset redistributes its
sources: a file whose terms do not allow that is excluded from every committed dataset (both
the fixed answers and the self-distilled answers, whose prompts are part of each sequence).
Share-alike sources are included; their licence travels with the data in each manifest.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Source:
    licence: str  # as the source repository states it, shortened
    redistribute: bool  # may its text be committed to this repository (as token ids)?
    answer: Callable[[dict], object] | None = None  # the record's reference answer, if it has one
    answer_field: str = ""  # where that answer lives, for the manifest


_CALC = re.compile(r"<<[^<>]*>>")  # GSM8K's calculator annotations, "48/2 = <<48/2=24>>24"


def _gsm8k(r):
    a = r.get("answer")
    return _CALC.sub("", a) if isinstance(a, str) else None


def _t0(r):
    a = r.get("completion")
    return a.removesuffix("<|endoftext|>") if isinstance(a, str) else None  # GPT-2's end marker, not answer text


def _solution(r):
    return (r.get("other") or {}).get("solution")


def _code(r):
    a = r.get("code")
    return a.replace("\r\n", "\n") if isinstance(a, str) else None


SOURCES: dict[str, Source] = {
    "agieval_en_exam.jsonl": Source("MIT; AQuA-RAT part Apache-2.0", True, _solution, "other.solution"),
    "agieval_math_en.jsonl": Source("MIT", True, _solution, "other.solution"),
    "awesome_chatgpt_prompts_en.jsonl": Source("CC0-1.0", True),
    "awesome_chatgpt_prompts_zh_questions.jsonl": Source("MIT (questions ChatGPT-generated)", True),
    "awesome_chatgpt_prompts_zh_roles.jsonl": Source("MIT", True),
    "cmrc2018_dev_rc_zh.jsonl": Source("CC BY-SA 4.0 (share-alike)", True),
    "csl_title_generation_zh.jsonl": Source("Apache-2.0", True),
    "gaokao_bench_objective.jsonl": Source("Apache-2.0 (public exam papers)", True, lambda r: r.get("analysis"), "analysis"),
    "gaokao_bench_subjective.jsonl": Source("Apache-2.0 (public exam papers)", True, lambda r: r.get("analysis"), "analysis"),
    "gpteacher_codegen_en.jsonl": Source("MIT (GPT-4 generated)", True, lambda r: r.get("response"), "response"),
    "gpteacher_roleplay_en.jsonl": Source("MIT (GPT-4 generated)", True, lambda r: r.get("response"), "response"),
    "gsm8k_train.part1.jsonl": Source("MIT", True, _gsm8k, "answer (calculator annotations <<...>> removed)"),
    "gsm8k_train.part2.jsonl": Source("MIT", True, _gsm8k, "answer (calculator annotations <<...>> removed)"),
    "mbpp.jsonl": Source("CC BY 4.0", True, _code, "code (CRLF -> LF)"),
    "nq_open_dev_en.jsonl": Source("CC BY-SA 3.0 (share-alike)", True),
    "ntrex_translation.jsonl": Source("CC BY-SA 4.0 (share-alike)", True),
    "oasst_prompts_en.jsonl": Source("Apache-2.0", True),
    "self_instruct_seed_tasks.jsonl": Source("Apache-2.0", True),
    "t0_context_qa_en.jsonl": Source("Apache-2.0 templates; AdversarialQA CC BY-SA 4.0, Quoref/ROPES CC BY 4.0", True,
                                     _t0, "completion (trailing <|endoftext|> removed)"),
    # the articles are third-party news text (BBC / CNN / Daily Mail copyright; XSum's licence unknown)
    "t0_summarization_en.jsonl": Source("third-party news text, no redistribution grant", False, _t0, "completion"),
}


# Open-ended English requests: what MT-bench's writing, roleplay and humanities turns look like, and
# what the rest of the training prompts (maths, code, translation, Chinese exams, short QA) are not.
# Held-out accuracy is also reported on these alone ("chat"), since MT-bench is where tau is measured.
CHAT_SOURCES = frozenset({"oasst_prompts_en.jsonl", "gpteacher_roleplay_en.jsonl", "awesome_chatgpt_prompts_en.jsonl",
                          "self_instruct_seed_tasks.jsonl"})


def source_info(name: str) -> Source:
    """The entry for a training file; an unknown file is a clear error (its licence must be checked first)."""
    if name not in SOURCES:
        raise KeyError(f"{name}: not in eagle_core/train/sources.py; check its licence at its source and add it")
    return SOURCES[name]


def reference_answer(source: str, record: dict) -> str | None:
    """The record's reference answer (stripped), or None if the file has none or it is empty."""
    fn = source_info(source).answer
    a = fn(record) if fn else None
    return a.strip() if isinstance(a, str) and a.strip() else None
