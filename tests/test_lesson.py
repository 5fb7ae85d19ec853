"""The lesson (issue 45, item 4): its shipped traces are what the engine decodes, each step opens at the
cycle its rule picks, that cycle shows the step's idea, and every card is short and filled in, in both
languages. The browser run is tests/test_lesson_browser.py."""
from __future__ import annotations

import os
import re

import pytest

import viz
from eagle_app import lesson
from eagle_app.lesson_plan import BY_KEY, LESSON_DIR, STEPS, TREE, chinese_tokens, is_byte_token, load_manifest, load_meta
from eagle_core import DecodeSettings
from eagle_core.trace import ACCEPTED, NOT_REACHED, REJECTED
from viz.examples import load_trace_file

PLAN = load_manifest()


def cycle_of(key: str):
    s = next(s for s in PLAN if s["key"] == key)
    eagle, vanilla = load_trace_file(os.path.join(LESSON_DIR, s["file"]))
    return eagle, vanilla, eagle.cycles[s["cycle"] - 1]


def test_manifest_lists_every_step_in_order():
    assert [s["key"] for s in PLAN] == [s.key for s in STEPS]
    assert [s["step"] for s in PLAN] == list(range(1, len(STEPS) + 1))
    for s in PLAN:
        eagle, _ = load_trace_file(os.path.join(LESSON_DIR, s["file"]))
        assert eagle.summary.prompt == BY_KEY[s["key"]].prompt
        assert 1 <= s["cycle"] <= len(eagle.cycles) == s["of"]
        tree = {k: eagle.summary.settings[k] for k in TREE}  # the script's settings, not a preset's
        assert tree == TREE, s["key"]


def test_each_step_opens_at_its_rules_cycle():
    for s in PLAN:
        eagle, _ = load_trace_file(os.path.join(LESSON_DIR, s["file"]))
        assert BY_KEY[s["key"]].rule(eagle.cycles) == s["cycle"] - 1, s["key"]


def test_each_steps_cycle_shows_its_idea():
    _, _, c = cycle_of("tree")
    assert c.n_draft == TREE["total_tokens"] and max(n.depth for n in c.nodes) == TREE["depth"]
    assert sum(n.parent == 0 for n in c.nodes) >= 2

    _, _, c = cycle_of("one_pass")
    assert c.n_draft == TREE["total_tokens"] and len(c.accepted) >= 3  # 2+ drafts and the root
    assert len(c.committed_ids) == len(c.accepted)  # the accepted drafts and the bonus, from one pass

    eagle, _, c = cycle_of("bonus")
    assert c.accepted_drafts == max(x.accepted_drafts for x in eagle.cycles) >= 2
    assert c.committed_ids[-1] == c.bonus_token_id

    _, _, c = cycle_of("rejection")
    first = [n for n in c.nodes if n.parent == 0]
    assert c.accepted == (0,) and first and all(n.decision == REJECTED for n in first)
    assert c.bonus_token_id not in {n.token_id for n in first}  # the target chose something else
    assert any(n.decision == NOT_REACHED for n in c.nodes)
    assert c.committed_ids == (c.bonus_token_id,)

    _, _, c = cycle_of("residual")
    assert c.rule == "point_mass"
    shown = False
    for n in c.nodes[1:]:
        lost = [s for s in c.nodes if s.parent == n.parent and s.index < n.index and s.decision == REJECTED]
        if n.decision == ACCEPTED and lost:
            assert all(s.u >= s.p_test for s in lost)  # each lost its draw
            left = 1.0 - sum(s.p for s in lost)  # p renormalised over the mass the rejections left
            assert n.p_test == pytest.approx(n.p / left, rel=1e-3) and n.p_test > n.p and n.u < n.p_test
            shown = True
    assert shown

    _, _, c = cycle_of("bytes")
    assert sum(is_byte_token(c.nodes[i].text) for i in c.accepted[1:]) >= 2
    assert is_byte_token(c.nodes[0].text)  # the caption counts the root's byte in
    assert re.search(r"[\u4e00-\u9fff]", c.committed_text)

    _, _, c = cycle_of("hardware")
    assert c.n_draft == TREE["total_tokens"]


@pytest.mark.parametrize("key", ["bonus", "residual"])
def test_shipped_traces_are_what_the_engine_decodes(key):
    """Re-decode a greedy and the sampled step with the recorded settings (and seed): same tokens, same
    accepted paths. Greedy float32 decoding is deterministic; sampling is, given the seed."""
    from tests.app_fixtures import default_engine

    s = next(s for s in PLAN if s["key"] == key)
    shipped, vanilla = load_trace_file(os.path.join(LESSON_DIR, s["file"]))
    settings = DecodeSettings(**{k: v for k, v in s["settings"].items() if k != "static_tree"})
    run = default_engine().run(s["prompt"], settings)
    assert run.summary.token_ids == shipped.summary.token_ids
    assert [[c.nodes[i].token_id for i in c.accepted] for c in run.cycles] == \
        [[c.nodes[i].token_id for i in c.accepted] for c in shipped.cycles]
    if vanilla is not None:  # greedy: the EAGLE output is the target's own
        assert vanilla.summary.token_ids == shipped.summary.token_ids


def test_the_recorded_vocabulary_counts_are_the_tokenizers():
    """Step 6's caption says how few of the vocabulary's tokens are whole Chinese characters."""
    from tests.app_fixtures import default_engine

    counts = chinese_tokens(default_engine().target.tokenizer)
    assert load_meta()["vocab"] == counts and 0 < counts["whole_chinese"] < counts["size"] // 100
    assert f"Only {counts['whole_chinese']} of" in lesson.card(PLAN, 6, "en")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_cards_are_short_filled_in_and_ask_one_question(lang):
    for i, s in enumerate(PLAN, start=1):
        md = lesson.card(PLAN, i, lang)
        assert "{" not in md and "}" not in md, md
        title, caption, question, source = md.split("\n\n")
        assert lesson.TEXT(f"title.{s['key']}", lang) in title
        if lang == "en":
            assert len(caption.split()) <= 120, (s["key"], len(caption.split()))
            assert question.count("?") >= 1 and "Question for the class" in question
        else:
            assert len(caption) <= 300, (s["key"], len(caption))  # ~120 English words
            assert "？" in question and "问全班" in question


def test_chinese_texts_have_no_english_words():
    """The Chinese table's own words (its fields aside: tokens, prompts, a machine's name) are Chinese."""
    allowed = {"EAGLE", "token", "UTF", "GPU", "CPU", "p", "q", "u", "python", "scripts", "make_lesson_traces", "py"}
    for key, (_, zh) in lesson.TEXT.entries.items():
        words = set(re.findall(r"[A-Za-z_]+", re.sub(r"{[^}]*}", "", zh)))
        assert words <= allowed, (key, words - allowed)


def test_open_in_decode_lands_on_the_steps_cycle():
    from eagle_app.views import named

    for i, s in enumerate(PLAN, start=1):
        out = named(lesson.open_in_decode(i, "en"))
        assert out["slider"].value == s["cycle"]
        eagle, _ = load_trace_file(os.path.join(LESSON_DIR, s["file"]))
        assert out["caption"] == viz.cycle_caption(eagle.cycles[s["cycle"] - 1], len(eagle.cycles), lang="en")
        assert out["state"]["source"].endswith(s["file"])
