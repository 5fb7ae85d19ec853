"""The lesson (issue 52, item 1): eight steps, one idea each, every card short and filled from its records in both
languages, a question and a try-it that names one Decode control; step 2 draws the head's real inputs; the
recorded steps open at their rule's cycle, which shows the step's idea; "go live" puts the lesson's settings on
the Decode tab. Tests over a recorded trace skip while that trace is not recorded for the current plan (the
lead re-records them); the browser run is tests/test_lesson_browser.py, literal figures tests/test_literal_figures.py."""
from __future__ import annotations

import os
import re

import pytest
import torch

import viz
from eagle_app import lesson, lesson_cards as cards, settings
from eagle_app.lesson_plan import (BY_KEY, LESSON_DIR, PRESET, RECORDED, STEPS, TREE, VISIBLE, chinese_tokens,
                                   is_byte_token, load_manifest, load_meta)
from eagle_core import PRESETS, DecodeSettings, Engine
from eagle_core.trace import ACCEPTED, REJECTED
from viz.examples import load_trace_file

PLAN = {s["key"]: s for s in load_manifest()}
KEYS = [s.key for s in STEPS]


def recorded(key: str):
    """(eagle, vanilla, the step's cycle, manifest entry) of a recorded step, or skip."""
    if key not in PLAN:
        pytest.skip(f"the lesson's {key!r} step is not recorded for the current plan yet (the traces' recorder)")
    s = PLAN[key]
    eagle, vanilla = load_trace_file(os.path.join(LESSON_DIR, s["file"]))
    return eagle, vanilla, eagle.cycles[s["cycle"] - 1], s


# ------------------------------------------------------------------------------------- the plan
def test_the_story_has_eight_steps_in_order_each_with_one_figure_and_one_control():
    assert KEYS == ["cost", "head", "tree", "mask", "greedy", "sampling", "languages", "hardware"]
    figures = {"forward", "head_inputs", "tree", "mask", "probs", "languages", "hardware"}
    for s in STEPS:
        assert s.figure in figures, s.key
        assert s.control in settings.NAMES or s.control in ("prompt", "preset"), s.key
        assert (s.file is None) == (s.rule is None), s.key  # a recorded step has a rule, a live one neither
    assert [s.key for s in RECORDED] == ["tree", "mask", "greedy", "sampling", "languages"]
    assert len({s.file for s in RECORDED}) == len(RECORDED)


def test_the_lesson_teaches_the_pages_default_tree():
    """Every step decodes with the `cpu` preset, the tree the page opens with on a CPU."""
    assert PRESET == "cpu" and {k: TREE[k] for k in PRESETS[PRESET]} == PRESETS[PRESET]
    if not torch.cuda.is_available():
        assert {k: settings.OPENING[k] for k in PRESETS[PRESET]} == PRESETS[PRESET]
    for s in STEPS:
        assert {k: s.settings[k] for k in TREE} == TREE, s.key
        DecodeSettings(**s.settings).validate(2048)


# ------------------------------------------------------------------------------------- the cards
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_cards_are_short_and_ask_one_question_and_one_try(lang):
    for i, s in enumerate(STEPS, start=1):
        md = lesson.card(i, lang)
        assert "{" not in md and "}" not in md, md
        title, caption, question, try_it, source = md.split("\n\n")
        assert lesson.TEXT(f"title.{s.key}", lang) in title and f"{i}" in title
        if lang == "en":
            assert len(caption.split()) <= 120, (s.key, len(caption.split()))
            assert len(try_it.split()) <= 60, (s.key, len(try_it.split()))
            assert 1 <= question.count("?") <= 2 and "Question for the class" in question
            assert try_it.startswith("**Try it**") and "Predict" in try_it
        else:
            assert len(caption) <= 300, (s.key, len(caption))  # ~120 English words
            assert 1 <= question.count("？") <= 2 and "问全班" in question and "预测" in try_it
        assert cards._control(s.control, lang) in try_it, s.key  # the control, as the Decode tab labels it


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_recorded_or_record_fed_card_is_filled_in(lang):
    """A step whose records exist shows every number: no "—" left in its caption."""
    for i, s in enumerate(STEPS, start=1):
        if s.file and s.key not in PLAN:
            continue
        if s.key == "languages" and not (load_meta().get("vocab") or {}).get("per_char"):
            continue  # the manifest's per-character counts come with the re-recording
        caption = lesson.card(i, lang).split("\n\n")[1]
        assert "—" not in caption, (s.key, caption)


