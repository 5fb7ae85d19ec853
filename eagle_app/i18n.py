"""The page in English and Simplified Chinese (issue 28, item 2). English is the default and the
source of truth; Chinese follows the browser's language (zh, zh-CN, zh-TW, ... -> Chinese) and the
page's "English / 中文" switch.

Two mechanisms, one table each:
- CHINESE: the page's static labels, buttons, tabs, headings, keyed by their English text as layout.py
  and settings.py write it (gettext-style: the English stays where it was). `translatable(english)` wraps
  one for Gradio's own i18n (gr.I18n, passed to launch() in launch.py): the browser translates
  it, following navigator.language, and the switch changes Gradio's locale in the page (JS below).
- APP_TEXT (and viz.i18n.FIGURE_TEXT for the figures' HTML and captions): strings made at run time by the
  callbacks (status lines, refusals, placeholders), which gr.I18n does not translate. Each is an
  (English, 简体中文) pair; the callbacks get the tab's language from a gr.State (c["lang"]).
The Learn tab's long text is viz/learn.py and viz/learn_zh.py, re-rendered by callbacks.
"""
from __future__ import annotations

import functools
import re

from eagle_core import METHOD_LABELS, PRESETS
from viz.hardware import TEXT as HARDWARE
from viz.i18n import Strings, lang_of  # noqa: F401  (lang_of: re-exported for the callbacks)

PRESET_NAMES = (("bigger tree to read", "更大、便于观察的树", "explain"), ("fastest on a 2-core CPU", "双核 CPU 上最快", "cpu"),
                ("GPU, published EAGLE-2", "GPU，EAGLE-2 论文的设置", "gpu"))


def preset_label(name: str, lang: str = "en") -> str:
    en, zh, _ = next(p for p in PRESET_NAMES if p[2] == name)
    p = PRESETS[name]
    if lang == "zh":
        return f"{zh}（深度 {p['depth']}，top-k {p['tree_top_k']}，{p['total_tokens']} 个词元）"
    return f"{en} (depth {p['depth']}, top-k {p['tree_top_k']}, {p['total_tokens']} tokens)"


