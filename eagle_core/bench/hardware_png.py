"""The hardware lesson's figure as a PNG for the docs (matplotlib; the app draws the same data
with plotly in viz/hardware.py, whose static export would need kaleido)."""
from __future__ import annotations

PUBLISHED = (60, 2.04)  # Qwen3-1.7B + EAGLE-3, total_token=60 (60 verified), H20 (the Tencent/AngelSlim README at 556ecfa)


def label_offsets(xs: list, close: float = 1.2) -> list[int]:
    """Each tree label's vertical offset in points: below its point, but above where the point sits
    within `close` times the previous tree's size (on the log axis the labels of 8 and 9 nodes overlapped
    those of 7 and 8), then below again for the next close one."""
    out, up = [], False
    for i, x in enumerate(xs):
        up = (not up) if i and x < close * xs[i - 1] else False
        out.append(10 if up else -16)
    return out


def render_png(measured: dict, table: dict, res: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    here, gpu = res["here"], res["gpu"]
    xs = [r["nodes"] for r in here]
    fig, ax = plt.subplots(1, 2, figsize=(14, 6.6), gridspec_kw=dict(width_ratios=[1.6, 1]))
    a = ax[0]
    a.plot(xs, [r["speedup"] for r in here], "o-", color="#0072B2", lw=2.5,
           label=f"measured here: {measured['hardware']}, {measured.get('threads', '?')} thread(s)")
    a.plot(xs, [r["speedup"] for r in gpu], "s--", color="#E69F00", lw=2.5,
           label=f"GPU (illustration, not measured): same tau, t(k) = t(1) up to 64, a head step {res['gpu_share']:.3f} t(1)")
    for row, color, name in ((res["best_here"], "#0072B2", "best here"), (res["best_gpu"], "#E69F00", "best, GPU illustration")):
        a.plot([row["nodes"]], [row["speedup"]], "*", ms=20, color=color, mec="#1f2430",
               label=f"{name}: {row['tree']}, {row['speedup']:.2f}x")
    a.plot([PUBLISHED[0]], [PUBLISHED[1]], "D", ms=10, mfc="none", mec="#D55E00", mew=2.5,
           label="published (another model): Qwen3-1.7B + EAGLE-3, 60 nodes, 2.04x on H20 (AngelSlim)")
    a.axhline(1.0, color="#9A9A9A", ls=":", lw=2, label="vanilla = 1x")
    for r, dy in zip(here, label_offsets(xs)):
        a.annotate(r["tree"], (r["nodes"], r["speedup"]), textcoords="offset points", xytext=(0, dy),
                   ha="center", fontsize=8, color="#444")
    a.set_xscale("log")
    a.set_xticks(xs, [str(x) for x in xs])
    a.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    a.set_ylim(0, max(max(r["speedup"] for r in gpu), PUBLISHED[1]) * 1.12)
    a.set(xlabel="tree size: tokens the target verifies in one pass (total + 1, log scale)",
          ylabel="predicted speedup over vanilla (x)",
          title="Predicted speedup = tau / c per tree (tau: the shipped EAGLE-2 head, 16 MT-bench prompts)")
    fig.legend(*a.get_legend_handles_labels(), fontsize=9, loc="lower center", ncol=2, frameon=False)
    a.grid(alpha=0.3)
    b = ax[1]
    fwd = {int(k): v for k, v in measured["forward_ms"].items()}
    ks = sorted(fwd)
    b.plot(ks, [fwd[k] / fwd[1] for k in ks], "o-", color="#0072B2", lw=2.5, label="t(k)/t(1), measured here")
    b.plot(ks, [1.0] * len(ks), "--", color="#E69F00", lw=2.5, label="flat (GPU illustration, not measured)")
    b.set(xlabel="new tokens k in one target forward", ylabel="t(k) / t(1)",
          title=f"Verification: t(1) = {fwd[1]:.1f} ms; measured in {measured['seconds']:.0f} s")
    b.legend(fontsize=9)
    b.grid(alpha=0.3)
    fig.subplots_adjust(left=0.05, right=0.99, top=0.93, bottom=0.25, wspace=0.16)
    fig.savefig(path, dpi=110)
    plt.close(fig)
