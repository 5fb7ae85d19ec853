"""The default tree for this machine and weight format, chosen once at start-up and cached.

The `cpu` preset (4,2,7) won on one CPU in one format (docs/performance.md, "The default tree, chosen on the
full MT-bench"); where the target's forward t(k) grows faster with k (another CPU, or the GGUF's blocks, which
turn the CPU compute-bound) a smaller tree pays more. So the page and the command line ask `choose_tree`,
which predicts each candidate's speedup with hardware.predict (the cost model the hardware panel uses):

    speedup(tree) = tau(tree) / c(tree),   c in vanilla steps

tau from the shipped head's record (TAU_TABLE, measured offline; it does not depend on the machine), c from a
short measurement here: t(k) for the candidates' row counts, the minimum over interleaved rounds after a
warm-up round (the least-disturbed round is the machine's own speed), and one drafting step per width
(timing.measure_head_steps). The result is cached as JSON per CPU model, threads, weight format, head record and
kernel sources (`cache_key`), so only the first start measures.

The preset stays, and the line says why, where no trustworthy measurement is possible: a GPU, the portable
path, a head the tau record was not measured with, other processes busy while it measured, or
EAGLE_FIXED_TREE=1 (reproducible runs and tests). An explicit tree (--tree, the page's sliders) always wins:
callers ask only when none was given.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass, field

import torch

from ..config import TreeSetting, default_preset, parse_tree
from ..environment import cache_root, flag
from .hardware import TAU_TABLE, load_tau_table, predict
from .quiet import MAX_OTHERS, cpu_times
from .timing import ForwardTiming, measure_head_steps

ENV = "EAGLE_FIXED_TREE"  # on: the device's preset, no measurement
VERSION = 1  # of the cache's contents; a change re-measures
MAX_DRAFTS = 12  # candidates: the recorded trees of at most 12 drafts (13 rows), trees a person can read on the page
MARGIN = 1.03  # another tree replaces the preset only when predicted this much faster: noise does not flip it
ROUNDS = 5  # timed rounds over all row counts, after one warm-up round
BUDGET_S = 8.0  # the timed rounds stop past this (at least one runs): a slow machine's start-up stays short
CONTEXT = 256  # committed tokens in the cache while timing (a prompt plus some of its answer)
HEAD_REPEATS = 5
MONOTONE = 0.8  # more rows taking under this share of fewer rows' time is noise, not the machine


@dataclass(frozen=True)
class TreeChoice:
    """The default tree and why. `chosen`: from a measurement here (or its cache); else the preset, `reason` why."""

    tree: TreeSetting
    preset: str  # the device's preset ("cpu", "gpu")
    chosen: bool = False
    reason: str = ""
    weights: str = "float32"
    # the reason as a key and its values, for a page that says it in another language (eagle_app/tree_advice.py)
    why: str = ""
    why_args: dict = field(default_factory=dict)
    predicted: float | None = None  # the tree's predicted speedup over vanilla
    preset_predicted: float | None = None  # the preset's, from the same measurement
    t1_ms: float | None = None
    ratios: dict = field(default_factory=dict)  # {k: t(k) / t(1)} for the measured row counts
    rows: list = field(default_factory=list)  # hardware.predict's rows, one per candidate
    cached: bool = False
    seconds: float = 0.0  # the measurement's wall time (0 from the cache)

    def line(self) -> str:
        """One line for a person: the CLI prints it on stderr; the page says the same in its language."""
        if not self.chosen:
            return f"Tree: {self.tree.text}, the {self.preset} preset ({self.reason})."
        curve = ", ".join(f"t({k})/t(1) {r:.2f}" for k, r in sorted(self.ratios.items()) if k > 1)
        when = "cached" if self.cached else f"measured in {self.seconds:.1f} s"
        return (f"Tree: {self.tree.text} chosen for this machine ({self.weights} weights): predicted "
                f"{self.predicted:.2f}x vanilla, the {self.preset} preset {self.preset_predicted:.2f}x; t(1) "
                f"{self.t1_ms:.1f} ms, {curve} ({when}; {ENV}=1 keeps the preset).")


def preset_choice(device, reason: str, weights: str = "float32", why: str = "", why_args: dict | None = None) -> TreeChoice:
    name = default_preset(device)
    return TreeChoice(parse_tree(name), name, reason=reason, weights=weights, why=why, why_args=why_args or {})


def candidates(table: dict, max_drafts: int = MAX_DRAFTS) -> list[TreeSetting]:
    """The recorded trees (tau known) of at most `max_drafts` drafts, smallest first."""
    return [t for t in table["trees"] if t.total_tokens <= max_drafts]


def pick(rows: list[dict], preset: str, margin: float = MARGIN) -> dict:
    """The row to open with: the fastest predicted, unless the preset's is within `margin` of it."""
    best = max(rows, key=lambda r: r["speedup"])
    own = next((r for r in rows if r["tree"] == preset), None)
    return own if own is not None and best["speedup"] <= margin * own["speedup"] else best


