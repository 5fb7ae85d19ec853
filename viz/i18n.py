"""English and Simplified Chinese text of the figures' and captions' run-time strings, and the
helper every translated string goes through. English is the default and the source of truth:
each entry is (English, 简体中文), side by side, written once. The app's own labels and status
lines use the same helper (eagle_app/i18n.py); the Learn tab's long text is viz/learn.py and
viz/learn_zh.py. No gradio here.
"""
from __future__ import annotations

LANGS = ("en", "zh")


def lang_of(code) -> str:
    """A browser's language (navigator.language "zh-CN", an Accept-Language header "zh-TW,zh;q=0.9,en;q=0.8",
    a radio's "zh") -> "zh" for any Chinese, else "en"."""
    first = str(code or "").split(",")[0].split(";")[0].strip().lower().replace("_", "-")
    return "zh" if first == "zh" or first.startswith("zh-") or first == "中文" else "en"


class Strings:
    """{key: (English, Chinese)}; `t(key, lang, **fields)` the text in that language, formatted."""

    def __init__(self, entries: dict[str, tuple[str, str]]):
        for key, pair in entries.items():
            assert isinstance(pair, tuple) and len(pair) == 2 and all(pair), key
        self.entries = entries

    def __call__(self, key: str, lang: str = "en", **fields) -> str:
        text = self.entries[key][1 if lang_of(lang) == "zh" else 0]
        return text.format(**fields) if fields else text

    def table(self, lang: str) -> dict[str, str]:
        i = 1 if lang == "zh" else 0
        return {k: v[i] for k, v in self.entries.items()}


