"""Benchmark aggregation and reporting: samples in, a JSON-able dict / markdown / PNG out.

The JSON shape scripts may rely on:

    {"methods": {NAME: {"overall": STATS, "by_category": {CAT: STATS}}}, "config": ..., "samples": [...]}

STATS always has `tokens_per_s`, `tau`, `speedup_vs_vanilla`, `speedup_vs_hf` and
`identical_to_vanilla` (None where it does not apply: a baseline that was not run, or a sampled
run), plus the fields listed in `_stats`. Definitions:

  tokens_per_s           sum of new tokens / sum of wall time over all runs (= mean tokens / mean time)
  speedup_vs_X           tokens_per_s / X's tokens_per_s on the same prompts ("ratio of means")
  speedup_vs_X_median    median over prompts of (method tokens/s / X tokens/s), per-prompt ratio
  tau                    tokens per target forward after the prefill (engine: committed per cycle)
  draft_share etc.       shares of wall time; the rest is prefill and per-cycle bookkeeping
  identical_to_vanilla   greedy: share of prompts whose output equals vanilla's, every repeat
"""
from __future__ import annotations

import json
import os
import statistics

BASELINES = ("vanilla", "hf", "hf-pld", "llama.cpp")


def _key(base: str) -> str:
    return "speedup_vs_" + base.replace("-", "_").replace(".", "_")


def save_json(path: str | None, data: dict) -> dict:
    """Write a measurement's result to `path` (if given, indented, UTF-8) and return it."""
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
    return data


BANDS = ((0, 50), (50, 65), (65, 1e9))  # GB/s: a shared host's memory speed moves by minutes


def bandwidth_bands(rounds: list[dict]) -> list[dict]:
    """Rounds of an A/B measurement ({"gbs": the memory's read bandwidth before the round, then ms per
    key}) -> per band of BANDS that has rounds, the median ms of every key; printed as it goes."""
    bands = []
    for lo, hi in BANDS:
        part = [r for r in rounds if lo <= r["gbs"] < hi]
        if part:
            med = {key: round(statistics.median(r[key] for r in part), 2) for key in part[0] if key != "gbs"}
            bands.append({"GB/s from": lo, "GB/s to": None if hi == 1e9 else hi, "rounds": len(part), "ms (median)": med})
            print(f"{lo}-{'' if hi == 1e9 else hi} GB/s, {len(part)} rounds:", med)
    return bands


def _per_prompt_tps(samples) -> dict[int, float]:
    """prompt index -> tokens/s over that prompt's repeats."""
    tok, wall = {}, {}
    for s in samples:
        tok[s.prompt_index] = tok.get(s.prompt_index, 0) + s.new_tokens
        wall[s.prompt_index] = wall.get(s.prompt_index, 0.0) + s.wall_s
    return {i: tok[i] / wall[i] for i in tok if wall[i] > 0}


def _stats(method: str, by_method: dict[str, list], vanilla_ids: dict | None) -> dict:
    own = by_method[method]
    tokens = sum(s.new_tokens for s in own)
    wall = sum(s.wall_s for s in own)
    tps = tokens / wall if wall > 0 else 0.0
    cyc = [s for s in own if s.tau is not None and s.cycles]
    n_cycles = sum(s.cycles for s in cyc)
    eng = [s for s in own if s.draft_s is not None]  # engine runs carry a draft/verify split
    eng_cycles = sum(s.cycles for s in eng)
    eng_wall = sum(s.wall_s for s in eng)

    def per_cycle(attr):
        return 1e3 * sum(getattr(s, attr) for s in eng) / eng_cycles if eng_cycles else None

    def share(attr):
        return sum(getattr(s, attr) for s in eng) / eng_wall if eng and eng_wall > 0 else None

    st = {
        "n_prompts": len({s.prompt_index for s in own}),
        "n_runs": len(own),
        "new_tokens_mean": tokens / len(own),
        "wall_s_mean": wall / len(own),
        "tokens_per_s": tps,
        "tau": sum(s.tau * s.cycles for s in cyc) / n_cycles if n_cycles else None,
        "draft_ms_per_cycle": per_cycle("draft_s"),
        "verify_ms_per_cycle": per_cycle("verify_s"),
        "draft_share": share("draft_s"),
        "verify_share": share("verify_s"),
        "prefill_share": share("prefill_s"),
        "eos_share": sum(s.stop_reason == "eos" for s in own) / len(own),
    }
    mine = _per_prompt_tps(own)
    for base in BASELINES:
        st[_key(base)] = st[_key(base) + "_median"] = None
        if base not in by_method:
            continue
        other = by_method[base]
        b_tok, b_wall = sum(s.new_tokens for s in other), sum(s.wall_s for s in other)
        if b_tok and b_wall:
            st[_key(base)] = tps / (b_tok / b_wall)
        theirs = _per_prompt_tps(other)
        ratios = [mine[i] / theirs[i] for i in mine if theirs.get(i)]
        st[_key(base) + "_median"] = statistics.median(ratios) if ratios else None
    st["identical_to_vanilla"] = None
    if vanilla_ids is not None:
        same: dict[int, bool] = {}
        for s in own:
            ref = vanilla_ids.get(s.prompt_index)
            same[s.prompt_index] = same.get(s.prompt_index, True) and ref is not None and s.token_ids == ref
        st["identical_to_vanilla"] = sum(same.values()) / len(same)
    return st


