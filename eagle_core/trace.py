"""The trace: one record per draft/verify cycle, plus a run summary.

This is the single interface between the decoding engine and everything that consumes it: the
CLI, the benchmark, the tests and the Gradio app. Records are plain frozen dataclasses with a
lossless JSON round trip (`run_to_json` / `run_from_json`), so a saved trace can be replayed
with no model loaded.

Vocabulary (names follow the papers):
  p      target probability of a drafted token at its parent (after temperature/top-p/top-k;
         at temperature 0 the plain softmax of the target's logits)
  q      draft (EAGLE head) probability of the token at its parent
  score  cumulative log q along the path from the root (EAGLE-2 ranks nodes by it)
  tau    tokens committed per draft/verify cycle (accepted drafts + the bonus token);
         vanilla decoding has tau = 1.00 by construction

The run metrics (`tau`, `acceptance_by_depth`) are defined once, at the end of this module,
on CycleRecords; the engine's summary, the training report and the app's charts all call them.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields

# Decisions a draft node can end a cycle with.
ACCEPTED = "accepted"  # on the accepted path
REJECTED = "rejected"  # tested against the target and refused
NOT_REACHED = "not_reached"  # never tested: its parent was not accepted, or a sibling before it was

TRACE_VERSION = 1


@dataclass(frozen=True)
class DraftNode:
    """One drafted token of a cycle's tree. Node 0 of every cycle is the root."""

    index: int  # position in the verification input (parents come before children)
    token_id: int
    text: str  # decoded text of this single token
    parent: int  # index of the parent node; -1 for the root
    depth: int  # root = 0
    q: float  # draft probability at the parent (root: 1.0)
    score: float  # cumulative log q from the root (root: 0.0)
    p: float | None  # target probability at the parent (root: None); None if never computed
    decision: str  # ACCEPTED / REJECTED / NOT_REACHED (the root is always ACCEPTED)
    u: float | None = None  # sampling: the uniform draw the node was tested with
    p_test: float | None = None  # sampling: the (renormalised) p the draw was compared to


@dataclass(frozen=True)
class CycleRecord:
    """One draft/verify cycle: the tree, the target's verdict and the timing."""

    step: int  # 0-based cycle index
    context_len: int  # committed tokens (prompt + generated) in the target cache before the cycle
    nodes: tuple[DraftNode, ...]  # root first; empty drafts -> only the root (vanilla)
    accepted: tuple[int, ...]  # node indices of the accepted path, root included
    bonus_token_id: int  # the target's own token after the accepted path
    bonus_text: str
    committed_ids: tuple[int, ...]  # tokens this cycle added to the output (accepted drafts + bonus,
    #                               truncated at EOS / max_new_tokens)
    committed_text: str  # output text added since the previous cycle (cycle 0 also carries the
    #                      prefill's first token; an incomplete UTF-8 character waits a cycle)
    draft_ms: float  # time spent drafting (EAGLE head)
    verify_ms: float  # time spent in the target forward + acceptance
    rule: str  # "greedy", "point_mass" (sampled tree, deterministic drafts) or "ratio" (min(1, p/q))
    bonus_p: float | None = None  # target probability of the bonus token (None if not computed)

    @property
    def accepted_drafts(self) -> int:
        """Number of accepted draft tokens (root excluded)."""
        return len(self.accepted) - 1

    @property
    def n_draft(self) -> int:
        return len(self.nodes) - 1


@dataclass(frozen=True)
class RawCycle:
    """What the decode loop keeps of a cycle while its clock runs: ids and numbers, no text. The engine
    builds the cycle's CycleRecord from it (token labels, the text it added) outside the timed span:
    right after the cycle (iterating a Generation) or after the last one (Generation.raw)."""

    step: int
    context_len: int
    tree: object  # the tree.DraftTree verified (a sampled chain's q distributions dropped)
    verdict: object  # the verify.Verdict
    committed_ids: tuple[int, ...]
    n_out: int  # tokens in the output after this cycle (the prefill's first one included)
    draft_ms: float
    verify_ms: float
    rule: str


@dataclass(frozen=True)
class RunSummary:
    """What a whole generation did."""

    method: str  # "eagle2", "eagle3", "eagle1", "chain" or "vanilla"
    prompt: str
    text: str  # the generated text (special tokens removed)
    token_ids: tuple[int, ...]  # generated token ids (EOS excluded)
    prompt_tokens: int
    new_tokens: int
    target_forwards: int  # prefill included
    cycles: int  # draft/verify cycles (prefill excluded)
    tau: float  # mean tokens committed per cycle
    wall_s: float  # prefill + all cycles
    tokens_per_s: float  # new_tokens / wall_s
    prefill_ms: float
    draft_s: float
    verify_s: float
    stop_reason: str  # "eos", "max_new_tokens", "context_full" or "stopped"
    settings: dict = field(default_factory=dict)  # the tree and sampling settings used
    model: str = ""
    head: str = ""
    device: str = ""
    head_layers: tuple[int, ...] = ()  # EAGLE-3: the target layers whose inputs feed the head (else empty)


