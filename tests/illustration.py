"""A hand-made illustration run for the viz and app tests: NOT a model run.

A small, invented EAGLE-2 trace (marked as such in its summary) that shows what a trained head
does — long accepted paths, a rejected sibling, a branch never reached — with a matching
vanilla run, so figure builders can be tested on known answers without a model.
"""
from __future__ import annotations

import math
import zlib

from eagle_core.trace import ACCEPTED, NOT_REACHED, REJECTED, CycleRecord, DraftNode, Run, RunSummary, tau

ILLUSTRATION = "hand-made illustration (invented numbers, not a model run)"

A, R, N = ACCEPTED, REJECTED, NOT_REACHED
# One list per cycle: root text, then (parent, text, q, p, decision) per draft node, then the
# bonus (text, p). p is None where the target never looked (its parent was rejected).
_CYCLES = [
    ("I", [(0, " am", .62, .71, A), (0, " always", .21, .12, R), (0, " will", .08, .05, R),
           (1, " going", .44, .55, A), (1, " not", .31, .20, R), (1, " a", .10, .04, R),
           (2, " try", .52, None, N), (4, " to", .93, .97, A), (5, " sure", .66, None, N)],
     (" explain", .64)),
    (" explain", [(0, " the", .58, .30, R), (0, " how", .27, .52, A), (1, " idea", .40, None, N),
                  (2, " speculative", .48, .61, A), (2, " EAGLE", .22, .18, R), (4, " decoding", .81, .88, A)],
     (" works", .47)),
    (" works", [(0, ":", .45, .08, R), (0, ".", .30, .11, R), (1, " first", .35, None, N)],
     (" a", .58)),
    (" a", [(0, " small", .70, .83, A), (1, " head", .51, .60, A), (2, " drafts", .45, .52, A),
            (3, " several", .38, .41, A), (1, " cheap", .18, .09, R)],
     (" tokens", .72)),
]


def _id(text: str) -> int:
    return zlib.crc32(text.encode()) % 49152


def _cycle(step: int, context_len: int, root: str, rows, bonus) -> CycleRecord:
    nodes = [DraftNode(0, _id(root), root, -1, 0, 1.0, 0.0, None, A)]
    for parent, text, q, p, decision in rows:
        par = nodes[parent]
        nodes.append(DraftNode(len(nodes), _id(text), text, parent, par.depth + 1, q,
                               par.score + math.log(q), p, decision))
    path = [0]
    while True:
        nxt = [n.index for n in nodes if n.parent == path[-1] and n.decision == A]
        if not nxt:
            break
        path.append(nxt[0])
    committed = [nodes[i].text for i in path[1:]] + [bonus[0]]
    text = (root if step == 0 else "") + "".join(committed)
    return CycleRecord(step=step, context_len=context_len, nodes=tuple(nodes), accepted=tuple(path),
                       bonus_token_id=_id(bonus[0]), bonus_text=bonus[0],
                       committed_ids=tuple(_id(t) for t in committed), committed_text=text,
                       draft_ms=9.0 + 1.5 * len(nodes), verify_ms=48.0 + 1.2 * len(nodes), rule="greedy",
                       bonus_p=bonus[1])


def illustration_runs() -> tuple[Run, Run]:
    """(EAGLE-2 run, vanilla run) of the same invented text, with plausible CPU timings."""
    cycles, L = [], 40
    for step, (root, rows, bonus) in enumerate(_CYCLES):
        c = _cycle(step, L, root, rows, bonus)
        cycles.append(c)
        L += len(c.accepted)
    text = "".join(c.committed_text for c in cycles)
    ids = tuple(i for c in cycles for i in c.committed_ids)
    prompt = "In one sentence, what is EAGLE speculative decoding?"
    n_new = len(ids) + 1
    draft_s = sum(c.draft_ms for c in cycles) / 1e3
    verify_s = sum(c.verify_ms for c in cycles) / 1e3
    wall = 0.09 + draft_s + verify_s
    common = dict(prompt=prompt, text=text, token_ids=(_id("I"),) + ids, prompt_tokens=40, new_tokens=n_new,
                  prefill_ms=90.0, stop_reason="max_new_tokens", model=ILLUSTRATION, device="cpu")
    eagle = Run(RunSummary(method="eagle2", target_forwards=1 + len(cycles), cycles=len(cycles),
                           tau=tau(cycles), wall_s=wall,
                           tokens_per_s=n_new / wall, draft_s=draft_s, verify_s=verify_s,
                           settings={"method": "eagle2", "depth": 4, "tree_top_k": 3, "total_tokens": 10,
                                     "temperature": 0.0}, head=ILLUSTRATION, **common),
                tuple(cycles), first_token_id=_id("I"), first_token_text="I")
    vcycles, L, prev = [], 40, "I"
    tokens = [t for c in cycles for t in [c.nodes[i].text for i in c.accepted[1:]] + [c.bonus_text]]
    for step, tok in enumerate(tokens):
        root = DraftNode(0, _id(prev), prev, -1, 0, 1.0, 0.0, None, A)
        vcycles.append(CycleRecord(step, L, (root,), (0,), _id(tok), tok, (_id(tok),),
                                   (prev if step == 0 else "") + tok, 0.0, 36.0, "greedy", 0.6))
        L, prev = L + 1, tok
    vwall = 0.09 + 0.036 * len(vcycles)
    vanilla = Run(RunSummary(method="vanilla", target_forwards=1 + len(vcycles), cycles=len(vcycles), tau=1.0,
                             wall_s=vwall, tokens_per_s=n_new / vwall, draft_s=0.0, verify_s=0.036 * len(vcycles),
                             settings={"method": "vanilla", "temperature": 0.0}, head="", **common),
                  tuple(vcycles), first_token_id=_id("I"), first_token_text="I")
    return eagle, vanilla
