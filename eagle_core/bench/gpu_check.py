"""The acceptance check for a machine with a GPU: one command, under ten minutes, a markdown report.

    python -m eagle_core.bench.gpu_check                    # on a CUDA machine: writes gpu_check.md
    python -m eagle_core.bench.gpu_check --short --out F    # a seconds-long run on any machine (CI runs it on a CPU)

It answers what nobody has measured on a GPU for this project yet:
  1. greedy identity per dtype (float32, bfloat16 where native, float16): EAGLE-2 against vanilla
     on the shipped example prompts (none of them in the heads' training data), and where outputs
     part, whether at a near-tie (eagle_core.divergence);
  2. tau and speedup over vanilla for EAGLE-2 and EAGLE-3 on the `gpu` and `cpu` trees;
  3. what a verification costs: t(k)/t(1), one forward of k new tokens against one token;
  4. the app's start-up: seconds from `import app` to a loaded model.
Every figure in the report is measured by this run, on the machine named at its top. The report is
rewritten as each part finishes, so a run that stops keeps what it measured (and says where it stopped);
an NVIDIA GPU that torch cannot use is named at the top (eagle_core.target.gpu_presence).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import torch

from ..config import PRESETS, DecodeSettings
from ..engine_loading import load_engine
from ..machine.info import machine_info
from ..target.gpu_presence import cached_mismatch
from ..divergence import first_parting
from ..target import native_bf16, pick_device
from .forward_costs import time_forward

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FULL = dict(prompts=6, new_tokens=128, rows=(1, 2, 4, 8, 16, 24, 32, 48, 64), repeats=5)
SHORT = dict(prompts=1, new_tokens=8, rows=(1, 2, 4), repeats=1)


def example_prompts(n: int) -> list[str]:
    with open(os.path.join(ROOT, "assets", "examples.json"), encoding="utf-8") as f:
        return [p["prompt"] for p in json.load(f)["prompts"]][:n]


def dtypes_for(device: str, short: bool) -> list[str]:
    if not device.startswith("cuda"):
        return ["float32", "bfloat16"] if short else ["float32", "bfloat16", "float16"]
    return ["float32"] + (["bfloat16"] if native_bf16(device) else []) + ["float16"]


def identity(engine, prompts, new_tokens: int) -> dict:
    """Greedy EAGLE-2 (gpu tree) against vanilla: identical count and every parting."""
    tree = PRESETS["gpu"]
    same, parts = 0, []
    for prompt in prompts:
        ids = engine.check(prompt, DecodeSettings(method="vanilla", max_new_tokens=new_tokens))
        van = engine.run(prompt, DecodeSettings(method="vanilla", max_new_tokens=new_tokens)).summary.token_ids
        eag = engine.run(prompt, DecodeSettings(method="eagle2", max_new_tokens=new_tokens, **tree)).summary.token_ids
        p = first_parting(engine.target, ids, van, eag)
        same += p is None
        if p is not None:
            parts.append(p.to_dict())
    return {"identical": same, "prompts": len(prompts), "partings": parts}


def speed(engine, prompts, new_tokens: int) -> dict:
    """tokens/s, tau and speedup for vanilla, EAGLE-2 and EAGLE-3 on the gpu and cpu trees (one
    untimed run first, then each prompt once per method, the methods interleaved)."""
    methods = {"vanilla": dict(method="vanilla")}
    for tree in ("gpu", "cpu"):
        methods[f"eagle2 {tree}"] = dict(method="eagle2", **PRESETS[tree])
        if engine.drafter3 is not None:
            methods[f"eagle3 {tree}"] = dict(method="eagle3", **PRESETS[tree])
    engine.run(prompts[0], DecodeSettings(max_new_tokens=4, **methods["eagle2 gpu"]))
    tok = {m: 0 for m in methods}
    wall = {m: 0.0 for m in methods}
    taus = {m: [] for m in methods}
    for prompt in prompts:
        for m, kw in methods.items():
            r = engine.run(prompt, DecodeSettings(max_new_tokens=new_tokens, **kw)).summary
            tok[m] += r.new_tokens
            wall[m] += r.wall_s
            taus[m].append(r.tau)
    rate = {m: tok[m] / wall[m] if wall[m] else 0.0 for m in methods}
    return {m: {"tokens_per_s": rate[m], "speedup": rate[m] / rate["vanilla"] if rate["vanilla"] else 0.0,
                "tau": sum(taus[m]) / len(taus[m])} for m in methods}


def app_startup_s(timeout: int = 600) -> float:
    """Seconds from a fresh interpreter's `import app` to the model being ready."""
    code = ("import time; t0 = time.perf_counter(); import app; app.MODEL.start(); app.MODEL.ready.wait(); "
            "assert app.MODEL.engine is not None, app.MODEL.error; print(time.perf_counter() - t0)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"the app did not start: {out.stderr.strip().splitlines()[-1:]}")
    return float(out.stdout.strip().splitlines()[-1])


def run(short: bool = False, device: str | None = None, on_part=None) -> dict:
    """The check's measurements; `on_part(result so far)` is called as each part finishes, so that
    a run that fails later keeps what it measured (main writes the report there)."""
    cfg = SHORT if short else FULL
    device = pick_device(device)
    prompts = example_prompts(cfg["prompts"])
    t0 = time.perf_counter()
    out = {"machine": machine_info(device), "short": short, "identity": {}, "speed": None, "t_k": None,
           "gpu_unused": cached_mismatch() if device == "cpu" else None}

    def done():
        out["total_s"] = time.perf_counter() - t0
        if on_part is not None:
            on_part(out)

    done()
    for dtype in dtypes_for(device, short):
        engine = load_engine(None, device=device, methods=("vanilla", "eagle2"), dtype=dtype)
        out["identity"][dtype] = identity(engine, prompts, cfg["new_tokens"])
        done()
        if dtype == "float32":  # the precision the app runs a small target in, on a GPU too
            out["t_k"] = {k: 1e3 * t for k, t in time_forward(engine.target, cfg["rows"], repeats=cfg["repeats"]).items()}
            done()
        del engine
    engine = load_engine(None, device=device, methods=("vanilla", "eagle2", "eagle3"))
    out["speed"] = speed(engine, prompts, cfg["new_tokens"])
    done()
    out["app_startup_s"] = app_startup_s()
    done()
    return out


def markdown(r: dict) -> str:
    """The report; a part not measured (yet) is left out, and a run that stopped says where."""
    m = r["machine"]
    lines = [f"# GPU check{' (short)' if r['short'] else ''}", "",
             f"Machine: {m.get('gpu', 'no GPU')} · device {m['device']} · CPU {m['cpu']} · torch {m['torch']} · "
             f"took {r.get('total_s', 0):.0f} s. Every figure below was measured by this run.", ""]
    if r.get("gpu_unused"):
        lines += [f"**GPU not used:** {r['gpu_unused']}", ""]
    if r.get("error"):
        lines += [f"**The run stopped:** {r['error']}. The parts below finished before it.", ""]
    if r["identity"]:
        lines += ["## Greedy EAGLE-2 (gpu tree) against vanilla, per dtype", "",
                  "| dtype | identical | partings (position: margin / tolerance, near-tie?) |", "|---|---|---|"]
    for dt, v in r["identity"].items():
        parts = "; ".join(f"{p['position']}: {abs(p['margin']):.3g} / {p['tolerance']:.3g}, "
                          f"{'near-tie' if p['near_tie'] else 'CLEAR WINNER (a bug)'}" for p in v["partings"]) or "-"
        lines.append(f"| {dt} | {v['identical']} / {v['prompts']} | {parts} |")
    if r["speed"]:
        lines += ["", "## Speed (default dtype)", "", "| method, tree | tokens/s | speedup | tau |", "|---|---|---|---|"]
        lines += [f"| {k} | {v['tokens_per_s']:.1f} | {v['speedup']:.2f}x | {v['tau']:.2f} |" for k, v in r["speed"].items()]
    if r["t_k"]:
        one = r["t_k"][1]
        lines += ["", "## One forward of k new tokens (float32, ms)", "", "| k | ms | t(k)/t(1) |", "|---|---|---|"]
        lines += [f"| {k} | {ms:.2f} | {ms / one:.2f} |" for k, ms in r["t_k"].items()]
    if "app_startup_s" in r:
        lines += ["", f"App start-up (import to model ready): {r['app_startup_s']:.1f} s"]
    return "\n".join(lines + [""])


def write_report(r: dict, out: str) -> None:
    """The markdown report at `out` and its numbers in a .json beside it (rewritten as each part finishes)."""
    with open(out, "w", encoding="utf-8") as f:
        f.write(markdown(r))
    with open(os.path.splitext(out)[0] + ".json", "w", encoding="utf-8") as f:
        json.dump(r, f, indent=1, default=str)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="The GPU acceptance check (see the module docstring).")
    ap.add_argument("--short", action="store_true", help="1 prompt, 8 tokens, k up to 4: seconds, any machine")
    ap.add_argument("--device", default=None)
    ap.add_argument("--out", default="gpu_check.md", help="markdown report (a .json beside it holds the numbers)")
    a = ap.parse_args(argv)
    so_far: dict = {}

    def save(r):
        so_far["r"] = r
        write_report(r, a.out)

    try:
        r = run(a.short, a.device, on_part=save)
    except BaseException as e:
        if "r" in so_far:  # keep what finished, and say where it stopped
            so_far["r"]["error"] = f"{type(e).__name__}: {e}"
            write_report(so_far["r"], a.out)
            print(f"gpu_check stopped ({type(e).__name__}: {e}); the finished parts are in {a.out}", file=sys.stderr)
        raise
    print(markdown(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
