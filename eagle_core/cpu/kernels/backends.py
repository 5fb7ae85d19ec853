"""The linear-layer backends and the module that calls them: each backend prepares a weight once
(smallgemm packs it into panels) and runs products on it; `Linear` is nn.Linear's inference forward
through one of them. Which backend a weight shape gets is decided in calibration.py; `install`
(linear.py) swaps a model's layers for these.

    smallgemm  our own AVX2/FMA kernel (smallgemm.c), compiled with the system C compiler on first
               use and cached; bit-identical per row whatever the batch (see the C file)
    onednn     oneDNN with a weight pre-packed once (torch.ops.mkldnn)
    openblas   numpy's OpenBLAS on a transposed copy of the weight (zero-copy views in and out)
    mkl        plain F.linear: what transformers runs by default
    rowwise    F.linear one row at a time: batch invariant by construction (each row is the same
               1-row product alone or in a batch), slow for many rows; what runs where no faster
               backend passes the batch-invariance check (docs/performance.md, "When the kernels
               cannot run")
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .build import library
from .gemv8 import SmallGemm8

ALIGN = 32  # bytes: the packed panels are read with aligned 256-bit loads


# prepare(weight) once, then run(state, x (m, K) contiguous fp32, bias) -> (m, N)
class Mkl:
    name = "mkl"

    @staticmethod
    def available() -> bool:
        return True

    @staticmethod
    def prepare(w):
        return w

    @staticmethod
    def run(w, x, bias):
        return F.linear(x, w, bias)


class OneDnn:
    name = "onednn"

    @staticmethod
    def available() -> bool:
        return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")

    @staticmethod
    def prepare(w):
        return torch.ops.mkldnn._reorder_linear_weight(w, 8)  # packed for a small batch

    @staticmethod
    def run(wp, x, bias):
        return torch.ops.mkldnn._linear_pointwise(x, wp, bias, "none", [], "")


class OpenBlas:
    name = "openblas"

    @staticmethod
    def available() -> bool:
        return True

    @staticmethod
    def prepare(w):
        return w.t().contiguous().numpy()  # (K, N), so x @ wt is a plain row-major product

    @staticmethod
    def run(wt, x, bias):
        y = torch.from_numpy(np.matmul(x.numpy(), wt))
        return y + bias if bias is not None else y


class RowWise:
    """One row at a time, each row copied to its own fresh (64-byte aligned) buffer first, so that a
    row's product never depends on the batch it came in or on where it sat in memory."""

    name = "rowwise"

    @staticmethod
    def available() -> bool:
        return True

    @staticmethod
    def prepare(w):
        return w

    @staticmethod
    def run(w, x, bias):
        if x.shape[0] == 1:
            return F.linear(x.clone(), w, bias)
        return torch.cat([F.linear(x[r:r + 1].clone(), w, bias) for r in range(x.shape[0])])


class SmallGemm:
    name = "smallgemm"

    @staticmethod
    def available() -> bool:
        return library() is not None

    @staticmethod
    def prepare(w):
        return _packed(w, torch.float32, library().pack_weight)

    @staticmethod
    def run(state, x, bias):
        return _product(_SMALLGEMM[0], state, x, bias)


class SmallGemm16:
    """smallgemm on a weight stored as float16, for weights whose every value IS a float16 (a draft
    head loaded from its float16 checkpoint): widened exactly on load, so the same bits as SmallGemm
    from half the bytes. Not a backend to choose by policy: the drafter and eagle_core/cpu/head_pass.py
    take it for a weight where `exact` holds."""

    name = "smallgemm16"

    @staticmethod
    def exact(w: torch.Tensor) -> bool:
        return (w.dtype == torch.float32 and w.device.type == "cpu" and w.numel() > 0
                and bool(torch.isfinite(w).all()) and torch.equal(w.to(torch.float16).float(), w))

    @staticmethod
    def prepare(w):
        if not SmallGemm16.exact(w):
            raise ValueError("smallgemm16 needs a float32 weight whose values are all float16")
        return _packed(w, torch.float16, library().pack_weight_f16)

    @staticmethod
    def run(state, x, bias):
        return _product(library().smallgemm_f16, state, x, bias)


