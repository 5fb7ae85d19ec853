"""The Lesson tab (issue 45, item 4): a teacher walks a class through seven shipped traces, one idea
each (eagle_app/lesson_plan.py), each opened at the cycle its rule picked, with a short caption and
one question for the class, in English and Chinese. Its own tab, not a section of the Learn tab: the
figures sit beside the words at projector size, and the Learn tab stays a reference to read.
Every string of the tab is in TEXT below; the tab redraws itself when the page's language changes.
"""
from __future__ import annotations

import functools
import json
import os

import gradio as gr

import viz
from eagle_core.trace import ACCEPTED, NOT_REACHED, REJECTED
from viz.examples import load_trace_file
from viz.i18n import Strings, lang_of
from viz.style import cycle_texts, md_text, token_label

from .lesson_plan import BY_KEY, LESSON_DIR, is_byte_token, load_manifest, load_meta, residual_nodes

TEXT = Strings({
    "tab": ("Lesson", "课堂"),
    "prev": ("◀ Previous step", "◀ 上一步"),
    "next": ("Next step ▶", "下一步 ▶"),
    "open": ("Open this trace in the Decode tab (scrub its cycles)", "在“解码”页打开这条轨迹（可逐轮拖动）"),
    "steps": ("Step", "步骤"),
    "intro": ("Seven recorded runs of the real model, one idea each. Pick a step, read the caption aloud, ask the "
              "question; the figures answer it.",
              "七段真实模型的运行记录，每段讲一个概念。选一步，朗读说明，提出问题；答案就在图中。"),
    "head": ("### Step {i} of {n} · {title}", "### 第 {i} 步（共 {n} 步）· {title}"),
    "ask": ("**Question for the class:** {q}", "**问全班**：{q}"),
    "source": ("Trace: “{prompt}” · cycle {k} of {of} · chosen as: {rule}",
               "轨迹：“{prompt}” · 第 {k} 轮（共 {of} 轮）· 选取规则：{rule}"),
    "missing": ("The lesson's traces are missing: run `python scripts/make_lesson_traces.py`.",
                "缺少课堂轨迹：请运行 `python scripts/make_lesson_traces.py`。"),
    "opened": ("Lesson step {i}: {title} · cycle {k} of {of}", "课堂第 {i} 步：{title} · 第 {k} 轮（共 {of} 轮）"),
    "list_sep": ("”, “", "”、“"),

    "title.tree": ("The draft tree", "草稿树"),
    "cap.tree": ("Before the big model runs, EAGLE's small draft head guesses what comes next. It does not guess "
                 "one token but a tree. The root is the token the model chose last (“{root}”). The head tried {kids} "
                 "different next tokens, then kept guessing after the most promising ones, {depth} levels deep: "
                 "{n} drafts in all. Each path down from the root is one possible continuation. The colours show "
                 "what the target model later decided about them: the next steps' story.",
                 "在大模型运行之前，EAGLE 的小型草稿头先猜接下来的内容。它猜的不是一个词元，而是一棵树。根节点是模型"
                 "上一步选定的词元（“{root}”）。草稿头先试了 {kids} 个不同的下一个词元，再沿最有希望的几条继续猜，"
                 "共 {depth} 层：一共 {n} 个草稿。从根往下的每条路径都是一种可能的续写。颜色表示目标模型随后对它们的判定：那是后面几步要讲的内容。"),
    "q.tree": ("How many different first tokens did the head try, and how many levels deep does the tree go?",
               "草稿头试了几个不同的第一个词元？这棵树有几层深？"),
    "rule.tree": ("the first cycle with a full tree", "第一个用满草稿树的轮次"),

    "title.one_pass": ("One pass verifies the whole tree", "一次前向验证整棵树"),
    "cap.one_pass": ("The target model checks all {n} drafts in a single forward pass, reading them as one "
                     "sequence. The mask shows the trick: each row is a draft, and it may look only at its own "
                     "ancestors (the filled squares), never at another branch. So every branch is scored as if it "
                     "were alone, all at the same time. In this cycle that one pass confirmed {k} drafts and added "
                     "the target's own next token: {m} tokens for one pass.",
                     "目标模型在一次前向中检查全部 {n} 个草稿，把它们当作一个序列来读。掩码图展示了其中的技巧：每一行是一个"
                     "草稿，它只能看到自己的祖先（涂色的格子），看不到其他分支。因此每个分支都像单独存在一样被打分，而且是同时"
                     "进行。这一轮，这一次前向确认了 {k} 个草稿，并加上目标模型自己的下一个词元：一次前向得到 {m} 个词元。"),
    "q.one_pass": ("In the mask, which tokens can the row of “{token}” see? Why must it not see the other branches?",
                   "在掩码图中，“{token}”这一行能看到哪些词元？为什么它不能看到其他分支？"),
    "rule.one_pass": ("the first full tree that accepted two or more drafts", "第一个用满草稿树且接受了至少两个草稿的轮次"),

    "title.bonus": ("Acceptance and the bonus token", "接受与奖励词元"),
    "cap.bonus": ("With greedy decoding a draft is kept only if it is exactly the target's own top choice. Walking "
                  "down from the root, the target accepted {k} drafts in a row: “{quoted}”. The same pass also gave "
                  "the target's own choice after the last accepted draft: the bonus token “{bonus}”. It comes free, "
                  "so every cycle adds at least one token; this one added {m}.",
                  "贪心解码时，只有恰好等于目标模型自己首选的草稿才会被保留。从根往下，目标模型连续接受了 {k} 个草稿："
                  "“{quoted}”。同一次前向还给出了目标模型在最后一个被接受的草稿之后自己的选择：奖励词元“{bonus}”。"
                  "它是免费得到的，所以每一轮至少增加一个词元；这一轮增加了 {m} 个。"),
    "q.bonus": ("In the chart, how high is the target's p for each accepted draft? Which bar is the bonus token?",
                "在图中，每个被接受的草稿的目标概率 p 有多高？哪一根柱子是奖励词元？"),
    "rule.bonus": ("the longest accepted path", "接受路径最长的轮次"),

    "title.rejection": ("A rejection", "被拒绝的草稿"),
    "cap.rejection": ("Here the target disagreed with every first guess: “{quoted}” were rejected, so the {u} "
                      "drafts below them were never tested. The cycle is not lost: the same pass gave the target's "
                      "own token, “{bonus}”, and it is kept. A bad guess costs drafting time and a bigger pass, "
                      "never a different text: what is written is the target's own choice.",
                      "这里目标模型不同意任何一个第一层的猜测：“{quoted}”都被拒绝了，因此它们下面的 {u} 个草稿根本没有被检验。"
                      "这一轮并没有白费：同一次前向给出了目标模型自己的词元“{bonus}”，并被保留。猜错的代价是起草的时间和"
                      "更大的一次前向，而不会改变输出：写下的始终是目标模型自己的选择。"),
    "q.rejection": ("Compare p (target) and q (draft) for the rejected drafts: which one did the head like most, and "
                    "which token did the target choose instead?",
                    "比较被拒绝草稿的 p（目标模型）和 q（草稿头）：草稿头最看好哪一个？目标模型改选了哪个词元？"),
    "rule.rejection": ("the first cycle whose first-level drafts were all rejected", "第一个第一层草稿全部被拒绝的轮次"),

    "title.residual": ("Sampling's residual rule", "采样的剩余概率规则"),
    "cap.residual": ("At temperature {t} the target draws its next token at random, and the drafts must not change "
                     "the odds. Each draft is tested with a random number u: keep it if u is below the target's p. "
                     "“{rej}” lost its draw (u = {u1} ≥ p = {p1}). Its sibling “{acc}” was then tested against p "
                     "renormalised over what the rejection left: its p is {p2}, its threshold rose to {t2}. It won "
                     "(u = {u2}). This keeps the output distributed exactly as the target's own sampling.",
                     "温度为 {t} 时，目标模型随机抽取下一个词元，而草稿不能改变这些概率。每个草稿用一个随机数 u 检验："
                     "当 u 小于目标概率 p 时保留。“{rej}”没有通过（u = {u1} ≥ p = {p1}）。接着它的兄弟节点“{acc}”"
                     "按拒绝后剩余的概率重新归一化来检验：它的 p 是 {p2}，门槛升到了 {t2}。它通过了（u = {u2}）。"
                     "这样输出的分布与目标模型自己采样完全相同。"),
    "q.residual": ("In the chart, is the black threshold line of “{acc}” above or below its p bar, and why?",
                   "在图中，“{acc}”的黑色门槛线在它的 p 柱之上还是之下？为什么？"),
    "rule.residual": ("the first cycle that accepted a draft after a rejected sibling", "第一个在兄弟节点被拒绝后接受草稿的轮次"),

    "title.bytes": ("A Chinese prompt's byte tokens", "中文提示词的字节词元"),
    "cap.bytes": ("Only {whole} of this model's {vocab:,} tokens are whole Chinese characters, so most characters "
                  "are split: a common character is 3 UTF-8 bytes, and here each byte is its own token (labels such "
                  "as “{example}”). In this cycle the target accepted {k} byte tokens: “{quoted}”. With the root's "
                  "byte and the bonus token they make whole characters: “{chars}”. Drafting and checking work on bytes exactly as "
                  "on words.",
                  "这个模型的 {vocab:,} 个词元中只有 {whole} 个是完整的汉字，所以多数汉字会被拆开：常用汉字占 3 个 "
                  "UTF-8 字节，这里每个字节各是一个词元（标签如“{example}”）。这一轮目标模型接受了 {k} 个字节词元：“{quoted}”。它们与根节点的"
                  "字节、奖励词元合在一起才组成完整的汉字：“{chars}”。起草和检验对字节的处理与对词语完全一样。"),
    "q.bytes": ("Counting the root and the bonus, how many tokens spell “{chars}”, and which node completes the first "
                "character?", "连同根节点和奖励词元，“{chars}”由几个词元组成？哪个节点补全了第一个汉字？"),
    "rule.bytes": ("the first cycle whose accepted path holds a byte token", "第一个接受路径中含有字节词元的轮次"),

    "title.hardware": ("What the hardware makes cheap", "硬件让什么变得便宜"),
    "cap.hardware": ("This pass checked {n} tokens at once. Is that {n} times the work of one? A pass reads all the "
                     "model's weights from memory once, however many tokens it checks. On a GPU that reading "
                     "dominates, so the figure's GPU illustration takes a pass of up to 64 tokens to cost as much as "
                     "one, and big trees pay. On a CPU the arithmetic grows with the tokens{ratio}, so small trees "
                     "win. The figure predicts the speedup of each tree size on both.",
                     "这一次前向同时检查了 {n} 个词元。这是检查一个词元的 {n} 倍工作量吗？无论检查多少个词元，一次"
                     "前向都只从内存中读取一遍模型的全部权重。在 GPU 上，读取权重是主要开销，所以图中的 GPU 示意假设最多 64 "
                     "个词元的前向与一个词元的耗时相同，大树划算。在 CPU 上，计算量随词元数增长{ratio}，所以小树更好。"
                     "图中预测了两种硬件上每种树大小的加速比。"),
    "ratio": (" (measured on {machine}, {date}: a pass over {k} tokens took {r:.2f}× a pass over one)",
              "（在 {machine} 上实测，{date}：{k} 个词元的前向耗时是一个词元的 {r:.2f} 倍）"),
    "q.hardware": ("In the figure, which tree size gives the best predicted speedup on the CPU, and which in the GPU "
                   "illustration?", "在图中，CPU 上预测加速比最高的是哪种树？GPU 示意中又是哪种？"),
    "rule.hardware": ("the first cycle with a full tree", "第一个用满草稿树的轮次"),
})


