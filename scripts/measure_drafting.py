"""What drafting costs per cycle on the CPU tree, as a share of a vanilla step, for several ways of
running the draft head: one MT-bench prompt per category, vanilla once, then EAGLE-2 with each
variant twice, interleaved; every EAGLE run must equal vanilla token for token. Run on a quiet
machine (docs/data/journal/performance-2026-12.md, "Issue 30's cycle bounds").

    python scripts/measure_drafting.py --json-out docs/data/bench/cycle_draft_lean_zen4.json

Variants (--variants, default lean,modules,modules-sdpa):
  lean          the engine as shipped: the head's lean pass (eagle_core/cpu/head_pass.py), each layer
                one kernels/layer.c call
  lean-torch-ops  the lean pass through its torch operations (EAGLE_C_LAYERS=0, the head's part)
  modules       the head's modules (their attention through the engine's kernel)
  modules-sdpa  the head's modules with torch's SDPA attention (the engine before the lean pass)
  bf16-lm-head  the lean pass with a bfloat16 draft LM head through oneDNN (an experiment)
  f16-lm-head   the lean pass with the draft LM head's rows rounded to float16, read as float16
                by smallgemm (half the bytes; the draft's numbers move by float16 rounding); the
                engine's default for a reduced draft vocabulary from 2026-12-04 to 2026-12-06, when
                int8 rows (kernels/gemv8.c) replaced it
  f32-lm-head   the draft LM head's rows as the target's float32 values (the default before)
  f16-head      the lean pass with the head's own products from their float16 values (the draft LM
                head's rows int8): the default before 2026-12-06, when int8 head weights replaced it
  unfused       the lean pass with the draft LM head and its top k as separate calls
                (EAGLE_FUSED_DRAFT=0): the engine before a pass became one kernel call (2026-12-06)
  float-x       the int8 products' float path (gemv8.c) where the int16 one would run (AVX-512
                VNNI): the engine before 2026-12-06's afternoon
  torch-rows    the lean pass, with the drafter's top-k, the walk's row statistics and the cache's
                compaction through torch (EAGLE_ROW_KERNEL=0 EAGLE_COMPACT_KERNEL=0), as before 2026-12-06
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from eagle_core import DecodeSettings, lean_head, load_engine  # noqa: E402
from eagle_core.machine import machine_info  # noqa: E402
from eagle_core.cpu.fused_pass import ENV as FUSED_ENV  # noqa: E402
from eagle_core.cpu.kernels import attention, library, linear_of  # noqa: E402
from eagle_core.cpu.kernels.compact import ENV as COMPACT_ENV  # noqa: E402
from eagle_core.cpu.kernels.rows import ENV as ROW_ENV  # noqa: E402

from eagle_core.bench.prompts import MT_BENCH as PROMPTS  # noqa: E402  (the shipped MT-bench)


def one_per_category(path: str) -> list[str]:
    seen, out = set(), []
    with open(path) as f:
        for line in f:
            r = json.loads(line)
            if r["category"] not in seen:
                seen.add(r["category"]); out.append(r["turns"][0])
    return out


@contextlib.contextmanager
def variant(d, name: str):
    """Run the drafter `d` the way `name` says (see the module docstring), then restore it."""
    lean, lm, serves = d.lean, (d.lm_weight, d.lm), attention.serves_cache
    c_layers = lean.c_layers if lean is not None else None
    env = {k: os.environ.get(k) for k in (ROW_ENV, COMPACT_ENV, FUSED_ENV)}
    try:
        if name == "torch-rows":
            os.environ[ROW_ENV] = os.environ[COMPACT_ENV] = "0"
        if name == "unfused":
            os.environ[FUSED_ENV] = "0"
        if name == "float-x":
            library().gemv8_allow_int16(0)
        if name == "f16-head":
            d._head_int8(d.head, False)
            d.lean = lean_head.build(d.head)[0]
        if name == "lean-torch-ops" and lean is not None:
            lean.c_layers = False
        if name in ("modules", "modules-sdpa"):
            d.lean = None
        if name == "modules-sdpa":
            attention.serves_cache = lambda *a, **k: False
        if name == "bf16-lm-head":
            wb = d.lm_weight.to(torch.bfloat16)
            d.lm_weight, d.lm = wb, linear_of(wb, "onednn")
        elif name == "f16-lm-head" and d.vocab_map is not None:
            wh = d.target.lm_head.weight[d.vocab_map].detach().half().float()
            d.lm_weight, d.lm = wh, linear_of(wh, "smallgemm16")
        elif name == "f32-lm-head" and d.vocab_map is not None:
            w32 = d.target.lm_head.weight[d.vocab_map].detach().clone()
            d.lm_weight, d.lm = w32, linear_of(w32, "smallgemm")
        elif name not in ("lean", "lean-torch-ops", "modules", "modules-sdpa", "torch-rows", "f16-head", "unfused",
                          "float-x"):
            raise SystemExit(f"unknown variant {name!r}")
        yield
    finally:
        if name == "f16-head":
            d._head_int8(d.head, type(d).HEAD_WEIGHTS == "int8")
        if name == "float-x":
            library().gemv8_allow_int16(1)
        d.lean, (d.lm_weight, d.lm), attention.serves_cache = lean, lm, serves
        for k, v in env.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        if lean is not None:
            lean.c_layers = c_layers


def measure(prompts, max_new: int, variants: list[str], tree: str = "2,2,4", method: str = "eagle2") -> dict:
    e = load_engine(None, None, None)
    d = e.drafter3 if method == "eagle3" else e.drafter
    depth, top_k, total = (int(v) for v in tree.split(","))
    eag = DecodeSettings(method=method, depth=depth, tree_top_k=top_k, total_tokens=total, max_new_tokens=max_new)
    van = DecodeSettings(method="vanilla", max_new_tokens=max_new)
    out = {"machine": machine_info("cpu"), "method": method, "vanilla_ms_per_token": [],
           **{name: [] for name in variants}}
    for q in prompts:
        v = e.run(q, van).summary
        out["vanilla_ms_per_token"].append(v.wall_s / v.new_tokens * 1000)
        for name in variants * 2:
            with variant(d, name):
                r = e.run(q, eag).summary
            if r.token_ids != v.token_ids:
                raise SystemExit(f"EAGLE ({name}) differs from vanilla on {q[:40]!r}")
            out[name].append({"draft_ms_per_cycle": r.draft_s / r.cycles * 1000,
                              "verify_ms_per_cycle": r.verify_s / r.cycles * 1000,
                              "cycle_ms": r.wall_s / r.cycles * 1000, "tau": r.tau, "tok_s": r.tokens_per_s})
    return out


def summary(out: dict) -> str:
    step = statistics.median(out["vanilla_ms_per_token"])
    lines = [f"{out['machine']['cpu']}, {out['machine']['threads']} threads, {out.get('method', 'eagle2')}; "
             f"vanilla {step:.2f} ms a token (median)"]
    for name in [k for k in out if k not in ("machine", "method", "vanilla_ms_per_token")]:
        v = out[name]
        med = lambda k: statistics.median(x[k] for x in v)  # noqa: E731
        lines.append(f"{name}: drafting {med('draft_ms_per_cycle'):.2f} ms a cycle "
                     f"({med('draft_ms_per_cycle') / step:.3f} of a vanilla step), verification "
                     f"{med('verify_ms_per_cycle'):.2f} ms, cycle {med('cycle_ms'):.2f} ms "
                     f"({med('cycle_ms') / step:.2f} steps), tau {statistics.mean(x['tau'] for x in v):.3f}, "
                     f"{statistics.mean(x['tok_s'] for x in v):.1f} tokens/s")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", default=os.path.normpath(PROMPTS))
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--variants", default="lean,modules,modules-sdpa")
    ap.add_argument("--tree", default="2,2,4", help="depth,top_k,total (2,2,4: every figure in the docs so far; "
                    "the cpu preset is 2,2,3 since 2026-12-04)")
    ap.add_argument("--method", default="eagle2", choices=["eagle2", "eagle3"], help="the head that drafts")
    ap.add_argument("--json-out", default=None)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    out = measure(one_per_category(a.prompts), a.max_new_tokens, a.variants.split(","), a.tree, a.method)
    print(summary(out))
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
