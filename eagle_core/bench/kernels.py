"""What verifying k tokens costs on a CPU, per linear-layer backend: the kernels report.

    python -m eagle_core.bench.kernels --threads 2 [--update-doc docs/performance.md]
    python -m eagle_core.bench.kernels --curve [--weights gguf]       (t(k), k = 1..32, of the whole forward)
    python -m eagle_core.bench.kernels --compare-blocking 13:12,7:6   (float32 forwards under smallgemm blockings)

Two tables, both with the CPU model, the thread count and the read bandwidth measured in the
same process:

1. `products` (block "kernels"): each weight shape of the target (SmolLM2-135M by default:
   hidden 576, 3 KV heads of 64, MLP 1536, vocabulary 49152), M rows, for every backend of
   eagle_core.cpu.kernels, ms per pass over as many distinct copies of the weight as one forward
   reads (so the weights come from memory, as in decoding, not from the cache).
2. `forward` (block "forward-costs", `--forward`, loads the default target): one whole forward of
   k new tokens, body and LM head, per backend and for the engine's chosen path, with t(k)/t(1)
   and t(1) against the streaming bound (see forward_costs.py).

With `--warm` the products table reuses one copy of each weight (one slice of a weight over 2.4 MB,
the LM head's 1,041 of 49,152 rows), so it stays in the caches: the products' arithmetic with the bytes almost
free. Where a row count's warm sum is near the streaming bound, memory and arithmetic must overlap
perfectly for that many rows to cost no more than one.

On a GPU these products cost nearly the same for k = 1..64, which is what makes tree
verification cheap there; the tables show what they cost here.
"""
from __future__ import annotations

import argparse

import torch

from ..cpu import kernels
from ..machine.timing import median_s
from .forward_costs import ROWS
from .report import replace_block

PRODUCT_ROWS = (1, 2, 4, 8, 16, 24, 64)


def shapes(hidden: int = 576, kv: int = 192, mlp: int = 1536, vocab: int = 49152, layers: int = 30) -> dict:
    """name -> (out_features, in_features, how many per forward)."""
    return {"q, o": (hidden, hidden, 2 * layers), "k, v": (kv, hidden, 2 * layers),
            "gate, up": (mlp, hidden, 2 * layers), "down": (hidden, mlp, layers), "lm head": (vocab, hidden, 1)}


WARM_BYTES = 2_400_000  # a weight larger than this is run warm as slices of at most this many bytes


