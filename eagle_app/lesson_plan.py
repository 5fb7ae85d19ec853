"""The lesson (issue 52, item 1): eight steps that tell one story, from "why one pass over k tokens
costs about one" to the live Decode tab, one idea each. Each step names its prompt, its decode settings
(the page's default tree, the `cpu` preset, unless the step is about another tree), the rule that picks
the cycle it opens at, the one figure it shows and the one Decode control its "try it" changes.

Steps 1, 2 and 8 need no recorded run (`file` is None): step 1 and 8 read the hardware panel's
recording (assets/learn/), step 2 runs the loaded target on its prompt when shown. The other five are
decoded by the traces' recorder into assets/lesson/ (one file each, `file`), which writes each rule's
cycle into assets/lesson/lesson.json; tests/test_lesson.py checks the files against the engine and the
rules. No gradio or torch here.
"""
from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from eagle_core.config import PRESETS
from eagle_core.trace import ACCEPTED, REJECTED

LESSON_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "assets", "lesson")
MANIFEST = os.path.join(LESSON_DIR, "lesson.json")
ZH_PROMPTS = os.path.join(os.path.dirname(LESSON_DIR), "prompts", "mt_bench_zh_question.jsonl")
PRESET = "cpu"  # the tree the page opens with on a CPU (eagle_app/settings.py): the lesson teaches that tree
TREE = dict(method="eagle2", **PRESETS[PRESET])
MAX_NEW = 40
SEEDS = range(1, 41)  # the sampled step: the first seed whose run shows the rule
VISIBLE = 0.1  # step 6: the residual's threshold at least this far above p, so the figure shows the gap


# ------------------------------------------------------------------------------------- rules
# Each takes a run's cycles and returns the 0-based index of the cycle the step opens at, or None.
def first(cycles, test):
    return next((i for i, c in enumerate(cycles) if test(c)), None)


def full_tree(c) -> bool:
    """Every draft slot used, the full depth reached, at least two first tokens tried."""
    kids = sum(1 for n in c.nodes if n.parent == 0)
    return c.n_draft == TREE["total_tokens"] and max(n.depth for n in c.nodes) == TREE["depth"] and kids >= 2


def rule_tree(cycles):
    return first(cycles, full_tree)


def rule_one_pass(cycles):
    """A full tree whose one pass committed 3 or more tokens (2+ accepted drafts and the bonus)."""
    return first(cycles, lambda c: full_tree(c) and c.accepted_drafts >= 2)


def rule_bonus(cycles):
    """The longest accepted path (the earliest of equals)."""
    drafted = [i for i, c in enumerate(cycles) if c.n_draft]
    return max(drafted, key=lambda i: (cycles[i].accepted_drafts, -i)) if drafted else None


def residual_nodes(c):
    """Drafts tested after a rejected sibling, against p renormalised over what the rejections left."""
    return [n for n in c.nodes[1:] if n.p_test is not None and n.p is not None and n.p_test > n.p + 1e-6
            and any(s.decision == REJECTED and s.parent == n.parent and s.index < n.index for s in c.nodes)]


def rule_residual(cycles):
    """A draft accepted after a sibling was rejected, its threshold visibly above its p (sampling's
    residual rule at work, and big enough to see in the figure)."""
    return first(cycles, lambda c: c.rule == "point_mass" and any(
        n.decision == ACCEPTED and n.p_test >= n.p + VISIBLE for n in residual_nodes(c)))


def is_byte_token(text: str) -> bool:
    return "<0x" in text  # eagle_app/tokens.py writes a byte of a split character as <0xE4>


def rule_bytes(cycles):
    """An accepted draft that is part of a character's bytes, not a whole character."""
    return first(cycles, lambda c: any(is_byte_token(c.nodes[i].text) for i in c.accepted[1:]))


@dataclass(frozen=True)
class Step:
    key: str  # the text table's keys: title.<key>, cap.<key>, q.<key>, try.<key>
    file: str | None  # the recorded trace in LESSON_DIR, or None: the step reads a record or the live model
    prompt: str
    settings: dict  # the decode settings of its run, and what "go live" puts on the Decode tab
    rule: callable
    rule_text: str  # the rule in words, recorded in the manifest
    figure: str  # the one figure: forward, head_inputs, tree, mask, probs, languages, hardware
    control: str  # the one Decode control its "try it" changes (a settings.FIELDS name, or "prompt")
    vanilla: bool = True  # also decode with vanilla (the Decode tab's cards compare the two)


def _run(**extra) -> dict:
    return dict(TREE, max_new_tokens=MAX_NEW, **extra)


