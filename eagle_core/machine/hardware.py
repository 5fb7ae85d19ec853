"""The hardware lesson: why the best tree size depends on the machine, measured where it runs.
The app's hardware panel, its tree advice and the Learn tab's quoted figures read it; the command
line that records it (RECORD_COMMAND) is eagle_core/bench/hardware.py.

Measures, on this machine, the target's forward time t(k) for k = 1..64 new tokens (body with the
engine's tree mask + LM head on all k rows, timing.measure_forward) and the head's time per
drafting step for the frontier widths the trees use (head layer + draft LM head + top-k,
timing.measure_head_steps). With a table of tau per tree (measured with the shipped head,
assets/learn/tau_by_tree.json) it predicts, for each tree (depth, top-k, total):

    speedup = tau / c,   c = t(total + 1) / t(1)  +  drafting / t(1)

where drafting = one step over the catch-up tokens (the accepted path, ~tau of them) plus
depth - 1 steps over top-k frontier tokens (eagle_core/drafting/drafter.py). A second curve is a GPU
*illustration*, not measured: at batch size 1 a data-centre GPU is limited by reading the weights,
not by arithmetic, so (1) a k-token forward costs about t(1) up to k = 64, and (2) a drafting
step costs what reading the head's weights costs, as a share of reading the target's: the head
layer, its fc and its draft LM head rows against the whole target (SmolLM2-135M with the shipped
head: 8.9 M of 134.5 M weights, 0.066 t(1), about two of the target's 30 layers). So there
c = 1 + depth x share. Kernel-launch and Python overheads per step are left out of both.
Per-cycle bookkeeping (masks, cache compaction, acceptance) is left out: it is under 1% of a
cycle (docs/performance.md, "The cost model").
"""
from __future__ import annotations

import json
import os
import statistics
import time

from ..config import TreeSetting, parse_tree
from .info import hardware_name, machine_info
from .timing import measure_forward, measure_head_steps

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TAU_TABLE = os.path.join(ROOT, "assets", "learn", "tau_by_tree.json")
RECORDED = os.path.join(ROOT, "assets", "learn", "hardware_recorded.json")
SPREAD = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)  # the k of the t(k)/t(1) table
CATCH_UP = (1, 2, 3, 4)  # tokens the first drafting step of a cycle processes: the accepted path
FORWARD, HEAD = "target forward, k = 1..64", "head, one drafting step per width"
# The recording (RECORDED and TAU_TABLE), written by RECORD_COMMAND: every preset (as config has it when it
# runs) among its trees; the page, the panel and the README quote it (`quoted`).
RECORD_PRESETS = ("cpu", "explain", "gpu")
RECORD_COMMAND = "python -m eagle_core.bench.hardware --record"


def tree_key(t: TreeSetting) -> str:
    return t.text


def load_tau_table(path: str = TAU_TABLE) -> dict:
    """{"trees": [TreeSetting], "tau": {tree text: tau}, ...the table's own fields (head, prompts, source)}."""
    with open(path, encoding="utf-8") as f:
        table = json.load(f)
    trees = [TreeSetting(*map(int, k.split(","))) for k in table["tau"]]
    table["trees"] = sorted(trees, key=lambda t: (t.total_tokens, t.depth))
    return table


def sizes_for(trees) -> list[int]:
    """The k to time: the spread of the table plus every tree's verification size (total + 1)."""
    return sorted(set(SPREAD) | {t.total_tokens + 1 for t in trees if t.total_tokens + 1 <= 64})


def widths_for(trees) -> list[int]:
    return sorted(set(CATCH_UP) | {t.width for t in trees})


