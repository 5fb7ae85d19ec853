"""Which trees pay on this machine, said under the tree settings: from the hardware panel's
measurement (this tab's own, once the user ran it, else the recorded one, labelled), each tree's
predicted speedup τ / c (eagle_core.machine.predict) and any cliff, a row count where the
verification's cost jumps (a kernel's register tile running out: docs/performance.md).

Also the tree the page opens with: chosen for this machine and weight format when the model loads
(eagle_core.machine.choose_tree, cached), said on the model line (`choice_note`), and put in the tree's
sliders once the model is ready unless the user has moved them (`opening_tree`)."""
from __future__ import annotations

import json

from eagle_core import PRESETS
from eagle_core.machine import RECORDED, TreeChoice, choose_tree, load_tau_table, predict
from eagle_core.machine.tree_choice import preset_choice
from viz.i18n import Strings

CLIFF = 1.25  # t(k) / t(k') between two measured row counts at most 4 apart: a jump, not a slope

TEXT = Strings({
    "head": ("**Which trees pay here** ({where}): predicted speedup τ / c, where c is a cycle's cost in vanilla steps.",
             "<b>哪些树在这里划算</b>（{where}）：预测加速比 τ / c，c 为每轮开销折合的普通解码步数。"),
    "row": ("{tree} ({rows} rows{name}): {speedup:.2f}×", "{tree}（{rows} 行{name}）：{speedup:.2f}×"),
    "pays": ("Trees above 1× pay; the best here is {best}.", "高于 1× 的树才划算；这里最好的是 {best}。"),
    "cliff": ("A cliff: verifying {b} rows costs {x:.2f}× what {a} rows cost ({ta:.1f} → {tb:.1f} ms).",
              "断崖：验证 {b} 行的开销是 {a} 行的 {x:.2f} 倍（{ta:.1f} → {tb:.1f} 毫秒）。"),
    "no_cliff": ("No cliff: the verification's cost grows smoothly with the rows up to {k}.",
                 "没有断崖：验证开销随行数平滑增长，直到 {k} 行。"),
    "recorded": ("recorded on {where}", "记录于 {where}"),
    "measured": ("measured on this machine", "在本机测得"),
    "none": ("The hardware panel in the Learn tab measures which trees pay on this machine.",
             "“学习”页的硬件面板可以测出哪些树在本机划算。"),
    "chosen": ("**Tree {tree}** chosen for this machine ({weights} weights): predicted {p:.2f}× vanilla{own}; "
               "measured t(1) {t1:.1f} ms, {curve}.",
               "<b>树 {tree}</b> 为本机选定（{weights} 权重）：预测为普通解码的 {p:.2f}×{own}；"
               "实测 t(1) {t1:.1f} 毫秒，{curve}。"),
    "own": (" (the `{preset}` preset {p:.2f}×)", "（预设 `{preset}` 为 {p:.2f}×）"),
    "kept": ("**Tree {tree}**, the `{preset}` preset: {reason}.", "<b>树 {tree}</b>，即预设 `{preset}`：{reason}。"),
})

# Why the preset was kept, in Chinese, by TreeChoice.why (eagle_core/machine/tree_choice.py); English is
# TreeChoice.reason itself, as the CLI prints it
KEPT_ZH = {
    "fixed_env": "设置了 {env}=1",
    "not_cpu": "不是 CPU（{device}）：用该设备的预设，不做测量",
    "portable": "可移植路径：没有 C 内核，不为选择而测量 t(k)",
    "other_head": "τ 记录的是随附的草稿头（{shipped}），不是 {head}",
    "no_head": "这台机器还没有缓存的选择；用 EAGLE-2 草稿头运行一次就会测量",
    "failed": "无法测量 t(k)：{error}",
    "busy": "测量 t(k) 时其他进程占用了 {used} 的 CPU（最多允许 {limit}）；下次启动会重新测量",
    "noise": "测得的 t(k) 是噪声而不是曲线：t({b}) {tb} 毫秒低于 t({a}) {ta} 毫秒；下次启动会重新测量",
    "not_chosen": "没有选择（{error}）",
}


def cliffs(forward_ms: dict) -> list[tuple[int, int, float, float]]:
    """(k', k, t(k'), t(k)) for consecutive measured row counts at most 4 apart whose cost jumps by CLIFF."""
    ks = sorted(forward_ms)
    return [(a, b, forward_ms[a], forward_ms[b]) for a, b in zip(ks, ks[1:])
            if b - a <= 4 and forward_ms[b] > CLIFF * forward_ms[a]]


