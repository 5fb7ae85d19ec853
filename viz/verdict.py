"""Why EAGLE won or lost this run, in its own numbers: the arithmetic of a speculative cycle.

A cycle commits τ tokens (the accepted drafts plus the target's bonus token) for the price of one
verification of the whole tree plus the drafting. Measured in vanilla steps, that price is c, and
the speedup is about τ / c. When EAGLE loses, c exceeded τ: the note says which part of c did it
(verifying the tree's rows, or drafting) and what to try, in the page's language.
"""
from __future__ import annotations

import html

from eagle_core.trace import Run

from .i18n import Strings

TEXT = Strings({
    "sum": ("Why: a cycle committed τ = {tau:.2f} tokens and cost {c:.2f} vanilla steps (verifying {rows} rows "
            "{verify:.1f} ms, drafting {draft:.1f} ms, against {step:.1f} ms for one vanilla step), so τ / c ≈ {pred:.2f}×.",
            "原因：每轮提交 τ = {tau:.2f} 个词元（含奖励词元），花费相当于 {c:.2f} 次普通解码步（验证 {rows} 行 "
            "{verify:.1f} 毫秒，起草 {draft:.1f} 毫秒；一次普通解码步 {step:.1f} 毫秒），所以 τ / c ≈ {pred:.2f}×。"),
    "lost": ("EAGLE was slower than vanilla on this run.", "本次 EAGLE 比普通解码慢。"),
    "verify": ("Verifying the tree cost {x:.2f} vanilla steps on this CPU: a smaller tree (fewer rows) verifies cheaper "
               "here; the hardware panel in the Learn tab shows what each row count costs on this machine.",
               "在本机处理器上验证整棵树花费 {x:.2f} 次普通解码步：较小的树（行数更少）验证更便宜；"
               "“学习”页的硬件面板显示本机每种行数的开销。"),
    "draft": ("Drafting took {share:.0%} of each cycle: a shallower tree drafts in fewer head passes.",
              "起草占每轮时间的 {share:.0%}：较浅的树需要的草稿头前向更少。"),
    "tau": ("Few drafts were accepted (τ {tau:.2f}): on this prompt the head's guesses rarely matched the target.",
            "被接受的草稿很少（τ {tau:.2f}）：在这个提示上草稿头的猜测很少与目标模型一致。"),
})


def cycle_costs(eagle: Run, vanilla: Run) -> dict | None:
    """The cycle's arithmetic from two finished runs' summaries, or None when either lacks cycles."""
    e, v = eagle.summary, vanilla.summary
    if e.cycles <= 0 or v.cycles <= 0 or v.tokens_per_s <= 0:
        return None
    step = (v.verify_s + v.draft_s) / v.cycles  # a vanilla cycle is one step of one token
    if step <= 0:
        return None
    verify, draft = e.verify_s / e.cycles, e.draft_s / e.cycles
    s = e.settings or {}
    method = e.method
    if method in ("eagle2", "eagle3"):
        rows = int(s.get("total_tokens", 0)) + 1
    elif method == "chain":
        rows = int(s.get("chain_length", 0)) + 1
    elif method == "eagle1":
        rows = len(s.get("static_tree", ())) + 1
    else:
        rows = 1
    c = (verify + draft) / step
    return {"tau": e.tau, "rows": rows, "verify_ms": 1e3 * verify, "draft_ms": 1e3 * draft, "step_ms": 1e3 * step,
            "c": c, "predicted": e.tau / c if c > 0 else 0.0, "speedup": e.tokens_per_s / v.tokens_per_s}


def verdict_html(eagle: Run | None, vanilla: Run | None, lang: str = "en") -> str:
    """One paragraph under the cards: the cycle's arithmetic, and when EAGLE lost, the main reason."""
    if eagle is None or vanilla is None or eagle.summary.method == "vanilla":
        return ""
    k = cycle_costs(eagle, vanilla)
    if k is None:
        return ""
    text = TEXT("sum", lang, tau=k["tau"], c=k["c"], rows=k["rows"], verify=k["verify_ms"], draft=k["draft_ms"],
                step=k["step_ms"], pred=k["predicted"])
    if k["speedup"] < 1.0:
        verify_steps, share = k["verify_ms"] / k["step_ms"], k["draft_ms"] / (k["verify_ms"] + k["draft_ms"])
        if k["tau"] < 1.3:
            reason = TEXT("tau", lang, tau=k["tau"])
        elif share > 0.25:
            reason = TEXT("draft", lang, share=share)
        else:
            reason = TEXT("verify", lang, x=verify_steps)
        text = f"<b>{html.escape(TEXT('lost', lang))}</b> {html.escape(text)} {html.escape(reason)}"
        return f"<p class='eg-note eg-verdict eg-lost'>{text}</p>"
    return f"<p class='eg-note eg-verdict'>{html.escape(text)}</p>"
