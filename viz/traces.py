"""Saving and loading what the app shows: an EAGLE run and (optionally) its vanilla twin.

A saved file is either a single engine trace (`eagle_core.run_to_json`) or a bundle
{"kind": BUNDLE_KIND, "runs": {"eagle": <trace>, "vanilla": <trace>}}. `check_run` goes further
than the engine's structural check: it verifies that indices point where they should, so a
hand-edited file becomes a clear ValueError instead of a crash inside a figure.

A shipped trace (assets/traces/, assets/lesson/, written by scripts/record_traces.py) also carries
"recorded": where and how it was recorded (CPU model, date, command, the machine's load and its
calibrated t(1)). `shipped_problems` says what makes such a trace unfit to teach with (a busy or
cold run, a verdict that does not fit its numbers); the recorder and tests/test_shipped_traces.py
both use it, so "plausible" has one definition.
"""
from __future__ import annotations

import json
import math
import re

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


def bundle_to_json(eagle: Run | None, vanilla: Run | None, title: str = "", recorded: dict | None = None) -> str:
    """`recorded`: the recorder's stamp (machine, date, command, load, calibration), kept beside the runs."""
    runs = {k: run_to_dict(r) for k, r in (("eagle", eagle), ("vanilla", vanilla)) if r is not None}
    extra = {"recorded": recorded} if recorded is not None else {}
    return json.dumps({"kind": BUNDLE_KIND, "title": title, **extra, "runs": runs}, ensure_ascii=False)


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


# ------------------------------------------------------------------------------ shipped traces
# What a shipped trace must show to be taught with. The bounds are loose on purpose: a quiet machine is far
# inside them, a busy or cold recording (the faults of issue 52) far outside (docs/app.md, "Re-recording the
# shipped traces").
LIMITS = {
    "step_ms": 60.0,  # a vanilla step of the default 135M model on a CPU it is taught on
    "step_over_t1": 2.0,  # a vanilla step against the machine's calibrated t(1) just before the run
    "verify_steps": 2.0,  # a cycle's verification in vanilla steps (more where the hardware record says so)
    "cold": 3.0, "cold_ms": 3.0,  # the first cycle's draft or verify: at most cold x the median + cold_ms
    "prefill_ms": 60.0, "prefill_ms_per_token": 3.0,  # prefill: at most prefill_ms + this per prompt token
    "agree": (0.6, 1.2),  # measured speedup over the verdict's tau / c (prefill and bookkeeping lower it)
    "opening": 1.3,  # the speedup of the trace the page opens on
}
DATE = re.compile(r"\d{4}-\d\d-\d\d")


def vanilla_step_ms(vanilla: Run | None) -> float | None:
    """One vanilla step (a cycle of one token) in ms, as the verdict counts it; None without cycles."""
    if vanilla is None or vanilla.summary.cycles <= 0:
        return None
    return 1e3 * (vanilla.summary.verify_s + vanilla.summary.draft_s) / vanilla.summary.cycles


def verified_rows(run: Run) -> int:
    """Rows one verification of this run's tree processes (its drafts plus the root)."""
    from .verdict import cycle_costs

    k = cycle_costs(run, run)  # the verdict's own count of the rows (None for a run without timed cycles)
    return k["rows"] if k else 1


