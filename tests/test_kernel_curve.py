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
    t, stream, arith, ratio, ok, own = v[13]
    assert stream == pytest.approx(538.0 / 50.0)
    assert arith == pytest.approx(2 * 134_479_872 * 13 / 200e9 * 1e3)  # at the matmul peak
    assert ratio == pytest.approx(32.0 / arith) and not ok  # the 12-row tile's cliff
    assert own == pytest.approx(32.0 / 12.0)  # at the engine's 400 GFLOP/s the bound is below t(1)
    assert v[8][4] and v[8][3] == pytest.approx(13.0 / 12.0)  # below the arithmetic bound t(1) counts
    assert not v[5][4]  # 1.2x t(1)
    assert v[16][4]  # 20.0 against 21.5 ms of arithmetic


def test_the_rendered_curve_names_the_machine_the_bounds_and_each_verdict():
    md = report.render_curve(_res({1: 12.0, 2: 12.5, 13: 32.0}))
    assert "test CPU" in md and "200 GFLOP/s" in md and "400 GFLOP/s" in md and "538 MB" in md
    rows = [line for line in md.splitlines() if line.startswith("| 1") or line.startswith("| 2 ")]
    assert len(rows) == 3 and "| not met |" in rows[-1] and "| met |" in rows[0]


@pytest.mark.skipif(not report.kernels.SmallGemm.available(), reason="no smallgemm library")
def test_peak_is_the_best_of_torch_and_the_engines_products():
    g = report.peak_gflops(repeats=1)
    assert g["torch_mm"] > 0 and g["smallgemm"] > 0 and g["peak"] == max(g["torch_mm"], g["smallgemm"])
