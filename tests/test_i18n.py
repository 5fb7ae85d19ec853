"""The page in Chinese (issue 28, item 2): every text has its translation, the Chinese Learn text
keeps the English one's numbers, the callbacks answer in the tab's language, and a real browser
asking for zh-CN gets the page in Chinese (the switch too). The browser test needs Debian's
chromium, like tests/test_browser.py, and skips without it."""
from __future__ import annotations

import os
import re
import tempfile
from collections import Counter

import pytest

from eagle_app import i18n, views as av
from eagle_app.callbacks import decoding as cb
from eagle_app.callbacks import page as page_events
from tests.app_fixtures import CHROMIUM, CHROMIUM_ARGS, chain_cycle, free_port, illustration, launched_app, req, sampled_cycle, vanilla_cycle
from viz import learn, learn_zh
from viz.figures import fill
from viz.hardware import TEXT as HARDWARE
from viz.i18n import FIGURE_TEXT, lang_of

HAN = re.compile(r"[\u4e00-\u9fff]")
CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")  # Chinese characters or Chinese punctuation
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
DEFAULTS = dict(method="eagle2", depth=2, tree_top_k=2, total_tokens=4, chain_length=4, temperature=0.0, top_p=1.0,
                top_k=0, max_new=8, seed=0)


def test_every_text_has_both_languages():
    import app  # noqa: F401  (builds the page: layout.py wraps every static text in i18n.translatable)

    assert i18n.USED == set(i18n.CHINESE), set(i18n.CHINESE) ^ i18n.USED  # each Chinese entry is used, each used one has it
    tables = i18n.gradio_i18n().translations_dict
    for loc in ("zh", "zh-CN", "zh-TW"):
        assert set(tables[loc]) == set(tables["en"]) == set(i18n.CHINESE)
    assert all(HAN.search(zh) or zh == en for en, zh in i18n.CHINESE.items())
    for strings in (i18n.APP_TEXT, FIGURE_TEXT, HARDWARE):
        for key, (en, zh) in strings.entries.items():
            assert en and zh, key
            # the same fields in both (a field missing in one language is a number the reader never sees)
            assert set(re.findall(r"{(\w+)", en)) >= set(re.findall(r"{(\w+)", zh)), key
            assert CJK.search(zh) or zh == en or key == "cap.quote", (key, zh)


def test_the_chinese_learn_text_keeps_every_number():
    for name in learn.BLOCKS + ("GLOSSARY",):
        en, zh = getattr(learn, name), getattr(learn_zh, name)
        assert Counter(NUMBER.findall(en)) == Counter(NUMBER.findall(zh)), name
        assert Counter(re.findall(r"`[^`]+`", en)) == Counter(re.findall(r"`[^`]+`", zh)), name  # code and formulas
        assert len(HAN.findall(zh)) > 50, name
    zh = learn.learn_blocks("zh")
    assert "错一位的输入" in zh["text"] and "术语表" in zh["glossary"] and "one-token shift" not in zh["text"]
    assert "one-token shift" in learn.learn_blocks("en")["text"]
    assert learn.learn_blocks("en")["glossary"] == fill(learn.GLOSSARY)


def test_the_language_follows_the_browser():
    for code in ("zh", "zh-CN", "zh-TW", "zh-HK", "zh_CN", "zh-Hans-CN", "zh-CN,zh;q=0.9,en;q=0.8", "ZH-tw"):
        assert lang_of(code) == "zh", code
    for code in ("en", "en-US", "fr-FR", "", None, "en-US,zh-CN;q=0.5", "zhx", "ja"):
        assert lang_of(code) == "en", code
    assert page_events.page_language("zh-CN") == "zh" and page_events.page_language("de") == "en"


def test_captions_and_cards_in_chinese_keep_their_numbers():
    eagle, vanilla = illustration()
    for c in (*eagle.cycles, sampled_cycle(), vanilla_cycle(), chain_cycle()):
        en, zh = av.viz.cycle_caption(c, 4), av.viz.cycle_caption(c, 4, lang="zh")
        assert HAN.search(zh) and not HAN.search(en), zh
        assert Counter(NUMBER.findall(en)) == Counter(NUMBER.findall(zh)), (en, zh)
    cards = av.viz.comparison_html(eagle, vanilla, lang="zh")
    assert "加速比" in cards and "speedup" not in cards and "完全一致" in cards
    state = av.new_state(eagle, vanilla)
    views = av.all_views(state, "zh")
    assert "第 1 轮" in views["caption"] or "轮" in views["caption"]
    assert "时间取自轨迹中的记录" in views["comparison"] and "草稿 ✓" in views["text"]
    assert "Timings as recorded" in av.all_views(state)["comparison"]  # English stays the default
    titles = {name: views[name].layout.title.text for name in ("tree", "mask", "probs", "acclen", "depth", "timing")}
    assert all(HAN.search(t) for t in titles.values()), titles
    assert "接受（草稿与目标模型一致）" in {t.name for t in views["tree"].data}
    english = av.all_views(state)
    assert english["tree"].layout.title.text.startswith("Cycle") and "Where the time went" in \
        english["timing"].layout.title.text