CHINESE = {
    # the header and tabs
    "# EAGLE speculative decoding, step by step\nA small head drafts a **tree** of tokens from the model's own "
    "features; the model checks the whole tree in **one** forward pass and keeps the longest correct path "
    "plus one **bonus** token of its own. In float32, the same output as ordinary decoding in fewer passes "
    "(half precision may part where two tokens nearly tie).":
        "# EAGLE 投机解码，一步一步看\n一个小型的头根据模型自己的特征起草一棵词元<b>树</b>；模型在<b>一次</b>前向中检查整棵树，"
        "保留最长的正确路径，再加上一个它自己的<b>奖励</b>词元。以 float32 计算时，输出与普通解码完全相同，前向次数更少"
        "（半精度下，在两个词元几乎打平之处可能分道扬镳）。",
    "Decode": "解码", "Learn": "学习", "Traces": "轨迹",
    # the Decode tab's controls
    "Prompt": "提示词", "Ask anything, or pick an example below…": "随便问点什么，或从下面选一个示例……",
    "Examples: writing · code · math · summarisation · translation · Chinese":
        "示例：写作 · 代码 · 数学 · 摘要 · 翻译 · 中文",
    METHOD_LABELS["eagle2"]: "EAGLE-2 动态树", METHOD_LABELS["eagle3"]: "EAGLE-3（融合目标模型多层，动态树）",
    METHOD_LABELS["eagle1"]: "EAGLE-1 静态树", METHOD_LABELS["chain"]: "链式（每步一个草稿）",
    "vanilla only (no drafting)": "仅普通解码（不起草）",
    "Also decode with vanilla afterwards (fair, one after the other)": "之后再用普通解码跑一遍（公平起见，先后运行）",
    "Tree settings": "树的设置", "Preset": "预设",
    **{preset_label(n): preset_label(n, "zh") for _, _, n in PRESET_NAMES},
    "Sampling (temperature 0 = greedy, reproducible)": "采样（温度 0 = 贪心，可复现）",
    "▶ Generate": "▶ 生成", "Step one cycle ›": "单步一轮 ›", "■ Stop": "■ 停止",
    # the settings (settings.FIELDS' labels)
    "Method": "方法", "Depth (expansion steps)": "深度（扩展步数）",
    "Top-k (children per node, frontier width)": "Top-k（每个节点的子节点数，前沿宽度）",
    "Total draft tokens verified per cycle (EAGLE-2)": "每轮验证的草稿词元总数（EAGLE-2）",
    "Chain length (chain method)": "链长（链式方法）", "Temperature": "温度", "Top-p": "Top-p",
    "Top-k (0 = off)": "Top-k（0 = 关闭）", "Max new tokens": "最多新词元数", "Seed": "随机种子",
    # the views
    "◀ Previous": "◀ 上一轮", "Cycle": "轮次", "Next ▶": "下一轮 ▶", "▶ Play": "▶ 播放", "❚❚ Pause": "❚❚ 暂停",
    "## EAGLE beside vanilla decoding": "## EAGLE 与普通解码并排对比",
    "### Replay at the measured pace": "### 按实测速度回放", "↻ Replay": "↻ 重放",
    # the Learn tab's right column
    "**Live figures of the cycle selected in the Decode tab**": "<b>“解码”页中所选轮次的实时图</b>",
    # the Traces tab
    "Download the current run (EAGLE and vanilla, every cycle) or load a saved one: every view works without "
    "the model. Files up to 20 MB. Shipped examples are below.":
        "下载当前这次运行（EAGLE 与普通解码，每一轮），或载入一个保存过的：所有视图都不需要模型。"
        "文件最大 20 MB。下方是随附的示例。",
    "Download trace (JSON)": "下载轨迹（JSON）", "Load a trace (.json)": "载入轨迹（.json）",
    "Example traces": "示例轨迹",
    # the switch itself
    "Language": "语言",
    # the model picker (picker.py; shown only on a CUDA GPU)
    "Model (GPU): public target and EAGLE head pairs": "模型（GPU）：公开的目标模型与 EAGLE 头组合",
    "Loading a pair changes the model for **everyone** using this app; a running decode finishes first. The first "
    "load downloads the weights (4-16 GB).": "加载一个组合会为本应用的<b>所有</b>用户更换模型；正在进行的解码会先完成。"
    "首次加载需要下载权重（4-16 GB）。",
    "Pair": "组合", "Load for everyone": "为所有人加载",
    # the hardware lesson's title and button (eagle_app/hardware.py; its other words are drawn by callbacks)
    **{HARDWARE(k): HARDWARE(k, "zh") for k in ("panel", "button")},
}
# The shipped example traces' titles ("Code, EAGLE-2 greedy · head: assets/…"), phrase by phrase (trace_title)
TITLE_ZH = (("Code", "代码"), ("Story", "故事"), ("Chinese", "中文"), ("Maths", "数学"), ("Math", "数学"),
            ("static tree", "静态树"), ("dynamic tree", "动态树"), ("greedy", "贪心"), ("sampled", "采样"),
            (" · head: ", " · 草稿头："), (", ", "，"))
USED: set[str] = set()  # every text layout.py wrapped (tests: each one has its Chinese)


@functools.cache
def gradio_i18n():
    """The gr.I18n passed to launch() (launch.py). Gradio's frontend matches the browser's locale exactly
    ("zh-CN", "zh-TW") before its language ("zh"), so the Chinese is registered under all three. (gradio is
    imported here only: settings.py reads APP_TEXT below and imports no gradio.)"""
    import gradio as gr

    return gr.I18n(en={k: k for k in CHINESE}, zh=CHINESE, **{"zh-CN": CHINESE, "zh-TW": CHINESE})