# ---- the cache ------------------------------------------------------------------------------------
def kernels_digest() -> str:
    """The C kernels' sources and flags: new kernels time differently, so they measure again."""
    from ..cpu.kernels import build

    return hashlib.sha256(build.source_bytes() + " ".join(build.CFLAGS).encode()).hexdigest()[:16]


def cache_key(target, table: dict, threads: int | None = None) -> dict:
    from ..cpu.kernels import cpu_model

    tau = json.dumps({"head": table.get("head"), "draft_vocab": table.get("draft_vocab"), "tau": table["tau"]},
                     sort_keys=True)
    return {"version": VERSION, "cpu": cpu_model(), "threads": threads or torch.get_num_threads(),
            "weights": getattr(target, "weight_format", "float32"), "target": str(target.name),
            "head": table.get("head"), "tau": hashlib.sha256(tau.encode()).hexdigest()[:16],
            "kernels": kernels_digest(), "blocking": _blocking(target)}


def _blocking(target) -> str:
    """The float32 products' blocking in use (ftuning.py: by hand through EAGLE_F32_TUNING, it times
    differently from the measured one); "" where it does not apply."""
    on_cpu = str(getattr(target, "device", "cpu")).startswith("cpu")
    if getattr(target, "weight_format", "float32") != "float32" or not on_cpu:
        return ""
    try:
        from ..cpu.kernels.ftuning import in_use

        return in_use()
    except (ImportError, OSError, AttributeError):
        return ""


def cache_path(key: dict, root: str | None = None) -> str:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return os.path.join(root or os.path.join(cache_root(), "tree_choice"), f"tree-{digest}.json")


def load_cached(key: dict, root: str | None = None) -> TreeChoice | None:
    try:
        with open(cache_path(key, root), encoding="utf-8") as f:
            d = json.load(f)
        if d.get("key") != key:
            return None
        c = d["choice"]
        return TreeChoice(**{**c, "tree": parse_tree(c["tree"]), "ratios": {int(k): v for k, v in c["ratios"].items()},
                             "cached": True, "seconds": 0.0})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store(key: dict, choice: TreeChoice, root: str | None = None) -> None:
    """Written to a temporary file and renamed, so a reader never sees half a file; a failure only costs a
    measurement at the next start."""
    path = cache_path(key, root)
    c = {**asdict(choice), "tree": choice.tree.text, "ratios": {str(k): v for k, v in choice.ratios.items()}}
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"key": key, "choice": c, "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime())}, f, indent=1)
        os.replace(tmp, path)
    except OSError:
        pass


# ---- the measurement ------------------------------------------------------------------------------
def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system  # this process, all its threads


def others_share(before: tuple, after: tuple) -> float | None:
    """Share of all CPUs other processes used between two (jiffies busy, jiffies total, own CPU s) samples."""
    if before[0] is None or after[0] is None or after[0][1] <= before[0][1]:
        return None
    tick = os.sysconf("SC_CLK_TCK")
    busy = (after[0][0] - before[0][0]) / tick - (after[1] - before[1])
    return max(0.0, busy / ((after[0][1] - before[0][1]) / tick))