FIGURE_TEXT = Strings({
    # the coloured text (viz/text.py)
    "legend.draft": ("draft ✓", "草稿 ✓"),
    "legend.draft_what": ("drafted by EAGLE, accepted by the target", "由 EAGLE 起草、目标模型接受"),
    "legend.bonus": ("bonus ★", "奖励 ★"),
    "legend.bonus_what": ("the target's own token (one per cycle)", "目标模型自己的词元（每轮一个）"),
    "legend.first": ("first", "首个"),
    "legend.first_what": ("from the prompt pass", "来自读取提示词的那次前向"),
    "legend.cycle": ("│ = start of a draft/verify cycle", "│ = 一轮起草/验证的开始"),
    "text.empty": ("The generated text appears here.", "生成的文本显示在这里。"),
    "text.cycle_title": ("cycle {n}: {k} accepted draft(s) + bonus", "第 {n} 轮：接受 {k} 个草稿 + 奖励词元"),
    # a cycle's caption (viz/text.py cycle_caption)
    "cap.head": ("**Cycle {n}**", "<b>第 {n} 轮</b>"),
    "cap.head_of": ("**Cycle {n} of {total}**", "<b>第 {n} 轮（共 {total} 轮）</b>"),
    "cap.why_vanilla": ("vanilla decoding", "普通解码"),
    "cap.why_last": ("only one token was left to generate", "只剩一个词元要生成"),
    "cap.no_drafts": ("{head} · No drafts this cycle ({why}): one target forward ({ms:.0f} ms) produced exactly one "
                      "token, {bonus}.",
                      "{head} · 本轮没有草稿（{why}）：目标模型一次前向（{ms:.0f} ms）恰好产生一个词元：{bonus}。"),
    "cap.drafted": ("{head} · The EAGLE head drafted **{n}** token{s} in a tree {depth} deep ({draft:.0f} ms). The "
                    "target checked the whole tree in **one** forward pass ({verify:.0f} ms) using the tree-attention "
                    "mask. ",
                    "{head} · EAGLE 头以一棵 {depth} 层深的树起草了 <b>{n}</b> 个词元（{draft:.0f} ms）。目标模型借助"
                    "树注意力掩码，在<b>一次</b>前向中检查了整棵树（{verify:.0f} ms）。"),
    "cap.rule.greedy": ("each matched the target's own top choice", "每个都与目标模型自己的首选一致"),
    "cap.rule.point_mass": ("each passed its random draw: u < p, or for a later sibling u < p ÷ the mass the "
                            "rejected siblings left",
                            "每个都通过了随机抽签：u < p 时通过；后面的兄弟节点则当 u < p/剩余质量 时通过（剩余质量：被拒兄弟留下的概率质量）"),
    "cap.rule.ratio": ("each passed its draw u < min(1, p/q)", "每个都通过了抽签 u < min(1, p/q)"),
    "cap.rule1.greedy": ("it matched the target's own top choice", "它与目标模型自己的首选一致"),
    "cap.rule1.point_mass": ("it passed its random draw: u < p, or for a later sibling u < p ÷ the mass the "
                             "rejected siblings left",
                             "它通过了随机抽签：u < p 时通过；后面的兄弟节点则当 u < p/剩余质量 时通过（剩余质量：被拒兄弟留下的概率质量）"),
    "cap.rule1.ratio": ("it passed its draw u < min(1, p/q)", "它通过了抽签 u < min(1, p/q)"),
    "cap.accepted": ("It accepted {quoted} ({why}). ", "它接受了 {quoted}（{why}）。"),
    "cap.vanilla": ("{head} · Vanilla decoding drafts nothing: one target pass ({ms:.0f} ms) produced one token, "
                    "{bonus}.",
                    "{head} · 普通解码不起草：目标模型一次前向（{ms:.0f} ms）产生一个词元：{bonus}。"),
    "cap.none_greedy": ("It accepted none of the drafts: no first-level draft was the target's own top choice, so "
                        "the deeper ones were never tested. ",
                        "它一个草稿也没有接受：第一层的草稿都不是目标模型自己的首选，所以更深的草稿从未被检验。"),
    "cap.none_sampled": ("It accepted none of the drafts: each tested one lost its random draw (a rejection is "
                         "chance here). ",
                         "它一个草稿也没有接受：每个被检验的草稿都输掉了随机抽签（这里的拒绝是概率使然）。"),
    "cap.rejected": ("Rejected: {quoted}{more}", "被拒绝：{quoted}{more}"),
    "cap.and_more": (" and more", " 等"),
    "cap.untested": ("; {k} other draft{were} never tested (a parent was rejected, or a sibling was accepted first). ",
                     "；另有 {k} 个草稿从未被检验（其父节点被拒，或某个兄弟节点先被接受）。"),
    "cap.period": (". ", "。"),
    "cap.bonus": ("After the accepted path the target adds its own **bonus** token {bonus}, so this cycle committed "
                  "**{k}** token{s} for one target pass",
                  "在被接受的路径之后，目标模型加上自己的<b>奖励</b>词元 {bonus}，因此本轮以一次目标前向提交了 <b>{k}</b> 个词元"),
    "cap.gain": (" (vanilla would have produced 1).", "（普通解码只会产生 1 个）。"),
    "cap.no_gain": (" — no gain over vanilla, but nothing lost either.", "——比普通解码没有收益，但也没有损失。"),
    "cap.quote": ("“{t}”", "“{t}”"),
    # the comparison cards
    "cards.empty": ("Run Generate to compare EAGLE with vanilla decoding.", "点击“生成”来比较 EAGLE 与普通解码。"),
    "cards.eagle_rate": ("EAGLE tokens/s", "EAGLE tokens/s"),
    "cards.eagle_wall": ("EAGLE wall time", "EAGLE 总耗时"),
    "cards.tau": ("τ: tokens per cycle (one target pass), bonus included", "τ：每轮（一次目标前向）提交的词元数，含奖励词元"),
    "cards.eagle_dv": ("EAGLE draft / verify time", "EAGLE 起草 / 验证时间"),
    "cards.vanilla_rate": ("vanilla tokens/s", "普通解码词元/秒"),
    "cards.vanilla_wall": ("vanilla wall time", "普通解码总耗时"),
    "cards.speedup": ("speedup (tokens/s ratio)", "加速比（词元/秒之比）"),
    "cards.identical": ("✓ identical", "✓ 完全一致"),
    "cards.identical_all": ("outputs, token for token", "两者输出逐词元相同"),
    "cards.identical_part": ("over the {n} tokens both produced (one stopped early)",
                             "在两者都产生的 {n} 个词元上（其中一个提前停止）"),
    "cards.differ": ("✗ differ", "✗ 不同"),
    "cards.differ_greedy": ("outputs (unexpected at temperature 0)", "输出不同（温度为 0 时不应发生）"),
    "cards.differ_from": ("from token {n} on: see below", "从第 {n} 个词元起：见下文"),
    "part.head": ("The outputs part at new token {n}: vanilla chose {v}, EAGLE {e}. Asked once more (one ordinary "
                  "forward of the shared text), the target puts their logits {margin} apart (largest logit {scale}).",
                  "两者的输出在第 {n} 个新词元处分开：普通解码选了 {v}，EAGLE 选了 {e}。再问一次目标模型（对共同文本做一次"
                  "普通前向），它给两者的 logit 相差 {margin}（最大的 logit 为 {scale}）。"),
    "part.tie": (" That is a near-tie in {dtype} (within {tol}, a few units of its rounding at this scale): a forward "
                 "over a whole tree rounds differently from a forward over one token, and here the rounding decided. "
                 "Both outputs are greedy decodes of the target to within that rounding; in float32 they are identical.",
                 "这在 {dtype} 下是近乎打平（相差在 {tol} 以内，是该量级下舍入误差的几个单位）：对整棵树的前向与对一个词元的"
                 "前向舍入方式不同，这里是舍入决定了结果。在这一舍入误差之内，两个输出都是目标模型的贪心解码；"
                 "在 float32 下两者完全相同。"),
    "part.bug": (" That is no near-tie: the target clearly prefers one of them, so this is a bug in the engine (please "
                 "report it with the trace).",
                 "这不是近乎打平：目标模型明显偏好其中一个，所以这是引擎的缺陷（请连同轨迹一起报告）。"),
    "cards.differ_sampled": ("≠ differ", "≠ 不同"),
    "cards.differ_sampled_what": ("sampled: both follow the target's distribution", "采样：两者都服从目标模型的分布"),
    # figure titles, axes and legends (viz/tree.py, probs.py, charts.py; hover texts stay English)
    "fig.tree": ("Cycle {n}: {d} drafted, {a} accepted + 1 bonus = {k} token{s}",
                 "第 {n} 轮：起草 {d} 个，接受 {a} 个 + 1 个奖励 = {k} 个词元"),
    "fig.tree_x": ("depth in the draft tree", "在草稿树中的深度"),
    "fig.root": ("root (last committed token)", "根（最后提交的词元）"),
    "fig.bonus": ("bonus (the target's own token)", "奖励（目标模型自己的词元）"),
    "fig.accepted": ("accepted (draft matched the target)", "接受（草稿与目标模型一致）"),
    "fig.rejected": ("rejected (tested, refused)", "拒绝（被检验后拒绝）"),
    "fig.not_reached": ("never tested", "从未检验"),
    "hover.bonus": ("<b>bonus token</b> {tok} (id {id})<br>the target's own choice after the accepted path<br>"
                    "p (target) = {p}", "<b>奖励词元</b> {tok}（id {id}）<br>目标模型在被接受路径之后自己的选择<br>p（目标模型）= {p}"),
    "hover.root": ("<b>root</b> {tok} (id {id})<br>last committed token; every draft starts here",
                   "<b>根</b> {tok}（id {id}）<br>最后提交的词元；每个草稿都从这里开始"),
    "hover.node": ("<b>{tok}</b> (id {id}), depth {d}", "<b>{tok}</b>（id {id}），深度 {d}"),
    "hover.decision": ("decision: <b>{what}</b>", "判定：<b>{what}</b>"),
    "hover.q": ("q (draft) = {q}", "q（草稿）= {q}"),
    "hover.p": ("p (target) = {p}", "p（目标模型）= {p}"),
    "hover.score": ("cumulative score Σ log q = {s}", "累计得分 Σ log q = {s}"),
    "hover.u": ("draw u = {u} vs {p}", "抽签 u = {u}，对比 {p}"),
    "hover.sees": ("{a} sees {b}", "{a} 能看到 {b}"),
    "hover.blind": ("{a} does NOT see {b}", "{a} 看不到 {b}"),
    "dec.accepted": ("accepted", "接受"), "dec.rejected": ("rejected", "拒绝"),
    "dec.not_reached": ("never tested", "从未检验"),
    "fig.mask": ("Tree attention: row sees column<br><sup>(plus all {n} context tokens)</sup>",
                 "树注意力：行能看到列<br><sup>（外加全部 {n} 个上下文词元）</sup>"),
    "fig.probs": ("Cycle {n} · {rule}", "第 {n} 轮 · {rule}"),
    "fig.rule.greedy": ("greedy rule: accept a draft iff it is the target's top token",
                        "贪心规则：草稿当且仅当是目标模型的首选词元时被接受"),
    "fig.rule.point_mass": ("sampling rule: accept if u < p (later siblings: u < p ÷ the mass rejected ones left)",
                            "采样规则：u < p 时接受（后面的兄弟节点：当 u < p/剩余质量 时接受）"),
    "fig.rule.ratio": ("speculative sampling: accept if the draw u < min(1, p/q)", "投机采样：抽签 u < min(1, p/q) 时接受"),
    "fig.no_drafts": ("No drafted tokens this cycle (vanilla decoding): the target picks the next token alone.",
                      "本轮没有草稿词元（普通解码）：由目标模型独自选出下一个词元。"),
    "fig.vanilla_none": ("Vanilla drafts nothing: no tree to verify.", "普通解码不起草：没有要验证的树。"),
    "fig.p": ("p  target", "p  目标模型"),
    "fig.q": ("q  draft (EAGLE head)", "q  草稿（EAGLE 头）"),
    "fig.after": ("after {t}", "接在 {t} 之后"),
    "fig.bonus_tick": ("bonus", "奖励"),
    "fig.threshold_point_mass": ("threshold (p renormalised)", "阈值（重新归一化后的 p）"),
    "fig.threshold_ratio": ("threshold min(1, p/q)", "阈值 min(1, p/q)"),
    "fig.draw_u": ("draw u", "抽签 u"),
    "fig.accepted_mark": ("✓ accepted", "✓ 接受"),
    "fig.rejected_mark": ("✗ rejected", "✗ 拒绝"),
    "fig.hover_p": ("{t}: target p = {p} · {mark}", "{t}：目标模型 p = {p} · {mark}"),
    "fig.hover_q": ("{t}: draft q = {q}", "{t}：草稿 q = {q}"),
    "fig.hover_bonus": ("bonus {t}: the target's own token, p = {p}", "奖励 {t}：目标模型自己的词元，p = {p}"),
    "fig.hover_test": ("accept if u < {p}", "u < {p} 时接受"),
    "fig.p_bonus": ("p of the bonus token", "奖励词元的 p"),
    "fig.probability": ("probability", "概率"),
    "fig.acclen_empty": ("Accepted length per cycle appears here once a run starts.", "运行开始后，这里显示每轮的接受长度。"),
    "fig.acc_drafts": ("accepted drafts", "被接受的草稿"),
    "fig.bonus_token": ("bonus token", "奖励词元"),
    "fig.tau_so_far": ("τ so far (tokens per target pass)", "目前的 τ（每次目标前向的词元数）"),
    "fig.acclen": ("Tokens per cycle · τ = {tau:.2f}", "每轮的词元数 · τ = {tau:.2f}"),
    "fig.acclen_x": ("cycle (one target forward each)", "轮（每轮一次目标前向）"),
    "fig.tokens": ("tokens", "词元数"),
    "fig.depth_empty": ("Acceptance by depth needs drafted tokens (vanilla drafts none).",
                        "按深度统计的接受率需要草稿词元（普通解码不起草）。"),
    "fig.depth_bar": ("depth {d}", "深度 {d}"),
    "fig.depth": ("Acceptance rate by depth", "各深度的接受率"),
    "fig.depth_y": ("accepted / reached", "接受 / 到达"),
    "fig.timing_empty": ("Timings appear after a run.", "运行之后显示耗时。"),
    "fig.timing": ("Where the time went", "时间花在了哪里"),
    "fig.seconds": ("seconds", "秒"),
    "fig.prefill": ("prefill", "预填充"),
    "fig.drafting": ("drafting (EAGLE head)", "起草（EAGLE 头）"),
    "fig.verification": ("verification (target)", "验证（目标模型）"),
    "fig.other": ("other", "其他"),
    "fig.s": ("s", "秒"),
    "fig.tok_s": ("tok/s", "词元/秒"),
    "fig.hover_acc": ("cycle %{x}: %{y} accepted drafts", "第 %{x} 轮：接受 %{y} 个草稿"),
    "fig.hover_plus_bonus": ("cycle %{x}: +1 bonus", "第 %{x} 轮：+1 个奖励词元"),
    "fig.hover_depth": ("%{x}: accepted in %{text} of the cycles whose accepted path got that far",
                        "%{x}：在被接受路径到达这里的轮次中，接受了 %{text}"),
    # the Learn tab's figures (viz/languages.py, the Medusa tree)
    "lang.header": ("| head | benchmark | tree | τ en (n) | τ zh (n) | zh/en | acc. d1/d2 en | zh |",
                    "| 头 | 基准 | 树 | 英文 τ (n) | 中文 τ (n) | zh/en | 接受率 d1/d2 英文 | 中文 |"),
    "lang.English": ("English", "英文"),
    "lang.Chinese": ("Chinese", "中文"),
    "lang.title": ("Tokens per cycle (tau) by language · tree {a}/{b}/{c}, T={t:g}",
                   "各语言每轮的词元数（τ）· 树 {a}/{b}/{c}，T={t:g}"),
    "lang.y": ("tau (1.00 = vanilla)", "τ（1.00 = 普通解码）"),
    "lang.none": ("No per-language measurement is shipped yet.", "尚未随附按语言的测量结果。"),
    "medusa": ("Medusa: a Cartesian product of per-position top-3 (note “I am begin”)",
               "Medusa：各位置前 3 名的笛卡尔积（注意 “I am begin”）"),
    "replay.empty": ("The paced replay appears after a run.", "按实测速度的回放在运行后出现。"),
    "replay.vanilla": ("vanilla", "普通解码"),
})