def translatable(english: str):
    """A static text of the page, for Gradio's i18n: English unless the page is in Chinese."""
    assert english in CHINESE, f"no Chinese for {english!r}: add it to eagle_app/i18n.py CHINESE"
    USED.add(english)
    return gradio_i18n()(english)


def trace_title(title: str, lang: str = "en") -> str:
    """A trace's title in `lang`: its known phrases translated (TITLE_ZH); names and paths stay."""
    if lang != "zh":
        return title
    for en, zh in TITLE_ZH:
        title = re.sub(rf"(?<![\w/-]){re.escape(en)}(?![\w/-])" if en[0].isalpha() else re.escape(en), zh, title)
    return title


def method_name(method: str, lang: str = "en") -> str:
    """A method id ("eagle2") as the page names it, in `lang`."""
    label = METHOD_LABELS.get(method, method) if method != "vanilla" else "vanilla only (no drafting)"
    return CHINESE.get(label, label) if lang == "zh" else label


def text(english: str, lang: str = "en") -> str:
    """A static text as a plain string in `lang` (for gr.update(label=...) and the like)."""
    return CHINESE[english] if lang == "zh" else english


LANG_CHOICES = [("English", "en"), ("中文", "zh")]

# In the page: Gradio's own i18n picks its locale from navigator.language once, at load. The switch
# changes it with the changeLocale of Gradio's frontend module (core-*.js, already loaded: an
# import() of the same URL returns the same module). Chinese -> "zh-CN" (its built-in strings too; the
# browser's own zh-TW is kept); English -> the browser's own locale, or "en" for a Chinese browser. Returns the inputs, the language made "en" or "zh", for the callback.
SET_LOCALE_JS = """async (lang, ...rest) => {
  lang = (lang || "en").toLowerCase().startsWith("zh") ? "zh" : "en";
  const nav = (navigator.language || "en"), navZh = nav.toLowerCase().startsWith("zh");
  // Gradio already follows the browser at load; otherwise Chinese, or back to the browser's own (or English)
  const fits = window.__egLang === undefined && (lang === "zh") === navZh && (!navZh || /^zh-(cn|tw)$/i.test(nav));
  const want = fits ? null : lang === "zh" ? (/^zh-tw/i.test(nav) ? "zh-TW" : "zh-CN") : (navZh ? "en" : nav);
  try {
    const url = performance.getEntriesByType("resource").map(e => e.name).find(n => /\\/core-[\\w-]+\\.js(\\?|$)/.test(n));
    if (want && url) { const m = await import(url); if (m.changeLocale) m.changeLocale(want); }
  } catch (e) { console.warn("eagle-explainer: could not switch Gradio's locale", e); }
  window.__egLang = lang;
  return [lang, ...rest];
}"""
# At page load: the browser's language (what Gradio's own i18n follows), made "zh" or "en".
DETECT_JS = """async (x) => {
  const nav = (navigator.language || (navigator.languages || ["en"])[0] || "en").toLowerCase();
  return nav.startsWith("zh") ? "zh" : "en";
}"""

