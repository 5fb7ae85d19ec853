"""smallgemm's AVX-512 prefetch distance, A against B in one process: the kernels built twice with
-DPREFETCH512=A and =B, then one target forward's distinct weights (30 layers' q/k/v, o, gate/up
and down, and the LM head, random, SmolLM2-135M's shapes, ~540 MB) multiplied at 1 and 5 rows by
each build in turn, round after round, with the memory's read bandwidth taken before each round.
The machine's memory speed moves by minutes on a shared host, so the medians are reported per
bandwidth band, each build measured in the same rounds. Run on a quiet machine with AVX-512
(docs/performance.md, 2026-12-05):

    python scripts/measure_prefetch.py --distances 256,2048 --minutes 8 --json-out docs/data/bench/prefetch_zen5.json
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import torch  # noqa: E402

from eagle_core.bench.report import machine_info, save_json  # noqa: E402
from eagle_core.kernels import build  # noqa: E402

SHAPES = [(960, 576), (576, 576), (3072, 576), (576, 1536)] * 30 + [(49152, 576)]
BANDS = ((0, 50), (50, 65), (65, 1e9))


def compiled(distance: int, tmp: str):
    """The kernels built with the AVX-512 tiles prefetching `distance` floats ahead."""
    return build.compile_kernels(os.path.join(tmp, f"kernels-{distance}.so"), (f"PREFETCH512={distance}",))


def packed(lib, n: int, k: int, g: torch.Generator):
    size = (n + 15) // 16 * 16 * k
    buf = torch.empty(size + 16)
    p = buf[(-buf.data_ptr() % 64) // 4:][:size]
    w = torch.randn(n, k, generator=g) * 0.02  # held while pack reads it
    lib.pack_weight(w.data_ptr(), n, k, p.data_ptr())
    return p, n, k


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--distances", default="256,2048", help="A,B: floats ahead of the loads")
    ap.add_argument("--minutes", type=float, default=8.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)
    if not torch.backends.cpu.get_cpu_capability() == "AVX512":
        sys.exit("these tiles run only on a CPU with AVX-512")
    names = args.distances.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        libs = {d: compiled(int(d), tmp) for d in names}
        g = torch.Generator().manual_seed(0)
        weights = [packed(libs[names[0]], n, k, g) for n, k in SHAPES]  # the same packing in both builds
        big = torch.randn((256 << 20) // 4)
        rounds, end = [], time.time() + args.minutes * 60
        while time.time() < end:
            t0 = time.perf_counter()
            libs[names[0]].stream_read(big.data_ptr(), big.numel(), args.threads)
            rec = {"gbs": big.numel() * 4 / (time.perf_counter() - t0) / 1e9}
            order = names if len(rounds) % 2 == 0 else names[::-1]
            for rows in (1, 5):
                x, y = torch.randn(rows, 1536), torch.empty(rows, 49152)
                for d in order:
                    t0 = time.perf_counter()
                    for p, n, k in weights:
                        libs[d].smallgemm(x.data_ptr(), rows, k, p.data_ptr(), n, k, None, y.data_ptr(), n, args.threads)
                    rec[f"{d} floats, {rows} rows"] = (time.perf_counter() - t0) * 1e3
            rounds.append(rec)
    bands = []
    for lo, hi in BANDS:
        part = [r for r in rounds if lo <= r["gbs"] < hi]
        if part:
            med = {key: round(statistics.median(r[key] for r in part), 2) for key in part[0] if key != "gbs"}
            bands.append({"GB/s from": lo, "GB/s to": None if hi == 1e9 else hi, "rounds": len(part), "ms (median)": med})
            print(f"{lo}-{'' if hi == 1e9 else hi} GB/s, {len(part)} rounds:", med)
    return save_json(args.json_out, {"machine": machine_info("cpu"), "threads": args.threads, "distances": names,
                                     "weights": len(SHAPES), "bands": bands})


if __name__ == "__main__":
    main()