def measure(target, head, draft_vocab, trees, ctx: int = 300, repeats: int = 3, head_repeats: int = 5,
            budget_s: float = 45.0, progress=None) -> dict:
    """Time this machine. `progress(fraction, text)` is called as the work advances.
    Rounds over all k (each visits every k; the median of the rounds is kept) stop at `repeats`,
    or earlier when another round would end past `budget_s` (a busy machine): at least one round.
    Returns {"forward_ms": {k: ms}, "step_ms": {m: ms}, "seconds", "rounds", "machine", ...}."""
    sizes, widths = sizes_for(trees), widths_for(trees)
    total = len(sizes) * repeats + len(widths)
    done = [0]

    def tick(what):
        done[0] += 1
        if progress is not None:
            progress(min(done[0] / total, 1.0), what)

    t0 = time.perf_counter()
    if progress is not None:
        progress(0.0, FORWARD)
    rounds = []
    while len(rounds) < repeats:
        r0 = time.perf_counter()
        rounds.append(measure_forward(target, ctx, sizes, 1, on_step=lambda: tick(FORWARD)))
        per_round = time.perf_counter() - r0
        if time.perf_counter() - t0 + per_round > budget_s * len(sizes) * repeats / total:
            done[0] = len(sizes) * repeats  # skip the remaining rounds' share of the bar
            break
    n_vocab = len(draft_vocab) if draft_vocab else None
    hs = measure_head_steps(target, head, ctx, widths, (n_vocab,), top_k=max(widths), repeats=head_repeats,
                            on_step=lambda: tick(HEAD))
    n_rows = n_vocab or target.lm_head_weight.shape[0]
    step = {m: hs["head_ms"][m] + hs["lm_ms"][(n_rows, m)] for m in widths}
    fwd = {k: statistics.median(r[k]["body_ms"] + r[k]["lm_head_ms"] for r in rounds) for k in sizes}
    return {"forward_ms": fwd, "step_ms": step, "seconds": time.perf_counter() - t0, "rounds": len(rounds),
            "weights": weights(target, head, n_rows),
            "machine": machine_info(target.device), "ctx": ctx, "device": str(target.device),
            "format": getattr(target, "weight_format", "float32"),
            "target": target.describe(), "draft_vocab": n_rows, "hardware": hardware_name(target.device),
            "date": time.strftime("%Y-%m-%d", time.gmtime())}


def weights(target, head, draft_rows: int) -> dict:
    """What one target forward and one drafting step read: {"target": the target's weights, "head_step":
    the head's (layer, fc) plus its draft LM head rows, "layers": the target's}. Counted, not timed (the
    GPU illustration)."""
    hidden = target.lm_head_weight.shape[1]
    return {"target": sum(p.numel() for p in target.model.parameters()),
            "head_step": sum(p.numel() for p in head.parameters()) + draft_rows * hidden,
            "layers": target.config.num_hidden_layers}


def gpu_head_share(measured: dict) -> float:
    """A drafting step's cost on a GPU as a share of t(1): the weights it reads over the target's."""
    w = measured["weights"]
    return w["head_step"] / w["target"]


def interp(table: dict, x: float) -> float:
    """Linear interpolation in a {number: value} table (clamped at its ends)."""
    xs = sorted(table)
    if x <= xs[0]:
        return table[xs[0]]
    for a, b in zip(xs, xs[1:]):
        if x <= b:
            return table[a] + (table[b] - table[a]) * (x - a) / (b - a)
    return table[xs[-1]]


def predict(forward_ms: dict, step_ms: dict, taus: dict, trees, gpu_share: float | None = None) -> list[dict]:
    """One row per tree: tau, verify and draft cost in vanilla steps, c and the predicted speedup.
    gpu_share: the GPU illustration instead: verification costs t(1) whatever the tree size, and
    each of the depth drafting steps costs gpu_share x t(1) (reading the head's weights)."""
    t1 = forward_ms[1] if 1 in forward_ms else interp(forward_ms, 1)
    rows = []
    for t in trees:
        tau = taus[tree_key(t)]
        n = t.total_tokens + 1
        if gpu_share is not None:
            verify, draft = 1.0, t.depth * gpu_share
        else:
            verify = (forward_ms[n] if n in forward_ms else interp(forward_ms, n)) / t1
            draft = (interp(step_ms, max(1.0, min(tau, 4.0))) + (t.depth - 1) * interp(step_ms, t.width)) / t1
        c = verify + draft
        rows.append({"tree": tree_key(t), "nodes": n, "tau": tau, "verify": verify, "draft": draft,
                     "c": c, "speedup": tau / c})
    return rows


def best(rows: list[dict]) -> dict:
    return max(rows, key=lambda r: r["speedup"])


def lesson(measured: dict, table: dict) -> dict:
    """The measurement and the tau table combined: both predictions and their best trees."""
    fwd = {int(k): v for k, v in measured["forward_ms"].items()}
    step = {int(k): v for k, v in measured["step_ms"].items()}
    here = predict(fwd, step, table["tau"], table["trees"])
    share = gpu_head_share(measured)
    gpu = predict(fwd, step, table["tau"], table["trees"], gpu_share=share)
    return {"here": here, "gpu": gpu, "best_here": best(here), "best_gpu": best(gpu), "gpu_share": share,
            "ratios": {k: fwd[k] / fwd[1] for k in sorted(fwd) if k in SPREAD}}