# ------------------------------------------------------------------------------------- data
@functools.lru_cache(maxsize=16)
def trace(file: str):
    """(eagle, vanilla) of a lesson trace, read once."""
    return load_trace_file(os.path.join(LESSON_DIR, file))


def steps() -> list[dict]:
    return load_manifest()


def step_of(value, plan: list[dict]) -> int:
    """The 1-based step of a radio value (its step number), clamped to the lesson."""
    try:
        i = int(value)
    except (TypeError, ValueError):
        i = 1
    return min(max(i, 1), max(len(plan), 1))


def _num(x: float) -> str:
    return f"{x:.2f}"


def _quote(texts, lang: str) -> str:
    return TEXT("list_sep", lang).join(md_text(token_label(t, 16)) for t in texts)


def facts(key: str, c, lang: str, temperature: float = 0.0, vocab: dict | None = None) -> dict:
    """The fields of step `key`'s caption and question, read from its cycle `c` (and its run's temperature)."""
    shown, bonus = cycle_texts(c)
    acc = [c.nodes[i] for i in c.accepted[1:]]
    label = lambda n: md_text(token_label(shown[n.index], 16))  # noqa: E731
    if key == "tree":
        return dict(root=label(c.nodes[0]), kids=sum(1 for n in c.nodes if n.parent == 0),
                    depth=max(n.depth for n in c.nodes), n=c.n_draft)
    if key == "one_pass":
        return dict(n=c.n_draft, k=len(acc), m=len(acc) + 1, token=label(acc[-1]))
    if key == "bonus":
        return dict(k=len(acc), quoted=_quote((shown[n.index] for n in acc), lang), bonus=md_text(token_label(bonus, 16)),
                    m=len(acc) + 1)
    if key == "rejection":
        first = [n for n in c.nodes if n.parent == 0 and n.decision == REJECTED]
        return dict(quoted=_quote((shown[n.index] for n in first), lang), bonus=md_text(token_label(bonus, 16)),
                    u=sum(1 for n in c.nodes if n.decision == NOT_REACHED))
    if key == "residual":
        won = next(n for n in residual_nodes(c) if n.decision == ACCEPTED)
        lost = [s for s in c.nodes if s.parent == won.parent and s.index < won.index and s.decision == REJECTED][-1]
        return dict(t=f"{temperature:g}", rej=label(lost), u1=_num(lost.u), p1=_num(lost.p_test), acc=label(won),
                    p2=_num(won.p), t2=_num(won.p_test), u2=_num(won.u))
    if key == "bytes":
        vocab = vocab or {}
        example = next(n for n in c.nodes if is_byte_token(n.text))
        return dict(whole=vocab.get("whole_chinese", "?"), vocab=vocab.get("size", 0), example=label(example),
                    k=sum(1 for n in acc if is_byte_token(n.text)), quoted=_quote((shown[n.index] for n in acc), lang),
                    chars=md_text(c.committed_text.strip()))
    if key == "hardware":
        return dict(n=c.n_draft + 1, ratio=_ratio(c.n_draft + 1, lang))
    raise KeyError(key)