APP_TEXT = Strings({
    # status lines (callbacks/decoding.py, views.py)
    "status.fair": ("Fair share: while anyone waits, each run stops after {fair:g} s per method ({budget:g} s when "
                    "nobody does).",
                    "公平分享：只要有人在排队，每次运行的每种方法在 {fair:g} 秒后停止（无人排队时为 {budget:g} 秒）。"),
    "status.waiting_model": ("Waiting for the model to finish loading…", "正在等待模型加载完成……"),
    "status.waiting_line": ("◌ Waiting for the decoder: {ahead} run{s} ahead of yours, about {wait:.0f} s. {fair} "
                            "**Stop** leaves the line; this page stays as it is.",
                            "◌ 正在等待解码器：你前面还有 {ahead} 个运行，大约 {wait:.0f} 秒。{fair}"
                            "<b>停止</b>即可离开队列；本页保持原样。"),
    "status.stopped_model": ("Stopped before the model was ready; the page is unchanged.",
                             "在模型就绪前已停止；页面未改变。"),
    "status.stopped_line": ("Stopped while waiting in line: nothing ran, the page is unchanged.",
                            "在排队时已停止：什么都没有运行，页面未改变。"),
    "status.stopped_line_step": ("Stopped while waiting in line; the page is unchanged.", "在排队时已停止；页面未改变。"),
    "status.long_prompt": ("Reading the {n:,}-token prompt first (long prompts take a while on a CPU). ",
                           "先读取 {n:,} 个词元的提示词（长提示词在 CPU 上需要一些时间）。"),
    "status.start_eagle": ("◔ Starting EAGLE (timed)…", "◔ 开始 EAGLE（计时中）……"),
    "status.start_vanilla": ("◔ Starting vanilla (timed)…", "◔ 开始普通解码（计时中）……"),
    "status.what_both": ("EAGLE, then vanilla,", "先 EAGLE、再普通解码，"),
    "status.what_vanilla": ("vanilla", "普通解码"),
    "status.what_eagle": ("EAGLE", "EAGLE"),
    "status.timing": ("◔ Timing {what} on {n} new tokens{each} (about {guess:.0f} s). The page stays still until "
                      "{done}, so that drawing does not take the CPU from the decoder; **Stop** ends the run and "
                      "keeps what was decoded.",
                      "◔ 正在计时：{what}各生成 {n} 个新词元（大约 {guess:.0f} 秒）。页面保持不动，直到{done}，"
                      "以免绘图占用解码器的 CPU；<b>停止</b>会结束运行并保留已解码的内容。"),
    "status.each": (" each", "各"),
    "status.both_done": ("both are done", "两者都完成"),
    "status.it_done": ("it is done", "它完成"),
    "status.eagle_done": ("EAGLE done: {n} tokens in {s:.1f} s. ", "EAGLE 完成：{s:.1f} 秒生成 {n} 个词元。"),
    "status.failed": ("{k} decoding failed: {err}", "{k} 解码失败：{err}"),
    "status.step": ("Step mode (not timed): cycle {n} done, τ so far {tau:.2f}. Click **Step** for the next one "
                    "(change a setting or the prompt to start over).",
                    "单步模式（不计时）：第 {n} 轮完成，目前 τ 为 {tau:.2f}。点击<b>单步</b>进行下一轮"
                    "（修改任一设置或提示词即重新开始）。"),
    "status.step_note": ("Step mode: each cycle waited for your click, so these timings are per cycle only.",
                         "单步模式：每一轮都在等你点击，所以这些时间只是每轮的时间。"),
    "status.step_done": ("Step mode finished. ", "单步模式结束。"),
    "status.done": ("Done. ", "完成。"),
    "status.run": ("**{label}**: {n} tokens, {rate:.1f} tok/s, τ {tau:.2f} ({why})",
                   "<b>{label}</b>：{n} 个词元，{rate:.1f} 词元/秒，τ {tau:.2f}（{why}）"),
    "status.no_tokens": ("produced no tokens ({why}) after reading a {n:,}-token prompt in {s:.1f} s",
                         "读取 {n:,} 个词元的提示词用了 {s:.1f} 秒后，没有产生任何词元（{why}）"),
    "status.progress": ("{before}◔ **{name}** decoding (timed; figures drawn after both runs) · {k}/{max_new} tokens "
                        "· {cycles} cycles · {dt:.0f} s{rate}",
                        "{before}◔ <b>{name}</b> 解码中（计时；图在两次运行之后绘制）· {k}/{max_new} 个词元 · "
                        "{cycles} 轮 · {dt:.0f} 秒{rate}"),
    "status.rate": (" · ≈ {r:.1f} tok/s so far", " · 目前 ≈ {r:.1f} 词元/秒"),
    "status.stopping": ("Stopping…", "正在停止……"),
    "status.stopped_kept": ("Stopped. The partial run is kept: scrub through it or download its trace.",
                            "已停止。保留了部分运行结果：可以拖动浏览，或下载它的轨迹。"),
    "how.budget": ("stopped at the {s:g} s limit", "在 {s:g} 秒上限处停止"),
    "how.fair": ("stopped at the {s:g} s fair-share limit, others were waiting", "在 {s:g} 秒公平分享上限处停止，有人在排队"),
    "how.you": ("stopped by you", "被你停止"),
    "reason.max_new_tokens": ("reached max new tokens", "达到最多新词元数"),
    "reason.eos": ("the model ended its answer", "模型结束了回答"),
    "reason.context_full": ("the model's context is full", "模型的上下文已满"),
    "reason.stopped": ("stopped early", "提前停止"),
    "label.vanilla": ("vanilla", "普通解码"),
    # notes under the comparison cards
    "note.trace": ("Timings as recorded in the trace (measured when it was made, on the machine that made it).",
                   "时间取自轨迹中的记录（在生成轨迹时、于生成它的机器上测得）。"),
    "note.timed": ("Timed with live drawing paused: {how}; the text, tree and charts were drawn after both runs "
                   "finished. EAGLE ran first, then vanilla, same prompt and settings, one after the other on "
                   "{device}. The replay below plays both at the measured pace.",
                   "计时期间暂停了实时绘制：{how}；文本、树和图表都在两次运行结束后才绘制。先运行 EAGLE，再运行普通解码，"
                   "提示词和设置相同，在{device}上先后运行。下面的回放按实测速度播放两者。"),
    "note.timed_one": ("Timed with live drawing paused: {how}; the text, tree and charts were drawn after it "
                       "finished. One run only: {name} on {device}, with no second run to compare it with. The replay "
                       "below plays it at the measured pace.",
                       "计时期间暂停了实时绘制：{how}；文本、树和图表都在运行结束后才绘制。只有一次运行：{name}，"
                       "在{device}上运行，没有可供对比的第二次运行。下面的回放按实测速度播放它。"),
    "note.timed_unrun": ("Timed with live drawing paused: {how}; the text, tree and charts were drawn after it "
                         "finished. EAGLE ran on {device}; vanilla did not run (the run was stopped first), so there "
                         "is no speedup to show. The replay below plays EAGLE alone.",
                         "计时期间暂停了实时绘制：{how}；文本、树和图表都在运行结束后才绘制。EAGLE 在{device}上运行；"
                         "普通解码没有运行（运行在此之前已停止），所以没有加速比可显示。下面的回放只播放 EAGLE。"),
    "note.quiet_one": ("the page did not change while it decoded", "解码时页面没有变化"),
    "note.live_one": ("while it decoded, the page showed only a one-line progress update", "解码时页面只显示一行进度"),
    "note.quiet": ("the page did not change while either run decoded", "两次运行解码时页面都没有变化"),
    "note.live": ("while each run decoded, the page showed only a one-line progress update",
                  "每次运行解码时，页面只显示一行进度"),
    # refusals
    "note.clamped": ("ⓘ {what}: {v} is above the maximum, so the slider uses **{edge}** (the engine refuses more).",
                     "ⓘ {what}：{v} 超过了上限，所以滑块取 <b>{edge}</b>（引擎不接受更大的值）。"),
    "note.clamped_min": ("ⓘ {what}: {v} is below the minimum, so the slider uses **{edge}**.",
                         "ⓘ {what}：{v} 低于下限，所以滑块取 <b>{edge}</b>。"),
    "refuse.title": ("Please check the input", "请检查输入"),
    "refuse.empty": ("The prompt is empty: type something (or pick an example) first.",
                     "提示词是空的：请先输入一些内容（或选一个示例）。"),
    "refuse.too_long": ("The prompt is {n:,} characters; this demo accepts at most {max:,}.",
                        "提示词有 {n:,} 个字符；本演示最多接受 {max:,} 个。"),
    "refuse.number": ("{what} must be a number (got {v})", "{what} 必须是数字（收到的是 {v}）"),
    "refuse.whole": ("{what} must be a whole number (got {v})", "{what} 必须是整数（收到的是 {v}）"),
    "refuse.other": ("{msg}", "请检查输入：{msg}"),
    "no_model": ("No model", "没有模型"),
    # placeholders while a run is on its way (views.cleared_views)
    "wait.after_runs": ("after both timed runs finish", "在两次计时运行结束后"),
    "wait.after_steps": ("when the step-by-step run finishes", "在单步运行结束时"),
    "wait.figure": ("Drawn {what}.", "{what}绘制。"),
    "wait.text": ("Decoding… the text, the draft tree and every chart are drawn {what}.",
                  "解码中……文本、草稿树和所有图表都{what}绘制。"),
    "wait.cards": ("The comparison appears {what}.", "对比结果{what}出现。"),
    "wait.replay": ("The paced replay appears {what}.", "按实测速度的回放{what}出现。"),
    "blank.tree": ("Press Generate (or Step) to draw the draft tree.", "点击“生成”（或“单步”）来绘制草稿树。"),
    "blank.mask": ("Tree-attention mask", "树注意力掩码"),
    "slider.of": ("Cycle (of {n})", "轮次（共 {n} 轮）"),
    "view.showcase": ("*Shown first: the cycle that accepted the most drafts, the clearest picture of the tree at "
                      "work. Drag the slider (or press Play) to see all {n} cycles, from cycle 1.*",
                      "<i>先显示的是接受草稿最多的一轮，最能看清树的作用。拖动滑块（或点击“播放”）可从第 1 轮起查看全部 {n} 轮。</i>"),
    # the model's line (model.py)
    "model.ready": ("**Model ready:** {model} {where}{loaded} · **draft head:** {head} "
                    "<span class=\"eg-more\" title=\"{title}\">{more}</span>",
                    "<b>模型已就绪：</b>{model}，{where}{loaded} · <b>草稿头：</b>{head} "
                    "<span class=\"eg-more\" title=\"{title}\">{more}</span>"),
    "model.loaded": (", loaded in {s:.1f} s", "，加载用时 {s:.1f} 秒"),
    "model.more": ("(details)", "（详情）"),
    "model.details": ("{target} · heads: {heads}", "{target} · 草稿头：{heads}"),
    "model.on_cpu": ("on this CPU", "运行在本机 CPU 上"),
    "model.on_cuda": ("on the GPU", "运行在 GPU 上"),
    "model.on_mps": ("on the Mac's GPU", "运行在 Mac 的 GPU 上"),
    "model.on_other": ("on {device}", "运行在 {device} 上"),
    "model.gpu_unused": ("⚠ <b>GPU not used:</b> {msg}", "⚠ <b>未使用 GPU：</b>{msg}"),
    "model.ours": (", trained by this project", "，由本项目训练"),
    "model.yours": (", loaded from your folder", "，从你指定的位置加载"),
    "model.and": (" and ", " 和 "),
    "model.no_head": ("none (vanilla decoding only)", "无（只能普通解码）"),
    "model.untrained": (", untrained, so expect τ ≈ 1 (still exact, not faster)",
                        "，未训练，因此预计 τ ≈ 1（依然精确，只是不会更快）"),
    "model.failed": ("**Model failed to load:** {err}. Saved traces still replay.",
                     "<b>模型加载失败：</b>{err}。保存的轨迹仍可回放。"),
    "model.loading": ("**Loading the model…**{since} — meanwhile explore the example trace below; Generate will wait "
                      "for it.",
                      "<b>正在加载模型……</b>{since}——同时可以浏览下面的示例轨迹；“生成”会等待模型加载完成。"),
    "model.since": (" ({s:.0f} s)", "（{s:.0f} 秒）"),
    # the Traces tab (traces.py)
    "trace.bad": ("Could not load this trace: {err}", "无法载入这个轨迹：{err}"),
    "trace.bad_title": ("Bad trace file", "轨迹文件有误"),
    "trace.replaying": ("Replaying **{title}** — {method}, {model}, {n} cycles. No model needed to explore it.",
                        "正在回放 <b>{title}</b> —— {method}，{model}，{n} 轮。浏览它不需要模型。"),
    "trace.unknown_model": ("unknown model", "未知模型"),
    # where the timed runs ran (the cards' note, note.timed's {device})
    "device.cpu": ("{threads} CPU thread(s)", " {threads} 个 CPU 线程"),
    "device.cuda": ("the GPU {name} (CUDA)", " GPU {name}（CUDA）"),
    "device.mps": ("the Apple GPU (MPS)", " Apple GPU（MPS）"),
    # the model picker (picker.py)
    "pick.unknown": ("No such pair: {pair}", "没有这个组合：{pair}"),
    "pick.off": ("Switching models is off here (a shared Space: its operator can set EAGLE_APP_ALLOW_SWITCH=1).",
                 "这里不能切换模型（共享的 Space：其管理者可以设置 EAGLE_APP_ALLOW_SWITCH=1）。"),
    "pick.gated": ("**{target}** is {hint}. The current model stays.",
                   "<b>{target}</b> 是受限仓库：请在 hub 上接受其许可并设置 HF_TOKEN（{hint}）。当前模型保持不变。"),
    "pick.waiting": ("Waiting for the running decode to finish…", "正在等待当前的解码结束……"),
    "pick.loading": ("Loading **{pair}** for everyone… {s:.0f} s", "正在为所有人加载 <b>{pair}</b>……{s:.0f} 秒"),
    "pick.failed": ("**{pair}** failed to load: {err}", "<b>{pair}</b> 加载失败：{err}"),
    "pick.done": ("**{pair}** is loaded ({s:.1f} s); every user now decodes with it.",
                  "<b>{pair}</b> 已加载（{s:.1f} 秒）；所有用户现在都用它解码。"),
    "status.switched": ("The model was switched while this request waited: press Generate again.",
                        "这个请求等待期间模型被切换了：请再点一次“生成”。"),
})