STEPS = (
    Step("cost", None, "Name the planets of the solar system in order.", _run(), None,
         "no trace: the hardware panel's recording (assets/learn/hardware_recorded.json)", "forward", "total_tokens"),
    Step("head", None, "Explain photosynthesis in two sentences.", _run(), None,
         "no trace: the loaded target runs the prompt when the step is shown", "head_inputs", "method"),
    Step("tree", "3-tree.json", "Explain photosynthesis in two sentences.", _run(), rule_tree,
         "first cycle with a full tree (every draft slot, full depth, 2+ first tokens)", "tree", "depth"),
    Step("mask", "4-mask.json", "Name the planets of the solar system in order.", _run(), rule_one_pass,
         "first full-tree cycle that accepted 2+ drafts", "mask", "tree_top_k"),
    Step("greedy", "5-greedy.json", "Write a Python function that returns the sum of a list of numbers.", _run(),
         rule_bonus, "the longest accepted path (earliest of equals)", "probs", "method"),
    Step("sampling", "6-sampling.json", "Tell a short story about a robot who learns to paint.",
         _run(temperature=0.8, top_p=0.95), rule_residual,
         f"first cycle that accepted a draft after a rejected sibling, its threshold {VISIBLE} or more above its p "
         f"(seed: the first of {SEEDS.start}-{SEEDS.stop - 1} that has one)", "probs", "seed", vanilla=False),
    Step("languages", "7-languages.json", "请用三句话介绍一下长城。", _run(), rule_bytes,
         "first cycle whose accepted path holds a byte token", "languages", "prompt"),
    Step("hardware", None, "What is the capital of France? Answer in one sentence.", _run(), None,
         "no trace: the hardware panel's recording and tau per tree (assets/learn/)", "hardware", "preset"),
)
BY_KEY = {s.key: s for s in STEPS}
RECORDED = tuple(s for s in STEPS if s.file)  # what the recorder decodes


def load_manifest(path: str = MANIFEST) -> list[dict]:
    """The recorded steps [{key, file, cycle (1-based), of, rule, settings, prompt, ...}] whose trace file
    exists and whose settings are the plan's ([] if the manifest is missing): a trace recorded for an older
    plan (another tree, another prompt) is not shown as if it were this one's."""
    out = []
    for s in load_meta(path).get("steps", []):
        step = BY_KEY.get(s.get("key"))
        if step is None or not step.file or s.get("file") != step.file or s.get("prompt") != step.prompt:
            continue
        if any(s.get("settings", {}).get(k) != v for k, v in step.settings.items() if k != "seed"):
            continue
        if os.path.exists(os.path.join(os.path.dirname(path), step.file)):
            out.append(s)
    return out


def load_meta(path: str = MANIFEST) -> dict:
    """The whole manifest: the steps, the command, the model and head, the vocabulary's counts ({} if missing)."""
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        return d if isinstance(d, dict) else {}
    except (OSError, ValueError):
        return {}


CJK = re.compile(r"[\u4e00-\u9fff]")


def zh_sample(path: str = ZH_PROMPTS) -> str:
    """The Chinese MT-bench prompts' text (the sample the bytes-per-character count reads), or ""."""
    try:
        with open(path, encoding="utf-8") as f:
            return "".join(t for line in f if line.strip() for t in json.loads(line).get("turns", [])[:1])
    except (OSError, ValueError):
        return ""


def chinese_tokens(tokenizer, sample: str | None = None) -> dict:
    """{"size": tokens in the vocabulary, "whole_chinese": tokens that decode to whole CJK characters,
    "per_char": {tokens: distinct characters of the sample that the tokenizer spells with that many tokens},
    "chars": distinct characters counted}. SmolLM2's tokenizer is a byte-level BPE: a character is 3 UTF-8
    bytes, and a token holds 1, 2 or 3 of them (or more, across characters), so a character costs 1 to 3 tokens."""
    vocab = tokenizer.get_vocab()
    whole = sum(1 for i in vocab.values() if re.fullmatch(r"\s?[\u4e00-\u9fff]+", tokenizer.decode([i])))
    chars = sorted(set(CJK.findall(zh_sample() if sample is None else sample)))
    per: dict[str, int] = {}
    for ch in chars:
        n = len(tokenizer(ch, add_special_tokens=False)["input_ids"])
        per[str(n)] = per.get(str(n), 0) + 1
    return {"size": len(vocab), "whole_chinese": whole, "per_char": dict(sorted(per.items())), "chars": len(chars)}