def _ratio(k: int, lang: str) -> str:
    """t(k)/t(1) from the recorded hardware measurement (the hardware panel's file), or nothing."""
    from eagle_core.machine import RECORDED

    try:
        with open(RECORDED, encoding="utf-8") as f:
            m = json.load(f)
        t = {int(n): float(ms) for n, ms in m["forward_ms"].items()}
        near = min((n for n in t if n >= k), default=None)
        return TEXT("ratio", lang, machine=md_text(m.get("hardware", m.get("device", ""))), date=m.get("date", ""),
                    k=near, r=t[near] / t[1]) if near and 1 in t else ""
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError):
        return ""


def card(plan: list[dict], i: int, lang: str) -> str:
    """The step's Markdown: its title, caption, question and where its trace comes from."""
    if not plan:
        return TEXT("missing", lang)
    s = plan[i - 1]
    eagle, _ = trace(s["file"])
    c = eagle.cycles[s["cycle"] - 1]
    f = facts(s["key"], c, lang, eagle.summary.settings.get("temperature", 0.0), load_meta().get("vocab"))
    return "\n\n".join((TEXT("head", lang, i=i, n=len(plan), title=TEXT(f"title.{s['key']}", lang)),
                        TEXT(f"cap.{s['key']}", lang, **f), TEXT("ask", lang, q=TEXT(f"q.{s['key']}", lang, **f)),
                        "<small>" + TEXT("source", lang, prompt=md_text(s["prompt"]), k=s["cycle"], of=len(eagle.cycles),
                                         rule=TEXT(f"rule.{s['key']}", lang)) + "</small>"))


