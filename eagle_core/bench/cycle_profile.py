"""Where one EAGLE cycle's time goes: cProfile over the engine's cycles, grouped into buckets.

Buckets are inclusive times of the engine's own functions (found by code object, so a renamed
or removed function shows as missing instead of breaking the report), minus the listed
children, so they do not overlap. cProfile adds a few microseconds per Python call, which
inflates the Python-heavy buckets; the report gives the unprofiled cycle time next to it.
"""
from __future__ import annotations

import cProfile
import inspect
import pstats
import time


def _key(fn):
    if fn is None:
        return None
    c = inspect.unwrap(fn).__code__
    return (c.co_filename, c.co_firstlineno, c.co_name)


def _engine_functions() -> dict:
    from .. import decode, target, tree
    from ..cpu import fused_pass, head_pass
    from ..drafting import drafter as draft, head

    g = lambda obj, name: getattr(obj, name, None)  # noqa: E731  (tolerate engine refactors)
    return {
        "Target.forward": g(target.Target, "forward"), "Target.logits": g(target.Target, "logits"),
        "EagleHead.forward": g(head.EagleHead, "forward"), "HeadPass.__call__": g(head_pass.HeadPass, "__call__"),
        "FusedPass.run": g(fused_pass.FusedPass, "run"), "FusedPass.top": g(fused_pass.FusedPass, "top"),
        "Drafter._logits": g(draft.Drafter, "_logits"), "Drafter._expand_top": g(draft.Drafter, "_expand_top"),
        "Drafter._run": g(draft.Drafter, "_run"), "Drafter._expand": g(draft.Drafter, "_expand"),
        "Drafter.catch_up": g(draft.Drafter, "catch_up"), "Drafter.draft": g(draft.Drafter, "draft"),
        "tree_attention_mask": g(tree, "tree_attention_mask"), "tree_positions": g(tree, "tree_positions"),
        "compact_cache": g(decode, "compact_cache"), "Generation._accept": g(decode.Generation, "_accept"),
        "Generation._record": g(decode.Generation, "_record"), "TextStream.push": g(decode.TextStream, "push"),
    }


def _breakdown(stats: pstats.Stats, total_s: float) -> tuple[list[tuple[str, float]], list[str], list[str]]:
    """[(bucket, seconds)] over the profiled cycles, the names of functions not found, and of those
    not called."""
    fns = _engine_functions()
    keys = {n: _key(f) for n, f in fns.items()}
    st = stats.stats  # {key: (cc, nc, tt, ct, callers)}
    # missing: renamed or removed (its bucket reads 0); idle: not called in these cycles (the fused
    # kernel pass on a CPU stands in for the head pass and the modules, a device or setting for others)
    missing = [n for n, k in keys.items() if k is None]
    idle = [n for n, k in keys.items() if k is not None and k not in st]

    def ct(name):
        k = keys[name]
        return st[k][3] if k in st else 0.0

    def ct_from(callee, caller):
        """Inclusive time of `callee` when called directly by `caller`."""
        k, kc = keys[callee], keys[caller]
        if k not in st or kc not in st[k][4]:
            return 0.0
        return st[k][4][kc][3]

    # the head's layer: the fused kernel pass on a CPU (it also takes the expanded nodes' top k),
    # else the head pass where it applies, else the modules
    torch_layer = ct("EagleHead.forward") + ct("HeadPass.__call__")
    head_layer, draft_lm = torch_layer + ct("FusedPass.run"), ct("Drafter._logits") + ct("FusedPass.top")
    head_inputs = ct("Drafter._run") - torch_layer
    draft_mask = (ct("Drafter._expand") - ct_from("Drafter._run", "Drafter._expand")
                  + ct("Drafter._expand_top") - ct_from("FusedPass.run", "Drafter._expand_top")
                  - ct_from("Drafter._expand", "Drafter._expand_top"))
    drafting = ct("Drafter.catch_up") + ct("Drafter.draft")
    # Target.logits is wrapped by torch.inference_mode, so its direct caller is the wrapper; every
    # LM-head call inside a profiled cycle comes from _accept (the prefill is not profiled).
    accept_lm = ct("Target.logits")
    rows = [
        ("draft: head layer (FusedPass.run, HeadPass.__call__ or EagleHead.forward)", head_layer),
        ("draft: draft LM head + top k (FusedPass.top or Drafter._logits)", draft_lm),
        ("draft: head inputs (embedding, concat)", head_inputs),
        ("draft: head attention masks (_expand)", draft_mask),
        ("draft: tree search bookkeeping (top-k, scores, select)",
         drafting - head_layer - draft_lm - head_inputs - draft_mask),
        ("verify: tree mask + positions", ct("tree_attention_mask") + ct("tree_positions")),
        ("verify: target body", ct("Target.forward")),
        ("verify: target LM head", ct("Target.logits")),
        ("verify: acceptance walk (excl. LM head)", ct("Generation._accept") - accept_lm),
        ("update: KV cache compaction", ct("compact_cache")),
        ("trace: cycle record + text delta", ct("Generation._record") + ct("TextStream.push")),
    ]
    rows.append(("other (loop, tensors, stop checks)", total_s - sum(v for _, v in rows)))
    return rows, missing, idle