@dataclass(frozen=True)
class Run:
    """A finished (or stopped) generation: summary plus every cycle."""

    summary: RunSummary
    cycles: tuple[CycleRecord, ...]
    first_token_id: int | None = None  # the token produced by the prefill forward
    first_token_text: str = ""


# -- run metrics ------------------------------------------------------------------------------
def tau(cycles) -> float:
    """Mean accepted length: tokens per draft/verify cycle, accepted drafts + the bonus token,
    i.e. len(accepted path incl. root) averaged over cycles (one target forward each; the
    prefill is not a cycle). Counted before the EOS / max_new_tokens cut of the last cycle,
    as the field reports it. 0.0 for no cycles; vanilla = 1.00."""
    cycles = list(cycles)
    return sum(len(c.accepted) for c in cycles) / len(cycles) if cycles else 0.0


@dataclass(frozen=True)
class DepthAcceptance:
    """Acceptance at one draft depth d (1 = the root's children), counted over cycles."""

    depth: int
    drafted: int  # cycles whose tree reaches depth d
    reached: int  # of those, cycles whose accepted path reached depth d - 1: depth d was in play
    accepted: int  # of those, cycles that accepted a draft at depth d

    @property
    def rate(self) -> float:
        """The acceptance rate at depth d: accepted / reached (conditional on getting there)."""
        return self.accepted / self.reached if self.reached else 0.0


def acceptance_by_depth(cycles) -> list[DepthAcceptance]:
    """One DepthAcceptance per depth 1 .. the deepest drafted; [] when nothing was drafted."""
    drafted: dict[int, int] = {}
    reached: dict[int, int] = {}
    accepted: dict[int, int] = {}
    for c in cycles:
        a = len(c.accepted) - 1  # accepted drafts = depth of the accepted path
        for d in range(1, max(n.depth for n in c.nodes) + 1):
            drafted[d] = drafted.get(d, 0) + 1
            if a >= d - 1:
                reached[d] = reached.get(d, 0) + 1
                accepted[d] = accepted.get(d, 0) + (a >= d)
    return [DepthAcceptance(d, drafted[d], reached.get(d, 0), accepted.get(d, 0)) for d in sorted(drafted)]


def acceptance_rates(cycles) -> dict[int, float]:
    """{depth: acceptance rate} for the depths some cycle reached (the training report's table)."""
    return {r.depth: r.rate for r in acceptance_by_depth(cycles) if r.reached}


def _node_from_dict(d: dict) -> DraftNode:
    return DraftNode(**{f.name: d.get(f.name) for f in fields(DraftNode)})


def cycle_from_dict(d: dict) -> CycleRecord:
    kw = {f.name: d.get(f.name) for f in fields(CycleRecord)}
    kw["nodes"] = tuple(_node_from_dict(n) for n in d["nodes"])
    kw["accepted"] = tuple(d["accepted"])
    kw["committed_ids"] = tuple(d["committed_ids"])
    return CycleRecord(**kw)


def summary_from_dict(d: dict) -> RunSummary:
    kw = {f.name: d[f.name] for f in fields(RunSummary) if f.name in d}
    kw["token_ids"] = tuple(kw.get("token_ids", ()))
    kw["head_layers"] = tuple(kw.get("head_layers", ()))  # absent in traces written before EAGLE-3
    return RunSummary(**kw)


def run_to_dict(run: Run) -> dict:
    return {
        "trace_version": TRACE_VERSION,
        "summary": asdict(run.summary),
        "first_token_id": run.first_token_id,
        "first_token_text": run.first_token_text,
        "cycles": [asdict(c) for c in run.cycles],
    }


def run_from_dict(d: dict) -> Run:
    """Rebuild a Run from `run_to_dict` output. Raises ValueError on a malformed trace."""
    if not isinstance(d, dict) or "summary" not in d or "cycles" not in d:
        raise ValueError("not an EAGLE trace: expected an object with 'summary' and 'cycles'")
    if d.get("trace_version") != TRACE_VERSION:
        raise ValueError(f"unsupported trace version {d.get('trace_version')!r} (expected {TRACE_VERSION})")
    try:
        return Run(
            summary=summary_from_dict(d["summary"]),
            cycles=tuple(cycle_from_dict(c) for c in d["cycles"]),
            first_token_id=d.get("first_token_id"),
            first_token_text=d.get("first_token_text", ""),
        )
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"malformed EAGLE trace: {e}") from e


def run_to_json(run: Run, indent: int | None = None) -> str:
    return json.dumps(run_to_dict(run), ensure_ascii=False, indent=indent)


def run_from_json(text: str) -> Run:
    try:
        d = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"trace is not valid JSON: {e}") from e
    return run_from_dict(d)