WIDE = ("hardware",)  # figures drawn under the tree, full width (the hardware figure's legend needs it)


def side_figure(key: str, c, lang: str):
    side = BY_KEY[key].side
    if side == "mask":  # taller, every row and column labelled: step 2's question names a row
        fig = viz.mask_figure(c, lang)
        labels = list(fig.data[0].x)
        fig.update_xaxes(tickmode="array", tickvals=labels, ticktext=labels)
        fig.update_yaxes(tickmode="array", tickvals=labels, ticktext=labels)
        return fig.update_layout(height=max(fig.layout.height or 0, 22 * len(labels) + 260))
    if side == "probs":
        return viz.probs_figure(c, lang)
    if side == "hardware":
        from .hardware import recorded_views

        return recorded_views(lang)[0]
    return None


def step_data(value, lang: str = "en") -> tuple:
    """(step number, card, tree figure, side figure or None, wide figure or None, text HTML) of the step
    `value` in `lang`: a step's second figure is beside the tree, or under it when it needs the width."""
    plan = steps()
    i = step_of(value, plan)
    if not plan:
        return i, TEXT("missing", lang), None, None, None, ""
    s = plan[i - 1]
    eagle, _ = trace(s["file"])
    c = eagle.cycles[s["cycle"] - 1]
    fig = side_figure(s["key"], c, lang)
    wide = BY_KEY[s["key"]].side in WIDE
    return (i, card(plan, i, lang), viz.tree_figure(c, lang=lang), None if wide else fig, fig if wide else None,
            viz.colored_text_html(eagle.cycles, selected=c.step, lang=lang))


