"""The note under the tree settings: which trees pay on this machine, from the hardware panel's
measurement, and any cliff in the verification's cost."""
from eagle_app.tree_advice import advice, cliffs, recorded_advice
from eagle_core.machine import load_tau_table
from eagle_core.config import TreeSetting


def _table(taus):
    return {"tau": taus, "trees": [TreeSetting(*map(int, k.split(","))) for k in taus]}


MEASURED = {"forward_ms": {"1": 12.0, "5": 13.5, "8": 14.4, "12": 16.0, "13": 32.0, "16": 34.5, "24": 45.5},
            "step_ms": {"1": 0.3, "2": 0.3, "4": 0.35}}


def test_a_jump_between_near_row_counts_is_a_cliff_and_a_slope_is_not():
    fwd = {int(k): v for k, v in MEASURED["forward_ms"].items()}
    assert cliffs(fwd) == [(12, 13, 16.0, 32.0)]  # 8 -> 12 (+11%) and 16 -> 24 (8 apart) are slopes
    assert cliffs({1: 10.0, 2: 10.5, 4: 11.0}) == []


def test_the_note_gives_each_trees_predicted_speedup_and_names_the_cliff():
    md = advice(MEASURED, _table({"4,2,7": 2.28, "4,4,12": 2.53}), "en")
    # 4,2,7: 8 rows 14.4 / 12 = 1.2 steps + drafting (0.3 + 3 x 0.3) / 12 = 0.1 -> 2.28 / 1.3
    assert f"4,2,7 (8 rows, `cpu`): {2.28 / 1.3:.2f}×" in md
    assert "4,4,12 (13 rows, `explain`)" in md or "4,4,12 (13 rows)" in md
    assert "A cliff: verifying 13 rows costs 2.00× what 12 rows cost (16.0 → 32.0 ms)." in md
    assert "the best here is 4,2,7" in md and "measured on this machine" in md


def test_smooth_costs_say_so_and_chinese_has_no_markdown_stars():
    smooth = {"forward_ms": {"1": 12.0, "8": 13.0, "13": 14.0}, "step_ms": {"1": 0.3, "2": 0.3}}
    md = advice(smooth, _table({"4,2,7": 2.28, "4,4,12": 2.53}), "zh", where="AMD EPYC, 2026-12-07")
    assert "没有断崖" in md and "**" not in md and "记录于 AMD EPYC, 2026-12-07" in md


def test_without_a_measurement_the_note_points_to_the_panel():
    assert "hardware panel" in advice(None, _table({"4,2,7": 2.28}), "en")


def test_the_shipped_recording_gives_a_note():
    md = recorded_advice("en")
    table = load_tau_table()
    assert "Which trees pay here" in md and "recorded on" in md
    assert sum(line.startswith("- ") for line in md.splitlines()) >= 1 and table["trees"]