def test_callbacks_answer_in_the_tabs_language(monkeypatch):
    """The empty prompt, a bad number and a too-long prompt are refused in Chinese for a Chinese tab,
    in English otherwise (the English lines are the ones tests/test_app.py checks)."""
    warnings = []
    monkeypatch.setattr(av.gr, "Warning", lambda message, title=None: warnings.append((message, title)))
    run = lambda prompt, lang, **kw: list(cb.generate(prompt, *{**DEFAULTS, **kw}.values(), True, av.new_state(),  # noqa: E731
                                                      None, lang, request=req("i18n-test")))
    for lang, empty, long, number in (("zh", "提示词是空的", "7,000 个字符", "必须是整数"),
                                      ("en", "The prompt is empty", "7,000 characters", "whole number")):
        assert empty in av.named(run("   ", lang)[-1])["status"]
        assert long in av.named(run("y" * 7000, lang)[-1])["status"]
        assert number in av.named(run("hi", lang, max_new=2.5)[-1])["status"]
    assert warnings[0] == ("提示词是空的：请先输入一些内容（或选一个示例）。", "请检查输入")
    assert warnings[3][1] == "Please check the input"


def test_status_lines_in_chinese():
    eagle, vanilla = illustration()
    state = av.new_state(eagle, vanilla)
    zh = av.done_status(state, {"eagle": ("how.you", {})}, "zh")
    assert zh.startswith("完成。") and "个词元" in zh and "Done" not in zh and "token" not in zh
    assert av.done_status(state).startswith("Done. ")
    assert "前面还有 2 个运行" in cb.waiting_line(2, 10.0, "zh") and "2 runs ahead" in cb.waiting_line(2, 10.0)
    assert "解码中" in av.progress_line("eagle", 12, 11, 0.0, 48, lang="zh")
    assert "第 2 轮" in av.cycle_views(state, 2, "zh")["caption"]
    from eagle_app.model import MODEL

    assert "模型" in MODEL.status("zh")


def test_the_switch_redraws_the_callbacks_texts():
    eagle, vanilla = illustration()
    state = av.new_state(eagle, vanilla, title="t")
    out = page_events.set_language("zh", state, 2)
    names = ("lang", "learn_text", "glossary", "lang_table", "lang_figure", "medusa", "decode_tab", "learn_tab", "traces_tab", "model", *av.VIEW, *av.SUMMARY,
             "status")
    got = dict(zip(names, out, strict=True))
    assert got["lang"] == "zh" and "错一位的输入" in got["learn_text"] and got["learn_tab"].label == "学习"
    assert "笛卡尔积" in got["medusa"].layout.title.text and "中文 τ" in got["lang_table"]
    assert "第 2 轮（共 4 轮）" in got["caption"] and "加速比" in got["comparison"] and "正在回放" in got["status"]
    back = dict(zip(names, page_events.set_language("en", state, 2), strict=True))
    assert "Cycle 2 of 4" in back["caption"] and back["learn_tab"].label == "Learn" and "Replaying" in back["status"]


# ---------------------------------------------------------------------------------- in a real browser


@pytest.fixture(scope="module")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing: apt-get install -y chromium")
    from playwright.sync_api import sync_playwright

    with launched_app(free_port()) as url, sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b, url
        b.close()


def open_page(browser, locale):
    from playwright.sync_api import expect

    b, url = browser
    context = b.new_context(locale=locale, viewport={"width": 1500, "height": 1000})
    page = context.new_page()
    page.goto(url)
    expect(page.locator("#eg-tree .js-plotly-plot")).to_be_visible(timeout=60_000)  # the example trace
    return context, page


def chinese_page(page):
    """What a Chinese page shows: Gradio's i18n (labels, tabs, buttons) and the callbacks' texts."""
    from playwright.sync_api import expect

    expect(page.locator("#eg-generate")).to_have_text("▶ 生成", timeout=30_000)
    expect(page.locator("#eg-prompt")).to_contain_text("提示词")
    expect(page.get_by_role("tab", name="学习")).to_be_visible()
    expect(page.locator("#eg-title")).to_contain_text("EAGLE 投机解码")
    expect(page.locator("#eg-caption")).to_contain_text("轮（共", timeout=30_000)
    expect(page.locator("#eg-status")).to_contain_text("正在回放")
    expect(page.locator("#eg-comparison")).to_contain_text("加速比")
    expect(page.locator("#eg-model")).to_contain_text("模型已就绪")  # the model line in plain words
    page.get_by_role("tab", name="学习").click()
    expect(page.locator(".eg-learn")).to_contain_text("EAGLE 起草的是特征")
    expect(page.locator("#eg-hardware")).to_contain_text("为什么草稿树的大小取决于硬件")  # the hardware panel
    page.locator("#eg-hardware").get_by_text("为什么草稿树的大小取决于硬件").click()
    expect(page.locator("#eg-hw-measure")).to_have_text("测量本机")
    expect(page.locator("#eg-hw-status")).to_contain_text("记录的")
    page.get_by_role("tab", name="解码").click()
    page.locator("#eg-generate").click()  # a refusal from a callback, in Chinese
    expect(page.locator("#eg-status")).to_contain_text("提示词是空的", timeout=30_000)