def step_views(value, lang: str = "en") -> tuple:
    """The callbacks' (radio, card, tree, side figure, wide figure, text) of the step `value` in `lang`."""
    lang = lang_of(lang)
    i, md, tree, side, wide, text = step_data(value, lang)
    return (gr.Radio(choices=choices(steps(), lang), value=i), md, tree, gr.Plot(value=side, visible=side is not None),
            gr.Plot(value=wide, visible=wide is not None), text)


def choices(plan: list[dict], lang: str) -> list[tuple[str, int]]:
    return [(f"{s['step']} · {TEXT('title.' + s['key'], lang)}", s["step"]) for s in plan]


def shift(value, delta: int, lang: str = "en") -> tuple:
    return step_views(step_of(value, steps()) + delta, lang)


def redraw(value, lang: str = "en") -> tuple:
    """The language switch: the step again in `lang`, and the tab's own labels."""
    lang = lang_of(lang)
    return (*step_views(value, lang), gr.Tab(label=TEXT("tab", lang)), gr.Button(value=TEXT("prev", lang)),
            gr.Button(value=TEXT("next", lang)), gr.Button(value=TEXT("open", lang)), TEXT("intro", lang))


def open_in_decode(value, lang: str = "en", request: gr.Request = None) -> tuple:
    """The step's trace into the Decode tab's views, at the step's cycle (scrub, play and download work)."""
    from .traces import save_trace
    from .views import cycle_views, new_state, outputs, session_id, summary_views

    lang = lang_of(lang)
    plan = steps()
    if not plan:
        return outputs()
    i = step_of(value, plan)
    s = plan[i - 1]
    path = os.path.join(LESSON_DIR, s["file"])
    eagle, vanilla = trace(s["file"])
    title = TEXT("opened", lang, i=i, title=TEXT(f"title.{s['key']}", lang), k=s["cycle"], of=len(eagle.cycles))
    state = new_state(eagle, vanilla, title, source=path)
    views = {**cycle_views(state, s["cycle"], lang), **summary_views(state, lang)}
    return outputs(**views, state=state, status=title, download=save_trace(state, session_id(request)), examples=None)