def test_step_one_reads_the_recording():
    from eagle_core.machine import load_recorded

    m = load_recorded()
    f = cards.cost_facts("en")
    rows = TREE["total_tokens"] + 1
    assert f["rows"] == rows and f["t1"] == f"{m['forward_ms'][1]:.1f}"
    assert f["r"] == f"{cards._t(m['forward_ms'], rows) / m['forward_ms'][1]:.2f}"
    assert f["mb"] == f"{m['weights']['target'] * 4 / 1e6:,.0f}"  # float32 weights, read once a pass
    md = lesson.card(1, "en")
    assert f"t(1) = {f['t1']} ms" in md and f"{f['r']}×" in md


def test_step_eight_names_the_recordings_best_tree():
    from eagle_core.machine import lesson as predicted, load_recorded, load_tau_table

    res = predicted(load_recorded(), load_tau_table())
    md = lesson.card(len(STEPS), "en")
    assert f"the best tree here is {res['best_here']['tree']}" in md
    assert max(r["speedup"] for r in res["here"]) == res["best_here"]["speedup"]


def test_chinese_texts_have_no_english_words():
    """The Chinese table's own words (its fields aside: tokens, prompts, a machine's name) are Chinese."""
    allowed = {"EAGLE", "token", "UTF", "GPU", "CPU", "p", "q", "u", "c", "k", "t", "x", "f", "LM", "head", "BPE",
               "SmolLM", "MB", "b", "small", "docs", "app", "md", "The", "lesson", "config", "json", "cpu", "gpu", "Introduce", "the",
               "Great", "Wall", "in", "three", "sentences"}
    for key, (_, zh) in lesson.TEXT.entries.items():
        words = set(re.findall(r"[A-Za-z_]+", re.sub(r"{[^}]*}", "", zh)))
        assert words <= allowed, (key, words - allowed)


# ------------------------------------------------------------------------------------- step 2, the head's inputs
def test_step_two_draws_the_heads_real_inputs():
    """One target forward over the prompt: each row is f(t) with x(t+1), the token one step ahead (the shift),
    the features are the target's own at those positions, the last row's x(t+1) is the target's next token."""
    from tests.conftest import tiny_head, tiny_target
    from viz.head_inputs import head_inputs_figure

    target = tiny_target()
    engine = Engine(target, tiny_head(target))
    prompt = "abcdefghij"
    data = cards.head_inputs(engine, prompt, rows=4)
    ids = engine.check(prompt, DecodeSettings(**BY_KEY["head"].settings))
    with torch.no_grad():
        feats = target.body(input_ids=torch.tensor([ids])).last_hidden_state[0]
    n = len(ids)
    dec = lambda i: target.tokenizer.decode([i])  # noqa: E731
    assert len(data["tokens"]) == len(data["next"]) == len(data["top"]) >= 2
    assert data["tokens"][-1] == dec(ids[-1])
    assert data["next"][:-1] == [dec(i) for i in ids[n - len(data["tokens"]) + 1:]]  # shifted by one
    assert data["tokens"] == [dec(i) for i in ids[n - len(data["tokens"]):]]
    assert torch.allclose(torch.tensor(data["top"]), feats[n - len(data["top"]):], atol=1e-4)
    assert data["next"][-1] == dec(int(target.logits(feats[-1:])[0].argmax()))
    assert data["layers"] == {} and data["hidden"] == target.hidden_size
    fig = head_inputs_figure(data, "en")
    assert len(fig.data) == 1 and len(fig.data[0].y) == len(data["tokens"])
    assert head_inputs_figure(None, "zh").layout.title.text  # the sketch when no model is loaded


def test_step_two_says_whether_the_figure_is_live():
    assert lesson.TEXT("no_model", "en") in lesson.card(2, "en", live=None)
    assert lesson.TEXT("live_model", "zh") in lesson.card(2, "zh", live={"tokens": []})


