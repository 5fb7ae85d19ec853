"""Example prompts and traces shipped in assets/, and the Medusa-style tree the Learn tab draws.

(The hand-made illustration run the figure tests use lives in tests/illustration.py.)
"""
from __future__ import annotations

import json
import math
import os
import zlib
from dataclasses import dataclass, field

from eagle_core.trace import ACCEPTED, NOT_REACHED, CycleRecord, DraftNode

from .i18n import FIGURE_TEXT
from .traces import MAX_TRACE_BYTES, bundle_from_json

ASSETS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "assets")
TRACE_DIR = os.path.join(ASSETS, "traces")


@dataclass(frozen=True)
class Example:
    """One shipped example trace (scripts/record_traces.py records it): its file, its title in the
    dropdown, the example prompt (assets/examples.json label) and what it sets beyond the page's defaults."""

    file: str
    title: str
    label: str
    sampling: dict = field(default_factory=dict)


# The page opens on the first (sorted by file name), so it is the one where EAGLE shows its win most plainly:
# code, greedy. Every example decodes with the page's default method and the tree the page opens with on a
# CPU (EXAMPLE_TREE), so what the page opens on is what Generate gives; only the prompt, the sampling of the
# sampled one and the length differ (EXAMPLE_NEW, a little past the page's default, so that the prefill both
# runs pay weighs less in the speedup). tests/test_shipped_traces.py holds them to it.
EXAMPLE_METHOD, EXAMPLE_TREE, EXAMPLE_NEW = "eagle2", "cpu", 64
EXAMPLES = (
    Example("01-code-greedy.json", "Code, EAGLE-2 greedy", "code"),
    Example("02-story-sampled.json", "Story, EAGLE-2 sampled (T=0.8)", "writing",
            dict(temperature=0.8, top_p=0.95, seed=1)),
    Example("03-chinese-greedy.json", "Chinese, EAGLE-2 greedy", "Chinese"),
)


def example_settings(example: Example) -> dict:
    """The DecodeSettings fields an example is recorded with: the page's defaults plus its sampling."""
    from eagle_core import PRESETS

    return dict(method=EXAMPLE_METHOD, max_new_tokens=EXAMPLE_NEW, **PRESETS[EXAMPLE_TREE], **example.sampling)


def _id(text: str) -> int:
    """A stable made-up token id for a text (the Medusa tree is drawn, never decoded)."""
    return zlib.crc32(text.encode()) % 49152


def example_prompts() -> list[list[str]]:
    """[[label, prompt], ...] from assets/examples.json."""
    with open(os.path.join(ASSETS, "examples.json"), encoding="utf-8") as f:
        return [[e["label"], e["prompt"]] for e in json.load(f)["prompts"]]


def example_traces() -> dict[str, str]:
    """{display name: path} of the traces shipped in assets/traces/, sorted by file name."""
    if not os.path.isdir(TRACE_DIR):
        return {}
    out = {}
    for name in sorted(os.listdir(TRACE_DIR)):
        if name.endswith(".json"):
            path = os.path.join(TRACE_DIR, name)
            with open(path, encoding="utf-8") as f:
                title = json.load(f).get("title") or name
            out[title] = path
    return out


def load_trace_file(path: str):
    """(eagle run, vanilla run) from a saved file; the size is checked before anything is read."""
    size = os.path.getsize(path)
    if size > MAX_TRACE_BYTES:
        raise ValueError(f"trace file is too large ({size / 1e6:.1f} MB; the limit is {MAX_TRACE_BYTES / 1e6:.0f} MB)")
    with open(path, "rb") as f:
        return bundle_from_json(f.read())


def cartesian_tree_cycle(prefix: str = "I", levels=((" am", " will", " always"), (" going", " begin", " try"))) -> CycleRecord:
    """A Medusa-style tree: every top-k choice of head 1 paired with every top-k choice of head 2.

    Head 2 never saw which token head 1 picked, so the product contains paths like "I am begin".
    Returned as a CycleRecord (nothing verified: every node NOT_REACHED) so `tree_figure` draws it."""
    nodes = [DraftNode(0, _id(prefix), prefix, -1, 0, 1.0, 0.0, None, ACCEPTED)]
    frontier = [0]
    for level in levels:
        nxt = []
        for parent in frontier:
            for rank, text in enumerate(level):
                q = 0.5 / (rank + 1)
                nodes.append(DraftNode(len(nodes), _id(text), text, parent, nodes[parent].depth + 1, q,
                                       nodes[parent].score + math.log(q), None, NOT_REACHED))
                nxt.append(len(nodes) - 1)
        frontier = nxt
    return CycleRecord(step=0, context_len=0, nodes=tuple(nodes), accepted=(0,), bonus_token_id=0, bonus_text="?",
                       committed_ids=(), committed_text="", draft_ms=0.0, verify_ms=0.0, rule="greedy")


def medusa_figure(lang: str = "en"):
    """The Learn tab's Medusa-style tree (the Cartesian product above), titled in `lang`."""
    from .tree import tree_figure

    return tree_figure(cartesian_tree_cycle(), show_bonus=False, title=FIGURE_TEXT("medusa", lang), lang=lang)