def advice(measured: dict | None, table: dict, lang: str = "en", where: str = "") -> str:
    """Markdown: each tree with a known τ and a measured verification size, its predicted speedup."""
    if not measured:
        return TEXT("none", lang)
    fwd = {int(k): v for k, v in measured["forward_ms"].items()}
    step = {int(k): v for k, v in measured["step_ms"].items()}
    names = {f"{p['depth']},{p['tree_top_k']},{p['total_tokens']}": n for n, p in PRESETS.items()}
    trees = [t for t in table["trees"] if t.total_tokens + 1 <= max(fwd)]
    rows = predict(fwd, step, table["tau"], trees)
    if not rows:
        return TEXT("none", lang)
    label = TEXT("recorded", lang, where=where) if where else TEXT("measured", lang)
    lines = [TEXT("head", lang, where=label), ""]
    for r in rows:
        name = f", `{names[r['tree']]}`" if r["tree"] in names else ""
        lines.append("- " + TEXT("row", lang, tree=r["tree"], rows=r["nodes"], name=name, speedup=r["speedup"]))
    lines += ["", TEXT("pays", lang, best=max(rows, key=lambda r: r["speedup"])["tree"])]
    jumps = [c for c in cliffs(fwd) if c[1] <= max(r["nodes"] for r in rows)]
    lines.append(" ".join(TEXT("cliff", lang, a=a, b=b, x=tb / ta, ta=ta, tb=tb) for a, b, ta, tb in jumps)
                 or TEXT("no_cliff", lang, k=max(r["nodes"] for r in rows)))
    return "\n".join(lines)


def recorded_advice(lang: str = "en", path: str = RECORDED) -> str:
    """The advice from the recorded measurement, labelled with its machine and date."""
    try:
        with open(path, encoding="utf-8") as f:
            m = json.load(f)
        table = load_tau_table()
    except (OSError, ValueError, KeyError):
        return TEXT("none", lang)
    where = f"{m.get('hardware', m.get('device', ''))}, {m.get('date', '')}".strip(", ")
    return advice(m, table, lang, where=where)


def page_choice(engine) -> TreeChoice | None:
    """The tree chosen for this machine (on the engine thread, while the model loads: cached, else a few
    seconds of measurement); None where the page keeps its opening preset without asking (no EAGLE-2 head)."""
    if engine is None or engine.drafter is None:
        return None
    try:
        return choose_tree(engine)
    except Exception as e:  # the page opens with its preset and says why; the model still serves
        return preset_choice(engine.target.device, f"not chosen ({type(e).__name__}: {e})", why="not_chosen",
                             why_args={"error": f"{type(e).__name__}: {e}"})


def choice_note(choice: TreeChoice | None, lang: str = "en") -> str:
    """The model line's sentence on the tree the page opens with ("" without a choice)."""
    if choice is None:
        return ""
    if not choice.chosen:
        zh = lang == "zh" and choice.why in KEPT_ZH
        reason = KEPT_ZH[choice.why].format(**choice.why_args) if zh else choice.reason
        return TEXT("kept", lang, tree=choice.tree.text, preset=choice.preset, reason=reason)
    rows = choice.tree.total_tokens + 1
    ks = sorted(k for k in choice.ratios if k > 1 and k in (rows, max(choice.ratios)))
    curve = ", ".join(f"t({k})/t(1) {choice.ratios[k]:.2f}" for k in ks)
    own = TEXT("own", lang, preset=choice.preset, p=choice.preset_predicted) if choice.preset_predicted else ""
    return TEXT("chosen", lang, tree=choice.tree.text, weights=choice.weights, p=choice.predicted, own=own,
                t1=choice.t1_ms, curve=curve)


def opening_tree(choice: TreeChoice | None, shown: tuple, opening: dict) -> tuple | None:
    """The (depth, top-k, total) to put in the tree's sliders now, or None to leave them: only a chosen tree,
    and only while they still hold the tree the page opened with (a tree the user set always wins)."""
    if choice is None or not choice.chosen:
        return None
    try:
        held = tuple(int(float(v)) for v in shown)
    except (TypeError, ValueError):
        return None
    want = (choice.tree.depth, choice.tree.width, choice.tree.total_tokens)
    if held != (opening["depth"], opening["tree_top_k"], opening["total_tokens"]) or held == want:
        return None
    return want
