"""Products straight from a GGUF file's Q4_1 / Q8_0 blocks (qblocks.c): build, pack, run, and the
same arithmetic in numpy.

    pack(fmt, blocks)                the file's blocks (n rows, K / 32 blocks each) -> qblocks.c's groups
    matmul(fmt, x, packed, n, K)     y (m, n) = x (m, K) @ dequant(W)^T, x quantized per block to int8
    simulate(fmt, x, blocks)         the kernel's arithmetic in numpy, bit for bit (the tests' oracle)
    dequantize(fmt, blocks)          the weights in float32, as the gguf package dequantizes them

qblocks.c is compiled once per machine into its own shared library (not the engine's
cpu-kernels library), cached under the engine's cache directory by a hash of its source and flags.
It is compiled for baseline x86-64 (or any CPU) and picks AVX-512 VNNI / AVX2 at run time, so the
plain C path is a real fallback; `library(plain_only=True)` builds a second copy with no SIMD code
at all (the tests compare the two bit for bit).

The row tile, prefetch distance and thread split change no bit; they are chosen per machine by a
short measurement on first use (a product with tile 0) and cached: qtuning.py, EAGLE_QB_TUNING.

    python -m eagle_core.bench.qblocks_curve --curve [--threads 2]

prints t(k), k = 1..32, for the default model's products from its blocks and in float32 (eagle_core/bench/qblocks_curve.py).
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess

import numpy as np
import torch

from ...environment import cache_root, value
from .qtuning import DEFAULT_PREFETCH, DEFAULT_TILE, SPLITS, declared, ensure

HERE = os.path.dirname(__file__)
SOURCE = os.path.join(HERE, "qblocks.c")
# -ffp-contract=off: the C's a*b+c stays two roundings, as numpy's float32 (the simulation) rounds it
CFLAGS = ["-O3", "-ffp-contract=off", "-fopenmp", "-shared", "-fPIC"]

Q4_1, Q8_0 = 0, 1  # qblocks.c's fmt argument
FORMATS = {"q4_1": Q4_1, "q8_0": Q8_0}
GGML_TYPES = {3: Q4_1, 8: Q8_0}  # GGMLQuantizationType values in a GGUF file
BLOCK = 32  # weights per block
BLOCK_BYTES = {Q4_1: 20, Q8_0: 34}
GROUP = 16  # outputs per group in the packed layout
GROUP_BLOCK_BYTES = {Q4_1: 320, Q8_0: 544}
PATHS = {"auto": 0, "plain": 1, "avx2": 2, "vnni": 3}
MAX_TILE = 16  # DEFAULT_TILE, DEFAULT_PREFETCH and SPLITS (the knobs qtuning.py chooses) come from there

_LIBS: dict = {}


def library(plain_only: bool = False):
    """The compiled qblocks.c (ctypes), built on first use. Raises OSError / SubprocessError if the
    C compiler is missing or fails (callers keep float32 then)."""
    if plain_only in _LIBS:
        return _LIBS[plain_only]
    flags = CFLAGS + (["-DQB_PLAIN_ONLY"] if plain_only else [])
    with open(SOURCE, "rb") as f:
        digest = hashlib.sha256(f.read() + " ".join(flags).encode()).hexdigest()[:16]
    folder = os.path.join(cache_root(), "kernels")
    path = os.path.join(folder, f"qblocks-{'plain-' if plain_only else ''}{digest}.so")
    if not os.path.exists(path):
        os.makedirs(folder, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"  # written aside, then moved: a reader never sees half a file
        subprocess.run([value("CC") or "cc", *flags, "-o", tmp, SOURCE, "-lm"], check=True,
                       capture_output=True, timeout=300)
        os.replace(tmp, path)
    _LIBS[plain_only] = declared(ctypes.CDLL(path))
    return _LIBS[plain_only]


def available_paths(lib=None) -> list[str]:
    """The paths this CPU runs ("plain", "avx2", "vnni"), slowest first."""
    mask = (lib or library()).qb_paths()
    return [name for name, p in PATHS.items() if p and mask & (1 << p)]


def best_path(lib=None) -> str:
    return {v: k for k, v in PATHS.items()}[(lib or library()).qb_best_path()]


def set_tuning(tile: int, prefetch: int, split: str, threads: int = 0, lib=None) -> None:
    """qblocks.c's knobs for calls with `threads` threads (0: every count). No knob changes a bit of y."""
    if (lib or library()).qb_set_tuning(threads, int(tile), int(prefetch), SPLITS[split]):
        raise ValueError(f"tuning out of range: tile {tile}, prefetch {prefetch}, split {split}")


