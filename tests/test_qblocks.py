"""Products from a GGUF's own Q4_1 / Q8_0 blocks (eagle_core/cpu/kernels/qblocks.c): the same bits as a
numpy simulation of its integer arithmetic, within the bound int8 activations allow of the float64
product, a row the same alone or in any batch, every instruction-set path and every tuning knob (row
tile, prefetch distance, thread split: qtuning.py) the same."""
import json
import os

import numpy as np
import pytest
import torch

from eagle_core.cpu.kernels import qblocks as qb
from eagle_core.cpu.kernels import qtuning
from eagle_core.environment import SettingError

U = 2.0 ** -24  # float32's unit roundoff
FORMATS = ("q4_1", "q8_0")


def _lib_or_skip(plain_only=False):
    try:
        return qb.library(plain_only)
    except (OSError, Exception) as e:  # no C compiler: nothing here can run
        pytest.skip(f"qblocks.c does not build here: {e}")


@pytest.fixture(scope="module")
def lib():
    return _lib_or_skip()


@pytest.fixture(autouse=True)
def no_measuring(monkeypatch):
    """A tile-0 call here keeps qblocks.c's compiled knobs (the tests of the choice undo this)."""
    monkeypatch.setenv("EAGLE_QB_TUNING", "off")


# knob settings the bit-for-bit tests run under: (tile, prefetch bytes, split)
KNOBS = [(16, 2048, "groups"), (1, 0, "rows"), (5, 64, "groups"), (8, 4096, "rows"), (13, 16384, "groups"),
         (16, 1024, "rows")]


@pytest.fixture
def knobs(lib, monkeypatch):
    """Sets the knobs for every thread count (qb.set_tuning), with qtuning told they are applied (so
    a tile-0 call keeps them, measures nothing); puts back what was there after the test."""
    before = {t: qb.get_tuning(t, lib) for t in (1, 2, 3)}
    monkeypatch.setattr(qtuning, "_APPLIED", {(id(lib), t): (qtuning.Tuning(), "test") for t in range(1, 9)})
    yield lambda tile, prefetch, split: qb.set_tuning(tile, prefetch, split, 0, lib)
    for t, (tile, prefetch, split) in before.items():
        qb.set_tuning(tile, prefetch, split, t, lib)


def random_blocks(fmt: str, n: int, k: int, seed: int = 0) -> np.ndarray:
    """(n, k/32 * block bytes) uint8: blocks like a quantizer's, every nibble / int8 value drawn
    (Q8_0: -128 too), scales of both signs for Q4_1's min."""
    rng = np.random.default_rng(seed)
    nb = k // 32
    d = (rng.uniform(0.001, 0.02, (n, nb))).astype(np.float16).view(np.uint8).reshape(n, nb, 2)
    if fmt == "q4_1":
        m = rng.uniform(-0.15, 0.05, (n, nb)).astype(np.float16).view(np.uint8).reshape(n, nb, 2)
        body = [d, m, rng.integers(0, 256, (n, nb, 16), dtype=np.uint8)]
    else:
        body = [d, rng.integers(-128, 128, (n, nb, 32)).astype(np.int8).view(np.uint8)]
    return np.ascontiguousarray(np.concatenate(body, axis=-1).reshape(n, -1))


