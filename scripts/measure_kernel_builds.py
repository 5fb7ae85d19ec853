"""Two builds of the C kernels, A against B in one process: the kernels built twice, each with its own
-D defines (a variant of smallgemm.c), then one target forward's distinct weights (30 layers' q/k/v, o, gate/up
and down, and the LM head, random, SmolLM2-135M's shapes, ~540 MB) multiplied at 1, 5 and 8 rows (--rows) by
each build in turn, round after round, with the memory's read bandwidth taken before each round.
The machine's memory speed moves by minutes on a shared host, so the medians are reported per
bandwidth band, each build measured in the same rounds. Run on a quiet machine with AVX-512
(docs/data/journal/performance-2026-12.md, 2026-12-05):

    # the AVX-512 tiles' prefetch distance, 256 against 2048 floats ahead
    python scripts/measure_kernel_builds.py --builds PREFETCH512=256 PREFETCH512=2048 --minutes 8 \
        --json-out docs/data/bench/prefetch_zen5.json
    # the AVX-512 tiles taking one pair of panels at a time against up to four (a variant not kept:
    # git apply docs/data/bench/cols_zen5.patch first)
    python scripts/measure_kernel_builds.py --builds COLS_MAX=1 COLS_MAX=4 --minutes 8 \
        --json-out docs/data/bench/cols_zen5.json
    # the blocked path's prefetch into L2 against L1, under the blocking the Xeon chose (ftuning.py)
    python scripts/measure_kernel_builds.py --builds BLOCK512_L2=1 BLOCK512_L2=0 --rows 1,8,13,16 \
        --blocking 7:6 --minutes 3 --json-out docs/data/bench/block_prefetch_xeon_20261207.json

A build is a space-free list of defines joined by "+" ("COLS_MAX=1+PREFETCH512=256").
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


SHAPES = [(960, 576), (576, 576), (3072, 576), (576, 1536)] * 30 + [(49152, 576)]


def compiled(defines: str, tmp: str, i: int):
    """The kernels built with the defines "NAME=VALUE+NAME=VALUE"."""
    from eagle_core.cpu.kernels import build

    return build.compile_kernels(os.path.join(tmp, f"kernels-{i}.so"), tuple(defines.split("+")))


def packed(lib, n: int, k: int, g: torch.Generator):
    import torch

    size = (n + 15) // 16 * 16 * k
    buf = torch.empty(size + 16)
    p = buf[(-buf.data_ptr() % 64) // 4:][:size]
    w = torch.randn(n, k, generator=g) * 0.02  # held while pack reads it
    lib.pack_weight(w.data_ptr(), n, k, p.data_ptr())
    return p, n, k


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--builds", nargs=2, required=True, metavar=("A", "B"), help="each: defines joined by +")
    ap.add_argument("--minutes", type=float, default=8.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rows", default="1,5,8", help="comma list of row counts")
    ap.add_argument("--blocking", metavar="F:H",
                    help="both builds' smallgemm blocking: blocked from F rows, tiles of at most H")
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)
    from eagle_core.bench.knob_compare import parse_blockings, parse_rows

    row_counts = parse_rows(ap, args.rows, "--rows")
    blocking = parse_blockings(ap, args.blocking, "--blocking")[:1] if args.blocking else []
    # after the arguments, so that --help loads nothing
    import torch
    from eagle_core.bench.report import bandwidth_bands, save_json
    from eagle_core.machine import machine_info

    if not torch.backends.cpu.get_cpu_capability() == "AVX512":
        sys.exit("these tiles run only on a CPU with AVX-512")
    names = args.builds
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    with tempfile.TemporaryDirectory() as tmp:
        libs = {d: compiled(d, tmp, i) for i, d in enumerate(names)}
        for lib in libs.values():
            for b in blocking:
                lib.smallgemm_set_blocking(b.blocked_from, b.height)
        g = torch.Generator().manual_seed(0)
        weights = [packed(libs[names[0]], n, k, g) for n, k in SHAPES]  # the same packing in both builds
        big = torch.randn((256 << 20) // 4)
        rounds, end, same_bits = [], time.time() + args.minutes * 60, True
        while time.time() < end:
            t0 = time.perf_counter()
            libs[names[0]].stream_read(big.data_ptr(), big.numel(), args.threads)
            rec = {"gbs": big.numel() * 4 / (time.perf_counter() - t0) / 1e9}
            order = names if len(rounds) % 2 == 0 else names[::-1]
            for rows in row_counts:
                x, y, last = torch.randn(rows, 1536), torch.empty(rows, 49152), None
                for d in order:
                    t0 = time.perf_counter()
                    for p, n, k in weights:
                        libs[d].smallgemm(x.data_ptr(), rows, k, p.data_ptr(), n, k, None, y.data_ptr(), n, args.threads)
                    rec[f"{d}, {rows} rows"] = (time.perf_counter() - t0) * 1e3
                    same_bits &= last is None or torch.equal(last, y)  # the LM head's output, both builds
                    last = y.clone()
            rounds.append(rec)
    bands = bandwidth_bands(rounds)
    print("the builds' outputs are", "the same bits" if same_bits else "DIFFERENT")
    return save_json(args.json_out, {"machine": machine_info("cpu"), "threads": args.threads, "builds": names,
                                     "rows": args.rows, "started": started,
                                     "ended": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "blocking": args.blocking or "compiled",
                                     "weights": len(SHAPES), "same bits": same_bits, "bands": bands})


if __name__ == "__main__":
    main()
