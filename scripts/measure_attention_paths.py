"""attention.c's two paths, AVX2 against AVX-512 (attention512.c), in one process: whole forwards of the
default target (body through layer.c, LM head for every row) of 1, 5 and 8 new tokens on a 300-token cache,
each path in turn, round after round (the order alternating), with the memory's read bandwidth taken
before each round. Medians per bandwidth band, as scripts/measure_kernel_builds.py reports builds, and
whether both paths gave the same logits bit for bit. Needs a CPU with AVX-512 (docs/data/journal/performance-2026-12.md,
2026-12-05, evening):

    python scripts/measure_attention_paths.py --minutes 6 --json-out docs/data/bench/attention512_emr.json
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


ROWS = (1, 5, 8)
PATHS = {"avx2": 0, "avx512": 1}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=6.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--context", type=int, default=300)
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)
    # after the arguments, so that --help loads nothing
    import torch
    from eagle_core.bench.report import bandwidth_bands, save_json
    from eagle_core.machine import machine_info
    from eagle_core.cpu.kernels import build
    from eagle_core.target import load_target

    if torch.backends.cpu.get_cpu_capability() != "AVX512":
        sys.exit("the AVX-512 path runs only on a CPU with AVX-512")
    torch.set_num_threads(args.threads)
    lib, target = build.library(), load_target()
    g = torch.Generator().manual_seed(0)
    big = torch.randn((256 << 20) // 4)
    rounds, same_bits, end = [], True, time.time() + args.minutes * 60
    with torch.inference_mode():
        cache = target.new_cache()
        target.forward(torch.randint(0, target.vocab_size, (1, args.context), generator=g), cache)
        while time.time() < end:
            t0 = time.perf_counter()
            lib.stream_read(big.data_ptr(), big.numel(), args.threads)
            rec = {"gbs": big.numel() * 4 / (time.perf_counter() - t0) / 1e9}
            order = list(PATHS) if len(rounds) % 2 == 0 else list(PATHS)[::-1]
            for k in ROWS:
                x = torch.randint(0, target.vocab_size, (1, k), generator=g)
                pos = torch.arange(args.context, args.context + k)[None]
                outs = []
                for path in order:
                    lib.attention_wide(PATHS[path])
                    t0 = time.perf_counter()
                    outs.append(target.logits(target.forward(x, cache, position_ids=pos)))
                    rec[f"{path}, {k} rows"] = (time.perf_counter() - t0) * 1e3
                    cache.crop(-k)
                same_bits &= torch.equal(outs[0], outs[1])
            rounds.append(rec)
    lib.attention_wide(1)
    rounds = rounds[2:] or rounds[-1:]  # the first two rounds warm up
    bands = bandwidth_bands(rounds)
    for band in bands:
        med = band["ms (median)"]
        band["t(k)/t(1)"] = {p: {k: round(med[f"{p}, {k} rows"] / med[f"{p}, 1 rows"], 3) for k in ROWS[1:]} for p in PATHS}
        print(f"  t(k)/t(1) from {band['GB/s from']} GB/s:", band["t(k)/t(1)"])
    print("the two paths' logits are", "the same bits" if same_bits else "DIFFERENT")
    return save_json(args.json_out, {"machine": machine_info("cpu"), "threads": args.threads,
                                     "context": args.context, "same bits": same_bits, "bands": bands})


if __name__ == "__main__":
    main()