def activations(m: int, k: int, seed: int = 0) -> torch.Tensor:
    """Rows like a decoder's: normal values, a few large outliers, one all-zero block."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(m, k, generator=g)
    x[:, 5] *= 40.0
    x[0, 32:64] = 0.0 if k >= 64 else x[0, 32:64]
    return x


def test_hand_built_block_has_its_known_answer(lib):
    """One Q4_1 block: d = 1, m = 0.5, every q = 15 (weights 15.5); x all 1 -> 32 * 15.5 = 496. One Q8_0
    block: d = 0.5, q = -128 everywhere; x all -2 -> 32 * 128 = 4096 (x quantizes to -127 exactly)."""
    one, half = (np.array([v], np.float16).view(np.uint8) for v in (1.0, 0.5))
    q41 = np.concatenate([one, half, np.full(16, 0xFF, np.uint8)])[None]
    y = qb.matmul("q4_1", torch.ones(1, 32), qb.pack("q4_1", q41, 1, 32), 1, 32)
    assert abs(float(y) - 496.0) <= 496.0 * 4 * U
    q80 = np.concatenate([half, np.full(32, -128, np.int8).view(np.uint8)])[None]
    for path in qb.available_paths(lib):
        y = qb.matmul("q8_0", torch.full((1, 32), -2.0), qb.pack("q8_0", q80, 1, 32), 1, 32, path=path)
        assert abs(float(y) - 4096.0) <= 4096.0 * 4 * U


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("n,k,m", [(1, 32, 1), (16, 64, 3), (53, 160, 7), (40, 576, 33)])
def test_kernel_equals_the_numpy_simulation_bit_for_bit(lib, knobs, fmt, n, k, m):
    """Every path, under every knob setting (the tuned tile: tile argument 0), 1 and 2 threads."""
    blocks = random_blocks(fmt, n, k, seed=n + k)
    x = activations(m, k, seed=m)
    want = qb.simulate(fmt, x.numpy(), blocks, n, k)
    packed = qb.pack(fmt, blocks, n, k)
    for i, setting in enumerate(KNOBS):
        knobs(*setting)
        for path in qb.available_paths(lib):
            got = qb.matmul(fmt, x, packed, n, k, path=path, threads=1 + i % 2)
            assert np.array_equal(got.numpy(), want), (path, setting)


@pytest.mark.parametrize("fmt", FORMATS)
def test_within_the_int8_rounding_bound_of_the_float64_product(lib, fmt):
    """|y - W x| <= sum_j |w_j| |x_j - xq_j sx| (each x moved by at most sx (1/2 + 128 u)) plus float32
    accumulation, (2 nb + 4) u sum |terms|; and the accumulation part alone bounds y - W (xq sx)."""
    n, k, m = 53, 576, 9
    blocks, x = random_blocks(fmt, n, k, seed=3), activations(m, k, seed=4)
    y = qb.matmul(fmt, x, qb.pack(fmt, blocks, n, k), n, k).double().numpy()
    w = qb.dequantize(fmt, blocks, n, k).astype(np.float64)  # exact: d * q + m fits float32 here
    d, mins, q = qb.decode(fmt, blocks, n, k)
    assert np.array_equal(w.reshape(n, -1, 32), d.astype(np.float64)[..., None] * q
                          + (0 if mins is None else mins.astype(np.float64)[..., None]))
    xq, sx, _ = qb.quantize_rows(x.numpy())
    xr = (xq.astype(np.float64) * sx.astype(np.float64)[..., None]).reshape(m, k)  # the values the kernel multiplies
    exact, rounded = x.double().numpy() @ w.T, xr @ w.T
    acc, total = qb.rounding_bound(fmt, x.numpy(), blocks, n, k)
    moved = total - acc
    assert np.all(np.abs(y - rounded) <= acc)
    assert np.all(np.abs(y - exact) <= total)
    assert np.abs(y - exact).max() > 1e-3 * moved.max()  # x really was rounded: the bound is not vacuous


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_row_is_the_same_alone_and_in_any_batch(lib, knobs, fmt):
    """k = 1..40 rows (odd counts, a partial group of outputs), every path, every knob setting (tuned
    tile, prefetch, split by groups or rows), explicit tiles 1..16, 1 to 3 threads: each row of a k-row
    product equals that row's one-row product bit for bit."""
    n, k = 37, 96
    blocks = random_blocks(fmt, n, k, seed=9)
    packed = qb.pack(fmt, blocks, n, k)
    x = activations(40, k, seed=10)
    knobs(16, 2048, "groups")
    alone = torch.cat([qb.matmul(fmt, x[i:i + 1], packed, n, k, threads=1) for i in range(40)])
    for i, setting in enumerate(KNOBS):
        knobs(*setting)
        for path in qb.available_paths(lib):
            for rows in range(1, 41):
                tile, threads = (0, 3, 8, 16, 0, 7, 12)[(rows + i) % 7], 1 + (rows + i) % 3
                y = qb.matmul(fmt, x[:rows], packed, n, k, path=path, tile=tile, threads=threads)
                assert torch.equal(y, alone[:rows]), (path, rows, tile, threads, setting)


def test_knobs_out_of_range_are_refused_and_leave_the_tuning(lib, knobs):
    knobs(8, 1024, "rows")
    for bad in ((0, 0, "groups"), (17, 0, "groups"), (8, 100, "groups"), (8, -64, "groups"), (8, 32768, "rows")):
        with pytest.raises(ValueError):
            qb.set_tuning(*bad, 0, lib)
    assert qb.get_tuning(2, lib) == (8, 1024, "rows")
    qb.set_tuning(12, 0, "groups", 2, lib)  # one thread count only
    assert qb.get_tuning(2, lib) == (12, 0, "groups") and qb.get_tuning(1, lib) == (8, 1024, "rows")
    assert qb.get_tuning(64, lib) == qb.get_tuning(8, lib)  # past 8 threads: 8's