def shipped_problems(eagle: Run | None, vanilla: Run | None, recorded: dict | None, rows_cost=None,
                     limits: dict = LIMITS, allow_busy: bool = False) -> list[str]:
    """Why this recorded pair is unfit to ship ([] if fit): no stamp (CPU model, date, command) or one
    that says busy; a vanilla step implausible for the CPU or for its own calibration; a verification
    dearer than `verify_steps` vanilla steps (or than 1.5 x what `rows_cost(rows)`, t(rows)/t(1) from
    the hardware record, allows for a big tree); a cold first cycle; a slow prefill; greedy outputs that
    differ; a verdict (viz/verdict.py, what the page shows) that does not fit the measured speedup."""
    from .verdict import cycle_costs, verdict_html

    out = []
    rec = recorded if isinstance(recorded, dict) else {}
    for key in ("cpu", "date", "command"):
        if not rec.get(key):
            out.append(f"no {key} in the trace's 'recorded' stamp")
    if rec.get("date") and not DATE.fullmatch(str(rec["date"])):
        out.append(f"recorded date {rec['date']!r} is not YYYY-MM-DD")
    if rec.get("busy") and not allow_busy:
        out.append(f"recorded on a busy machine ({rec.get('busy_why') or 'stamped busy'}): re-record on a quiet one")
    calib = rec.get("calibration_t1_ms")
    step = vanilla_step_ms(vanilla)
    if step is not None:
        if step > limits["step_ms"]:
            out.append(f"vanilla step {step:.1f} ms is implausible for the CPU (at most {limits['step_ms']:g} ms)")
        if calib and step > limits["step_over_t1"] * calib:
            out.append(f"vanilla step {step:.1f} ms is over {limits['step_over_t1']:g}x the machine's calibrated "
                       f"t(1) {calib:.1f} ms: it was busy during the run")
    ref = step if step is not None else calib  # an EAGLE-only trace: the calibration stands for a step
    for kind, run in (("EAGLE", eagle), ("vanilla", vanilla)):
        if run is None:
            continue
        s = run.summary
        if s.prefill_ms > limits["prefill_ms"] + limits["prefill_ms_per_token"] * s.prompt_tokens:
            out.append(f"{kind} prefill {s.prefill_ms:.0f} ms for {s.prompt_tokens} prompt tokens is implausible")
        if len(run.cycles) >= 3:
            for part in ("draft_ms", "verify_ms"):
                first = getattr(run.cycles[0], part)
                median = sorted(getattr(c, part) for c in run.cycles)[len(run.cycles) // 2]
                if first > limits["cold"] * median + limits["cold_ms"]:
                    out.append(f"{kind}'s first cycle is cold: {part[:-3]} {first:.1f} ms against a median of "
                               f"{median:.1f} ms (warm the engine up before timing)")
    if eagle is not None and ref and eagle.summary.cycles > 0 and eagle.summary.method != "vanilla":
        rows = verified_rows(eagle)
        allowed = max(limits["verify_steps"], 1.5 * rows_cost(rows) if rows_cost else 0.0)
        verify = 1e3 * eagle.summary.verify_s / eagle.summary.cycles
        if verify > allowed * ref:
            out.append(f"verifying {rows} rows took {verify:.1f} ms a cycle, {verify / ref:.2f} vanilla steps "
                       f"(at most {allowed:.2f})")
    if eagle is not None and vanilla is not None and eagle.summary.method != "vanilla":
        if eagle.summary.settings.get("temperature", 0.0) == 0.0 and eagle.summary.token_ids != vanilla.summary.token_ids:
            out.append("greedy EAGLE and vanilla outputs differ")
        k = cycle_costs(eagle, vanilla)
        if k is not None:
            lost = "eg-lost" in verdict_html(eagle, vanilla)
            if lost != (k["speedup"] < 1.0):
                out.append(f"the verdict says {'lost' if lost else 'won'} but the speedup is {k['speedup']:.2f}x")
            lo, hi = limits["agree"]
            if k["predicted"] > 0 and not lo <= k["speedup"] / k["predicted"] <= hi:
                out.append(f"measured {k['speedup']:.2f}x does not fit the verdict's tau / c = {k['predicted']:.2f}x "
                           f"(the runs were timed under different loads)")
    return out


def speedup(eagle: Run | None, vanilla: Run | None) -> float | None:
    """EAGLE's tokens/s over vanilla's, as the page's cards show it."""
    if eagle is None or vanilla is None or vanilla.summary.tokens_per_s <= 0:
        return None
    return eagle.summary.tokens_per_s / vanilla.summary.tokens_per_s


def load_bundle(path: str) -> tuple[Run | None, Run | None, dict | None, str]:
    """(eagle, vanilla, the 'recorded' stamp or None, title) of a saved bundle."""
    with open(path, "rb") as f:
        text = f.read()
    eagle, vanilla = bundle_from_json(text)
    d = json.loads(text)
    return eagle, vanilla, d.get("recorded") if isinstance(d.get("recorded"), dict) else None, d.get("title", "")
