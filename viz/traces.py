"""Saving and loading what the app shows: an EAGLE run and (optionally) its vanilla twin.

A saved file is either a single engine trace (`eagle_core.run_to_json`) or a bundle
{"kind": BUNDLE_KIND, "runs": {"eagle": <trace>, "vanilla": <trace>}}. `check_run` goes further
than the engine's structural check: it verifies that indices point where they should, so a
hand-edited file becomes a clear ValueError instead of a crash inside a figure.
"""
from __future__ import annotations

import json
import math

from eagle_core.trace import ACCEPTED, NOT_REACHED, REJECTED, Run, run_from_dict, run_to_dict

BUNDLE_KIND = "eagle-explainer/comparison"
MAX_TRACE_BYTES = 20_000_000  # a 1,000-cycle EAGLE-2 trace is ~5 MB; refuse anything far larger
MAX_SECONDS = 1e6  # no recorded time is longer than this (about 11 days)
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
                if v is not None and not _number(v, -1e6 if name == "score" else 0.0, 0.0 if name == "score" else 1.0 + 1e-6):
                    raise ValueError(f"malformed EAGLE trace: {where} node {i} has {name}={v!r}")
        acc = c.accepted
        if not acc or acc[0] != 0 or any(not isinstance(a, int) or not 0 <= a < len(c.nodes) for a in acc):
            raise ValueError(f"malformed EAGLE trace: {where} has an invalid accepted path {acc!r}")
        if any(c.nodes[b].parent != a for a, b in zip(acc, acc[1:])):
            raise ValueError(f"malformed EAGLE trace: {where}'s accepted path is not a path in its tree")
        if not isinstance(c.committed_text, str) or not isinstance(c.bonus_text, str):
            raise ValueError(f"malformed EAGLE trace: {where} has non-text committed/bonus text")
        for name in ("draft_ms", "verify_ms"):
            if not _number(getattr(c, name), 0, MAX_SECONDS * 1e3):
                raise ValueError(f"malformed EAGLE trace: {where} has {name}={getattr(c, name)!r}")
    s = run.summary
    for name, hi in (("wall_s", MAX_SECONDS), ("tokens_per_s", 1e7), ("tau", 1e4), ("prefill_ms", MAX_SECONDS * 1e3),
                     ("draft_s", MAX_SECONDS), ("verify_s", MAX_SECONDS)):
        if not _number(getattr(s, name), 0, hi):
            raise ValueError(f"malformed EAGLE trace: summary.{name}={getattr(s, name)!r} is not a sensible number")
    for name in ("new_tokens", "prompt_tokens", "cycles", "target_forwards"):
        if not isinstance(getattr(s, name), int) or not 0 <= getattr(s, name) < 10 ** 7:
            raise ValueError(f"malformed EAGLE trace: summary.{name}={getattr(s, name)!r}")
    for name in ("model", "head", "device", "stop_reason", "prompt"):
        if not isinstance(getattr(s, name), str):
            raise ValueError(f"malformed EAGLE trace: summary.{name} must be text")
    return run


def _number(v, lo: float, hi: float) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and lo <= v <= hi


def bundle_to_json(eagle: Run | None, vanilla: Run | None, title: str = "") -> str:
    runs = {k: run_to_dict(r) for k, r in (("eagle", eagle), ("vanilla", vanilla)) if r is not None}
    return json.dumps({"kind": BUNDLE_KIND, "title": title, "runs": runs}, ensure_ascii=False)


def _finite(s: str) -> float:
    v = float(s)
    if not math.isfinite(v):
        raise ValueError(f"trace holds the number {s}, too large to be real")
    return v


def _no_constant(name: str):
    raise ValueError(f"trace holds {name}, which is not a number (NaN and infinity are refused)")


def bundle_from_json(text: str | bytes) -> tuple[Run | None, Run | None]:
    """(eagle run, vanilla run) from a bundle or a single trace. ValueError if malformed."""
    if len(text) > MAX_TRACE_BYTES:
        raise ValueError(f"trace file is too large ({len(text) / 1e6:.1f} MB; the limit is {MAX_TRACE_BYTES / 1e6:.0f} MB)")
    try:
        d = json.loads(text, parse_float=_finite, parse_constant=_no_constant)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"trace is not valid JSON: {e}") from e
    except RecursionError:
        raise ValueError("trace is nested far too deeply to be an EAGLE trace") from None
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
