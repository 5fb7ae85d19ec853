"""Tables and chart for the cost model (costmodel.py measures, this file presents)."""
from __future__ import annotations

# The speedups the tables and chart quote for heads better than ours: for Vicuna-13B on
# MT-bench (greedy) EAGLE (arXiv:2401.15077) reports tau 3.98 and EAGLE-2 (arXiv:2406.16858) 4.83.
HYPOTHETICAL_TAUS = (2.0, 3.0, 4.0)

DOC_SIZES = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)


def forward_table(fwd: dict) -> str:
    base = fwd[1]["body_ms"] + fwd[1]["lm_head_ms"] if 1 in fwd else None
    lines = ["| new tokens n | body ms | LM head ms (n rows) | total ms | in 1-token steps |", "|---|---|---|---|---|"]
    for n in [n for n in DOC_SIZES if n in fwd] or sorted(fwd):
        b, lm = fwd[n]["body_ms"], fwd[n]["lm_head_ms"]
        lines.append(f"| {n} | {b:.1f} | {lm:.1f} | {b + lm:.1f} | {(b + lm) / base:.2f} |" if base else
                     f"| {n} | {b:.1f} | {lm:.1f} | {b + lm:.1f} | – |")
    return "\n".join(lines)


def head_table(hs: dict) -> str:
    vocabs = sorted({N for N, _ in hs["lm_ms"]}, reverse=True)
    lines = ["| tokens m | head layer ms | " + " | ".join(f"draft LM head N={N} ms" for N in vocabs) + " |",
             "|---|---|" + "---|" * len(vocabs)]
    for m, ms in sorted(hs["head_ms"].items()):
        lines.append(f"| {m} | {ms:.2f} | " + " | ".join(f"{hs['lm_ms'][(N, m)]:.2f}" for N in vocabs) + " |")
    return "\n".join(lines)


def tree_rows(cycles: dict, taus: dict | None = None) -> list[dict]:
    van = cycles["vanilla"]["cycle_ms"]
    rows = []
    for key, r in cycles.items():
        if key == "vanilla":
            continue
        vname, t = key
        c = r["cycle_ms"] / van
        row = {"vocab": vname, "setting": t.label, "nodes": t.total_tokens + 1, "draft_ms": r["draft_ms"],
               "verify_ms": r["verify_ms"], "cycle_ms": r["cycle_ms"], "c": c, "break_even_tau": c,
               "tau_for_2x": 2 * c, **{f"speedup_at_tau_{x:g}": x / c for x in HYPOTHETICAL_TAUS}}
        if taus and t in taus:
            row["measured_tau"] = taus[t]
            row["predicted_speedup"] = taus[t] / c
        rows.append(row)
    return rows


def tree_table(cycles: dict, taus: dict | None = None) -> str:
    van = cycles["vanilla"]
    rows = tree_rows(cycles, taus)
    has_tau = any("measured_tau" in r for r in rows)
    head = (["draft vocab", "tree d/k/t", "nodes verified", "draft ms", "verify ms", "cycle ms", "c (vanilla steps)",
             "τ for 2×"] + [f"speedup at τ={x:g}" for x in HYPOTHETICAL_TAUS]
            + (["measured τ", "predicted speedup"] if has_tau else []))
    lines = [f"Vanilla cycle: {van['cycle_ms']:.1f} ms ({1e3 / van['cycle_ms']:.1f} tok/s).", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["vocab"], r["setting"], str(r["nodes"]), f"{r['draft_ms']:.1f}", f"{r['verify_ms']:.1f}",
                 f"{r['cycle_ms']:.1f}", f"{r['c']:.2f}", f"{r['tau_for_2x']:.2f}"]
        cells += [f"{r[f'speedup_at_tau_{x:g}']:.2f}×" for x in HYPOTHETICAL_TAUS]
        if has_tau:
            cells += [f"{r['measured_tau']:.2f}" if "measured_tau" in r else "–",
                      f"{r['predicted_speedup']:.2f}×" if "predicted_speedup" in r else "–"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_png(fwd: dict, hs: dict, cycles: dict, path: str, title: str = "") -> None:
    """Left: target forward vs n. Middle: head step cost. Right: cycle cost c vs tree size."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(1, 3, figsize=(15, 4.2))
    ns = sorted(fwd)
    ax[0].plot(ns, [fwd[n]["body_ms"] for n in ns], "o-", ms=3, label="model body")
    ax[0].plot(ns, [fwd[n]["body_ms"] + fwd[n]["lm_head_ms"] for n in ns], "o-", ms=3, label="body + LM head (n rows)")
    ax[0].set(xlabel="new tokens n in one forward (~300-token cache)", ylabel="ms", title="target forward")
    ax[0].legend(fontsize=8)
    ms = sorted(hs["head_ms"])
    ax[1].plot(ms, [hs["head_ms"][m] for m in ms], "o-", label="head layer")
    for N in sorted({N for N, _ in hs["lm_ms"]}, reverse=True):
        ax[1].plot(ms, [hs["lm_ms"][(N, m)] for m in ms], "s--", label=f"draft LM head N={N}")
    ax[1].set(xlabel="tokens m per head step", ylabel="ms", title="one draft step")
    ax[1].legend(fontsize=8)
    van = cycles["vanilla"]["cycle_ms"]
    for vname in sorted({k[0] for k in cycles if k != "vanilla"}):
        pts = sorted((t.total_tokens + 1, r["cycle_ms"] / van, t.label) for (v, t), r in
                     ((k, r) for k, r in cycles.items() if k != "vanilla") if v == vname)
        ax[2].plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=f"c, draft vocab {vname}")
        for x, y, lab in pts:
            ax[2].annotate(lab, (x, y), fontsize=6, xytext=(3, 3), textcoords="offset points")
    for tau in HYPOTHETICAL_TAUS:
        ax[2].axhline(tau / 2, color="gray", lw=0.6, ls=":")
        ax[2].annotate(f"2× needs τ={tau:g}", (ax[2].get_xlim()[0], tau / 2), fontsize=7, color="gray")
    ax[2].set(xlabel="tree nodes verified", ylabel="cycle cost c (vanilla steps)",
              title="speedup = τ / c  (break-even τ = c)")
    ax[2].legend(fontsize=8)
    for a in ax:
        a.grid(alpha=0.3)
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
