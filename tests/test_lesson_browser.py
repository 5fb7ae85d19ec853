"""The lesson in a real browser (issue 45, item 4): every step, in English and in Chinese, shows its trace's
tree, its caption and its question; "open in the Decode tab" lands on the step's cycle. Reuses the
Chromium harness of tests/test_browser.py; saves app-lesson*.png beside the other screenshots (SHOTS: a temporary folder unless EAGLE_SCREENSHOTS names one)."""
from __future__ import annotations

import os

import pytest

from eagle_app import lesson
from eagle_app.lesson_plan import load_manifest
from tests.app_fixtures import CHROMIUM
from tests.test_browser import SHOTS, browser, open_page, page_url  # noqa: F401  (fixtures)

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing: apt-get install -y chromium")


def walk(page, lang: str) -> None:
    """Every step by its Next button: the card names the step, shows its caption's start and its question,
    and the tree figure is drawn with the step's nodes."""
    from playwright.sync_api import expect

    plan = load_manifest()
    card = page.locator("#eg-lesson-card")
    for i, s in enumerate(plan, start=1):
        if i > 1:
            page.locator("#eg-lesson-next").click()
        title = lesson.TEXT(f"title.{s['key']}", lang)
        expect(card).to_contain_text(lesson.TEXT("head", lang, i=i, n=len(plan), title=title).lstrip("# "),
                                     timeout=30_000)
        question = lesson.TEXT("ask", lang, q="").replace("*", "").strip()
        expect(card).to_contain_text(question)
        expect(card).to_contain_text(lesson.TEXT(f"cap.{s['key']}", lang).split("{")[0][:20])
        expect(page.locator("#eg-lesson-tree .js-plotly-plot")).to_be_visible()
        assert page.locator("#eg-lesson-tree .js-plotly-plot .scatterlayer .trace").count() >= 1
        side = lesson.BY_KEY[s["key"]].side
        if side != "text":
            where = "#eg-lesson-wide" if side in lesson.WIDE else "#eg-lesson-side"
            expect(page.locator(f"{where} .js-plotly-plot")).to_be_visible()
        assert "**" not in card.inner_text(), card.inner_text()  # emphasis renders, in Chinese too
        assert card.is_visible() and page.get_by_text("Error", exact=True).count() == 0


def test_the_lesson_runs_in_both_languages(page_url, browser):  # noqa: F811
    from playwright.sync_api import expect

    page = open_page(browser, page_url)
    page.get_by_role("tab", name=lesson.TEXT("tab", "en")).click()
    assert page.get_by_label("1 · The draft tree").count() == 1  # one step list, not a second one drawn at build
    walk(page, "en")
    page.locator("#eg-lesson-steps").get_by_text("4 · A rejection").click()
    expect(page.locator("#eg-lesson-card")).to_contain_text("Step 4 of 7", timeout=30_000)
    page.wait_for_timeout(1000)
    page.screenshot(path=os.path.join(SHOTS, "app-lesson.png"), full_page=True)

    page.locator("#eg-lang").get_by_text("中文").click()
    expect(page.get_by_role("tab", name="课堂")).to_be_visible(timeout=30_000)
    expect(page.locator("#eg-lesson-card")).to_contain_text("第 4 步", timeout=30_000)
    page.locator("#eg-lesson-steps").get_by_text("1 · 草稿树").click()
    walk(page, "zh")
    page.wait_for_timeout(1000)
    page.screenshot(path=os.path.join(SHOTS, "app-lesson-zh.png"), full_page=True)

    # the step's trace in the Decode tab, at the step's cycle
    plan = load_manifest()
    page.locator("#eg-lesson-open").click()
    expect(page.locator("#eg-status")).to_contain_text("课堂第 7 步", timeout=30_000)
    expect(page.locator("#eg-caption")).to_be_visible(timeout=30_000)  # the page went to the Decode tab itself
    expect(page.locator("#eg-caption")).to_contain_text(f"{plan[-1]['cycle']}", timeout=30_000)
    expect(page.locator("#eg-tree .js-plotly-plot")).to_be_visible()
    page.close()