def profile_cycles(engine, prompt: str, settings, top: int = 12) -> dict:
    """Run one generation; profile every cycle after the first (the first includes the prefill).

    Returns {"cycles", "cycle_ms" (profiled), "cycle_ms_unprofiled", "buckets": [(name, ms per cycle)],
    "missing": [names not in the engine], "idle": [names not called],
    "top_functions": [(name, self ms per cycle, calls per cycle)]}.
    """
    # an unprofiled run of the same generation for the true cycle time
    run = engine.run(prompt, settings)
    n_cyc = max(run.summary.cycles, 1)
    plain_ms = (run.summary.wall_s * 1e3 - run.summary.prefill_ms) / n_cyc

    gen = engine.generate(prompt, settings)
    it = iter(gen)
    next(it)  # prefill + first cycle, not profiled
    prof = cProfile.Profile()
    cycles, total = 0, 0.0
    while True:
        t0 = time.perf_counter()
        prof.enable()
        try:
            next(it)
        except StopIteration:
            prof.disable()
            break
        prof.disable()
        total += time.perf_counter() - t0
        cycles += 1
    if cycles == 0:
        raise ValueError("the generation ended after one cycle; ask for more new tokens")
    stats = pstats.Stats(prof)
    rows, missing, idle = _breakdown(stats, total)
    per = 1e3 / cycles
    funcs = sorted(stats.stats.items(), key=lambda kv: -kv[1][2])[:top]
    return {
        "cycles": cycles, "tau": gen.run.summary.tau if gen.run else None,
        "cycle_ms": total * per, "cycle_ms_unprofiled": plain_ms,
        "buckets": [(name, v * per) for name, v in rows], "missing": missing, "idle": idle,
        "top_functions": [(f"{k[2]} ({k[0].rsplit('/', 1)[-1]}:{k[1]})", v[2] * per, v[1] / cycles) for k, v in funcs],
    }


def profile_markdown(p: dict) -> str:
    lines = [f"{p['cycles']} cycles profiled: {p['cycle_ms']:.1f} ms per cycle under cProfile, "
             f"{p['cycle_ms_unprofiled']:.1f} ms without it.", "",
             "| where | ms / cycle | share |", "|---|---|---|"]
    for name, ms in p["buckets"]:
        lines.append(f"| {name} | {ms:.2f} | {ms / p['cycle_ms']:.0%} |")
    if p["missing"]:
        lines += ["", f"Not found in the engine (bucket reads 0): {', '.join(p['missing'])}."]
    if p.get("idle"):
        lines += ["", f"Not called in these cycles (another path served them): {', '.join(p['idle'])}."]
    lines += ["", "Top functions by self time (torch ops appear as builtins):", "",
              "| function | self ms / cycle | calls / cycle |", "|---|---|---|"]
    for name, ms, calls in p["top_functions"]:
        lines.append(f"| `{name}` | {ms:.2f} | {calls:.1f} |")
    return "\n".join(lines)
