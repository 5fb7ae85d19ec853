"""Products from a GGUF's own Q4_1 / Q8_0 blocks (eagle_core/cpu/kernels/qblocks.c): the same bits as a
numpy simulation of its integer arithmetic, within the bound int8 activations allow of the float64
product, a row the same alone or in any batch, every instruction-set path the same."""
import numpy as np
import pytest
import torch

from eagle_core.cpu.kernels import qblocks as qb

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
def test_kernel_equals_the_numpy_simulation_bit_for_bit(lib, fmt, n, k, m):
    blocks = random_blocks(fmt, n, k, seed=n + k)
    x = activations(m, k, seed=m)
    want = qb.simulate(fmt, x.numpy(), blocks, n, k)
    packed = qb.pack(fmt, blocks, n, k)
    for path in qb.available_paths(lib):
        assert np.array_equal(qb.matmul(fmt, x, packed, n, k, path=path).numpy(), want), path


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
def test_a_row_is_the_same_alone_and_in_any_batch(lib, fmt):
    """k = 1..40 rows (odd counts, a partial group of outputs), every path, several row tiles, 1 and 2
    threads: each row of a k-row product equals that row's one-row product bit for bit."""
    n, k = 37, 96
    blocks = random_blocks(fmt, n, k, seed=9)
    packed = qb.pack(fmt, blocks, n, k)
    x = activations(40, k, seed=10)
    alone = torch.cat([qb.matmul(fmt, x[i:i + 1], packed, n, k, threads=1) for i in range(40)])
    for path in qb.available_paths(lib):
        for rows in range(1, 41):
            tile, threads = (1, 3, 8, 16)[rows % 4], 1 + rows % 2
            y = qb.matmul(fmt, x[:rows], packed, n, k, path=path, tile=tile, threads=threads)
            assert torch.equal(y, alone[:rows]), (path, rows, tile, threads)


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
