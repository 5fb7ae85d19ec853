"""t(k), k = 1..32: the products of one forward of the default model, from its GGUF's blocks and in float32.

    python -m eagle_core.bench.qblocks_curve --curve [--threads 2] [--tile 8] [--repeats 5] [--json-out F]
    python -m eagle_core.bench.qblocks_curve --tune [--threads 2]    (the knobs measured afresh, cached, scores shown)

One pass = every product a forward of k tokens makes, in the CPU decoder's grouping (cpu/forward.py): per layer
q/k/v stacked (960 x 576), o (576 x 576), gate/up stacked (3072 x 576), down (576 x 1536), 30 layers,
then the LM head (49152 x 576), each weight distinct, so they stream from memory as in decoding:

    Q4_1   the file's blocks through qblocks.c (layers Q4_1, LM head Q8_0; ~96 MB)
    f32    the same weights dequantized, through the engine's float32 product (smallgemm; ~538 MB)

Beside each: the streaming bound (the format's bytes at the read bandwidth measured in the same
process: a buffer several times the last-level cache, several passes, the fastest) and the arithmetic bound (k rows' multiply-adds at the rate each product reaches on one
weight kept in the caches, 32 rows, the fastest of 40 bursts: peak_rate), and t(k) / max(t(1), arithmetic), the issue's goal being <= 1.15.
Attention, norms and the rest of a forward are not in it. Timings on a busy machine mean little:
run it on a quiet one.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np
import torch

from ..cpu.kernels import qblocks, qtuning
from ..machine.timing import median_s

ROWS = tuple(range(1, 33))
GOAL = 1.15
LAYER_GROUPS = (("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"), ("self_attn.o_proj",),
                ("mlp.gate_proj", "mlp.up_proj"), ("mlp.down_proj",))


def forward_weights(blocks: dict) -> list[tuple[str, np.ndarray, int, int]]:
    """(format, raw blocks, out_features, in_features) for each product of one forward, in order."""
    out, layer = [], 0
    while f"model.layers.{layer}.mlp.down_proj" in blocks:
        for group in LAYER_GROUPS:
            parts = [blocks[f"model.layers.{layer}.{p}"] for p in group]
            data = np.concatenate([np.asarray(p.data) for p in parts])
            out.append((parts[0].fmt, data, data.shape[0], parts[0].in_features))
        layer += 1
    head = blocks["lm_head"]
    out.append((head.fmt, np.asarray(head.data), head.out_features, head.in_features))
    return out


def float32_product():
    """-> (name, prepare(w), run(state, x)): the engine's float32 product, else torch's."""
    try:
        from ..cpu.kernels.backends import SmallGemm

        if SmallGemm.available():
            return "smallgemm", SmallGemm.prepare, lambda st, x: SmallGemm.run(st, x, None)
    except ImportError:
        pass
    return "torch", lambda w: w, lambda st, x: torch.nn.functional.linear(x, st)


def _meminfo_bytes(key: str) -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def last_level_cache_bytes() -> int:
    """The largest cache the kernel reports for cpu0 (a virtual machine may report its host's L3), 32 MB
    when none is."""
    sizes = []
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for d in os.listdir(base):
            text = open(os.path.join(base, d, "size")).read().strip().upper()
            sizes.append(int(text[:-1]) * {"K": 1 << 10, "M": 1 << 20}[text[-1]] if text[-1] in "KM" else int(text))
    except (OSError, ValueError, KeyError, IndexError):
        pass
    return max(sizes, default=32 << 20)


def probe_bytes(cache: int, free: int | None) -> int:
    """4x the last-level cache and at least 1 GiB, at most a quarter of the free memory (256 MB at the
    least): no cache holds it, so reading it is reading memory."""
    want = max(1 << 30, 4 * cache)
    return max(min(want, free // 4) if free else want, 256 << 20) // 64 * 64


def probe_buffer() -> torch.Tensor:
    """int64 ones, probe_bytes of them for this machine."""
    return torch.ones(probe_bytes(last_level_cache_bytes(), _meminfo_bytes("MemAvailable")) // 8, dtype=torch.int64)


def bandwidth(threads: int = 2, passes: int = 5, buffer: torch.Tensor | None = None) -> float:
    """GB/s reading `buffer` (probe_buffer()) with `threads` threads: the fastest of `passes` passes,
    after one untimed. qb_stream_read's count is bytes."""
    a = probe_buffer() if buffer is None else buffer
    lib, nbytes = qblocks.library(), a.numel() * 8
    lib.qb_stream_read(a.data_ptr(), nbytes, threads)
    best = min(median_s(lambda: lib.qb_stream_read(a.data_ptr(), nbytes, threads), 1) for _ in range(passes))
    return nbytes / 1e9 / best


def peak_rate(run, n: int, k: int, rows: int = 32, calls: int = 20, bursts: int = 40) -> float:
    """The fastest of `bursts` warm rates (each over `calls` products of `rows` rows on one weight kept in
    the caches): the arithmetic bound's rate. On this project's 2-vCPU VMs the warm rate runs in two
    states, ~205 and ~325 G multiply-adds/s on the Xeon (2026-12-07), switching within a process (the
    host placing the two vCPUs, presumably on one core's two hyperthreads or on two cores), so a median
    of a few bursts moved the bound by half between runs; the fastest burst is the machine's rate."""
    x = torch.randn(rows, k)
    run(x)
    best = float("inf")
    for _ in range(bursts):
        t0 = time.perf_counter()
        for _ in range(calls):
            run(x)
        best = min(best, (time.perf_counter() - t0) / calls)
    return rows * n * k / best


def prepare(blocks: dict, tile: int, qpath: str = "auto") -> dict:
    """Both formats' products of one forward, ready to run, with their bytes and multiply-adds."""
    weights = forward_weights(blocks)
    name, f32_prepare, f32_run = float32_product()
    q_states, f_states = [], []
    for fmt, data, n, k in weights:
        q_states.append((fmt, qblocks.pack(fmt, data, n, k), n, k))
        f_states.append((f32_prepare(torch.from_numpy(qblocks.dequantize(fmt, data, n, k))), k))
    macs = {fmt: sum(n * k for f, _, n, k in weights if f == fmt) for fmt in qblocks.FORMATS}

    def q_run(st, x):
        return qblocks.matmul(st[0], x, st[1], st[2], st[3], tile=tile, path=qpath)

    return {"weights": weights, "q": q_states, "f32": f_states, "q_run": q_run, "f32_run": f32_run,
            "f32_name": name, "macs": macs, "q_bytes": sum(d.nbytes for _, d, _, _ in weights),
            "f32_bytes": 4 * sum(macs.values())}


def block_rates(weights, run=None) -> dict:
    """Peak warm multiply-add rates of the blocks, per format (peak_rate): Q4_1 on layer 0's stacked
    gate/up, Q8_0 on 4096 LM-head rows. `weights`: forward_weights(); run(state, x): the product
    (qblocks.matmul, tuned knobs)."""
    run = run or (lambda st, x: qblocks.matmul(st[0], x, st[1], st[2], st[3]))
    fmt_l, data_l, n_l, k_l = weights[2]  # layer 0's gate/up
    fmt_h, data_h, _, k_h = weights[-1]
    rows_h = 4096
    head = np.ascontiguousarray(np.asarray(data_h)[:rows_h])
    q_l = (fmt_l, qblocks.pack(fmt_l, data_l, n_l, k_l), n_l, k_l)
    q_h = (fmt_h, qblocks.pack(fmt_h, head, rows_h, k_h), rows_h, k_h)
    return {fmt_l: peak_rate(lambda x: run(q_l, x), n_l, k_l), fmt_h: peak_rate(lambda x: run(q_h, x), rows_h, k_h)}


def block_arithmetic(gguf: str | None = None) -> dict:
    """What a forward's products from a GGUF's blocks read and compute: {"mb": bytes read / 1e6, "macs":
    {format: multiply-adds per row}, "rates_gmacs": {format: warm G multiply-adds/s}} (kernels --curve's
    bounds in the gguf format)."""
    from ..target import gguf_blocks

    weights = forward_weights(gguf_blocks.read(gguf))
    macs = {fmt: sum(n * k for f, _, n, k in weights if f == fmt) for fmt in qblocks.FORMATS}
    return {"mb": sum(d.nbytes for _, d, _, _ in weights) / 1e6, "macs": {f: v for f, v in macs.items() if v},
            "rates_gmacs": {f: v / 1e9 for f, v in block_rates(weights).items()}}


def rates(p: dict) -> dict:
    """Peak warm multiply-add rates: the blocks' (block_rates), float32 on layer 0's gate/up."""
    return {**block_rates(p["weights"], p["q_run"]), "f32": peak_rate(lambda x: p["f32_run"](p["f32"][2][0], x),
                                                                      p["weights"][2][2], p["weights"][2][3])}


def curve(rows=ROWS, repeats: int = 5, tile: int = 0, gguf: str | None = None, qpath: str = "auto") -> dict:
    """t(k) of one forward's products from a GGUF's blocks (`gguf`: a file, None: the default model's) on
    qblocks.c's path `qpath`, and in float32, beside their bounds (render() draws the table)."""
    from ..target import gguf_blocks

    p = prepare(gguf_blocks.read(gguf), tile, qpath)
    threads = torch.get_num_threads()
    tuning = qtuning.describe(qblocks.library(), threads)  # measured now if not cached: before any timing
    bws, t_q, t_f, buf = [], {}, {}, probe_buffer()
    g = torch.Generator().manual_seed(0)
    with torch.inference_mode():
        for k in rows:
            xs = {K: torch.randn(k, K, generator=g) for K in {w[3] for w in p["weights"]}}
            t_q[k] = 1e3 * median_s(lambda: [p["q_run"](st, xs[st[3]]) for st in p["q"]], repeats, warmup=1)
            t_f[k] = 1e3 * median_s(lambda: [p["f32_run"](st, xs[K]) for st, K in p["f32"]], repeats, warmup=1)
            if k in (rows[0], rows[len(rows) // 2], rows[-1]):
                bws.append(bandwidth(threads, buffer=buf))
        r = rates(p)
    bw = statistics.median(bws)
    return {"cpu": _cpu_name(), "threads": threads, "tile": tile or "tuned", "tuning": tuning,
            "probe_mb": buf.numel() * 8 / 1e6,
            "qblocks_path": qblocks.best_path() if qpath == "auto" else qpath,
            "f32_product": p["f32_name"], "bandwidth_gbs": bw, "q_mb": p["q_bytes"] / 1e6,
            "f32_mb": p["f32_bytes"] / 1e6, "macs": p["macs"], "rates_gmacs": {f: v / 1e9 for f, v in r.items()},
            "t_q_ms": t_q, "t_f32_ms": t_f}


def compare_paths(paths, rows=(1, 4, 8, 13, 16), rounds: int = 9, gguf: str | None = None, p: dict | None = None,
                  prefetches=None) -> dict:
    """One forward's products from the blocks on each path (or, with `prefetches`, on the best path at each
    software prefetch distance in bytes), in one process, interleaved: for each round, each k, each variant
    in turn (separate runs of --curve differ by more than the variants do). -> {"t_ms": {variant: {k: median
    ms}}}, with the CPU."""
    if p is None:
        from ..target import gguf_blocks

        p = prepare(gguf_blocks.read(gguf), 0)
    lib, threads = qblocks.library(), torch.get_num_threads()
    tuned = qtuning.ensure(lib, threads)
    g = torch.Generator().manual_seed(0)
    xs = {k: {K: torch.randn(k, K, generator=g) for K in {st[3] for st in p["q"]}} for k in rows}
    variants = {f"prefetch {b} B": ("auto", b) for b in prefetches} if prefetches else {q: (q, None) for q in paths}

    def once(name: str, k: int) -> float:
        path, pf = variants[name]
        if pf is not None:
            qblocks.set_tuning(tuned.tile, pf, tuned.split, threads=threads, lib=lib)
        t0 = time.perf_counter()
        for fmt, packed, n, K in p["q"]:
            qblocks.matmul(fmt, xs[k][K], packed, n, K, path=path)
        return 1e3 * (time.perf_counter() - t0)

    times = {(v, k): [] for v in variants for k in rows}
    try:
        with torch.inference_mode():
            for v in variants:  # warm: code, OpenMP threads
                for k in rows:
                    once(v, k)
            for _ in range(rounds):
                for k in rows:
                    for v in variants:
                        times[(v, k)].append(once(v, k))
    finally:
        qtuning.set_tuning(lib, threads, tuned)
    return {"cpu": _cpu_name(), "threads": threads, "rounds": rounds,
            "t_ms": {v: {k: statistics.median(times[(v, k)]) for k in rows} for v in variants}}


def render_paths(res: dict) -> str:
    paths = list(res["t_ms"])
    rows = list(res["t_ms"][paths[0]])
    out = [f"CPU: {res['cpu']}, {res['threads']} threads. One forward's products from the GGUF blocks, median ms of "
           f"{res['rounds']} interleaved rounds, each column's t(k) / its t(1) in brackets.", "",
           "| k | " + " | ".join(paths) + " |", "|---|" + "---|" * len(paths)]
    for k in rows:
        out.append(f"| {k} | " + " | ".join(f"{res['t_ms'][q][k]:.2f} ({res['t_ms'][q][k] / res['t_ms'][q][rows[0]]:.2f})"
                                           for q in paths) + " |")
    return "\n".join(out)


def _cpu_name() -> str:
    try:
        from ..cpu.kernels.build import cpu_model

        return cpu_model()
    except ImportError:
        import platform

        return platform.processor() or platform.machine()


def verdict(res: dict) -> dict:
    """k -> {format: (t ms, t / t(1), streaming ms, arithmetic ms, t / max(t(1), arithmetic))}."""
    rate, macs = res["rates_gmacs"], res["macs"]
    out = {}
    for k in sorted(res["t_q_ms"]):
        row = {}
        for key, times, mb, arith in (
                ("q", res["t_q_ms"], res["q_mb"], sum(k * macs[f] / (rate[f] * 1e9) for f in macs if macs[f])),
                ("f32", res["t_f32_ms"], res["f32_mb"], k * sum(macs.values()) / (rate["f32"] * 1e9))):
            t1, t = times[min(times)], times[k]
            arith_ms = 1e3 * arith
            row[key] = (t, t / t1, mb / res["bandwidth_gbs"], arith_ms, t / max(t1, arith_ms))
        out[k] = row
    return out


def render(res: dict) -> str:
    r = res["rates_gmacs"]
    tile = "" if res["tile"] == "tuned" else f"; row tile {res['tile']} by hand"
    lines = [f"CPU: {res['cpu']}, {res['threads']} threads, qblocks path {res['qblocks_path']}, knobs: "
             f"{res.get('tuning', '?')}{tile}. Products of one forward of k tokens (30 layers + LM head), median ms. "
             f"Read bandwidth {res['bandwidth_gbs']:.1f} GB/s (fastest pass over {res.get('probe_mb', 0):.0f} MB); "
             f"GGUF blocks {res['q_mb']:.0f} MB, float32 {res['f32_mb']:.0f} MB "
             f"({res['f32_product']}). Peak warm rates, G multiply-adds/s: "
             + ", ".join(f"{f} {v:.0f}" for f, v in r.items()) + f". Goal: t(k) / max(t(1), arithmetic) <= {GOAL}.",
             "", "| k | Q4_1 t(k) | /t(1) | streaming | arithmetic | t/max(t1, arith) "
             "| f32 t(k) | /t(1) | streaming | arithmetic | t/max(t1, arith) |", "|---" * 11 + "|"]
    for k, row in verdict(res).items():
        cells = [f"{t:.1f} | {rel:.2f} | {s:.1f} | {a:.1f} | {ratio:.2f}{'' if ratio <= GOAL else ' *'}"
                 for t, rel, s, a, ratio in (row["q"], row["f32"])]
        lines.append(f"| {k} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("* above the goal. Timings taken while other work runs are not results.")
    return "\n".join(lines)


def tune_report(threads: int) -> str:
    """The knobs measured afresh (qtuning.retune: the cached choice replaced), each stage's candidates
    with their weighted relative times (1.0 a unit of weight: the best at every row count)."""
    lib = qblocks.library()
    t0 = time.perf_counter()
    choice, log = qtuning.retune(lib, threads)
    lines = [f"CPU: {_cpu_name()}, {threads} threads, path {qblocks.best_path(lib)}; rows (weight) "
             + ", ".join(f"{r} ({w:g})" for r, w in qtuning.ROWS.items())
             + f"; {time.perf_counter() - t0:.1f} s. Choice: {choice.text()}."]
    for stage, scores in log.items():
        lines += [f"{stage}:"] + [f"  {v:7.3f}  {c}" for c, v in sorted(scores.items(), key=lambda kv: kv[1])]
    return "\n".join(lines)


def main(argv=None) -> str:
    ap = argparse.ArgumentParser(prog="python -m eagle_core.bench.qblocks_curve", description=__doc__.split("\n\n")[0])
    ap.add_argument("--curve", action="store_true", help="measure t(k), k = 1..32 (the default model's GGUF)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tile", type=int, default=0, help="rows per pass over a weight group, 1..16 (0: the tuned one)")
    ap.add_argument("--tune", action="store_true", help="measure qblocks.c's knobs afresh (replacing the cached "
                    "choice) and print each stage's scores")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--rows", default="1-32", help="k values: 1-32, or a list like 1,8,13,16")
    ap.add_argument("--gguf", default=None, help="a GGUF file (default: the default model's)")
    ap.add_argument("--path", default="auto", choices=list(qblocks.PATHS),
                    help="qblocks.c's instruction-set path (auto: the best here)")
    ap.add_argument("--compare-paths", default=None, metavar="P1,P2",
                    help="t(k) of the listed paths (e.g. avx2,vnni) interleaved in one process, at --rows (default "
                    "1,4,8,13,16)")
    ap.add_argument("--compare-prefetch", default=None, metavar="B1,B2",
                    help="the same, for software prefetch distances in bytes (e.g. 0,2048) on the best path")
    ap.add_argument("--json-out", default=None)
    args = ap.parse_args(argv)
    if args.tune:
        return tune_report(args.threads)
    if not args.curve and not args.compare_paths and not args.compare_prefetch:
        lib = qblocks.library()
        return f"qblocks.c built; paths here: {', '.join(qblocks.available_paths(lib))} (best {qblocks.best_path(lib)})"
    torch.set_num_threads(args.threads)
    lo, _, hi = args.rows.partition("-")
    rows = tuple(range(int(lo), int(hi) + 1)) if hi else tuple(int(v) for v in args.rows.split(","))
    if args.compare_paths or args.compare_prefetch:
        paths = args.compare_paths.split(",") if args.compare_paths else []
        bad = [q for q in paths if q not in qblocks.available_paths()]
        if bad:
            raise SystemExit(f"paths not available here: {', '.join(bad)} (here: {', '.join(qblocks.available_paths())})")
        pfs = args.compare_prefetch.split(",") if args.compare_prefetch else None
        if pfs and not all(b.isdigit() and int(b) % 64 == 0 and int(b) <= qtuning.MAX_PREFETCH for b in pfs):
            raise SystemExit(f"--compare-prefetch {args.compare_prefetch}: byte counts 0..{qtuning.MAX_PREFETCH}, "
                             "multiples of 64, comma-separated")
        pfs = [int(b) for b in pfs] if pfs else None
        res = compare_paths(paths, rows if args.rows != "1-32" else (1, 4, 8, 13, 16), gguf=args.gguf, prefetches=pfs)
        if args.json_out:
            with open(args.json_out, "w") as f:
                json.dump(res, f, indent=1)
        return render_paths(res)
    res = curve(rows, args.repeats, args.tile, gguf=args.gguf, qpath=args.path)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(res, f, indent=1)
    return render(res)


if __name__ == "__main__":
    print(main())