# ------------------------------------------------------------------------------------- the tab
TO_DECODE = "() => { const tab = document.querySelector('button[role=tab]'); if (tab) tab.click(); }"


def tab(c: dict, lang: str = "en") -> None:
    """The Lesson tab's widgets, into `c` by name (called inside layout.build's Blocks)."""
    plan = steps()
    with gr.Tab(TEXT("tab", lang), elem_id="eg-lesson-tab") as c["lesson_tab"]:
        c["lesson_intro"] = gr.Markdown(TEXT("intro", lang))
        with gr.Row():
            c["lesson_prev"] = gr.Button(TEXT("prev", lang), size="sm", min_width=110, scale=0, elem_id="eg-lesson-prev")
            c["lesson_step"] = gr.Radio(choices(plan, lang), value=1 if plan else None, show_label=False,
                                        container=False, scale=6, elem_id="eg-lesson-steps")
            c["lesson_next"] = gr.Button(TEXT("next", lang), size="sm", min_width=110, scale=0, elem_id="eg-lesson-next")
        _, first, tree, side, wide, text = step_data(1, lang)
        c["lesson_card"] = gr.Markdown(first, elem_id="eg-lesson-card", elem_classes="eg-learn")
        with gr.Row():
            c["lesson_tree"] = gr.Plot(tree, show_label=False, label="lesson tree", scale=3, min_width=380,
                                       elem_id="eg-lesson-tree")
            c["lesson_side"] = gr.Plot(side, show_label=False, label="lesson figure", scale=2, min_width=330,
                                       elem_id="eg-lesson-side", visible=side is not None)
        c["lesson_wide"] = gr.Plot(wide, show_label=False, label="lesson figure", elem_id="eg-lesson-wide",
                                   visible=wide is not None)
        c["lesson_text"] = gr.HTML(text, elem_id="eg-lesson-text")
        c["lesson_open"] = gr.Button(TEXT("open", lang), size="sm", elem_id="eg-lesson-open")


def wire(page) -> None:
    """The tab's events: a step picked, previous / next, the language switch, and opening the trace."""
    c = page.c
    views = [c["lesson_step"], c["lesson_card"], c["lesson_tree"], c["lesson_side"], c["lesson_wide"], c["lesson_text"]]
    hidden = dict(api_visibility="private", show_progress="hidden")
    c["lesson_step"].input(step_views, [c["lesson_step"], c["lang"]], views, **hidden)
    c["lesson_prev"].click(lambda v, lang: shift(v, -1, lang), [c["lesson_step"], c["lang"]], views, **hidden)
    c["lesson_next"].click(lambda v, lang: shift(v, +1, lang), [c["lesson_step"], c["lang"]], views, **hidden)
    c["lang"].change(redraw, [c["lesson_step"], c["lang"]],
                     views + [c["lesson_tab"], c["lesson_prev"], c["lesson_next"], c["lesson_open"], c["lesson_intro"]],
                     **hidden)
    c["lesson_open"].click(open_in_decode, [c["lesson_step"], c["lang"]], page.all, **hidden).then(
        None, js=TO_DECODE, **hidden)  # then show the Decode tab (the first tab)
