"""The figure builders on hand-made traces: graph shape, highlighted path, labels, HTML."""
from __future__ import annotations

import json

import pytest

import viz
from eagle_core.trace import ACCEPTED, NOT_REACHED, REJECTED, CycleRecord, DraftNode, run_to_dict
from tests.app_fixtures import chain_cycle, illustration, sampled_cycle, vanilla_cycle
from viz.examples import cartesian_tree_cycle
from viz.tree import BONUS_KEY


def test_tree_graph_counts_and_path():
    c = illustration()[0].cycles[0]  # root + 9 drafts, path I -> am -> going -> to, bonus " explain"
    g = viz.tree_graph(c)
    assert g.number_of_nodes() == 10 + 1  # draft nodes + bonus
    assert g.number_of_edges() == 9 + 1
    on_path = {n for n, a in g.nodes(data=True) if a["on_path"]}
    assert on_path == {0, 1, 4, 8, BONUS_KEY}
    assert g.nodes[BONUS_KEY]["label"] == "␣explain"
    assert list(g.predecessors(BONUS_KEY)) == [8]
    assert g.nodes[1]["label"] == "␣am" and g.nodes[0]["kind"] == "root"
    assert {g.nodes[n]["decision"] for n in (2, 3, 5, 6)} == {REJECTED}
    assert {g.nodes[n]["decision"] for n in (7, 9)} == {NOT_REACHED}


def test_tree_layout_children_right_of_parents():
    g = viz.tree_graph(illustration()[0].cycles[1])
    pos = viz.tree_layout(g)
    for u, v in g.edges:
        assert pos[v][0] == pos[u][0] + 1
    assert len({p for p in pos.values()}) == len(pos)  # no two nodes on the same spot


def test_tree_figure_traces_match_graph():
    c = illustration()[0].cycles[0]
    fig = viz.tree_figure(c)
    markers = [t for t in fig.data if t.mode == "markers+text"]
    assert sum(len(t.x) for t in markers) == viz.tree_graph(c).number_of_nodes()
    by_name = {t.name.split(" ")[0]: t for t in markers}
    assert list(by_name["accepted"].text) == ["␣am", "␣going", "␣to"]
    assert list(by_name["bonus"].text) == ["␣explain"]
    assert len(by_name["rejected"].text) == 4 and len(by_name["never"].text) == 2
    assert "q (draft) = 0.620" in by_name["accepted"].hovertext[0]
    assert "Cycle 1" in fig.layout.title.text


def test_vanilla_cycle_is_root_plus_bonus():
    c = vanilla_cycle()
    g = viz.tree_graph(c)
    assert (g.number_of_nodes(), g.number_of_edges()) == (2, 1)
    markers = [t for t in viz.tree_figure(c).data if t.mode == "markers+text"]
    assert sorted(len(t.x) for t in markers) == [1, 1]  # the root and the bonus, nothing drafted
    assert [list(r) for r in viz.mask_figure(c).data[0].z] == [[1]]  # the root sees itself only
    assert len(viz.probs_figure(c).data) == 1  # just the bonus bar


def test_medusa_cartesian_tree_without_bonus():
    g = viz.tree_graph(cartesian_tree_cycle(), show_bonus=False)
    assert (g.number_of_nodes(), g.number_of_edges()) == (1 + 3 + 9, 12)
    labels = {a["label"] for _, a in g.nodes(data=True)}
    assert {"␣am", "␣begin"} <= labels


def test_mask_is_ancestor_closed():
    c = illustration()[0].cycles[0]
    z = viz.mask_figure(c).data[0].z
    n = len(c.nodes)
    assert len(z) == n and all(len(r) == n for r in z)
    for i, node in enumerate(c.nodes):
        assert z[i][i] == 1 and z[i][0] == 1  # itself and the root
        for j in range(n):
            assert z[i][j] == 0 or j <= i
    assert z[8] == [1, 1, 0, 0, 1, 0, 0, 0, 1, 0]  # " to" sees root, " am", " going", itself


def test_probs_figure_greedy_and_sampled():
    c = illustration()[0].cycles[0]
    fig = viz.probs_figure(c)
    tested = viz.tested_nodes(c)
    assert len(tested) == 7  # 3 at the root, 3 under " am", 1 under " going"
    p_bar = fig.data[0]
    assert list(p_bar.y) == [n.p for n in tested]
    ticks = dict(zip(fig.layout.xaxis.tickvals, fig.layout.xaxis.ticktext))
    assert ticks[p_bar.x[0]].startswith("✓ ␣am") and ticks[p_bar.x[1]].startswith("✗ ␣always")
    s = viz.probs_figure(sampled_cycle())
    draws = [t for t in s.data if t.name == "draw u"]
    assert len(draws) == 1 and len(draws[0].y) == 7