def to_json(measured: dict) -> dict:
    return {**measured, "forward_ms": {str(k): v for k, v in measured["forward_ms"].items()},
            "step_ms": {str(k): v for k, v in measured["step_ms"].items()}}


def load_recorded(path: str = RECORDED) -> dict:
    with open(path, encoding="utf-8") as f:
        m = json.load(f)
    m["forward_ms"] = {int(k): v for k, v in m["forward_ms"].items()}
    m["step_ms"] = {int(k): v for k, v in m["step_ms"].items()}
    return m


QUOTED_K = (8, 16, 64)  # the t(k)/t(1) the page quotes


def quoted(measured: dict | None = None, table: dict | None = None) -> dict[str, str]:
    """Every figure the page and the README quote from the recording, as text: machine, date, command,
    t(k)/t(1) for QUOTED_K, and per preset (cpu, explain, gpu as config has them now) its tree, tokens
    verified, tau, cost c in vanilla steps and predicted speedup here ("—" for a tree not recorded)."""
    m = measured or load_recorded()
    table = table or load_tau_table()
    res = lesson(m, table)
    rows = {r["tree"]: r for r in res["here"]}
    fwd = {int(k): v for k, v in m["forward_ms"].items()}
    q = {"machine": m.get("hardware", m.get("device", "?")), "date": m.get("date", "?"),
         "threads": str(m.get("threads", "?")), "command": m.get("command", RECORD_COMMAND),
         "tau_prompts": str(table.get("prompts", "?")), "t1_ms": f"{fwd[1]:.1f}"}
    for k in QUOTED_K:
        q[f"t{k}"] = f"{(fwd[k] if k in fwd else interp(fwd, k)) / fwd[1]:.2f}"
    for name in RECORD_PRESETS:
        tree = parse_preset(name)
        r = rows.get(tree)
        q[f"{name}_tree"], q[f"{name}_nodes"] = tree, str(int(tree.split(",")[2]) + 1)
        for field, fmt in (("tau", "{:.2f}"), ("verify", "{:.2f}"), ("c", "{:.2f}"), ("speedup", "{:.2f}")):
            q[f"{name}_{field}"] = fmt.format(r[field]) if r else "—"
    return q


def parse_preset(name: str) -> str:
    return parse_tree(name).text


# ------------------------------------------------------------------------------ weight formats (issue 54)
# The record's top level is the format the page runs (float32); `formats` holds the others, each a measure()
# of a target in that format (same head, same trees) plus the lesson's prompt decoded in it, or
# {"unavailable": why} where the format cannot run on the recording machine. A record made before this holds
# no `formats`: the lesson says "not recorded yet". Nothing here is required by the shipped-record tests.
FORMATS = ("float32", "gguf")
FORMAT_KMAX = 32  # the lesson's t(k) reach


def format_entry(measured: dict | None, fmt: str) -> dict | None:
    """Format `fmt`'s part of a record: {"forward_ms": {int: ms}, "step_ms": ..., "decode": ..., ...},
    {"unavailable": why}, or None (not recorded)."""
    if not measured:
        return None
    if measured.get("format", "float32") == fmt:
        e = measured
    else:
        e = (measured.get("formats") or {}).get(fmt)
    if not isinstance(e, dict):
        return None
    if "unavailable" in e:
        return {"unavailable": str(e["unavailable"])}
    try:
        fwd = {int(k): float(v) for k, v in e["forward_ms"].items()}
        step = {int(k): float(v) for k, v in e["step_ms"].items()}
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    if 1 not in fwd or not step:
        return None
    return {**e, "forward_ms": fwd, "step_ms": step}


def format_lessons(measured: dict | None, table: dict) -> dict:
    """{fmt: {"state": "recorded" | "missing" | "unavailable", "why", "curve": {k: ms} up to FORMAT_KMAX,
    "rows": predicted rows, "best": best row, "decode": the record's decode or None}} for every format."""
    out = {}
    for fmt in FORMATS:
        e = format_entry(measured, fmt)
        if e is None or "unavailable" in e:
            out[fmt] = {"state": "missing" if e is None else "unavailable", "why": (e or {}).get("unavailable", "")}
            continue
        rows = predict(e["forward_ms"], e["step_ms"], table["tau"], table["trees"])
        out[fmt] = {"state": "recorded", "why": "", "rows": rows, "best": best(rows), "decode": e.get("decode"),
                    "curve": {k: v for k, v in sorted(e["forward_ms"].items()) if k <= FORMAT_KMAX},
                    "target": e.get("target", "")}
    return out