# The CPU path's fallback line in Chinese (eagle_app/model.path_note), built from the facts the engine
# keeps as keys (eagle_core/cpu/status.py, PathStatus.kind and .args). English is the engine's own line
# (PathStatus.line(), which the CLI prints), so it lives there, once.
FALLBACK_ZH = {
    "line": "CPU 路径：{path}，原因：{reason}{cost}；{same}。",
    "cost": "；比本引擎自己的内核慢约 {x:g} 倍（{doc}）",
    "same": "贪心 EAGLE 仍与普通解码逐个词元相同（乘积和注意力都是行不变的）",
    "may_part": "贪心 EAGLE 可能在近乎平局处与普通解码分岔（torch 的乘积和注意力不是行不变的）",
    "portable": "可移植路径（torch 自带的模块，不用 C 内核）",
    "portable_env": "设置了 {env}=1",
    "stock": "调用时要求了 FastPath(kernels=\"stock\")",
    "torch": "torch 的内核",
    "dtype": "本引擎的内核只运行 float32 权重（这个目标是 {dtype}）",
    "backend": "{policy} 后端",
    "forced": "调用时指定了 FastPath(kernels='{policy}')",
    "torch_named": "torch 的内核（{names}）",
    "no_library": "C 内核不可用：{error}",
    "partial": "{names}（本引擎的内核用于 {n} 种权重形状中的 {ok} 种）",
    "rejected": "smallgemm 在这台机器上有 {bad} 种权重形状没有通过批量不变性检查",
}
