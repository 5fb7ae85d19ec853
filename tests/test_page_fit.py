"""Issue 45, "tried as a student would": the page's layout at 400-1920 px. A 60-node tree keeps its
labels apart and its top marker inside; the p/q ticks of many drafts are thinned and turn; a three-line
title gets its room; the glossary wraps; the replay stacks on a narrow screen; a wide screen is used.
The figures are checked by their layout settings, the page in Debian's chromium."""
from __future__ import annotations

import os
import tempfile

import pytest

from eagle_core.trace import ACCEPTED, NOT_REACHED, REJECTED, CycleRecord, DraftNode
from viz import probs as vp
from viz import tree as vt
from viz.style import wrap_title


def wide_cycle(depth: int = 6, width: int = 10, total: int = 59) -> CycleRecord:
    """An EAGLE-2-shaped tree of `total` drafts: `width` children at depth 1, then the first few
    nodes of each level expanded, `width` children each, breadth first; the first child of each
    level is accepted, its siblings rejected, the rest never tested."""
    nodes = [DraftNode(0, 0, "root", -1, 0, 1.0, 0.0, None, ACCEPTED)]
    frontier, path = [0], [0]
    while len(nodes) < total + 1 and frontier:
        nxt = []
        for parent in frontier[:3]:
            for k in range(width):
                if len(nodes) > total:
                    break
                i, d = len(nodes), nodes[parent].depth + 1
                if d > depth:
                    break
                on_path = parent == path[-1]
                decision = (ACCEPTED if k == 0 else REJECTED) if on_path else NOT_REACHED
                nodes.append(DraftNode(i, i, f" token{i}word", parent, d, 0.5 / (k + 1), -0.5 * d,
                                       None if decision == NOT_REACHED else 0.3, decision))
                if decision == ACCEPTED:
                    path.append(i)
                nxt.append(i)
        frontier = nxt
    accepted = tuple(path)
    return CycleRecord(1, 40, tuple(nodes), accepted, 999, " end", tuple(range(len(accepted))),
                       "".join(nodes[i].text for i in accepted[1:]) + " end", 5.0, 40.0, "greedy", 0.8)


def _plot_px(fig) -> float:
    m = fig.layout.margin
    return fig.layout.height - m.t - m.b


def test_wide_tree_rows_leave_room_for_their_labels():
    cycle = wide_cycle()
    assert len(cycle.nodes) == 60
    fig = vt.tree_figure(cycle)
    y0, y1 = fig.layout.yaxis.range
    px_per_row = _plot_px(fig) / (y1 - y0)
    markers = [t for t in fig.data if t.mode == "markers+text"]
    for t in markers:  # a label over its marker must fit in one row, with a gap
        assert t.textfont.size + t.marker.size / 2 + 4 <= px_per_row, (t.name, px_per_row)
        assert t.cliponaxis is False  # the top row's marker is not cut at the plot's edge
        assert all(len(s) <= vt.TREE_DENSE_LABEL for s in t.text), t.text  # wide levels: short labels
    top = max(y for t in markers for y in t.y)
    assert y1 - top >= 1.0  # a row's room above the top node for its label


def test_small_tree_keeps_its_big_labels():
    cycle = wide_cycle(depth=3, width=2, total=6)
    fig = vt.tree_figure(cycle)
    sizes = {t.textfont.size for t in fig.data if t.mode == "markers+text"}
    assert min(sizes) == 14
    assert any("token" in s for t in fig.data if t.mode == "markers+text" for s in t.text)


def fan_cycle(n: int = 30) -> CycleRecord:
    """The root and n tested children (the first accepted), as a wide first level tests them."""
    nodes = [DraftNode(0, 0, "root", -1, 0, 1.0, 0.0, None, ACCEPTED)]
    nodes += [DraftNode(i, i, f" token{i}word", 0, 1, 0.5 / i, -i, 0.4 / i, ACCEPTED if i == 1 else REJECTED)
              for i in range(1, n + 1)]
    return CycleRecord(1, 40, tuple(nodes), (0, 1), 999, " end", (1, 999), " token1word end", 5.0, 40.0, "greedy", 0.8)


