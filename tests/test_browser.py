"""A real browser (Debian's chromium, driven by Playwright) against the launched app.

Loads the page, types a prompt, clicks Generate, and checks that the draft tree, the coloured
text and the vanilla comparison appear; saves docs/screenshots/*.png. Also records how long
the first tree takes to appear after the click (docs/app.md). Skips only when /usr/bin/chromium
is missing (install it with `apt-get install -y chromium`).
"""
from __future__ import annotations

import os
import time

import pytest

from tests.app_fixtures import free_port, launched_app

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SHOTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "screenshots")

pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing: apt-get install -y chromium")


@pytest.fixture(scope="module")
def page_url():
    with launched_app(free_port()) as url:
        yield url


def test_generate_in_browser(page_url):
    from playwright.sync_api import expect, sync_playwright

    os.makedirs(SHOTS, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1500, "height": 1000})
            page.goto(page_url)
            # the shipped example trace is on screen before any model is needed
            expect(page.locator("#eg-tree .js-plotly-plot")).to_be_visible(timeout=60_000)
            expect(page.locator("#eg-text .eg-cyc").first).to_be_visible()
            page.screenshot(path=os.path.join(SHOTS, "app-example-trace.png"), full_page=True)

            page.locator("#eg-prompt textarea").fill("Write a Python function that adds two numbers.")
            box = page.locator("#eg-maxnew input[type=number]")
            box.fill("12")
            box.press("Enter")
            t0 = time.perf_counter()
            page.locator("#eg-generate").click()
            expect(page.locator("#eg-tree")).to_contain_text("Cycle 1:", timeout=120_000)
            first_tree_s = time.perf_counter() - t0
            expect(page.locator("#eg-status")).to_contain_text("Done.", timeout=180_000)
            expect(page.locator("#eg-comparison")).to_contain_text("vanilla tokens/s")
            expect(page.locator("#eg-comparison")).to_contain_text("identical")
            assert page.locator("#eg-text .eg-bonus").count() >= 1
            assert page.locator("#eg-text .eg-cyc").count() >= 2
            expect(page.locator("#eg-tree .js-plotly-plot")).to_be_visible()
            expect(page.locator("#eg-acclen .js-plotly-plot")).to_be_visible()
            page.screenshot(path=os.path.join(SHOTS, "app-generate.png"), full_page=True)
            page.get_by_role("tab", name="Learn").click()
            expect(page.locator(".eg-learn")).to_contain_text("one-token shift")
            page.wait_for_timeout(1500)
            page.screenshot(path=os.path.join(SHOTS, "app-learn.png"), full_page=True)
            print(f"\nfirst tree on screen {first_tree_s:.2f} s after clicking Generate (model warm)")
        finally:
            browser.close()