# ------------------------------------------------------------------------------------- languages
class ByteBPE:
    """A stand-in byte-level tokenizer: one token per character in WHOLE, else one per UTF-8 byte."""
    WHOLE = {"长"}

    def get_vocab(self):
        return {"长": 0, "a": 1, **{f"<0x{b:02X}>": 2 + b for b in range(256)}}

    def decode(self, ids):
        return "长" if ids == [0] else "a" if ids == [1] else "�"

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [0 if ch in self.WHOLE else 2 for ch in text for _ in
                              ([0] if ch in self.WHOLE else ch.encode("utf-8"))]}


def test_bytes_per_character_are_counted_from_the_tokenizer():
    counts = chinese_tokens(ByteBPE(), sample="长城长城。abc")
    assert counts["whole_chinese"] == 1 and counts["chars"] == 2
    assert counts["per_char"] == {"1": 1, "3": 1}  # 长 whole, 城 three byte tokens; punctuation and Latin left out


# ------------------------------------------------------------------------------------- recorded steps
def test_each_recorded_step_opens_at_its_rules_cycle():
    if not PLAN:
        pytest.skip("no lesson trace recorded for the current plan yet")
    for key, s in PLAN.items():
        eagle, vanilla = load_trace_file(os.path.join(LESSON_DIR, s["file"]))
        assert eagle.summary.prompt == BY_KEY[key].prompt
        assert {k: eagle.summary.settings[k] for k in TREE} == TREE, key
        assert BY_KEY[key].rule(eagle.cycles) == s["cycle"] - 1, key
        for run in (eagle, vanilla):  # a run cut short (the app's time budget on a busy machine) tells another story
            assert run is None or run.summary.stop_reason != "stopped", (key, run.summary.method)


def test_step_three_shows_the_full_tree_and_its_root_row():
    _, _, c, _ = recorded("tree")
    assert c.n_draft == TREE["total_tokens"] and max(n.depth for n in c.nodes) == TREE["depth"]
    assert sum(n.parent == 0 for n in c.nodes) >= 2 and c.nodes[0].depth == 0  # the root: the row before the drafts
    assert f"reads {c.n_draft + 1} rows" in lesson.card(3, "en")


def test_step_four_one_pass_commits_several_tokens():
    _, _, c, _ = recorded("mask")
    assert c.n_draft == TREE["total_tokens"] and len(c.accepted) >= 3  # 2+ drafts and the root
    assert len(c.committed_ids) == len(c.accepted)  # the accepted drafts and the bonus, from one pass


def test_step_five_greedy_acceptance_and_per_depth():
    eagle, vanilla, c, _ = recorded("greedy")
    assert c.accepted_drafts == max(x.accepted_drafts for x in eagle.cycles) >= 2
    assert c.committed_ids[-1] == c.bonus_token_id
    assert vanilla is not None and vanilla.summary.token_ids == eagle.summary.token_ids
    line = cards.per_depth(eagle.cycles, "en")
    first = [x for x in eagle.cycles if x.n_draft]
    assert line.startswith(f"depth 1: {sum(len(x.accepted) > 1 for x in first)} of {len(first)}")


def test_step_six_the_residual_visibly_differs_from_p():
    _, _, c, _ = recorded("sampling")
    assert c.rule == "point_mass"
    shown = False
    for n in c.nodes[1:]:
        lost = [s for s in c.nodes if s.parent == n.parent and s.index < n.index and s.decision == REJECTED]
        if n.decision == ACCEPTED and lost:
            assert all(s.u >= s.p_test for s in lost)  # each lost its draw
            left = 1.0 - sum(s.p for s in lost)  # p renormalised over the mass the rejections left
            assert n.p_test == pytest.approx(n.p / left, rel=1e-3) and n.u < n.p_test
            shown = shown or n.p_test >= n.p + VISIBLE
    assert shown


def test_step_seven_accepts_byte_tokens():
    eagle, _, c, _ = recorded("languages")
    assert sum(is_byte_token(c.nodes[i].text) for i in c.accepted[1:]) >= 1
    assert re.search(r"[\u4e00-\u9fff]", "".join(x.committed_text for x in eagle.cycles))  # it writes Chinese


