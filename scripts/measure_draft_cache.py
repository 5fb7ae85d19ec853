"""Where drafting's extra time after a verification goes: the draft head's weights and caches.

Times the draft LM head's 1-row product and one whole drafting step (the head's catch-up on 2
accepted tokens, then a 2,2,3 tree) in three states of the CPU's caches:

  warm          right after the same work ran (its bytes in cache, as in a micro-benchmark)
  after read    after a plain read of a 256 MB buffer (the kernels' stream_read)
  after target  after one target forward of 4 tokens plus its LM head (what precedes drafting in a
                decode cycle: ~540 MB of weights streamed)

and, for each state, with nothing done before the timed call, with the timed call run once before
(its own bytes brought back the way it reads them), or with its weights read by stream_read first.
Run on a quiet machine (docs/data/journal/performance-2026-12.md, 2026-12-05):

    python scripts/measure_draft_cache.py --json-out docs/data/bench/draft_cache_zen5.json
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def timed(fn, before, pre, repeats: int) -> float:
    """Median microseconds of fn() over `repeats`, each after before() then pre() (untimed)."""
    out = []
    for i in range(repeats + 3):
        before()
        pre()
        t = time.perf_counter()
        fn()
        if i >= 3:
            out.append((time.perf_counter() - t) * 1e6)
    return round(statistics.median(out), 1)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json-out")
    args = ap.parse_args(argv)
    # after the arguments, so that --help loads nothing
    import torch
    from eagle_core import DecodeSettings, load_engine
    from eagle_core.bench.report import save_json
    from eagle_core.cpu import kernels
    from eagle_core.machine import machine_info

    torch.set_num_threads(args.threads)
    eng = load_engine()
    lib = kernels.library()
    if lib is None:
        sys.exit("the CPU kernels are not built here: nothing to measure")
    d, tgt, h = eng.drafter_for("eagle2"), eng.target, eng.target.hidden_size
    s = DecodeSettings(method="eagle2", depth=2, tree_top_k=2, total_tokens=3)
    with torch.inference_mode():
        f1, f2 = torch.randn(1, h), torch.randn(2, h)
        d._logits(f1)  # packs the draft LM head's rows
        lm = d.lm._state[0]
        head_cache = d.new_cache(2048)
        d.catch_up(head_cache, torch.randn(300, h), torch.randint(0, 1000, (300,)), 0)
        tc = tgt.new_cache()
        tgt.forward(torch.randint(0, 1000, (1, 300)), tc)
        big = torch.randn((256 << 20) // 4)
        two, pos = torch.tensor([5, 6]), torch.tensor([300, 301])

        def target_step():
            f = tgt.forward(torch.tensor([[5, 6, 7, 8]]), tc, torch.tensor([[300, 301, 302, 303]]))
            tgt.logits(f[0])
            tc.crop(-4)

        def drafting():
            root = d._run(two, f2, pos, head_cache)[-1]
            d.draft(s, head_cache, 7, root, 302, 2)
            head_cache.crop(300)

        def read_lm():
            lib.stream_read(lm.data_ptr(), lm.numel() * lm.element_size() // 4, args.threads)

        states = {"warm": lambda: None, "after read": lambda: lib.stream_read(big.data_ptr(), big.numel(), args.threads),
                  "after target": target_step}
        work = {"draft LM head, 1 row": (lambda: d._logits(f1), read_lm), "drafting, 2,2,3": (drafting, None)}
        res = {}
        for wname, (fn, reader) in work.items():
            for sname, before in states.items():
                pres = {"nothing": lambda: None, "the same call once": fn}
                if reader is not None:
                    pres["its weights read (stream_read)"] = reader
                res[f"{wname} | {sname}"] = {p: timed(fn, before, pre, args.repeats) for p, pre in pres.items()}
                print(f"{wname:22s} {sname:13s} " + "  ".join(f"{p}: {v:7.1f} us" for p, v in res[f'{wname} | {sname}'].items()))
        res["target forward 4 rows + LM head, us"] = timed(target_step, lambda: None, lambda: None, 10)
    out = {"machine": machine_info("cpu"), "threads": args.threads, "repeats": args.repeats,
           "draft_lm_bytes": lm.numel() * lm.element_size(), "microseconds (median)": res}
    return save_json(args.json_out, out)


if __name__ == "__main__":
    main()