def test_many_drafts_thin_and_turn_their_ticks():
    cycle = fan_cycle()
    n = len(vp.tested_nodes(cycle)) + 1  # + the bonus
    assert n > vp.PROBS_MAX_TICKS
    fig = vp.probs_figure(cycle)
    ax = fig.layout.xaxis
    assert len(ax.tickvals) <= vp.PROBS_MAX_TICKS
    assert ax.tickvals[-1] == "bonus"  # the bonus is always labelled
    assert 90 in ax.autotickangles and ax.automargin
    assert all("<br>" not in t and len(t) <= vp.PROBS_MANY_LABEL + 2 for t in ax.ticktext), ax.ticktext


def test_few_drafts_keep_two_line_ticks():
    from tests.app_fixtures import chain_cycle

    fig = vp.probs_figure(chain_cycle())
    assert len(fig.layout.xaxis.tickvals) == len(vp.tested_nodes(chain_cycle())) + 1
    assert all("<br><sup>" in t for t in fig.layout.xaxis.ticktext)


def test_a_three_line_title_gets_more_room():
    fig = vp.probs_figure(fan_cycle())
    lines = wrap_title(fig.layout.title.text).count("<br>") + 1
    assert lines >= 3
    assert fig.layout.margin.t >= 24 * lines + 40


def test_hardware_figure_keeps_its_top_label_inside():
    from tests.test_hardware import _result
    from viz.hardware import hardware_figure

    r = _result()
    fig = hardware_figure(r, "Test CPU")
    top = max(max(t.y) for t in fig.data if t.y is not None)
    assert fig.layout.yaxis.range[1] >= top * 1.1
    assert all(t.cliponaxis is False for t in fig.data if t.mode == "markers+text")


def test_css_rules():
    from eagle_app.layout import CSS
    from viz.text import CSS as TEXT_CSS

    assert "1500px" not in CSS and "max-width:min(100%" in CSS
    # a table's cells wrap (it fits 1280 px); its headers stay one line (no letter per line at 400 px, where it scrolls)
    assert "white-space:normal" in CSS.split(".eg-learn td{")[1].split("}")[0]
    assert "nowrap" in CSS.split(".eg-learn th{")[1].split("}")[0]
    assert "minmax(300px,1fr)" in TEXT_CSS.split(".eg-replay{")[1].split("}")[0]
    assert "word-break:normal" in TEXT_CSS.split(".eg-replay .eg-text{")[1].split("}")[0]


# ---------------------------------------------------------------------- the page in a browser
from tests.app_fixtures import CHROMIUM, CHROMIUM_ARGS, free_port, launched_app  # noqa: E402


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is missing")
def test_page_fits_400_1280_1920():
    from playwright.sync_api import expect, sync_playwright

    with launched_app(free_port()) as url, sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(tempfile.mkdtemp(prefix="eagle-fit-"), executable_path=CHROMIUM,
                                                   args=CHROMIUM_ARGS)
        try:
            page = ctx.new_page()
            page.set_viewport_size({"width": 1920, "height": 1000})
            page.goto(url)
            expect(page.locator("#eg-tree .js-plotly-plot")).to_be_visible(timeout=60_000)
            expect(page.locator("#eg-replay .eg-replay")).to_be_visible(timeout=60_000)  # the example trace's
            width = page.evaluate("() => document.querySelector('.gradio-container').getBoundingClientRect().width")
            assert width > 0.9 * 1920, width  # it stopped at 1500 px: a fifth of the screen blank
            page.set_viewport_size({"width": 400, "height": 1000})
            page.wait_for_timeout(800)
            boxes = [page.locator("#eg-replay .eg-text").nth(i).bounding_box() for i in range(2)]
            assert boxes[1]["y"] >= boxes[0]["y"] + boxes[0]["height"], boxes  # stacked, not two thin columns
            page.get_by_role("tab", name="Learn").click()
            for w in (1280, 1920):
                page.set_viewport_size({"width": w, "height": 1000})
                page.wait_for_timeout(800)
                sizes = page.evaluate("() => [...document.querySelectorAll('.eg-learn table')].map("
                                      "t => [t.scrollWidth, t.clientWidth])")
                assert sizes and all(s <= c + 1 for s, c in sizes), (w, sizes)
            page.get_by_text("Why tree size depends on the hardware").click()  # its tables of numbers
            page.set_viewport_size({"width": 400, "height": 1000})
            page.wait_for_timeout(1500)
            rights = page.evaluate("() => [...document.querySelectorAll('.prose table')].filter(t => t.offsetParent)"
                                   ".map(t => t.getBoundingClientRect().right)")
            assert len(rights) >= 3 and max(rights) <= 400, rights  # in the screen; wider ones scroll inside
        finally:
            ctx.close()