def test_open_in_decode_lands_on_the_steps_cycle():
    from eagle_app.views import named

    if not PLAN:
        pytest.skip("no lesson trace recorded for the current plan yet")
    for i, s in enumerate(STEPS, start=1):
        if s.key not in PLAN:
            continue
        out = named(lesson.open_in_decode(i, "en"))
        assert out["slider"].value == PLAN[s.key]["cycle"]
        eagle, _ = load_trace_file(os.path.join(LESSON_DIR, s.file))
        assert out["caption"] == viz.cycle_caption(eagle.cycles[PLAN[s.key]["cycle"] - 1], len(eagle.cycles), lang="en")
        assert out["state"]["source"].endswith(s.file)


def test_a_trace_recorded_for_another_plan_is_not_shown(tmp_path):
    import json
    import shutil

    (tmp_path / "3-tree.json").write_text("{}")
    entry = dict(step=3, key="tree", file="3-tree.json", cycle=1, of=1, prompt=BY_KEY["tree"].prompt,
                 settings=dict(BY_KEY["tree"].settings))
    (tmp_path / "lesson.json").write_text(json.dumps({"steps": [entry]}))
    assert [s["key"] for s in load_manifest(str(tmp_path / "lesson.json"))] == ["tree"]
    stale = dict(entry, settings=dict(entry["settings"], total_tokens=11))
    (tmp_path / "lesson.json").write_text(json.dumps({"steps": [stale, dict(entry, key="rejection")]}))
    assert load_manifest(str(tmp_path / "lesson.json")) == []
    shutil.rmtree(tmp_path)


# ------------------------------------------------------------------------------------- going live
def test_go_live_puts_the_lessons_settings_on_the_decode_tab():
    for i, s in enumerate(STEPS, start=1):
        prompt, preset, compare, *values = lesson.live_settings(i)
        got = dict(zip(settings.NAMES, values))
        assert prompt == s.prompt and preset == PRESET and compare == s.vanilla
        assert {k: got[k] for k in TREE} == TREE and got["max_new_tokens"] == s.settings["max_new_tokens"]
        assert got["temperature"] == s.settings.get("temperature", 0.0)
        settings.build(values)  # the page can decode them as they are


# ------------------------------------------------------------------------------------- the default model
@pytest.mark.slow
def test_step_two_on_the_default_model_reads_eagle3s_layers():
    from tests.app_fixtures import default_engine

    engine = default_engine()
    data = cards.head_inputs(engine, BY_KEY["head"].prompt)
    assert list(data["layers"]) == list(engine.drafter3.target_layers)
    assert data["next"][:-2] == data["tokens"][1:-1]  # the prompt's own tokens, each beside the one after it
    assert len(data["top"][0]) == data["hidden"] == engine.target.hidden_size


@pytest.mark.slow
def test_the_recorded_vocabulary_counts_are_the_tokenizers():
    """Step 7's caption says how the tokenizer spells Chinese characters: counted from the tokenizer itself."""
    from tests.app_fixtures import default_engine

    counts = chinese_tokens(default_engine().target.tokenizer)
    assert 0 < counts["whole_chinese"] < counts["size"] // 100
    assert set(counts["per_char"]) <= {"1", "2", "3"} and sum(counts["per_char"].values()) == counts["chars"] > 100
    meta = load_meta().get("vocab") or {}
    if "per_char" not in meta:
        pytest.skip("the manifest's vocabulary counts come with the re-recorded traces")
    assert meta == counts


@pytest.mark.slow
@pytest.mark.parametrize("key", ["greedy", "sampling"])
def test_shipped_traces_are_what_the_engine_decodes(key):
    """Re-decode a greedy and the sampled step with the recorded settings (and seed): same tokens, same
    accepted paths. Greedy float32 decoding is deterministic; sampling is, given the seed."""
    from tests.app_fixtures import default_engine

    shipped, vanilla, _, s = recorded(key)
    run = default_engine().run(s["prompt"], DecodeSettings(**{k: v for k, v in s["settings"].items() if k != "static_tree"}))
    assert run.summary.token_ids == shipped.summary.token_ids
    assert [[c.nodes[i].token_id for i in c.accepted] for c in run.cycles] == \
        [[c.nodes[i].token_id for i in c.accepted] for c in shipped.cycles]
