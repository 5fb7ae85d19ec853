"""Saving and loading what the app shows: an EAGLE run and (optionally) its vanilla twin.

A saved file is either a single engine trace (`eagle_core.run_to_json`) or a bundle
{"kind": BUNDLE_KIND, "runs": {"eagle": <trace>, "vanilla": <trace>}}. `check_run` goes further
than the engine's structural check: it verifies that indices point where they should, so a
hand-edited file becomes a clear ValueError instead of a crash inside a figure.
"""
from __future__ import annotations

import json

from eagle_core.trace import ACCEPTED, NOT_REACHED, REJECTED, Run, run_from_dict, run_to_dict

BUNDLE_KIND = "eagle-explainer/comparison"
MAX_TRACE_BYTES = 20_000_000  # a 1,000-cycle EAGLE-2 trace is ~5 MB; refuse anything far larger
DECISIONS = (ACCEPTED, REJECTED, NOT_REACHED)


def check_run(run: Run) -> Run:
    """Raise ValueError if the run's cycles are not self-consistent; returns the run."""
    if not isinstance(run.summary.text, str) or not isinstance(run.summary.method, str):
        raise ValueError("malformed EAGLE trace: summary.text and summary.method must be strings")
    for c in run.cycles:
        where = f"cycle {c.step}"
        if not c.nodes:
            raise ValueError(f"malformed EAGLE trace: {where} has no nodes (the root is always there)")
        for i, n in enumerate(c.nodes):
            if n.index != i or not isinstance(n.text, str):
                raise ValueError(f"malformed EAGLE trace: {where} node {i} has index {n.index!r} or a non-text token")
            if (i == 0) != (n.parent == -1) or not (-1 <= n.parent < i):
                raise ValueError(f"malformed EAGLE trace: {where} node {i} has parent {n.parent!r}")
            if n.decision not in DECISIONS:
                raise ValueError(f"malformed EAGLE trace: {where} node {i} has decision {n.decision!r}")
            for name in ("q", "score", "p", "u", "p_test"):
                v = getattr(n, name)
                if v is not None and not isinstance(v, (int, float)):
                    raise ValueError(f"malformed EAGLE trace: {where} node {i} has {name}={v!r}")
        acc = c.accepted
        if not acc or acc[0] != 0 or any(not isinstance(a, int) or not 0 <= a < len(c.nodes) for a in acc):
            raise ValueError(f"malformed EAGLE trace: {where} has an invalid accepted path {acc!r}")
        if any(c.nodes[b].parent != a for a, b in zip(acc, acc[1:])):
            raise ValueError(f"malformed EAGLE trace: {where}'s accepted path is not a path in its tree")
        if not isinstance(c.committed_text, str) or not isinstance(c.bonus_text, str):
            raise ValueError(f"malformed EAGLE trace: {where} has non-text committed/bonus text")
        for name in ("draft_ms", "verify_ms"):
            if not isinstance(getattr(c, name), (int, float)):
                raise ValueError(f"malformed EAGLE trace: {where} has {name}={getattr(c, name)!r}")
    return run


def bundle_to_json(eagle: Run | None, vanilla: Run | None, title: str = "") -> str:
    runs = {k: run_to_dict(r) for k, r in (("eagle", eagle), ("vanilla", vanilla)) if r is not None}
    return json.dumps({"kind": BUNDLE_KIND, "title": title, "runs": runs}, ensure_ascii=False)


def bundle_from_json(text: str | bytes) -> tuple[Run | None, Run | None]:
    """(eagle run, vanilla run) from a bundle or a single trace. ValueError if malformed."""
    if len(text) > MAX_TRACE_BYTES:
        raise ValueError(f"trace file is too large ({len(text) / 1e6:.1f} MB; the limit is {MAX_TRACE_BYTES / 1e6:.0f} MB)")
    try:
        d = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"trace is not valid JSON: {e}") from e
    if isinstance(d, dict) and d.get("kind") == BUNDLE_KIND and isinstance(d.get("runs"), dict):
        runs = {k: check_run(_run(v)) for k, v in d["runs"].items() if k in ("eagle", "vanilla")}
        if not runs:
            raise ValueError("the trace bundle holds no 'eagle' or 'vanilla' run")
        return runs.get("eagle"), runs.get("vanilla")
    run = check_run(_run(d))
    return (None, run) if run.summary.method == "vanilla" else (run, None)


def _run(d) -> Run:
    try:
        return run_from_dict(d)
    except (ValueError, KeyError, TypeError, AttributeError) as e:
        raise ValueError(str(e) if isinstance(e, ValueError) else f"malformed EAGLE trace: {e!r}") from e
