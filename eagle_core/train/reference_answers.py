"""Source (2): existing reference answers, teacher-forced (tokenisation only, no generation).

Several training files carry an answer (GPTeacher `response`, GSM8K `answer`, MBPP `code`,
AGIEval `other.solution`, GAOKAO `analysis`, T0 `completion`; see sources.py). Each becomes one
sequence "user prompt -> assistant answer" in the target's chat template:

    ids        = Target.encode_prompt(prompt) + encode(answer) + [end of turn]
    prompt_len = len(Target.encode_prompt(prompt))      the loss covers ids[prompt_len:]

The prompt is encoded exactly as at decode time (special-token text typed in it is plain text);
so is the answer, which ends with the template's end-of-turn token, as a self-distilled answer
ends with the EOS the target generated. EAGLE-1 measured that fixed answers cost little against
regenerated ones (arXiv:2401.15077, Table 6: tau 3.62 vs 3.75).
"""
from __future__ import annotations

import os
import sys
import time

from .data import train_prompts
from .ids import FORMAT, summarize, tokenizer_fingerprint, write_manifest, write_part
from .sources import reference_answer, source_info

_SLOT_P, _SLOT_A = "\x00PROMPT\x00", "\x00ANSWER\x00"


def end_of_turn_id(target) -> int | None:
    """The token that closes an assistant turn: the first token the chat template writes after the
    answer (SmolLM2: <|im_end|>) if it is an EOS; without a template, the first valid EOS id."""
    tok = target.tokenizer
    if getattr(tok, "chat_template", None):
        rendered = tok.apply_chat_template([{"role": "user", "content": _SLOT_P}, {"role": "assistant", "content": _SLOT_A}],
                                           tokenize=False)
        after = rendered.split(_SLOT_A, 1)[1]
        ids = list(tok(after, add_special_tokens=False)["input_ids"]) if after else []
        if ids and ids[0] in target.eos_ids:
            return ids[0]
    valid = [e for e in target.eos_ids if 0 <= e < target.vocab_size]
    return valid[0] if valid else None


def encode_exchange(target, prompt: str, answer: str, end_id: int | None) -> tuple[list[int], int]:
    """-> (ids, prompt_len) of "user prompt -> assistant answer" (special-token text in the answer,
    as in the prompt, is plain text)."""
    p = target.encode_prompt(prompt)
    a = list(target.tokenizer(answer, add_special_tokens=False, split_special_tokens=True)["input_ids"])
    return p + a + ([end_id] if end_id is not None else []), len(p)


def build_reference_answers(target, train_dir: str, eval_dir: str, out: str, max_prompt_tokens: int, max_seq: int,
                command: str = "") -> dict:
    """Write one part per source file with reference answers under `out`; -> the manifest."""
    prompts, info = train_prompts(train_dir, eval_dir)  # eval overlap dropped here
    os.makedirs(out, exist_ok=True)
    end_id = end_of_turn_id(target)
    by_source: dict[str, list] = {}
    for p in prompts:
        by_source.setdefault(p.source, []).append(p)
    files, per_source, excluded = [], {}, {}
    for name in sorted(by_source):
        src = source_info(name)
        if src.answer is None:
            continue
        if not src.redistribute:
            excluded[name] = src.licence
            continue
        seqs, plens, lines = [], [], []
        stats = {"records": len(by_source[name]), "skipped_empty": 0, "skipped_long_prompt": 0, "truncated": 0}
        for p in by_source[name]:
            answer = reference_answer(name, p.record)
            if answer is None:
                stats["skipped_empty"] += 1
                continue
            ids, plen = encode_exchange(target, p.text, answer, end_id)
            if plen > max_prompt_tokens:
                stats["skipped_long_prompt"] += 1
                continue
            if len(ids) > max_seq:
                ids = ids[:max_seq]
                stats["truncated"] += 1
            seqs.append(ids); plens.append(plen); lines.append(p.line)
        if not seqs:
            continue
        entry = write_part(os.path.join(out, name.removesuffix(".jsonl") + ".npz"), seqs, plens, [name] * len(seqs),
                           lines, target.vocab_size)
        entry["licence"] = src.licence
        files.append(entry)
        per_source[name] = {**stats, "sequences": entry["sequences"], "prompt_tokens": entry["prompt_tokens"],
                            "answer_tokens": entry["answer_tokens"], "licence": src.licence,
                            "answer_field": src.answer_field}
        print(f"{name}: {entry['sequences']} sequences, {entry['answer_tokens']} answer + "
              f"{entry['prompt_tokens']} prompt tokens", flush=True)
    manifest = {
        "format": FORMAT, "kind": "fixed-answers", "command": command,
        "template": "user prompt -> assistant answer in the target's chat template; prompt as Target.encode_prompt, "
                    "answer tokenised with special-token text as plain text, then the end-of-turn token; "
                    "loss on ids[prompt_len:]",
        "tokenizer": tokenizer_fingerprint(target), "end_of_turn_id": end_id,
        "limits": {"max_prompt_tokens": max_prompt_tokens, "max_seq": max_seq},
        "overlap_check": info, "excluded_by_licence": excluded,
        "totals": summarize(files), "sources": per_source, "files": files,
    }
    write_manifest(out, manifest)
    return manifest


def run_ids_fixed(args) -> None:
    from ..target import load_target

    t0 = time.time()
    target = load_target(args.model)
    m = build_reference_answers(target, args.train_dir, args.eval_dir, args.out, args.max_prompt_tokens, args.max_seq,
                    command="python -m eagle_core.train " + " ".join(sys.argv[1:]))
    tot = m["totals"]
    print(f"{tot['sequences']} sequences, {tot['answer_tokens']} answer + {tot['prompt_tokens']} prompt tokens "
          f"in {time.time() - t0:.0f}s; excluded by licence: {sorted(m['excluded_by_licence']) or 'none'}", flush=True)