def _packed(w, dtype, pack):
    """w (N, K) packed by smallgemm.c's `pack` into pairs of 8-output panels, in a buffer of
    `dtype` aligned to ALIGN bytes. -> (packed, N, K), the state `_product` reads."""
    n, k = w.shape
    size = (n + 15) // 16 * 16 * k
    buf = torch.empty(size + ALIGN, dtype=dtype)
    off = (-buf.data_ptr() % ALIGN) // buf.element_size()
    packed = buf[off:off + size]
    pack(w.contiguous().data_ptr(), n, k, packed.data_ptr())
    return packed, n, k


def _product(fn, state, x, bias):
    """y = x W^T (+ bias) through smallgemm.c's `fn` on a packed weight; x (m, K) contiguous."""
    packed, n, k = state
    m = x.shape[0]
    y = torch.empty(m, n)
    fn(x.data_ptr(), m, k, packed.data_ptr(), n, k, None if bias is None else bias.data_ptr(), y.data_ptr(), n,
       torch.get_num_threads())
    return y


class _LazyFn(list):
    """[the library's smallgemm], looked up on first use: a decode calls it ~200 times a step."""

    def __getitem__(self, i):
        if not len(self):
            self.append(library().smallgemm)
        return list.__getitem__(self, i)


_SMALLGEMM = _LazyFn()


BACKENDS = {b.name: b for b in (SmallGemm, OneDnn, OpenBlas, Mkl, RowWise)}
# smallgemm on another storage of the weight: taken by the drafter by name, never chosen by policy
STORAGES = {SmallGemm16.name: SmallGemm16, SmallGemm8.name: SmallGemm8}


# -- the module ---------------------------------------------------------------------------------------------
class Linear(nn.Module):
    """nn.Linear's inference forward through one backend. Holds the ORIGINAL parameters (shared, not
    copied) plus the backend's prepared form, rebuilt if the weight changes in place."""

    def __init__(self, weight: nn.Parameter, bias, backend: str):
        super().__init__()
        self.weight, self.bias = weight, bias
        self.in_features, self.out_features = weight.shape[1], weight.shape[0]
        self.backend = STORAGES.get(backend) or BACKENDS[backend]
        self._state, self._version = None, None

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, backend={self.backend.name}"

    def prepare(self) -> None:
        """(Re)build the backend's form of the weight, e.g. smallgemm's packed panels."""
        with torch.no_grad():
            self._state = self.backend.prepare(self.weight.detach())
        self._version = weight_version(self.weight)

    def forward(self, x):
        w = self.weight
        if (x.dtype is not torch.float32 or w.dtype is not torch.float32 or x.device.type != "cpu"
                or (torch.is_grad_enabled() and (x.requires_grad or w.requires_grad))):
            return F.linear(x, w, self.bias)  # training, other dtypes and devices: stock
        if self._version != weight_version(w):
            self.prepare()
        x2 = x.reshape(-1, self.in_features)
        if not x2.is_contiguous():
            x2 = x2.contiguous()
        bias = None if self.bias is None else self.bias.detach()
        return self.backend.run(self._state, x2, bias).view(*x.shape[:-1], self.out_features)


def weight_version(t: torch.Tensor):
    """What changes when the weight is replaced or modified in place. Tensors made under
    inference_mode keep no version counter; for those only a new storage is seen."""
    return (t.data_ptr(), None if t.is_inference() else t._version)


def linear_of(weight: torch.Tensor, backend: str | None) -> nn.Module:
    """A bias-free product with `weight` (N, K) through `backend` (None: plain F.linear)."""
    w = nn.Parameter(weight, requires_grad=False)
    return Linear(w, None, backend) if backend else Linear(w, None, "mkl")
