"""The note under the cards: a cycle's arithmetic (τ against its cost in vanilla steps) and, when
EAGLE lost, the reason from that run's own numbers, in English and Chinese."""
import re

from eagle_core.trace import Run, RunSummary
from viz.text import comparison_html
from viz.verdict import cycle_costs, verdict_html


def _run(method, cycles, new_tokens, draft_s, verify_s, settings=None):
    wall = draft_s + verify_s + 0.01
    return Run(summary=RunSummary(method=method, prompt="p", text="t", token_ids=tuple(range(new_tokens)),
                                  prompt_tokens=5, new_tokens=new_tokens, target_forwards=cycles + 1, cycles=cycles,
                                  tau=new_tokens / cycles, wall_s=wall, tokens_per_s=new_tokens / wall,
                                  prefill_ms=10.0, draft_s=draft_s, verify_s=verify_s, stop_reason="max_new_tokens",
                                  settings=settings or {}), cycles=())


VANILLA = _run("vanilla", 100, 100, 0.0, 1.2)  # 12 ms a step


def test_the_costs_are_the_cycles_own_numbers():
    # 13 rows verified at 32 ms a cycle, 9 ms of drafting, 2.5 tokens a cycle
    eagle = _run("eagle2", 40, 100, 0.36, 1.28, {"total_tokens": 12})
    k = cycle_costs(eagle, VANILLA)
    assert k["rows"] == 13 and abs(k["verify_ms"] - 32.0) < 1e-9 and abs(k["draft_ms"] - 9.0) < 1e-9
    assert abs(k["step_ms"] - 12.0) < 1e-9 and abs(k["c"] - 41 / 12) < 1e-9
    assert abs(k["predicted"] - 2.5 / (41 / 12)) < 1e-9 and k["speedup"] < 1


def test_a_loss_names_the_verification_when_it_costs_most():
    eagle = _run("eagle2", 40, 100, 0.08, 1.28, {"total_tokens": 12})
    html = verdict_html(eagle, VANILLA)
    assert "slower than vanilla" in html and "Verifying the tree cost 2.67 vanilla steps" in html
    assert "eg-lost" in html and "13 rows" in html


def test_a_loss_names_drafting_or_a_low_tau_when_they_decide():
    drafting = _run("eagle2", 40, 100, 0.8, 0.6, {"total_tokens": 7})
    assert "Drafting took 57%" in verdict_html(drafting, VANILLA)
    low_tau = _run("eagle2", 90, 100, 0.1, 1.3, {"total_tokens": 7})
    assert "Few drafts were accepted (τ 1.11)" in verdict_html(low_tau, VANILLA)


def test_a_win_shows_the_arithmetic_without_a_warning_and_vanilla_alone_shows_nothing():
    eagle = _run("eagle2", 40, 100, 0.04, 0.56, {"total_tokens": 7})
    html = verdict_html(eagle, VANILLA)
    assert "τ = 2.50" in html and "8 rows" in html and "eg-lost" not in html and "slower" not in html
    assert verdict_html(VANILLA, VANILLA) == "" and verdict_html(None, VANILLA) == ""


def test_the_chinese_note_has_no_english_words():
    eagle = _run("eagle2", 40, 100, 0.08, 1.28, {"total_tokens": 12})
    text = re.sub(r"<[^>]+>", "", verdict_html(eagle, VANILLA, "zh"))
    assert "原因" in text and not re.findall(r"[A-Za-z]{2,}", text.replace("EAGLE", ""))


def test_the_cards_carry_the_note():
    eagle = _run("eagle2", 40, 100, 0.08, 1.28, {"total_tokens": 12})
    assert "Verifying the tree cost" in comparison_html(eagle, VANILLA)
