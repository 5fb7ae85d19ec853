"""The lesson in a real browser (issue 52, item 1): every step, in English and in Chinese, shows its card (caption,
question, try-it) and its one figure; the last step goes live: the Decode tab with the step's prompt and the
lesson's settings; "open in the Decode tab" lands on a recorded step's cycle. Reuses the Chromium harness of
tests/test_browser.py; saves app-lesson*.png beside the other screenshots (SHOTS: a temporary folder unless
EAGLE_SCREENSHOTS names one)."""
from __future__ import annotations

import os

import pytest

from eagle_app import lesson
from eagle_app.lesson_plan import STEPS, TREE
from tests.app_fixtures import CHROMIUM
from tests.test_browser import SHOTS, browser, open_page, page_url  # noqa: F401  (fixtures)

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing: apt-get install -y chromium")


def walk(page, lang: str) -> None:
    """Every step by its Next button: the card names the step and shows its question and try-it, and the step's
    figure is drawn when it has one."""
    from playwright.sync_api import expect

    card = page.locator("#eg-lesson-card")
    for i, s in enumerate(STEPS, start=1):
        if i > 1:
            page.locator("#eg-lesson-next").click()
        title = lesson.TEXT(f"title.{s.key}", lang)
        expect(card).to_contain_text(lesson.TEXT("head", lang, i=i, n=len(STEPS), title=title).lstrip("# "),
                                     timeout=30_000)
        for key in ("ask", "try"):
            expect(card).to_contain_text(lesson.TEXT(key, lang, q="", t="").replace("*", "").replace("<b>", "")
                                         .replace("</b>", "").strip().rstrip(":："))
        if lesson.figure(s.key, lang) is not None:
            expect(page.locator("#eg-lesson-figure .js-plotly-plot")).to_be_visible(timeout=30_000)
        assert "**" not in card.inner_text() and "<b>" not in card.inner_text(), card.inner_text()
        switch = page.locator("#eg-lesson-precision")
        if s.figure == "hardware":  # step 8's precision switch: the GGUF's blocks picked, their words shown
            from viz.hardware import TEXT as HW

            switch.get_by_text(HW("fmt.gguf", lang)).click()
            expect(page.locator("#eg-lesson-precision-text")).to_contain_text(HW("fmt.gguf", lang), timeout=30_000)
            switch.get_by_text(HW("fmt.float32", lang)).click()
        else:
            expect(switch).to_be_hidden()
        page.wait_for_timeout(500)
        page.screenshot(path=os.path.join(SHOTS, f"app-lesson-{lang}-{i}.png"), full_page=True)  # each step, to look at
        assert card.is_visible() and page.get_by_text("Error", exact=True).count() == 0


def test_the_lesson_runs_in_both_languages_and_ends_live(page_url, browser):  # noqa: F811
    from playwright.sync_api import expect

    page = open_page(browser, page_url)
    page.get_by_role("tab", name=lesson.TEXT("tab", "en")).click()
    first = f"1 · {lesson.TEXT('title.cost', 'en')}"
    assert page.get_by_label(first).count() == 1  # one step list, not a second one drawn at build
    walk(page, "en")
    page.wait_for_timeout(1000)
    page.screenshot(path=os.path.join(SHOTS, "app-lesson.png"), full_page=True)

    page.locator("#eg-lang").get_by_text("中文").click()
    expect(page.get_by_role("tab", name="课堂")).to_be_visible(timeout=30_000)
    expect(page.locator("#eg-lesson-card")).to_contain_text(f"第 {len(STEPS)} 步", timeout=30_000)
    page.locator("#eg-lesson-steps").get_by_text(f"1 · {lesson.TEXT('title.cost', 'zh')}").click()
    walk(page, "zh")
    page.wait_for_timeout(1000)
    page.screenshot(path=os.path.join(SHOTS, "app-lesson-zh.png"), full_page=True)

    # the last step ends on the live Decode tab, with the step's prompt and the lesson's tree
    page.locator("#eg-lesson-live").click()
    expect(page.locator("#eg-prompt textarea")).to_have_value(STEPS[-1].prompt, timeout=30_000)
    page.get_by_text("树的设置").first.click()  # the tree settings' accordion
    expect(page.locator("#eg-set-total input[type=number]")).to_have_value(str(TREE["total_tokens"]))
    expect(page.locator("#eg-set-depth input[type=number]")).to_have_value(str(TREE["depth"]))

    recorded = [i for i, s in enumerate(STEPS, start=1) if s.file and s.key in lesson.recorded_steps()]
    if recorded:  # a recorded step's run in the Decode tab, at the step's cycle
        i = recorded[-1]
        page.get_by_role("tab", name="课堂").click()
        page.locator("#eg-lesson-steps").get_by_text(f"{i} · {lesson.TEXT('title.' + STEPS[i - 1].key, 'zh')}").click()
        page.locator("#eg-lesson-open").click()
        expect(page.locator("#eg-status")).to_contain_text(f"课堂第 {i} 步", timeout=30_000)
        expect(page.locator("#eg-caption")).to_be_visible(timeout=30_000)
        cycle = lesson.recorded_steps()[STEPS[i - 1].key]["cycle"]
        expect(page.locator("#eg-caption")).to_contain_text(f"{cycle}", timeout=30_000)
    page.close()
