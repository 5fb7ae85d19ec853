"""Loss and held-out accuracy curves of a training run (reads the run's log.jsonl)."""
from __future__ import annotations

import json
import os


def run_plot(args):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps, feat, ce, top1 = [], [], [], []
    ep_x, ep = [], {}  # held-out series per key: top1, top5, and per set (top1_self, top1_fixed, ...)
    with open(os.path.join(args.run, "log.jsonl")) as f:
        for line in f:
            r = json.loads(line)
            if "epoch_end" in r:
                ep_x.append(r["step"])
                for k in ("top1", "top5", "top1_self", "top5_self", "top1_fixed"):
                    if k in r:
                        ep.setdefault(k, []).append(r[k])
            else:
                steps.append(r["step"]); feat.append(r["feat_loss"]); ce.append(r["ce_loss"]); top1.append(r["train_top1"])
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    a.plot(steps, feat, label="feature SmoothL1 (weight 1.0)")
    a.plot(steps, [c * 0.1 for c in ce], label="soft cross-entropy x 0.1")
    a.set_xlabel("step"); a.set_ylabel("training loss"); a.set_yscale("log"); a.legend(); a.grid(alpha=0.3)
    b.plot(steps, top1, alpha=0.5, label="top-1, training batches")
    names = {"top1": "top-1, held out (all)", "top5": "top-5, held out (all)",
             "top1_self": "top-1, held out: the target's own answers", "top5_self": "top-5, held out: own answers",
             "top1_fixed": "top-1, held out: reference answers"}
    for (k, ys), style in zip(ep.items(), ("o-", "s--", "^-", "v--", "d:")):
        if len(ys) == len(ep_x):
            b.plot(ep_x, ys, style, label=names[k])
    b.set_xlabel("step"); b.set_ylabel("draft accuracy vs target argmax"); b.set_ylim(0, 1); b.legend(); b.grid(alpha=0.3)
    fig.suptitle(getattr(args, "title", None) or "EAGLE head for SmolLM2-135M-Instruct: training on a CPU")
    fig.tight_layout()
    os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")