def test_probs_figure_gives_drafts_with_the_same_label_their_own_bars():
    """Two drafts reading alike (the same text after the same parent text) had one category, so
    one bar was drawn over the other; each drafted token now has its own."""
    root = DraftNode(0, 10, "def", -1, 0, 1.0, 0.0, None, ACCEPTED)
    nodes = (root, DraftNode(1, 11, " f", 0, 1, 0.5, -0.7, 0.6, ACCEPTED),
             DraftNode(2, 12, " g", 0, 1, 0.3, -1.2, 0.2, REJECTED),
             DraftNode(3, 13, " g", 0, 1, 0.4, -0.9, 0.1, REJECTED),  # another token id, same text
             DraftNode(4, 14, "x", 2, 2, 0.4, -2.1, None, NOT_REACHED))
    c = CycleRecord(1, 20, nodes, (0, 1), 99, "(", (11, 99), " f(", 5.0, 40.0, "greedy", 0.9)
    fig = viz.probs_figure(c)
    p_bar, q_bar, bonus = fig.data
    assert list(p_bar.y) == [0.6, 0.2, 0.1] and list(q_bar.y) == [0.5, 0.3, 0.4]
    assert len(set(p_bar.x) | set(bonus.x)) == 4  # 3 tested drafts + the bonus, one category each
    ticks = dict(zip(fig.layout.xaxis.tickvals, fig.layout.xaxis.ticktext))
    assert list(ticks) == list(p_bar.x) + list(bonus.x)
    labels = [ticks[x] for x in p_bar.x]
    assert labels[0].startswith("✓ ␣f") and labels[1] == labels[2] and labels[1].startswith("✗ ␣g")
    assert ticks[bonus.x[0]].startswith("★ (")


def test_mask_figure_makes_room_for_its_labels():
    """Row labels were cut off on the left at 420 px: the margins grow to fit the labels
    (automargin, not left to the template) above a least left margin."""
    layout = viz.mask_figure(illustration()[0].cycles[0]).layout
    assert layout.yaxis.automargin is True and layout.xaxis.automargin is True
    assert layout.margin.l >= 20


def test_charts():
    eagle, vanilla = illustration()
    depth = viz.acceptance_by_depth_figure(eagle.cycles).data[0]
    # depth 1: accepted in cycles 1, 2, 4 of 4; depth 2: by cycles 1, 2 and 4 of the 3 that
    # accepted depth 1; depth 4: only cycle 4 drafted it and got there
    assert list(depth.text)[:2] == ["3/4", "3/3"] and list(depth.y)[:2] == [0.75, 1.0]
    assert list(depth.text)[-1] == "1/1"
    fig = viz.accepted_length_figure(eagle.cycles, selected=1)
    assert list(fig.data[0].y) == [3, 3, 0, 4] and "τ = 3.50" in fig.layout.title.text
    assert len(viz.timing_figure(eagle, vanilla).data) == 4
    empty = viz.acceptance_by_depth_figure([vanilla_cycle()])  # no drafts: a message, not a crash
    assert not empty.data and "needs drafted tokens" in empty.layout.annotations[0].text


def test_text_html_colours_escapes_and_keeps_newlines():
    eagle, _ = illustration()
    html = viz.colored_text_html(eagle.cycles, selected=1)
    assert html.count("class='eg-cyc") == 4 and html.count("eg-sel") == 2  # one in CSS, one selected
    assert html.count("<span class='eg-bonus'>") == 4 + 1  # + the legend
    assert "<span class='eg-prefill'>I</span>" in html
    c = chain_cycle()
    assert viz.token_pieces(c) == [(" f", "draft"), ("(", "draft"), ("\n", "bonus")]
    evil = vanilla_cycle(text="<script>alert(1)</script>\n  indented")
    out = viz.colored_text_html([evil])
    assert "<script>alert" not in out and "&lt;script&gt;" in out and "\n  indented" in out


def test_token_pieces_falls_back_when_bytes_split():
    c = vanilla_cycle(text="\ufffd")
    from dataclasses import replace
    c = replace(c, committed_text="长")  # the token text alone is half a character
    assert viz.token_pieces(c) == [("长", "bonus")]