def test_the_bandwidth_probe_reads_the_bytes_it_is_given(lib):
    """qb_stream_read's count is bytes: a buffer of ones (int64) read over b bytes sums to b / 8."""
    a = torch.ones(1 << 16, dtype=torch.int64)
    for nbytes, threads in ((8 * a.numel(), 1), (8 * a.numel(), 2), (4096, 2), (64 * 100 + 63, 3)):
        assert lib.qb_stream_read(a.data_ptr(), nbytes, threads) == nbytes // 64 * 8
    from eagle_core.bench import qblocks_curve as qc

    gib = 1 << 30  # the probe: 4x the last-level cache, at least 1 GiB, at most a quarter of free memory
    assert qc.probe_bytes(480 << 20, 22 * gib) == 4 * (480 << 20) and qc.probe_bytes(32 << 20, None) == gib
    assert qc.probe_bytes(480 << 20, 2 * gib) == gib // 2 and qc.probe_bytes(gib, 10 << 20) == 256 << 20
    assert qc.last_level_cache_bytes() >= 1 << 20


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_plain_c_build_equals_the_simd_paths(lib, fmt):
    """A second library compiled with no SIMD code at all (-DQB_PLAIN_ONLY) gives the SIMD paths' bits."""
    plain = _lib_or_skip(plain_only=True)
    assert qb.available_paths(plain) == ["plain"]
    n, k = 45, 224
    blocks = random_blocks(fmt, n, k, seed=11)
    packed = qb.pack(fmt, blocks, n, k)
    x = activations(13, k, seed=12)
    want = qb.matmul(fmt, x, packed, n, k, lib=plain)
    for path in qb.available_paths(lib):
        assert torch.equal(qb.matmul(fmt, x, packed, n, k, path=path), want), path


def test_a_non_finite_row_gives_nan_and_leaves_the_others(lib):
    n, k = 20, 64
    blocks = random_blocks("q4_1", n, k)
    packed = qb.pack("q4_1", blocks, n, k)
    x = activations(3, k)
    x[1, 40] = float("inf")
    for path in qb.available_paths(lib):
        y = qb.matmul("q4_1", x, packed, n, k, path=path)
        assert torch.isnan(y[1]).all() and torch.isfinite(y[[0, 2]]).all()
        assert torch.equal(y[2], qb.matmul("q4_1", x[2:], packed, n, k, path=path)[0])


@pytest.mark.parametrize("fmt", FORMATS)
def test_dequantize_is_the_gguf_packages(fmt):
    gguf = pytest.importorskip("gguf")
    n, k = 10, 96
    blocks = random_blocks(fmt, n, k, seed=5)
    kind = gguf.GGMLQuantizationType.Q4_1 if fmt == "q4_1" else gguf.GGMLQuantizationType.Q8_0
    assert np.array_equal(qb.dequantize(fmt, blocks, n, k), gguf.quants.dequantize(blocks, kind))


def test_shapes_not_served_are_refused(lib):
    with pytest.raises(ValueError):
        qb.pack("q4_1", np.zeros(20, np.uint8), 1, 48)  # k not a multiple of 32
    with pytest.raises(ValueError):
        qb.pack("q8_0", np.zeros(33, np.uint8), 1, 32)  # a byte short
    packed = qb.pack("q8_0", random_blocks("q8_0", 4, 32), 4, 32)
    with pytest.raises(ValueError):
        qb.matmul("q8_0", torch.ones(2, 64), packed, 4, 32)


# ---- the knobs' choice (qtuning.py) ---------------------------------------------------------------
def test_score_is_each_candidate_relative_to_the_best_at_each_row_count():
    a, b = qtuning.Tuning(8), qtuning.Tuning(16)
    got = qtuning.score({a: {1: 2.0, 8: 6.0}, b: {1: 1.0, 8: 12.0}}, {1: 1.0, 8: 0.5})
    assert got == {a: 2.0 + 0.5, b: 1.0 + 0.5 * 2.0}


@pytest.fixture
def fresh(monkeypatch, tmp_path, knobs):
    """No knobs applied yet in this process, the cache in tmp_path."""
    monkeypatch.setattr(qtuning, "_APPLIED", {})
    monkeypatch.setenv("EAGLE_EXPLAINER_CACHE", str(tmp_path))
    monkeypatch.delenv("EAGLE_QB_TUNING", raising=False)
    return monkeypatch


