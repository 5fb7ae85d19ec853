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


def test_the_floor_keeps_a_forwards_other_work_and_puts_its_products_at_the_arithmetic_bound():
    res = _res({1: 8.2, 13: 14.5, 16: 16.3})
    res.update(weights="gguf", weight_mb=96.0, products_1_ms=3.5,
               blocks={"mb": 96.0, "macs": {"q4_1": 106_168_320}, "rates_gmacs": {"q4_1": 250.0}})
    a13 = 1e3 * 13 * 106_168_320 / 250e9  # 5.52 ms: above the products' 3.5 ms at one row, below t(1)
    least, ratio = report.floor(res, 13)
    assert least == pytest.approx(8.2 - 3.5 + a13) and ratio == pytest.approx(least / 8.2)
    assert ratio > report.CLIFF_GOAL  # 1.25: out of reach, however lean the rest of the forward
    leaner = dict(res, t_ms={1: 6.2, 13: 12.0}, products_1_ms=3.5)  # 2 ms less outside the products
    assert report.floor(leaner, 13)[1] > ratio
    slow = dict(res, products_1_ms=6.0)  # one-row products slower than 13 rows' arithmetic: t(1) is the floor
    assert report.floor(slow, 13) == pytest.approx((8.2, 1.0))
    md = report.render_curve(res)
    assert "t(13) >= 10.2 ms, 1.25 x" in md and "out of reach" in md and "3.5 ms of t(1) = 8.2 ms" in md
    assert report.floor(_res({1: 8.2, 13: 9.0}), 13) is None  # a record without the products' time


def test_the_float32_floor_counts_the_products_at_the_fastest_rate_measured():
    res = dict(_res({1: 26.8, 16: 37.2}, peak=353.0, own=242.0), products_1_ms=23.0)
    least, ratio = report.floor(res, 16)  # 16 rows at 353 GFLOP/s: 12.2 ms, under the one-row 23 ms
    assert least == pytest.approx(26.8) and ratio == pytest.approx(1.0)
    fast = dict(_res({1: 12.0, 16: 40.0}, peak=200.0, own=400.0), products_1_ms=9.0)
    a16 = 2 * 134_479_872 * 16 / 200e9 * 1e3  # the goal's bound (torch's rate): 21.5 ms
    least, ratio = report.floor(fast, 16)
    assert least == pytest.approx(3.0 + a16 / 2) and ratio == pytest.approx(least / a16)  # products at 400
    assert "within reach in principle" in report.render_curve(fast)


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


def test_the_floors_one_row_products_are_the_forwards_own_products_without_the_python_around_them():
    import torch

    from eagle_core.bench import products_alone as pa, qblocks_curve as qc
    from eagle_core.cpu.kernels import qblocks
    from eagle_core.target import gguf_blocks

    if qblocks.library() is None:
        pytest.skip("no qblocks library")
    ws = qc.forward_weights(gguf_blocks.read(None))
    assert len(ws) == 4 * 30 + 1 and ws[-1][2:] == (49152, 576)  # grouped as the decoder groups them, LM head last
    some = [ws[0], ws[3], ws[-1]]  # q/k/v (Q4_1), down (Q4_1), the LM head (Q8_0)
    xs = {k: torch.randn(1, k) for _, _, _, k in some}
    lib = qblocks.library()
    calls, keep = pa.direct_calls(lib, some, xs)
    assert all(lib.qb_matmul(*c) == 0 for c in calls)
    for (fmt, data, n, k), (packed, y) in zip(some, keep):
        assert torch.equal(y, qblocks.matmul(fmt, xs[k], packed, n, k))  # the same product, bit for bit
    assert pa.products_one_row("gguf", repeats=1) > 0


@pytest.mark.parametrize("bad", ["1,y", "0", "", "65"])
def test_row_counts_out_of_range_are_one_line_naming_the_option(bad, capsys):
    with pytest.raises(SystemExit):
        report.main(["--compare-blocking", "7:6", "--forward-rows", bad])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--forward-rows" in err and "1..64" in err