def test_caption_and_comparison():
    eagle, vanilla = illustration()
    cap = viz.cycle_caption(eagle.cycles[0], 4)
    assert "Cycle 1 of 4" in cap and "**9**" in cap and "“␣explain”" in cap and "**4** tokens" in cap
    assert "exactly one" in viz.cycle_caption(vanilla_cycle())
    cmp = viz.comparison_html(eagle, vanilla)
    assert "✓ identical" in cmp and "speedup" in cmp
    assert "animation-delay" in viz.replay_html(eagle, vanilla)


def test_bundle_round_trip():
    eagle, vanilla = illustration()
    e2, v2 = viz.bundle_from_json(viz.bundle_to_json(eagle, vanilla, title="t"))
    assert e2 == eagle and v2 == vanilla
    single = json.dumps(run_to_dict(vanilla))
    assert viz.bundle_from_json(single) == (None, vanilla)


def _bad(mutate):
    d = run_to_dict(illustration()[0])
    mutate(d)
    return json.dumps(d)


@pytest.mark.parametrize("text", [
    "", "not json", "[]", "{}", '{"kind": "eagle-explainer/comparison", "runs": {}}',
    _bad(lambda d: d.update(trace_version=99)),
    _bad(lambda d: d["cycles"].append(1)),
    _bad(lambda d: d["cycles"][0].update(nodes=None)),
    _bad(lambda d: d["cycles"][0]["nodes"][3].update(parent=42)),
    _bad(lambda d: d["cycles"][0].update(accepted=[0, 7])),
    _bad(lambda d: d["cycles"][0]["nodes"][1].update(decision="maybe")),
    _bad(lambda d: d["cycles"][0]["nodes"][1].update(q="high")),
    _bad(lambda d: d["summary"].update(text=5)),
])
def test_malformed_traces_raise_value_error(text):
    with pytest.raises(ValueError):
        viz.bundle_from_json(text)


def test_token_label():
    assert viz.token_label(" hello") == "␣hello" and viz.token_label("\n") == "↵"
    assert viz.token_label("  ") == "␣␣" and viz.token_label("x" * 40).endswith("…")


def test_per_language_rows_table_and_figure():
    """eval results of paired prompt sets -> rows, a table with the zh/en ratio, grouped bars."""
    from viz.languages import language_figure, language_rows, language_table

    def run(name, tau, n=4):
        return {"prompts": name, "tree": [2, 2, 4], "temperature": 0.0,
                "overall": {"prompts": n, "tau": tau, "tokens_per_s": 20.0, "acceptance_by_depth": {}}}

    results = [{"method": "eagle2", "runs": [run("mgsm_en.jsonl", 2.0), run("mgsm_zh.jsonl", 1.5),
                                             run("mt_bench_question.jsonl", 1.8), run("other.jsonl", 9.0)]},
               {"method": "eagle3", "runs": [run("mt_bench_zh_question.jsonl", 1.2)]}]
    rows = language_rows(results)
    assert len(rows) == 4 and {r["method"] for r in rows} == {"EAGLE-2", "EAGLE-3"}
    table = language_table(rows)
    assert "| EAGLE-2 | MGSM | 2,2,4 | 2.00 (4) | 1.50 (4) | 0.75 |" in table
    assert "| EAGLE-3 | MT-bench | 2,2,4 | – | 1.20 (4) | – |" in table
    fig = language_figure(rows)
    assert [t.name for t in fig.data] == ["English", "Chinese"]
    assert list(fig.data[1].y) == [1.5, None, 1.2]  # groups: (EAGLE-2 MGSM), (EAGLE-2 MT-bench), (EAGLE-3 MT-bench)
    assert language_table([]) == "" and "No per-language" in language_figure([]).layout.annotations[0].text
    from viz.languages import merge_results
    split = [{"head": "h", "method": "eagle2", "runs": results[0]["runs"][:2]},
             {"head": "h", "method": "eagle2", "runs": results[0]["runs"][2:]}]
    merged = merge_results(split)
    assert len(merged) == 1 and len(merged[0]["runs"]) == 4