def test_a_chinese_browser_gets_the_page_in_chinese(browser):
    context, page = open_page(browser, "zh-CN")
    assert page.evaluate("navigator.language") == "zh-CN"
    chinese_page(page)
    context.close()


def test_the_switch_turns_an_english_page_chinese_and_back(browser):
    from playwright.sync_api import expect

    context, page = open_page(browser, "en-US")
    expect(page.locator("#eg-generate")).to_have_text("▶ Generate")
    expect(page.locator("#eg-caption")).to_contain_text("Cycle 1 of", timeout=30_000)
    page.locator("#eg-lang").get_by_text("中文").click()
    chinese_page(page)
    page.screenshot(path=os.path.join(tempfile.gettempdir(), "eagle-i18n-switched.png"))
    page.locator("#eg-lang").get_by_text("English").click()
    expect(page.locator("#eg-generate")).to_have_text("▶ Generate", timeout=30_000)
    expect(page.get_by_role("tab", name="Learn")).to_be_visible()
    expect(page.locator("#eg-status")).to_contain_text("Replaying")  # the status line is drawn again
    expect(page.locator("#eg-caption")).to_contain_text("Cycle 1 of")
    context.close()


# The figures' own words (titles, axis titles, legends, annotations, ticks); node labels are tokens, data. A tick's
# token text is data too, so ticks are checked only for the words the page itself writes there.
FIGURE_WORDS_JS = """(root) => {
  const plots = [...root.querySelectorAll('.js-plotly-plot')].filter(p => p.offsetParent !== null);
  const own = [], ticks = [];
  for (const p of plots) {
    if (p.closest('#eg-mask')) continue;  // its ticks are the tree's tokens
    for (const e of p.querySelectorAll('.gtitle, .g-xtitle, .g-ytitle, .legendtext, .annotation-text')) own.push(e.textContent);
    for (const e of p.querySelectorAll('.xtick text, .ytick text')) ticks.push(e.textContent);
  }
  return [own, ticks, plots.length];
}"""
NAMES = {"EAGLE", "SmolLM", "GPU", "CPU", "MGSM", "bench", "Medusa", "Qwen", "AngelSlim", "README", "AMD", "EPYC",
         "family", "model", "Intel", "Xeon", "Processor"}
UI_TICK_WORDS = {"after", "bonus", "node", "vanilla", "depth", "cycle", "tok"}


def english_words(texts, allowed=NAMES) -> list[str]:
    words = []
    for t in texts:
        t = re.sub(r"“[^”]*”", " ", t)  # a quoted example ("I am begin") is data
        words += [w for w in re.findall(r"[A-Za-z]{3,}", t) if w not in allowed]
    return words


def test_a_chinese_generate_shows_no_raw_markdown_and_no_english_in_the_figures(browser):
    """Issue 45: a zh-CN page after a Chinese question: 0 raw ** anywhere, 0 English words in the figures'
    own words (names such as EAGLE aside), in the Decode tab, the Learn tab and the hardware panel."""
    from playwright.sync_api import expect

    context, page = open_page(browser, "zh-CN")
    expect(page.locator("#eg-generate")).to_have_text("▶ 生成", timeout=30_000)
    page.locator("#eg-prompt textarea").fill("请用两句话介绍长城。")
    box = page.locator("#eg-maxnew input[type=number]")
    box.fill("16")
    box.press("Enter")
    page.locator("#eg-generate").click()
    expect(page.locator("#eg-status")).to_contain_text("完成", timeout=300_000)
    expect(page.locator("#eg-comparison")).to_contain_text("普通解码", timeout=30_000)
    page.wait_for_timeout(1500)
    checked = 0
    for tab in ("解码", "学习"):
        page.get_by_role("tab", name=tab).click()
        page.wait_for_timeout(1500)
        if tab == "学习":
            page.locator("#eg-hardware").get_by_text("为什么草稿树的大小取决于硬件").click()
            expect(page.locator("#eg-hw-plot .js-plotly-plot")).to_be_visible(timeout=30_000)
            page.wait_for_timeout(1000)
        body = page.evaluate("document.body.innerText")
        assert "**" not in body, body[max(0, body.index("**") - 80):body.index("**") + 80]
        own, ticks, n = page.evaluate(FIGURE_WORDS_JS, page.locator("body").element_handle())
        checked += n
        assert any("轮" in t or "树" in t for t in own) and not english_words(own), (tab, english_words(own))
        assert not [w for w in english_words(ticks, set()) if w.lower() in UI_TICK_WORDS], (tab, ticks)
    assert checked >= 8
    page.screenshot(path=os.path.join(tempfile.gettempdir(), "eagle-zh-generate.png"), full_page=True)
    context.close()