def get_tuning(threads: int, lib=None) -> tuple[int, int, str]:
    """(tile, prefetch bytes, split) that calls with `threads` threads use."""
    out = (ctypes.c_int * 3)()
    (lib or library()).qb_get_tuning(threads, out)
    return out[0], out[1], {v: k for k, v in SPLITS.items()}[out[2]]


def fmt_of(fmt) -> int:
    return FORMATS[fmt] if isinstance(fmt, str) else int(fmt)


def _as_uint8(blocks) -> np.ndarray:
    a = blocks.numpy() if isinstance(blocks, torch.Tensor) else np.asarray(blocks)
    return np.ascontiguousarray(a).view(np.uint8)


def pack(fmt, blocks, n: int, k: int) -> torch.Tensor:
    """The file's blocks for n rows of k weights (row-major, k / 32 blocks a row) -> qblocks.c's
    groups of 16 rows, a uint8 tensor (64-byte aligned rows of groups)."""
    fmt = fmt_of(fmt)
    if k % BLOCK:
        raise ValueError(f"in_features {k} is not a multiple of {BLOCK}")
    raw = _as_uint8(blocks)
    if raw.size != n * (k // BLOCK) * BLOCK_BYTES[fmt]:
        raise ValueError(f"{raw.size} bytes of blocks for a ({n}, {k}) weight in format {fmt}")
    groups = -(-n // GROUP)
    out = torch.empty(groups * (k // BLOCK) * GROUP_BLOCK_BYTES[fmt], dtype=torch.uint8)
    library().qb_pack(fmt, raw.ctypes.data, n, k, out.data_ptr())
    return out


def matmul(fmt, x: torch.Tensor, packed: torch.Tensor, n: int, k: int, path: str = "auto", tile: int = 0,
           threads: int | None = None, lib=None) -> torch.Tensor:
    """y (m, n) float32 = x (m, k) float32 @ W^T, W packed by `pack`. Every output is computed in
    the same order whatever m, `tile` (rows per pass over a weight group, 1..16; 0: the tuned one, measured
    on first use: qtuning.py) and `threads`, and on every `path`."""
    lib = lib or library()
    threads = threads or torch.get_num_threads()
    if not tile:
        ensure(lib, threads)  # the tuned knobs: measured on first use, then cached (qtuning.py)
    x = x.detach().to(torch.float32).contiguous()
    if x.dim() != 2 or x.shape[1] != k:
        raise ValueError(f"x must be (m, {k}); got {tuple(x.shape)}")
    y = torch.empty(x.shape[0], n)
    if x.shape[0] == 0:
        return y
    rc = lib.qb_matmul(fmt_of(fmt), x.data_ptr(), x.shape[0], k, packed.data_ptr(), n, y.data_ptr(), n,
                       threads, PATHS[path], int(tile))
    if rc:
        raise (MemoryError if rc == -2 else ValueError)(f"qb_matmul: {'out of memory' if rc == -2 else 'not served'} "
                                                        f"(fmt {fmt}, {tuple(x.shape)} x ({n}, {k}), path {path})")
    return y


# ---- the same arithmetic in numpy --------------------------------------------------------------
def decode(fmt, blocks, n: int, k: int) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
    """-> (d (n, k/32) float32, m (n, k/32) float32 or None for Q8_0, q (n, k/32, 32) int64)."""
    fmt = fmt_of(fmt)
    raw = _as_uint8(blocks).reshape(n, k // BLOCK, BLOCK_BYTES[fmt])
    d = raw[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    if fmt == Q8_0:
        return d, None, raw[..., 2:].copy().view(np.int8).astype(np.int64)
    mins = raw[..., 2:4].copy().view(np.float16)[..., 0].astype(np.float32)
    qs = raw[..., 4:].astype(np.int64)
    return d, mins, np.concatenate([qs & 15, qs >> 4], axis=-1)


def dequantize(fmt, blocks, n: int, k: int) -> np.ndarray:
    """(n, k) float32: d * q (+ m), each weight rounded once to float32, as gguf.quants does."""
    d, mins, q = decode(fmt, blocks, n, k)
    w = d[..., None] * q.astype(np.float32)
    if mins is not None:
        w = w + mins[..., None]
    return w.reshape(n, k)


def quantize_rows(x) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x (m, k) float32 -> (xq (m, k/32, 32) int8, sx (m, k/32), xs = sx * sum(xq) (m, k/32)), as
    qblocks.c quantizes: sx = max|x| / 127, xq = nearest(x / sx), ties to even; a block of zeros
    gets sx = 0, a block holding a NaN or an infinity sx = NaN."""
    x = np.asarray(x, dtype=np.float32)
    xb = x.reshape(x.shape[0], -1, BLOCK)
    amax = np.abs(xb).max(-1)
    finite = np.isfinite(xb).all(-1)
    ok = finite & (amax > 0)
    s = np.where(ok, amax / np.float32(127), np.float32(1)).astype(np.float32)
    with np.errstate(invalid="ignore"):
        q = np.where(ok[..., None], np.rint(xb / s[..., None]), np.float32(0)).astype(np.int8)
    sx = np.where(ok, s, np.where(finite, np.float32(0), np.float32(np.nan))).astype(np.float32)
    return q, sx, (sx * q.astype(np.int64).sum(-1).astype(np.float32)).astype(np.float32)


def simulate(fmt, x, blocks, n: int, k: int) -> np.ndarray:
    """What qb_matmul returns, computed in numpy with the same float32 operations in the same order."""
    fmt = fmt_of(fmt)
    xq, sx, xs = quantize_rows(x)
    d, mins, q = decode(fmt, blocks, n, k)
    f = np.zeros((xq.shape[0], n), np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        for b in range(k // BLOCK):
            isum = (xq[:, b].astype(np.int64) @ q[:, b].T).astype(np.float32)
            f = f + (d[None, :, b] * sx[:, b, None]) * isum
            if mins is not None:
                f = f + mins[None, :, b] * xs[:, b, None]
    return f


def rounding_bound(fmt, x, blocks, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """How far matmul's y (m, n) may be from the float64 product of x with the dequantized weights.
    -> (accumulation, total): `accumulation` bounds |y - W (xq sx)| (float32 rounding of the block sums,
    (2 k/32 + 4) u sum |terms|); `total` bounds |y - W x|: that plus sum_j |w_j| |x_j - xq_j sx|, each x
    moved by at most sx (1/2 + 128 u) (its quotient x / sx rounded once, then to an integer)."""
    u = 2.0 ** -24
    d, mins, q = decode(fmt, blocks, n, k)
    d = d.astype(np.float64)
    w = d[..., None] * q + (0.0 if mins is None else mins.astype(np.float64)[..., None])  # (n, k/32, 32)
    terms = np.abs(d)[..., None] * q + (0.0 if mins is None else np.abs(mins.astype(np.float64))[..., None])
    xq, sx, _ = quantize_rows(x)
    xr = np.abs(xq.astype(np.float64)) * sx.astype(np.float64)[..., None]
    acc = (2 * (k // BLOCK) + 4) * u * np.einsum("rbj,obj->ro", xr, np.abs(terms))
    moved = np.einsum("rb,obj->ro", sx.astype(np.float64) * (0.5 + 128 * u), np.abs(w))
    return acc, acc + moved