def format_unavailable(target, fmt: str) -> str | None:
    """Why `target`'s model cannot run in weight format `fmt` here (None: it can). The GGUF's blocks need
    the default model's file, a CPU, the C library (not the portable path) and qblocks.c built."""
    if fmt == "float32":
        return None
    from ..target.gguf_blocks import default_gguf
    from ..target.model import DEFAULT_MODEL

    fast = getattr(target, "fast", None)
    if str(getattr(target, "device", "cpu")) != "cpu":
        return f"the GGUF blocks' kernels (qblocks.c) run on a CPU; this target is on {target.device}"
    if fast is None or not fast.calls_library:
        return "the portable path (EAGLE_PORTABLE=1) calls no C, and the GGUF blocks multiply in C (qblocks.c)"
    if getattr(target, "name", "") != DEFAULT_MODEL:
        return f"the format reads the default model's GGUF file; {getattr(target, 'name', '?')} has none"
    if default_gguf() is None:
        return "the default model's GGUF file is not on this machine"
    from ..cpu.quant_linear import require_kernels  # the format's own check, inside the seam (eagle_core/cpu)

    try:
        require_kernels()
    except ValueError as e:  # no compiler, or the build failed: float32 only
        return str(e)
    return None


def load_in_format(target, fmt: str):
    """The same model loaded again with its products in weight format `fmt` (its other fast-path options kept)."""
    from dataclasses import replace

    from ..target import load_target

    return load_target(target.name, device=str(target.device), fast=replace(target.fast, weights=fmt))


def decode_rates(engine, prompt: str, settings, warm_tokens: int = 16) -> dict:
    """`prompt` decoded by vanilla and by settings' method (after an untimed short run of each): tokens/s,
    tau and token ids per method, so two formats' runs of one prompt can be set side by side."""
    out = {"prompt": prompt, "method": settings.method, "max_new_tokens": settings.max_new_tokens,
           "tree": f"{settings.depth},{settings.tree_top_k},{settings.total_tokens}"}
    for method in ("vanilla", settings.method):
        s = settings.with_(method=method)
        engine.run(prompt, s.with_(max_new_tokens=min(warm_tokens, s.max_new_tokens)))
        run = engine.run(prompt, s).summary
        out[method] = {"tokens_per_s": run.tokens_per_s, "tau": run.tau, "new_tokens": run.new_tokens,
                       "token_ids": list(run.token_ids)}
    return out


def measure_format(engine, fmt: str, trees, prompt: str | None = None, settings=None, repeats: int = 3,
                   progress=None) -> dict:
    """The record's entry for format `fmt`: measure() of the engine's model loaded in `fmt`, with the same
    head, and (given a prompt) decode_rates in it; {"unavailable": why} where the format cannot run here."""
    from ..engine_loading import load_engine

    why = format_unavailable(engine.target, fmt)
    if why:
        return {"unavailable": why}
    target = load_in_format(engine.target, fmt)
    m = measure(target, engine.drafter.head, engine.draft_vocab, trees, repeats=repeats, progress=progress)
    if prompt is not None and settings is not None:
        other = load_engine(target, methods=(settings.method,))
        m["decode"] = decode_rates(other, prompt, settings)
    return to_json(m)


def with_formats(measured: dict, entries: dict) -> dict:
    """The record with `entries` ({fmt: measure_format(...)}) under "formats"; the page's own format stays on top."""
    return {**measured, "formats": {**(measured.get("formats") or {}), **entries}}


def record_formats(engine, path: str, trees, prompt: str, settings, log=print) -> dict:
    """Into the record at `path` (RECORD_COMMAND's file): `prompt` decoded in the page's own format (the
    engine's) and every other format's entry (measure_format: its t(k), head steps and the same decode).
    Written in place -> the record. The recorder (scripts/record_traces.py --records) calls this."""
    from ..config import DecodeSettings

    settings = DecodeSettings(**settings) if isinstance(settings, dict) else settings
    with open(path, encoding="utf-8") as f:
        m = json.load(f)
    own = m.setdefault("format", getattr(engine.target, "weight_format", "float32"))
    log(f"the lesson's prompt decoded in {own}")
    m["decode"] = decode_rates(engine, prompt, settings)
    entries = {}
    for fmt in (f for f in FORMATS if f != own):
        log(f"timing the machine in the {fmt} weight format")
        entries[fmt] = measure_format(engine, fmt, trees, prompt, settings, repeats=5,
                                      progress=lambda f, what: log(f"  {100 * f:3.0f}%  {what}"))
        log(f"{fmt}: " + entries[fmt].get("unavailable", "recorded"))
    m = with_formats(m, entries)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(m, f, indent=1)
    return m