def summarize(samples, methods: list[str], greedy: bool) -> dict:
    """Aggregate Samples per method, overall and per category (see the module docstring)."""
    vanilla_ids = None
    if greedy and "vanilla" in methods:
        vanilla_ids = {s.prompt_index: s.token_ids for s in samples if s.method == "vanilla" and s.repeat == 0}
    cats = sorted({s.category for s in samples})
    out = {"methods": {}}
    groups = {"overall": samples, **{c: [s for s in samples if s.category == c] for c in cats}}
    for m in methods:
        entry = {"overall": None, "by_category": {}}
        for name, group in groups.items():
            by_method = {mm: [s for s in group if s.method == mm] for mm in methods}
            by_method = {mm: v for mm, v in by_method.items() if v}
            st = _stats(m, by_method, vanilla_ids) if m in by_method else None
            if name == "overall":
                entry["overall"] = st
            else:
                entry["by_category"][name] = st
        out["methods"][m] = entry
    return out


TAU_BINS = (1.0, 1.4, 1.6, 1.8, 2.0, 2.5)


def _eagle_vanilla_pairs(samples: list[dict]) -> list[tuple[dict, dict]]:
    """(eagle sample, vanilla sample) of each prompt and repeat that ran both and made tokens."""
    pairs: dict[tuple, dict] = {}
    for d in samples:
        if d["method"] in ("eagle", "vanilla") and d["wall_s"] > 0:
            pairs.setdefault((d["prompt"], d["repeat"]), {})[d["method"]] = d
    return [(p["eagle"], p["vanilla"]) for p in pairs.values()
            if "eagle" in p and "vanilla" in p and p["eagle"]["tau"] and p["eagle"]["new_tokens"]
            and p["vanilla"]["new_tokens"]]


def _speedup(e: dict, v: dict) -> float:
    return (e["new_tokens"] / e["wall_s"]) / (v["new_tokens"] / v["wall_s"])


def eagle_by_tau(samples: list[dict]) -> dict | None:
    """How EAGLE's per-prompt speedup over vanilla follows its per-prompt tau.

    `break_even_tau` is the median over prompts of tau / speedup: the cost of one cycle in vanilla
    steps (c in docs/performance.md), i.e. the tau at which EAGLE merely ties with vanilla.
    None unless both methods were run.
    """
    rows = [(e["tau"], _speedup(e, v)) for e, v in _eagle_vanilla_pairs(samples)]
    if not rows:
        return None
    bins = []
    edges = TAU_BINS + (float("inf"),)
    for lo, hi in zip(edges, edges[1:]):
        sp = [s for t, s in rows if lo <= t < hi]
        if sp:
            bins.append({"tau_from": lo, "tau_to": None if hi == float("inf") else hi, "n": len(sp),
                         "speedup_mean": statistics.fmean(sp), "faster_share": sum(x > 1 for x in sp) / len(sp)})
    return {"n": len(rows), "break_even_tau": statistics.median(t / s for t, s in rows),
            "faster_share": sum(s > 1 for _, s in rows) / len(rows), "bins": bins}