def test_the_environment_fixes_or_skips_the_knobs(lib, fresh):
    fresh.setenv("EAGLE_QB_TUNING", "tile=5, split=rows")
    x, packed = activations(3, 64), qb.pack("q4_1", random_blocks("q4_1", 16, 64), 16, 64)
    qb.matmul("q4_1", x, packed, 16, 64, threads=2)  # tile 0: the knobs are applied here
    assert qb.get_tuning(2, lib) == (5, qtuning.DEFAULT_PREFETCH, "rows")
    assert "EAGLE_QB_TUNING" in qtuning.describe(lib, 2)
    fresh.setattr(qtuning, "_APPLIED", {})
    fresh.setenv("EAGLE_QB_TUNING", "off")
    assert qtuning.ensure(lib, 2) == qtuning.Tuning() and qb.get_tuning(2, lib) == (16, 2048, "groups")
    fresh.setattr(qtuning, "_APPLIED", {})
    for bad in ("tile=0", "prefetch=100", "split=cols", "tiles=4", "fast"):
        fresh.setenv("EAGLE_QB_TUNING", bad)
        with pytest.raises(SettingError, match="EAGLE_QB_TUNING"):
            qtuning.ensure(lib, 2)


def test_the_knobs_are_measured_once_then_read_from_the_cache(lib, fresh):
    """A short measurement (small workload, two candidates a knob) picks among the candidates, writes
    the JSON, and a new process (no knobs applied) reads it back without measuring; a corrupt file is
    measured again."""
    for name, v in (("COLD_BYTES", 1 << 20), ("ROWS", {1: 1.0, 5: 1.0}), ("ROUNDS", 1), ("TILES", (4, 12)),
                    ("PREFETCHES", (0, 1024))):
        fresh.setattr(qtuning, name, v)
    choice = qtuning.ensure(lib, 2)
    assert choice.tile in (4, 12, 16) and choice.prefetch in (0, 1024, 2048) and choice.split in qb.SPLITS
    assert qb.get_tuning(2, lib) == (choice.tile, choice.prefetch, choice.split)
    assert "measured" in qtuning.describe(lib, 2)
    path = qtuning._cache_path(2)
    saved = json.load(open(path))
    assert saved["choice"] == {"tile": choice.tile, "prefetch": choice.prefetch, "split": choice.split}
    assert set(saved["scores"]) == {"tile", "prefetch", "split"}
    fresh.setattr(qtuning, "_APPLIED", {})
    fresh.setattr(qtuning, "measure", lambda *a, **k: pytest.fail("measured again"))
    assert qtuning.ensure(lib, 2) == choice and "cached" in qtuning.describe(lib, 2)
    fresh.undo()  # corrupt cache: measured again (the real measure back)
    fresh.setattr(qtuning, "_APPLIED", {})
    fresh.setenv("EAGLE_EXPLAINER_CACHE", os.path.dirname(os.path.dirname(path)))
    fresh.delenv("EAGLE_QB_TUNING", raising=False)
    for name, v in (("COLD_BYTES", 1 << 20), ("ROWS", {1: 1.0}), ("ROUNDS", 1), ("TILES", (4,)), ("PREFETCHES", (0,))):
        fresh.setattr(qtuning, name, v)
    open(path, "w").write("{not json")
    qtuning.ensure(lib, 2)
    assert "measured" in qtuning.describe(lib, 2) and json.load(open(path))["threads"] == 2


def test_the_interleaved_path_comparison_times_every_path_at_every_row_count(lib):
    """qblocks_curve --compare-paths on two small weights: one median per path and k, the table's rows in order."""
    from eagle_core.bench import qblocks_curve as qc

    p = {"q": [(qb.FORMATS[f], qb.pack(f, random_blocks(f, 40, 64), 40, 64), 40, 64) for f in FORMATS]}
    paths = qb.available_paths(lib)[-2:]
    res = qc.compare_paths(paths, rows=(1, 3, 16), rounds=2, p=p)
    assert set(res["t_ms"]) == set(paths) and all(list(t) == [1, 3, 16] for t in res["t_ms"].values())
    assert all(v > 0 for t in res["t_ms"].values() for v in t.values())
    table = qc.render_paths(res).splitlines()
    assert [line.split("|")[1].strip() for line in table[-3:]] == ["1", "3", "16"]
    with pytest.raises(SystemExit, match="not available"):
        qc.main(["--compare-paths", "vnni,nosuch"])
    for bad in ("abc", "100", "32768"):
        with pytest.raises(SystemExit, match="--compare-prefetch .*multiples of 64"):
            qc.main(["--compare-prefetch", f"0,{bad}"])
    before = qb.get_tuning(torch.get_num_threads(), lib)
    res = qc.compare_paths([], rows=(2,), rounds=1, p=p, prefetches=(0, 2048))  # the knob, on the best path
    assert list(res["t_ms"]) == ["prefetch 0 B", "prefetch 2048 B"] and qb.get_tuning(torch.get_num_threads(), lib) == before
