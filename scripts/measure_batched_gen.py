"""Answer tokens/s of batched self-distillation (`ids-gen`) against one prompt at a time, for docs/training.md.

The first N prompts of `ids-gen`'s order (sorted by length, as a part is), greedy, answered with
data.generate_batch at each batch size; the answer tokens counted are the real ones (cut after
EOS), so rows that finish early and keep a batch slot cost what they cost. Also checks that greedy
answers are the same batched as alone (on the default model's float32 CPU kernels they may differ
late in an answer: a batch of 16 rows runs other matrix kernels than a single row).

    python scripts/measure_batched_gen.py --train-dir PROMPTS/train --eval-dir PROMPTS/eval \
        --prompts 32 --batches 1,16,32 --max-new-tokens 128

PROMPTS is the prompt collection `ids-gen` reads (docs/training.md, "The data").
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--train-dir", required=True, help="the prompts' train folder, as ids-gen's --train-dir")
    ap.add_argument("--eval-dir", required=True, help="the prompts' eval folder, as ids-gen's --eval-dir")
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--batches", default="1,16,32")
    ap.add_argument("--single-prompts", type=int, default=4, help="prompts answered at batch size 1 (it is slow)")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--max-prompt-tokens", type=int, default=384)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    import torch  # after the arguments: --help loads nothing

    from eagle_core import load_target
    from eagle_core.train.data import generate_batch
    from eagle_core.train.gen_ids import prompt_order

    torch.set_num_threads(args.threads)

    target = load_target()
    prompts, _ = prompt_order(args.train_dir, args.eval_dir, 0)
    enc = [target.encode_prompt(p.text) for p in prompts[:args.prompts]]
    enc = sorted((e for e in enc if len(e) <= args.max_prompt_tokens), key=len)
    cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
    print(f"{cpu}, {args.threads} threads, {len(enc)} prompts, up to {args.max_new_tokens} new tokens, "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    answers = {}
    for B in [int(b) for b in args.batches.split(",")]:
        use = enc[:args.single_prompts] if B == 1 else enc
        t0, out = time.time(), []
        for i in range(0, len(use), B):
            out += generate_batch(target, use[i:i + B], args.max_new_tokens, 0.0, 0)[0]
        dt = time.time() - t0
        n = sum(map(len, out))
        answers[B] = out
        print(f"batch {B:3d}: {len(use)} prompts, {n} answer tokens in {dt:.1f}s = {n / dt:.1f} tokens/s "
              f"({len(use) / dt:.3f} prompts/s)", flush=True)
    if 1 in answers:
        for B, out in answers.items():
            same = sum(a == b for a, b in zip(answers[1], out))
            print(f"batch {B}: {same}/{len(answers[1])} greedy answers identical to batch 1")


if __name__ == "__main__":
    main()
