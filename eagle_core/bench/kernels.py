"""Why verifying a few tokens is not free on a CPU: the target's matrix products, timed alone.

    python -m eagle_core.bench.kernels --threads 2 [--update-doc docs/performance.md]

Times one fp32 product of M rows with each weight shape of the target (SmolLM2-135M by default:
hidden 576, 3 KV heads of 64, MLP 1536, vocabulary 49152) for M = 1 (a vanilla step) and the row
counts of small verification trees, with three kernels: `F.linear` (what transformers runs),
`x @ W^T` with W^T stored contiguous, and MKL's pre-packed SGEMM. The weights are random; only
shapes matter for time. On a GPU these products cost nearly the same for M = 1..64, which is
what makes tree verification cheap there; the table shows what they cost here.
"""
from __future__ import annotations

import argparse

import torch

from .report import replace_block
from .timing import median_s


WARMUP = 3  # untimed calls before each timing (first calls pay for allocation and packing)


def shapes(hidden: int = 576, kv: int = 192, mlp: int = 1536, vocab: int = 49152, layers: int = 30) -> dict:
    """name -> (out_features, in_features, how many per forward)."""
    return {"q, o": (hidden, hidden, 2 * layers), "k, v": (kv, hidden, 2 * layers),
            "gate, up": (mlp, hidden, 2 * layers), "down": (hidden, mlp, layers), "lm head": (vocab, hidden, 1)}


def measure(rows=(1, 5, 9), reps: int = 200, **shape_kw) -> list[dict]:
    """One dict per (shape, M): median microseconds per product for each kernel."""
    torch.manual_seed(0)
    has_mkl = torch.backends.mkl.is_available() and hasattr(torch.ops.mkl, "_mkl_linear")
    out = []
    with torch.inference_mode():
        for name, (n_out, n_in, count) in shapes(**shape_kw).items():
            w = torch.randn(n_out, n_in) / n_in ** 0.5
            wt = w.t().contiguous()
            r = max(10, reps * 576 * 576 // (n_out * n_in))
            for m in rows:
                x = torch.randn(m, n_in)
                row = {"weights": name, "shape": f"{n_out}x{n_in}", "per_forward": count, "rows": m,
                       "linear_us": 1e6 * median_s(lambda: torch.nn.functional.linear(x, w), r, WARMUP),
                       "transposed_us": 1e6 * median_s(lambda: x @ wt, r, WARMUP), "mkl_packed_us": None}
                if has_mkl:
                    packed = torch.ops.mkl._mkl_reorder_linear_weight(w, m)
                    row["mkl_packed_us"] = 1e6 * median_s(lambda: torch.ops.mkl._mkl_linear(x, packed, w, None, m), r, WARMUP)
                out.append(row)
    return out


def render_markdown(rows: list[dict], threads: int) -> str:
    ms = sorted({r["rows"] for r in rows})
    lines = [f"fp32 products timed alone, {threads} threads, median (µs); the last column is `F.linear`'s "
             "time relative to 1 row.", "",
             "| weights | shape | per forward | rows | F.linear µs | x @ Wᵀ (contiguous) µs | MKL packed µs | "
             "F.linear vs 1 row |", "|---|---|---|---|---|---|---|---|"]
    base = {r["weights"]: r["linear_us"] for r in rows if r["rows"] == ms[0]}
    for r in rows:
        packed = "–" if r["mkl_packed_us"] is None else f"{r['mkl_packed_us']:.0f}"
        lines.append(f"| {r['weights']} | {r['shape']} | {r['per_forward']} | {r['rows']} | {r['linear_us']:.0f} | "
                     f"{r['transposed_us']:.0f} | {packed} | {r['linear_us'] / base[r['weights']]:.2f}x |")
    lines.append("")
    lines.append("Summed over one forward of the 30-layer body (weights × per forward), F.linear:")
    lines.append("")
    lines.append("| rows | body products ms | LM head ms |")
    lines.append("|---|---|---|")
    for m in ms:
        body = sum(r["linear_us"] * r["per_forward"] for r in rows if r["rows"] == m and r["weights"] != "lm head")
        head = sum(r["linear_us"] for r in rows if r["rows"] == m and r["weights"] == "lm head")
        lines.append(f"| {m} | {body / 1e3:.1f} | {head / 1e3:.1f} |")
    return "\n".join(lines)


def main(argv=None) -> str:
    ap = argparse.ArgumentParser(prog="python -m eagle_core.bench.kernels", description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--rows", default="1,5,9", help="comma list of row counts M")
    ap.add_argument("--reps", type=int, default=200, help="repetitions for a 576x576 product (scaled by size)")
    ap.add_argument("--update-doc", default=None, metavar="MD")
    ap.add_argument("--doc-block", default="kernels")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    rows = measure(tuple(int(m) for m in args.rows.split(",")), args.reps)
    md = render_markdown(rows, torch.get_num_threads())
    print(md)
    if args.update_doc:
        replace_block(args.update_doc, args.doc_block, md)
    return md


if __name__ == "__main__":
    main()
