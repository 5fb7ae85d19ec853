"""The lesson (issue 45, item 4): seven shipped traces, one idea each, in the order a teacher walks a
class through them. Each step names its prompt, its decode settings (chosen here, not from a preset,
so the traces do not move when a preset does), and the rule that picks the cycle the step opens at.
scripts/make_lesson_traces.py decodes them into assets/lesson/ and records each rule's cycle in
assets/lesson/lesson.json; tests/test_lesson.py checks the files against the engine and the rules.
No gradio or torch here.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

from eagle_core.trace import ACCEPTED, REJECTED

LESSON_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "assets", "lesson")
MANIFEST = os.path.join(LESSON_DIR, "lesson.json")
TREE = dict(method="eagle2", depth=4, tree_top_k=3, total_tokens=11)  # readable: 11 drafts, 3 per node, 4 deep
MAX_NEW = 40
SEEDS = range(1, 21)  # the sampled step: the first seed whose run shows the rule


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


def rule_rejection(cycles):
    """Every first-level draft rejected: the pass commits only the target's own token."""
    return first(cycles, lambda c: c.n_draft > 0 and c.accepted_drafts == 0
                 and all(n.decision == REJECTED for n in c.nodes if n.parent == 0))


def residual_nodes(c):
    """Drafts tested after a rejected sibling, against p renormalised over what the rejections left."""
    return [n for n in c.nodes[1:] if n.p_test is not None and n.p is not None and n.p_test > n.p + 1e-6
            and any(s.decision == REJECTED and s.parent == n.parent and s.index < n.index for s in c.nodes)]


def rule_residual(cycles):
    """A draft accepted after a sibling was rejected (sampling's residual rule at work)."""
    return first(cycles, lambda c: c.rule == "point_mass" and any(n.decision == ACCEPTED for n in residual_nodes(c)))


def is_byte_token(text: str) -> bool:
    return "<0x" in text  # eagle_app/tokens.py writes a byte of a split character as <0xE4>


def rule_bytes(cycles):
    """An accepted draft that is part of a character's bytes, not a whole character."""
    return first(cycles, lambda c: any(is_byte_token(c.nodes[i].text) for i in c.accepted[1:]))


@dataclass(frozen=True)
class Step:
    key: str  # the text table's keys: title.<key>, cap.<key>, q.<key>
    file: str
    prompt: str
    settings: dict
    rule: callable
    rule_text: str  # the rule in words, recorded in the manifest
    side: str  # the figure beside the tree: mask, probs, text or hardware
    vanilla: bool = True  # also decode with vanilla (the Decode tab's cards compare the two)


STEPS = (
    Step("tree", "1-tree.json", "Explain photosynthesis in two sentences.", dict(TREE, max_new_tokens=MAX_NEW),
         rule_tree, "first cycle with a full tree (every draft slot, full depth, 2+ first tokens)", "text"),
    Step("one_pass", "2-one-pass.json", "Name the planets of the solar system in order.",
         dict(TREE, max_new_tokens=MAX_NEW), rule_one_pass, "first full-tree cycle that accepted 2+ drafts", "mask"),
    Step("bonus", "3-bonus.json", "Write a Python function that returns the sum of a list of numbers.",
         dict(TREE, max_new_tokens=MAX_NEW), rule_bonus, "the longest accepted path (earliest of equals)", "probs"),
    Step("rejection", "4-rejection.json", "Write a short poem about autumn leaves.", dict(TREE, max_new_tokens=MAX_NEW),
         rule_rejection, "first cycle whose first-level drafts were all rejected", "probs"),
    Step("residual", "5-residual.json", "Tell a short story about a robot who learns to paint.",
         dict(TREE, max_new_tokens=MAX_NEW, temperature=0.8, top_p=0.95), rule_residual,
         "first cycle that accepted a draft after a rejected sibling (seed: the first of 1-20 that has one)", "probs",
         vanilla=False),
    Step("bytes", "6-bytes.json", "请用三句话介绍一下长城。", dict(TREE, max_new_tokens=MAX_NEW), rule_bytes,
         "first cycle whose accepted path holds a byte token", "text"),
    Step("hardware", "7-hardware.json", "What is the capital of France? Answer in one sentence.",
         dict(TREE, max_new_tokens=MAX_NEW), rule_tree, "first cycle with a full tree", "hardware"),
)
BY_KEY = {s.key: s for s in STEPS}


def load_manifest(path: str = MANIFEST) -> list[dict]:
    """[{key, file, cycle (1-based), rule, settings, prompt, title}, ...] in lesson order ([] if missing)."""
    return [s for s in load_meta(path).get("steps", []) if s.get("key") in BY_KEY]


def load_meta(path: str = MANIFEST) -> dict:
    """The whole manifest: the steps, the command, the model and head, the vocabulary's counts ({} if missing)."""
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
        return d if isinstance(d, dict) else {}
    except (OSError, ValueError):
        return {}


def chinese_tokens(tokenizer) -> dict:
    """{"size": tokens in the vocabulary, "whole_chinese": tokens that decode to whole CJK characters}."""
    import re

    vocab = tokenizer.get_vocab()
    whole = sum(1 for i in vocab.values() if re.fullmatch(r"\s?[\u4e00-\u9fff]+", tokenizer.decode([i])))
    return {"size": len(vocab), "whole_chinese": whole}