def warm_plan(n_out: int, n_in: int, count: int, limit: int = WARM_BYTES) -> tuple[int, int]:
    """-> (rows of the one weight kept warm, passes over it): the passes read a forward's bytes
    (count x n_out rows, rounded up to whole slices)."""
    rows = n_out if n_out * n_in * 4 <= limit else max(1, limit // (n_in * 4))
    return rows, -(-count * n_out // rows)


def measure(rows=PRODUCT_ROWS, repeats: int = 5, backends=None, warm: bool = False, **shape_kw) -> list[dict]:
    """One dict per (shape, M): ms per pass over `per forward` distinct weights, for each backend
    (warm: over one weight, or one slice of it, as many times as a forward reads its bytes: warm_plan)."""
    torch.manual_seed(0)
    names = backends or [b for b in kernels.AUTO_CANDIDATES if kernels.BACKENDS[b].available()]
    out = []
    with torch.inference_mode():
        for name, (n_out, n_in, count) in shapes(**shape_kw).items():
            # warm: one weight (or slice) prepared once and read `passes` times; else `count` distinct ones
            n_w, passes = warm_plan(n_out, n_in, count) if warm else (n_out, 1)
            ws = [torch.randn(n_w, n_in) / n_in ** 0.5 for _ in range(1 if warm else count)]
            for m in rows:
                x = torch.randn(m, n_in)
                row = {"weights": name, "shape": f"{n_out}x{n_in}", "per_forward": count, "rows": m}
                for b in names:
                    backend = kernels.BACKENDS[b]
                    states = [backend.prepare(w) for w in ws] * passes
                    row[b] = 1e3 * median_s(lambda: [backend.run(st, x, None) for st in states], repeats, warmup=1)
                out.append(row)
    return out


def _header(threads: int, bandwidth: float) -> str:
    return (f"CPU: {kernels.cpu_model()}, {threads} threads, torch {torch.__version__}; read bandwidth "
            f"{bandwidth:.1f} GB/s (measured in the same process).")


def render_markdown(rows: list[dict], threads: int, bandwidth: float, warm: bool = False) -> str:
    names = [k for k in rows[0] if k not in ("weights", "shape", "per_forward", "rows")]
    ms = sorted({r["rows"] for r in rows})
    over = (f"one weight kept in the caches (of a weight over {WARM_BYTES / 1e6:.1f} MB, one slice), as many "
            "times as a forward reads its bytes" if warm else "`per forward` distinct weights")
    lines = [_header(threads, bandwidth) + f" fp32 products, ms per pass over {over} "
             "(median), and in brackets the time relative to 1 row.", "",
             "| weights | shape | per forward | rows | " + " | ".join(names) + " |",
             "|---|---|---|---|" + "---|" * len(names)]
    base = {(r["weights"], n): r[n] for r in rows if r["rows"] == ms[0] for n in names}
    for r in rows:
        cells = " | ".join(f"{r[n]:.2f} ({r[n] / base[(r['weights'], n)]:.2f}x)" for n in names)
        lines.append(f"| {r['weights']} | {r['shape']} | {r['per_forward']} | {r['rows']} | {cells} |")
    lines += ["", "Summed over one forward (every shape × per forward), ms:", "",
              "| rows | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for m in ms:
        sums = [sum(r[n] for r in rows if r["rows"] == m) for n in names]
        lines.append(f"| {m} | " + " | ".join(f"{s:.1f}" for s in sums) + " |")
    return "\n".join(lines)


CURVE_ROWS = tuple(range(1, 33))
CLIFF_GOAL = 1.15  # t(k) may exceed max(t(1), the rows' arithmetic at the peak) by this factor at most


def peak_gflops(repeats: int = 5) -> dict:
    """The float32 arithmetic rate this machine reaches with its threads, GFLOP/s: torch's matmul
    on 1024-square matrices, and the engine's own products (smallgemm) on 12 and 32 rows of one
    weight kept in the caches. -> {"torch_mm": ..., "smallgemm": ..., "peak": the larger}."""
    out = {}
    with torch.inference_mode():
        a, b = torch.randn(1024, 1024), torch.randn(1024, 1024)
        out["torch_mm"] = 2 * 1024 ** 3 / median_s(lambda: torch.mm(a, b), repeats, warmup=2) / 1e9
        if kernels.SmallGemm.available():
            w = torch.randn(1024, 576)
            st = kernels.SmallGemm.prepare(w)
            best = 0.0
            for m in (12, 32):
                x = torch.randn(m, 576)
                t = median_s(lambda: [kernels.SmallGemm.run(st, x, None) for _ in range(20)], repeats, warmup=1) / 20
                best = max(best, 2 * m * 1024 * 576 / t / 1e9)
            out["smallgemm"] = best
    out["peak"] = max(out.values())
    return out


def attention_macs(res: dict, k: int) -> float:
    """Multiply-adds of the attention in one forward of k chain rows over the curve's cache: per layer
    and query head, each row's scores and weighted values over the context and the rows up to itself."""
    a = res.get("attention")
    if not a:
        return 0.0
    keys = k * res["context"] + k * (k + 1) // 2
    return 2.0 * a["layers"] * a["heads"] * a["head_dim"] * keys


def curve(target, rows=CURVE_ROWS, repeats: int = 5, context: int = 300) -> dict:
    """The engine's own forward (body + LM head for all k rows), t(k) for each k, beside its two
    bounds: the weights' bytes at the read bandwidth measured between the rounds (streaming), and
    the k rows' products at the measured peak (arithmetic): float32 at the matmul peak, or in the gguf
    weight format the blocks at their warm rates (qblocks_curve.block_arithmetic)."""
    from .forward_costs import time_forward, weight_bytes

    peak = peak_gflops()
    gguf = getattr(target, "weight_format", "float32") == "gguf"
    if gguf:
        from .qblocks_curve import block_arithmetic

        blocks = block_arithmetic()
    bws: list = []
    with torch.inference_mode():
        ts = time_forward(target, tuple(rows), context, repeats, bandwidth=bws)
    bw = sorted(bws)[len(bws) // 2] if bws else kernels.stream_bandwidth()
    params = sum(m.in_features * m.out_features for m in target.model.modules()  # every linear layer, LM head too
                 if hasattr(m, "in_features") and hasattr(m, "out_features"))
    cfg = target.config
    import time

    res = {"cpu": kernels.cpu_model(), "recorded": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "threads": torch.get_num_threads(), "context": context,
           "weights": "gguf" if gguf else "float32", "bandwidth_gbs": bw,
           "weight_mb": blocks["mb"] if gguf else weight_bytes(target.model) / 1e6, "product_params": params,
           "gflops": peak, "t_ms": {k: 1e3 * t for k, t in ts.items()},
           "attention": {"layers": cfg.num_hidden_layers, "heads": cfg.num_attention_heads,
                         "head_dim": getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads}}
    from .products_alone import products_one_row

    res["products_1_ms"] = products_one_row(res["weights"], repeats)  # after the timing: its copy of the weights
    if gguf:
        res["blocks"] = blocks
    elif kernels.library() is not None:  # the portable path has no smallgemm, so no blocking to name
        from ..cpu.kernels import ftuning

        res["blocking"] = ftuning.describe(kernels.library(), res["threads"])
    return res


def curve_verdict(res: dict) -> dict:
    """k -> (t(k) ms, streaming bound ms, arithmetic bound ms at the matmul peak, t(k) / max(t(1), that
    bound), within the goal, t(k) / max(t(1), the arithmetic at the fastest measured rate), the k rows'
    attention arithmetic ms at the matmul peak). The goal reads the bound at torch's matmul rate, the
    machine's measured matmul peak; the engine's own products from the caches ran faster than that here,
    and the sixth value holds t(k) to the stricter bound too. In the gguf format both bounds are the
    blocks' products at their own warm rates. The attention's arithmetic (over the curve's cache, which
    grows with k too) is not in the goal's bound: shown beside it."""
    stream = res["weight_mb"] / res["bandwidth_gbs"]
    t1 = res["t_ms"][min(res["t_ms"])]
    g = res["gflops"]
    blocks = res.get("blocks") if res.get("weights") == "gguf" else None
    out = {}
    for k, t in sorted(res["t_ms"].items()):
        if blocks:
            arith = own = 1e3 * sum(k * n / (blocks["rates_gmacs"][f] * 1e9) for f, n in blocks["macs"].items())
        else:
            flops = 2 * res["product_params"] * k
            arith, own = flops / (g["torch_mm"] * 1e9) * 1e3, flops / (g["peak"] * 1e9) * 1e3
        ratio = t / max(t1, arith)
        attn = 2 * attention_macs(res, k) / (g["torch_mm"] * 1e9) * 1e3
        out[k] = (t, stream, arith, ratio, ratio <= CLIFF_GOAL, t / max(t1, own), attn)
    return out


def floor(res: dict, k: int) -> tuple[float, float] | None:
    """The least t(k) a forward like the measured one could reach, and its ratio to the goal's bound: its
    work outside the products at one row (t(1) minus the products' own one-row time, `products_1_ms`)
    not shrinking with rows, and its k rows' products at the arithmetic bound's rate (never faster than
    one row's). A forward cut leaner outside its products, or with faster one-row products, only raises
    the ratio. None for a record without the products' time."""
    p1, v = res.get("products_1_ms"), curve_verdict(res)
    if not p1 or k not in v:
        return None
    t1, arith, g = res["t_ms"][min(res["t_ms"])], v[k][2], res["gflops"]
    # the products can beat neither the goal's rate nor the fastest measured (float32: the engine's own)
    fastest = arith if res.get("weights") == "gguf" else arith * g["torch_mm"] / max(g["peak"], g["torch_mm"])
    least = max(t1 - p1, 0.0) + max(fastest, p1)
    return least, least / max(t1, arith)


def _floor_lines(res: dict) -> list[str]:
    floors = {k: f for k in (13, 16) if (f := floor(res, k))}
    if not floors:
        return []
    t1 = res["t_ms"][min(res["t_ms"])]
    p1 = res["products_1_ms"]
    out = ["", f"The floor: the products alone at one row took {p1:.1f} ms of t(1) = {t1:.1f} ms, so "
               f"{max(t1 - p1, 0.0):.1f} ms of a forward is other work (attention, norms, Python). With that work "
               "not growing with rows and the k rows' products at the arithmetic bound:"]
    for k, (least, ratio) in floors.items():
        verdict = ("out of reach, unless a forward spends longer than this one outside its products or on one "
                   "row's products" if ratio > CLIFF_GOAL else "the goal is within reach in principle")
        out.append(f"- t({k}) >= {least:.1f} ms, {ratio:.2f} x max(t(1), arithmetic): {verdict}.")
    return out


def render_curve(res: dict) -> str:
    g = res["gflops"]
    blocks = res.get("blocks") if res.get("weights") == "gguf" else None
    if blocks:
        bound = ("the k rows' multiply-adds from the GGUF's blocks at their warm rates ("
                 + ", ".join(f"{f} {blocks['rates_gmacs'][f]:.0f} G/s on {blocks['macs'][f] / 1e6:.1f} M a row"
                             for f in blocks["macs"]) + ")")
        own_note = "the same bound (the blocks have one rate)"
    else:
        bound = (f"2 x {res['product_params'] / 1e6:.1f} M multiply-adds per row at the measured matmul peak, "
                 f"{g['torch_mm']:.0f} GFLOP/s (torch's matmul)")
        own_note = (f"t(k) held to the fastest rate measured, {g['peak']:.0f} GFLOP/s (the engine's own products "
                    f"from the caches: {g.get('smallgemm', 0):.0f})")
    blocking = f" (smallgemm {res['blocking']})" if res.get("blocking") else ""
    when = f", {res['recorded']}" if res.get("recorded") else ""
    lines = [f"CPU: {res['cpu']}{when}, {res['threads']} threads, torch {torch.__version__}, weights "
             f"{res.get('weights', 'float32')}{blocking}. The engine's forward of k new tokens (body + LM head for all k rows, "
             f"{res['context']}-token cache), median ms. Streaming bound: {res['weight_mb']:.0f} MB of weights at "
             f"{res['bandwidth_gbs']:.1f} GB/s. Arithmetic bound: {bound}; the second ratio: {own_note}. "
             f"Attention: the k rows' scores and weighted values over the cache at {g['torch_mm']:.0f} GFLOP/s, "
             f"not in the bound. Goal: t(k) within {CLIFF_GOAL:.2f}x of max(t(1), arithmetic bound).", "",
             "| k | t(k) ms | t(k)/t(1) | streaming bound ms | arithmetic bound ms | t(k) / max(t(1), arithmetic) | goal "
             "| t(k) / max(t(1), arithmetic at the engine's rate) | attention arithmetic ms |",
             "|---|---|---|---|---|---|---|---|---|"]
    t1 = res["t_ms"][min(res["t_ms"])]
    for k, (t, stream, arith, ratio, ok, own, attn) in curve_verdict(res).items():
        lines.append(f"| {k} | {t:.1f} | {t / t1:.2f} | {stream:.1f} | {arith:.1f} | {ratio:.2f} | "
                     f"{'met' if ok else 'not met'} | {own:.2f} | {attn:.1f} |")
    return "\n".join(lines + _floor_lines(res))


def main(argv=None) -> str:
    ap = argparse.ArgumentParser(prog="python -m eagle_core.bench.kernels", description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--rows", default=",".join(map(str, PRODUCT_ROWS)), help="comma list of row counts M (products)")
    ap.add_argument("--forward", action="store_true", help="also time whole forwards of the default target")
    ap.add_argument("--forward-rows", default=",".join(map(str, ROWS)))
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--backends", default=",".join(kernels.AUTO_CANDIDATES),
                    help="comma list of eagle_core.cpu.kernels backends (openblas: run it on its own, its threads spin)")
    ap.add_argument("--warm", action="store_true", help="products from the caches: their arithmetic alone")
    ap.add_argument("--curve", action="store_true",
                    help="only the engine's forward for k = 1..32 beside its streaming and arithmetic bounds")
    ap.add_argument("--json-out", default=None, help="with --curve: the measurement as JSON")
    ap.add_argument("--from-json", default=None, help="with --curve: no measurement, the table of a --json-out file")
    ap.add_argument("--weights", default="float32", choices=("float32", "gguf"),
                    help="with --curve: the target's products, float32 (the default) or the GGUF's own blocks")
    ap.add_argument("--update-doc", default=None, metavar="MD")
    ap.add_argument("--compare-blocking", default=None, metavar="F:H,F:H",
                    help="the float32 forward under each smallgemm blocking (blocked from F rows, tiles of at most H), "
                         "interleaved in one process; rows from --forward-rows")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.compare_blocking:
        from .knob_compare import compare_cli

        return compare_cli(ap, args)
    if args.curve:
        if args.from_json:
            import json

            with open(args.from_json) as f:
                res = json.load(f)
            res["t_ms"] = {int(k): v for k, v in res["t_ms"].items()}
        else:
            from .knob_compare import target_in

            res = curve(target_in(args.weights), repeats=args.repeats)
        md = render_curve(res)
        print(md)
        if args.json_out:
            import json

            with open(args.json_out, "w") as f:
                json.dump(res, f, indent=1)
        if args.update_doc:
            replace_block(args.update_doc, "forward-curve" + ("-gguf" if res.get("weights") == "gguf" else ""), md)
        return md
    threads = torch.get_num_threads()
    bw = kernels.stream_bandwidth()
    backends = [b for b in args.backends.split(",") if b]
    rows = tuple(int(m) for m in args.rows.split(","))
    md = render_markdown(measure(rows, args.repeats, backends, warm=args.warm), threads, bw, warm=args.warm)
    print(md)
    if args.update_doc and not args.warm:
        replace_block(args.update_doc, "kernels", md)
    if args.forward:
        from ..target import load_target
        from . import forward_costs

        target = load_target()
        res = forward_costs.measure(target, backends, rows=tuple(int(k) for k in args.forward_rows.split(",")),
                                    repeats=args.repeats)
        fmd = forward_costs.render_markdown(res, threads)
        print()
        print(fmd)
        if args.update_doc:
            replace_block(args.update_doc, "forward-costs", fmd)
        md += "\n\n" + fmd
    return md


if __name__ == "__main__":
    main()