def eagle_by_vanilla_step(samples: list[dict], groups: int = 4) -> list[dict] | None:
    """EAGLE per prompt against how fast vanilla ran on that prompt (its ms per token, which moves
    with the machine's memory speed from minute to minute on a shared host): the prompts in
    `groups` equal groups from vanilla's fastest steps to its slowest, each with its mean speedup
    and tau, the median cycle cost in vanilla steps (tau / speedup) and drafting's mean share of a
    vanilla step. None without both methods or with fewer prompts than groups."""
    rows = []
    for e, v in _eagle_vanilla_pairs(samples):
        step = v["verify_s"] / max(v["cycles"], 1)
        rows.append((step * 1e3, _speedup(e, v), e["tau"], e["draft_s"] / max(e["cycles"], 1) / step))
    if len(rows) < groups:
        return None
    rows.sort()
    out = []
    for g in range(groups):
        part = rows[g * len(rows) // groups:(g + 1) * len(rows) // groups]
        out.append({"vanilla_ms_from": part[0][0], "vanilla_ms_to": part[-1][0], "n": len(part),
                    "speedup_mean": statistics.fmean(r[1] for r in part), "tau_mean": statistics.fmean(r[2] for r in part),
                    "cycle_in_steps": statistics.median(r[2] / r[1] for r in part),
                    "draft_share": statistics.fmean(r[3] for r in part)})
    return out


def _vanilla_step_markdown(groups: list[dict]) -> list[str]:
    lines = ["", "EAGLE per prompt, by how fast vanilla ran on it (its ms per token: on a shared machine it moves "
             "with the memory's speed, and a faster step leaves more of a cycle to drafting and the tree's rows):", "",
             "| vanilla ms per token | prompts | speedup (mean) | τ (mean) | one cycle, in vanilla steps (median) "
             "| drafting, share of a vanilla step |", "|---|---|---|---|---|---|"]
    for g in groups:
        lines.append(f"| {g['vanilla_ms_from']:.1f}–{g['vanilla_ms_to']:.1f} | {g['n']} | {g['speedup_mean']:.2f}× "
                     f"| {g['tau_mean']:.2f} | {g['cycle_in_steps']:.2f} | {g['draft_share']:.3f} |")
    return lines


def _tau_markdown(bt: dict) -> list[str]:
    lines = ["", f"EAGLE per prompt, by its τ: one cycle costs **{bt['break_even_tau']:.2f}** vanilla steps "
             f"(median of τ / speedup over {bt['n']} prompts), so a prompt is faster than vanilla when its τ "
             f"exceeds that; {bt['faster_share']:.0%} of prompts were.", "",
             "| eagle τ | prompts | speedup over vanilla (mean) | share faster than vanilla |", "|---|---|---|---|"]
    for b in bt["bins"]:
        rng = f"{b['tau_from']:.1f}–{b['tau_to']:.1f}" if b["tau_to"] else f"≥ {b['tau_from']:.1f}"
        lines.append(f"| {rng} | {b['n']} | {b['speedup_mean']:.2f}× | {b['faster_share']:.0%} |")
    return lines


# -- markdown ---------------------------------------------------------------------------------
def _f(x, fmt="{:.2f}", none="–"):
    return none if x is None else fmt.format(x)


def _loads(cfg: dict) -> str:
    """The 1-minute load average at the start of the run, or of each of its segments."""
    segs = cfg.get("segments") or [cfg.get("machine", {})]
    loads = [str(s.get("loadavg_1m", "?")) for s in segs]
    if len(loads) == 1:
        return loads[0]
    return f"{' / '.join(loads)} at the starts of the run's {len(loads)} segments (it was resumed from its journal)"


def _weights(cfg: dict) -> str:
    """"weights gguf (chosen by --weights auto: why); " for the report's first line ("" in older reports)."""
    if "weights" not in cfg:
        return ""
    return f"weights {cfg['weights']}{f' ({why})' if (why := cfg.get('weights_why')) else ''}; "


def render_markdown(result: dict) -> str:
    methods = list(result["methods"])
    cfg = result.get("config", {})
    lines = []
    if cfg:
        e, mach = cfg.get("eagle", {}), cfg.get("machine", {})
        n, n_sel = cfg.get("n_prompts"), cfg.get("n_selected")
        count = f"{n} of {n_sel} selected" if n_sel and n_sel != n else f"{n}"
        where = f"`{os.path.basename(str(cfg.get('prompts')))}`"
        if cfg.get("categories"):
            where += f" (categories: {', '.join(cfg['categories'])})"
        lines.append(f"{count} prompts from {where}, "
                     f"{cfg.get('max_new_tokens')} new tokens, temperature {cfg.get('temperature')}, "
                     f"{cfg.get('repeats')} repeat(s); eagle {e.get('method')} depth {e.get('depth')} "
                     f"top-k {e.get('tree_top_k')} total {e.get('total_tokens')}, head `{e.get('head') or '-'}`; "
                     f"{cfg.get('model')}; {_weights(cfg)}{mach.get('threads')} threads, load {_loads(cfg)}")
        lines.append("")
    bases = [b for b in BASELINES if b in methods]
    head = ["method", "tok/s"] + [f"×{b} (mean / median)" for b in bases] + \
           ["τ", "draft ms/cycle", "verify ms/cycle", "draft / verify share", "identical to vanilla"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for m in methods:
        st = result["methods"][m]["overall"]
        if st is None:
            continue
        row = [m, _f(st["tokens_per_s"], "{:.1f}")]
        row += [f"{_f(st[_key(b)])} / {_f(st[_key(b) + '_median'])}" for b in bases]
        row += [_f(st["tau"]), _f(st["draft_ms_per_cycle"], "{:.1f}"), _f(st["verify_ms_per_cycle"], "{:.1f}"),
                f"{_f(st['draft_share'], '{:.0%}')} / {_f(st['verify_share'], '{:.0%}')}",
                _f(st["identical_to_vanilla"], "{:.0%}")]
        lines.append("| " + " | ".join(row) + " |")
    cats = sorted({c for m in methods for c in result["methods"][m]["by_category"]})
    if len(cats) > 1 or (cats and cats != ["all"]):
        lines += ["", "Per category: tokens/s (speedup over vanilla); τ and identity for eagle" if "eagle" in methods
                  else "Per category: tokens/s (speedup over vanilla)", ""]
        head = ["category", "n"] + methods + (["eagle ×hf-pld", "eagle τ", "eagle identical"]
                                              if "eagle" in methods else [])
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for c in cats:
            per = {m: result["methods"][m]["by_category"].get(c) for m in methods}
            n = next((st["n_prompts"] for st in per.values() if st), 0)
            row = [c, str(n)]
            for m in methods:
                st = per[m]
                row.append("–" if st is None else
                           f"{st['tokens_per_s']:.1f} ({_f(st['speedup_vs_vanilla'], '{:.2f}×', '?')})")
            if "eagle" in methods:
                st = per["eagle"] or {}
                row += [_f(st.get(_key("hf-pld")), "{:.2f}×"), _f(st.get("tau")),
                        _f(st.get("identical_to_vanilla"), "{:.0%}")]
            lines.append("| " + " | ".join(row) + " |")
    if result.get("eagle_by_tau"):
        lines += _tau_markdown(result["eagle_by_tau"])
    if result.get("eagle_by_vanilla_step"):
        lines += _vanilla_step_markdown(result["eagle_by_vanilla_step"])
    return "\n".join(lines)


# -- chart ------------------------------------------------------------------------------------
def render_png(result: dict, path: str) -> None:
    """Two panels: tokens/s per category and method; speedup over vanilla with the 2x target line."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = list(result["methods"])
    cats = sorted({c for m in methods for c in result["methods"][m]["by_category"]})
    groups = ["overall"] + (cats if cats != ["all"] else [])

    def stat(m, g, key):
        st = result["methods"][m]["overall"] if g == "overall" else result["methods"][m]["by_category"].get(g)
        return (st or {}).get(key) or 0.0

    fig, axes = plt.subplots(2, 1, figsize=(max(6.0, 1.1 * len(groups) * len(methods) ** 0.5 + 3), 7))
    w = 0.8 / len(methods)
    for ax, key, title in ((axes[0], "tokens_per_s", "tokens / s"), (axes[1], "speedup_vs_vanilla", "speedup over vanilla")):
        for j, m in enumerate(methods):
            xs = [i + (j - (len(methods) - 1) / 2) * w for i in range(len(groups))]
            ys = [stat(m, g, key) for g in groups]
            bars = ax.bar(xs, ys, width=w, label=m)
            if key == "speedup_vs_vanilla":
                ax.bar_label(bars, fmt="%.2f", fontsize=7)
        ax.set_xticks(range(len(groups)), groups, rotation=20 if len(groups) > 5 else 0, fontsize=8)
        ax.set_ylabel(title)
        ax.grid(axis="y", alpha=0.3)
    axes[1].axhline(1.0, color="black", lw=0.8)
    axes[1].axhline(2.0, color="gray", lw=0.8, ls="--", label="2× target")
    axes[0].legend(fontsize=8, ncol=len(methods))
    cfg = result.get("config", {})
    fig.suptitle(f"{cfg.get('model', '')}, {cfg.get('max_new_tokens', '?')} new tokens, T={cfg.get('temperature', '?')}",
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- docs -------------------------------------------------------------------------------------
def replace_block(path: str, name: str, text: str) -> None:
    """Replace the text between `<!-- NAME:begin -->` and `<!-- NAME:end -->` in a markdown file
    (appended at the end if the markers are absent), so measured tables can be regenerated."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    doc = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
    block = f"{begin}\n{text.strip()}\n{end}"
    if begin in doc and end in doc:
        doc = doc[: doc.index(begin)] + block + doc[doc.index(end) + len(end):]
    else:
        doc = doc.rstrip() + "\n\n" + block + "\n"
    with open(path, "w", encoding="utf-8") as f:
        f.write(doc)