def test_captions_tell_a_chance_rejection_from_a_wrong_guess():
    """Issue 28: under sampling a likely draft can lose its draw, so "the guesses all missed" would
    be wrong; drafts after a rejected parent or an accepted sibling were never tested."""
    from dataclasses import replace

    from viz.text import cycle_caption

    rejected_all = chain_cycle((REJECTED, NOT_REACHED, NOT_REACHED, NOT_REACHED))
    greedy = cycle_caption(rejected_all)
    sampled = cycle_caption(replace(rejected_all, rule="point_mass"))
    assert "top choice" in greedy and "chance" not in greedy
    assert "chance" in sampled and "missed" not in sampled
    assert "3 other drafts were never tested" in greedy


def test_learn_text_states_its_sources_and_measured_costs():
    """Issue 28, item 5: the Learn tab's claims as corrected (each names its source or measurement)."""
    from viz import learn

    text = " ".join((learn.FEATURES, learn.TREE, learn.VERIFY, learn.OTHERS, learn.LANGUAGES, learn.GLOSSARY))
    assert "second-to-top-layer hidden state" not in text and "after the final norm" in text
    assert "about two single-token" not in text and "1.20–1.39" not in text  # figures now come from the recording
    assert "{t8}" in learn.GLOSSARY and "{cpu_speedup}" in learn.GLOSSARY  # (viz/figures.py), issue 45
    # issue 45: EAGLE-1/2's heads and this one's draft vocabulary; the soft cross-entropy; float32 on the CPU kernels
    assert "{draft_rows}" in learn.FEATURES and "official EAGLE-1/2 heads borrow the target's whole" in learn.FEATURES
    assert "soft cross-entropy" in learn.OTHERS and "On this app's CPU kernels" in learn.VERIFY
    assert "bytes of one character following" not in text and "{huma_zh}" in learn.LANGUAGES
    assert "τ 3.98" in text and "τ 4.83" in text and "τ 6.65" in text  # EAGLE-1/2/3, each its own paper
    assert "half precision" in learn.VERIFY and "q` plays no part" in learn.VERIFY
    assert "do not compound" not in text


def test_partial_characters_show_the_character_they_build():
    """Issue 28: a node holding part of a Chinese character shows the character and its share of
    the bytes when a node below it (or the bonus) completes it, and is marked unfinished otherwise."""
    from viz.style import cycle_texts

    def node(i, text, parent, depth, decision):
        return DraftNode(i, 10 + i, text, parent, depth, 0.5, -0.7 * depth, 0.4, decision)

    nodes = (node(0, "我", -1, 0, ACCEPTED), node(1, "<0xE9>", 0, 1, ACCEPTED), node(2, "<0xA5>", 1, 2, ACCEPTED),
             node(3, "<0xE5>", 0, 1, REJECTED), node(4, "<0xA5><0xBD>", 3, 2, NOT_REACHED),
             node(5, "<0xE4>", 0, 1, REJECTED))  # 饭 = E9 A5 AD (its last byte is the bonus), 好 = E5 A5 BD
    cycle = CycleRecord(0, 10, nodes, (0, 1, 2), 99, "<0xAD>", (10, 11, 12, 99), "饭", 1.0, 2.0, "greedy", 0.5)
    shown, bonus = cycle_texts(cycle)
    assert shown == {0: "我", 1: "‹饭 1/3›", 2: "‹饭 2/3›", 3: "‹好 1/3›", 4: "好", 5: "‹E4…›"}
    assert bonus == "饭"


def test_every_symbol_the_page_shows_has_a_font():
    """Issue 28: the status line's emoji (an hourglass, a stopwatch) were empty boxes on a machine
    without an emoji font. Every non-ASCII character in the app's and the figures' source must be
    in some installed font (the CI machine has Debian's chromium fonts and fonts-noto-cjk)."""
    import os
    import shutil
    import subprocess

    if shutil.which("fc-list") is None:
        pytest.skip("fontconfig's fc-list is not installed")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    chars = set()
    for folder in ("eagle_app", "viz"):
        for d, _, files in os.walk(os.path.join(root, folder)):
            for f in files:
                if f.endswith(".py"):
                    chars |= {c for c in open(os.path.join(d, f), encoding="utf-8").read() if ord(c) > 0x7F}
    chars = {c for c in chars if not 0x3000 <= ord(c) <= 0x9FFF and not 0xFF00 <= ord(c) <= 0xFFEF}  # CJK: the CJK font
    missing = [c for c in sorted(chars)
               if not subprocess.run(["fc-list", f":charset={ord(c):x}", "family"], capture_output=True, text=True).stdout.strip()]
    assert not missing, [f"{c} U+{ord(c):04X}" for c in missing]
