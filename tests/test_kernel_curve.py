"""The kernels report's curve (python -m eagle_core.bench.kernels --curve): t(k) for k = 1..32 beside
the streaming and arithmetic bounds, and the goal that no row count falls off a cliff."""
import pytest

from eagle_core.bench import kernels as report


def _res(t_ms, peak=200.0, params=134_479_872, own=400.0):
    return {"cpu": "test CPU", "threads": 2, "context": 300, "bandwidth_gbs": 50.0, "weight_mb": 538.0,
            "product_params": params, "gflops": {"torch_mm": peak, "smallgemm": own, "peak": max(peak, own)},
            "t_ms": t_ms}


def test_the_verdict_measures_each_k_against_the_larger_of_t1_and_the_arithmetic():
    # 13 rows of 134.5 M multiply-adds at 200 GFLOP/s: 17.5 ms of arithmetic, above t(1) = 12 ms
    v = report.curve_verdict(_res({1: 12.0, 5: 14.4, 8: 13.0, 13: 32.0, 16: 20.0}))
    t, stream, arith, ratio, ok, own, attn = v[13]
    assert stream == pytest.approx(538.0 / 50.0)
    assert arith == pytest.approx(2 * 134_479_872 * 13 / 200e9 * 1e3)  # at the matmul peak
    assert ratio == pytest.approx(32.0 / arith) and not ok  # the 12-row tile's cliff
    assert own == pytest.approx(32.0 / 12.0)  # at the engine's 400 GFLOP/s the bound is below t(1)
    assert v[8][4] and v[8][3] == pytest.approx(13.0 / 12.0)  # below the arithmetic bound t(1) counts
    assert not v[5][4]  # 1.2x t(1)
    assert v[16][4]  # 20.0 against 21.5 ms of arithmetic
    assert attn == 0.0  # a record without the model's shape: no attention estimate


def test_the_gguf_curve_bounds_each_format_by_its_own_warm_rate_and_shows_the_attention_beside_it():
    res = _res({1: 7.0, 13: 13.8})
    res.update(weights="gguf", weight_mb=96.0, blocks={"mb": 96.0, "macs": {"q4_1": 106_168_320, "q8_0": 28_311_552},
                                                       "rates_gmacs": {"q4_1": 244.0, "q8_0": 262.0}},
               attention={"layers": 30, "heads": 9, "head_dim": 64})
    v = report.curve_verdict(res)
    t, stream, arith, ratio, ok, own, attn = v[13]
    expect = 1e3 * 13 * (106_168_320 / 244e9 + 28_311_552 / 262e9)  # 7.06 ms: above t(1)
    assert arith == pytest.approx(expect) and own == pytest.approx(ratio) and ratio == pytest.approx(13.8 / expect)
    assert stream == pytest.approx(96.0 / 50.0) and not ok
    # 13 chain rows over a 300-token cache: 13 * 300 + 91 keys a head, scores and values, 30 layers x 9 heads
    assert attn == pytest.approx(2 * 2 * 30 * 9 * 64 * (13 * 300 + 91) / 200e9 * 1e3)
    assert v[1][3] == pytest.approx(1.0)  # one row: t(1) is its own bound
    md = report.render_curve(res)
    assert "weights gguf" in md and "q4_1 244 G/s" in md and "| not met |" in md


def test_the_rendered_curve_names_the_machine_the_bounds_and_each_verdict():
    md = report.render_curve(_res({1: 12.0, 2: 12.5, 13: 32.0}))
    assert "weights float32" in md
    assert "test CPU" in md and "200 GFLOP/s" in md and "400 GFLOP/s" in md and "538 MB" in md
    rows = [line for line in md.splitlines() if line.startswith("| 1") or line.startswith("| 2 ")]
    assert len(rows) == 3 and "| not met |" in rows[-1] and "| met |" in rows[0]


@pytest.mark.skipif(not report.kernels.SmallGemm.available(), reason="no smallgemm library")
def test_peak_is_the_best_of_torch_and_the_engines_products():
    g = report.peak_gflops(repeats=1)
    assert g["torch_mm"] > 0 and g["smallgemm"] > 0 and g["peak"] == max(g["torch_mm"], g["smallgemm"])


def test_the_blocking_comparison_shows_each_blocking_against_the_first():
    res = {"cpu": "test CPU", "threads": 2, "context": 300, "rounds": 7,
           "t_ms": {"blocked from 13 rows, tiles of at most 12": {1: 26.0, 10: 36.0},
                    "blocked from 7 rows, tiles of at most 6": {1: 26.0, 10: 31.5}}}
    from eagle_core.bench.knob_compare import render

    md = render(res)
    assert "test CPU" in md and "7 interleaved rounds" in md and "float32 forward" in md
    assert "| 10 | 36.00 | 31.50 (0.88) |" in md and "| 1 | 26.00 | 26.00 (1.00) |" in md


@pytest.mark.parametrize("option,bad,allowed", [("--compare-blocking", b, "2..13") for b in ("14:3", "7:0", "13:12,x", "7")])
def test_a_setting_out_of_range_is_one_line_naming_the_option(option, bad, allowed, capsys):
    with pytest.raises(SystemExit):
        report.main([option, bad])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert option in err and allowed in err


def test_the_arithmetic_bounds_rate_is_the_fastest_burst_not_a_median():
    import time

    from eagle_core.bench.qblocks_curve import peak_rate

    calls = []

    def run(x):  # every other burst of 2 calls slow: a median of bursts would land between the states
        calls.append(x.shape)
        time.sleep(0.004 if (len(calls) // 2) % 2 else 0.001)

    rate = peak_rate(run, n=10, k=8, rows=4, calls=2, bursts=6)
    assert calls[0] == (4, 8) and len(calls) == 1 + 2 * 6  # one untimed call, then the bursts
    assert 4 * 10 * 8 / 0.0035 < rate <= 4 * 10 * 8 / 0.001  # the fast state's rate


def test_settings_are_timed_interleaved_on_a_real_forward_and_the_knob_put_back():
    from conftest import tiny_target
    from eagle_core.bench.knob_compare import compare_settings

    applied, restored = [], []
    settings = {"a": lambda: applied.append("a"), "b": lambda: applied.append("b")}
    res = compare_settings(tiny_target(), settings, lambda: restored.append(True), rows=(1, 3), rounds=2, context=20)
    assert applied == ["a", "b"] * 2 * 3  # each row count, each setting in turn, round by round (one untimed)
    assert restored == [True] and set(res["t_ms"]) == {"a", "b"}
    assert all(v > 0 for t in res["t_ms"].values() for v in t.values()) and set(res["t_ms"]["a"]) == {1, 3}