@torch.inference_mode()
def forward_curve(target, sizes, rounds: int = ROUNDS, ctx: int = CONTEXT, stop=None) -> dict[int, float] | None:
    """{k: ms}: the target's forward of k new tokens (a binary tree under the engine's mask, LM head on all k
    rows), the minimum over `rounds` rounds that each visit every k, after one untimed warm-up round.
    `stop(r)`, called before round r (0: the warm-up, after the cache's prefill): "abandon" returns None, "end"
    ends the rounds (heeded from round 2 on: one timed round at least)."""
    timing = ForwardTiming(target, ctx, seed=0, low=min(100, target.vocab_size // 2))
    best = {k: float("inf") for k in sizes}
    for r in range(rounds + 1):
        verdict = stop(r) if stop is not None else ""
        if verdict == "abandon":
            return None
        if verdict == "end" and r > 1:
            break
        for k in sizes:
            body, lm = timing.tree_step(k)
            if r:
                best[k] = min(best[k], 1e3 * (body + lm))
    return best


def measure_here(engine, trees, budget_s: float = BUDGET_S) -> dict:
    """{"forward_ms", "step_ms", "seconds", "others"}: t(k) for 1 and every tree's rows, one drafting step per
    width (head layer + draft LM head + top-k, as hardware.measure), and the others' share of the CPUs meanwhile.
    Other processes busy during the warm-up round: {"others", "seconds"} only, at once."""
    from .hardware import widths_for

    target, head, vocab = engine.target, engine.drafter.head, engine.draft_vocab
    sizes = sorted({1} | {t.total_tokens + 1 for t in trees})
    widths = widths_for(trees)
    t0, before = time.perf_counter(), (cpu_times(), _own_cpu_s())

    def stop(r):  # busy in the prefill or the warm-up: give up at once (the preset); slow: end at the budget
        share = others_share(before, (cpu_times(), _own_cpu_s()))
        if r <= 1 and share is not None and share > MAX_OTHERS:
            return "abandon"
        return "end" if time.perf_counter() - t0 > budget_s else ""

    fwd = forward_curve(target, sizes, stop=stop)
    if fwd is None:
        return {"others": others_share(before, (cpu_times(), _own_cpu_s())), "seconds": time.perf_counter() - t0}
    n_vocab = len(vocab) if vocab else None
    hs = measure_head_steps(target, head, CONTEXT, widths, (n_vocab,), top_k=max(widths), repeats=HEAD_REPEATS)
    n_rows = n_vocab or target.lm_head_weight.shape[0]
    step = {m: hs["head_ms"][m] + hs["lm_ms"][(n_rows, m)] for m in widths}
    after = (cpu_times(), _own_cpu_s())
    return {"forward_ms": fwd, "step_ms": step, "seconds": time.perf_counter() - t0,
            "others": others_share(before, after)}


# ---- the choice -----------------------------------------------------------------------------------
def decide(measured: dict, table: dict, trees, preset: str, weights: str) -> TreeChoice:
    """The choice from a measurement ({"forward_ms", "step_ms", "seconds"}) and the tau record."""
    rows = predict(measured["forward_ms"], measured["step_ms"], table["tau"], trees)
    row = pick(rows, parse_tree(preset).text)
    own = next((r for r in rows if r["tree"] == parse_tree(preset).text), None)
    fwd = measured["forward_ms"]
    return TreeChoice(parse_tree(row["tree"]), preset, chosen=True, weights=weights, predicted=round(row["speedup"], 3),
                      preset_predicted=round(own["speedup"], 3) if own else None, t1_ms=round(fwd[1], 2),
                      ratios={k: round(v / fwd[1], 3) for k, v in sorted(fwd.items())},
                      rows=[{k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()} for r in rows],
                      seconds=round(measured.get("seconds", 0.0), 2))


def _refusal(engine, table: dict, env) -> tuple[str, str, dict]:
    """Why this engine cannot have its tree chosen here: (words, key, values), or ("", "", {}) if it can."""
    target = engine.target
    if flag(ENV, env):
        return f"{ENV}=1", "fixed_env", {"env": ENV}
    if not str(target.device).startswith("cpu"):
        return f"not a CPU ({target.device}): the device's preset, not measured", "not_cpu", {"device": str(target.device)}
    if not target.fast.calls_library:
        return "the portable path: no kernels, t(k) not measured for a choice", "portable", {}
    if engine.drafter is not None:
        vocab = len(engine.draft_vocab) if engine.draft_vocab else "full"
        if engine.head_name != table.get("head") or vocab != table.get("draft_vocab"):
            return (f"tau is recorded for the shipped head ({table.get('head')}), not {engine.head_name}", "other_head",
                    {"shipped": table.get("head"), "head": engine.head_name})
    return "", "", {}


def choose_tree(engine, table: dict | None = None, cache_dir: str | None = None, env=None,
                measure=measure_here) -> TreeChoice:
    """The tree to open with on this machine and weight format: from the cache, else measured (a few seconds)
    and cached; the preset where a choice is not possible or not trustworthy (TreeChoice.reason says why).
    `measure(engine, trees)` is measure_here (tests pass a hand-built one)."""
    target = engine.target
    weights = getattr(target, "weight_format", "float32")
    preset = default_preset(target.device)
    table = table or load_tau_table(TAU_TABLE)
    why, key, args = _refusal(engine, table, env)
    if why:
        return preset_choice(target.device, why, weights, key, args)
    key = cache_key(target, table)
    hit = load_cached(key, cache_dir)
    if hit is not None:
        return hit
    if engine.drafter is None:
        return preset_choice(target.device, "no choice cached for this machine yet; a run with the EAGLE-2 head "
                             "measures it", weights, "no_head")
    trees = candidates(table)
    try:
        m = measure(engine, trees)
    except (RuntimeError, ValueError, OSError) as e:  # a start-up never fails for want of a measurement
        return preset_choice(target.device, f"t(k) could not be measured: {type(e).__name__}: {e}", weights, "failed",
                             {"error": f"{type(e).__name__}: {e}"})
    others = m.get("others")
    if "forward_ms" not in m or (others is not None and others > MAX_OTHERS):
        used = f"{others:.0%}" if others is not None else "too much"
        return preset_choice(target.device, f"other processes used {used} of the CPUs while t(k) was measured (at "
                             f"most {MAX_OTHERS:.0%}); the next start measures again", weights, "busy",
                             {"used": used, "limit": f"{MAX_OTHERS:.0%}"})
    ks = sorted(m["forward_ms"])
    bumps = [(a, b) for a in ks for b in ks if a < b and m["forward_ms"][b] < MONOTONE * m["forward_ms"][a]]
    if bumps:
        a, b = bumps[0]
        return preset_choice(target.device, f"the measured t(k) is noise, not a curve: t({b}) "
                             f"{m['forward_ms'][b]:.1f} ms under t({a}) {m['forward_ms'][a]:.1f} ms; the next start "
                             "measures again", weights, "noise",
                             {"a": a, "b": b, "ta": f"{m['forward_ms'][a]:.1f}", "tb": f"{m['forward_ms'][b]:.1f}"})
    choice = decide(m, table, trees, preset, weights)
    store(key, choice, cache_dir)
    return choice
