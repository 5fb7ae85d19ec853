"""Linear layers on a CPU (eagle_core.cpu.kernels): one path for the engine, fast for 1 to 64 rows, batch invariant.

EAGLE pays only if verifying k drafted tokens costs about one ordinary step. At batch size 1 a
step is bound by streaming the fp32 weights from memory, so k rows could ride along nearly free,
but torch's default CPU kernel (MKL's sgemm, which takes a slow path on AMD CPUs) costs ~2.5x more
at 5 rows than at 1 (docs/performance.md). This module gives every linear layer of the target
(body and LM head) and of the draft head one kernel, chosen per weight shape at load time:

    smallgemm  our own AVX2/FMA kernel (smallgemm.c), compiled with the system C compiler on first
               use and cached; bit-identical per row whatever the batch (see the C file)
    onednn     oneDNN with a weight pre-packed once (torch.ops.mkldnn)
    openblas   numpy's OpenBLAS on a transposed copy of the weight (zero-copy views in and out)
    mkl        plain F.linear: what transformers runs by default, and the fallback

`install(model)` swaps each nn.Linear for a `Linear` that keeps the same parameters (so state
dicts, tied weights and `.weight` look-ups are unchanged) and routes the product through the
chosen backend. Only backends that are batch invariant on this machine are eligible (checked at
calibration: a row alone and inside 5/16/24-row batches must be equal bit for bit), so a greedy
EAGLE run reproduces the vanilla run exactly by construction, not only by argmax luck. Gradients,
other dtypes and other devices go through F.linear unchanged: CUDA and MPS keep their own kernels.

FastPath(kernels=...) (eagle_core/cpu/options.py) forces one backend by name, or "stock" to install none.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from . import attention
from .build import cache_dir, cpu_model, library, library_error, source_bytes
from .gemv8 import SmallGemm8

# The row counts a decode meets, with their weight in the choice: a vanilla step (1 row), the CPU
# tree's verification (5), larger trees (16, weighted less). Summed unweighted, the 8- and 16-row
# products (arithmetic-bound, slowest) outweighed the 1-row step and could pick a backend that is
# faster at 16 rows but slower per decode step (docs/performance.md, "The engine's CPU kernels").
CALIBRATION_ROWS = {1: 1.0, 5: 1.0, 16: 0.25}
COLD_BYTES = 64 << 20  # calibration cycles through copies of the weight filling this many bytes ...
MAX_COPIES = 128  # ... (at most this many), so each product reads its weight from memory, as in a forward
PLAN_VERSION = 2  # in the cached plan's key: a new way of choosing calibrates again
INVARIANCE_ROWS = (1, 5, 16, 24)
PREFER_OWN = 1.10  # another backend must be >10% faster in calibration to replace smallgemm
ALIGN = 32  # bytes: the packed panels are read with aligned 256-bit loads


# -- backends: prepare(weight) once, then run(state, x (m, K) contiguous fp32, bias) -> (m, N) ------------
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


BACKENDS = {b.name: b for b in (SmallGemm, OneDnn, OpenBlas, Mkl)}
# What "auto" measures and may choose. Not OpenBLAS: numpy's OpenBLAS keeps a thread pool of its
# own that spins after each call, so on a 2-core machine it stalls torch's OpenMP threads (and
# every measurement after it) until it goes to sleep; it is measured only when asked by name.
AUTO_CANDIDATES = ("smallgemm", "onednn", "mkl")
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


# -- choosing per shape, once per machine ----------------------------------------------------------------------
def batch_invariant(backend, n: int, k: int, seed: int = 0) -> bool:
    """Is each row's result the same, bit for bit, alone and inside batches of 5/16/24 rows?"""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(n, k, generator=g) / k ** 0.5
    x = torch.randn(max(INVARIANCE_ROWS), k, generator=g)
    st = backend.prepare(w)
    full = backend.run(st, x, None)
    return all(torch.equal(backend.run(st, x[:m].contiguous(), None), full[:m]) for m in INVARIANCE_ROWS)


def time_backends(backends, n: int, k: int, rows=tuple(CALIBRATION_ROWS),
                  rounds: int = 5) -> dict[str, dict[int, float]]:
    """name -> {rows: seconds}: the fastest of `rounds` products on a random weight of the shape,
    read from memory as in a forward (each timing is a pass over enough copies of the weight to
    leave the caches, divided by the copies), the backends interleaved round by round, so that a
    burst of load elsewhere on the machine hits them alike and the minimum survives it."""
    copies = max(1, min(MAX_COPIES, -(-COLD_BYTES // (4 * n * k))))
    ws = [torch.randn(n, k) / k ** 0.5 for _ in range(copies)]
    xs = {m: torch.randn(m, k) for m in rows}
    states = {b.name: [b.prepare(w) for w in ws] for b in backends}
    for b in backends:
        for m in rows:
            b.run(states[b.name][0], xs[m], None)  # lazily built kernels and buffers
    best = {b.name: {m: float("inf") for m in rows} for b in backends}
    for _ in range(rounds):
        for b in backends:
            for m in rows:
                t0 = time.perf_counter()
                for st in states[b.name]:
                    b.run(st, xs[m], None)
                best[b.name][m] = min(best[b.name][m], (time.perf_counter() - t0) / copies)
    return best


def _plan_path(threads: int) -> str:
    src = hashlib.sha256(source_bytes()).hexdigest()[:8]
    key = f"{cpu_model()}|{torch.__version__}|{np.__version__}|{threads}|{src}|{PLAN_VERSION}"
    return os.path.join(cache_dir(), f"plan-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json")


def choose(shapes, threads: int | None = None) -> dict[tuple[int, int], str]:
    """(N, K) -> backend name: the fastest batch-invariant backend, its times at CALIBRATION_ROWS weighted.
    Measured once per machine, thread count and library versions; cached as JSON."""
    threads = threads or torch.get_num_threads()
    path = _plan_path(threads)
    try:
        with open(path) as f:
            known = {tuple(map(int, s.split("x"))): v for s, v in json.load(f)["choice"].items()}
    except (OSError, ValueError, KeyError):
        known = {}
    todo = [s for s in dict.fromkeys(shapes) if s not in known]
    if todo:
        for n, k in todo:
            eligible = [BACKENDS[b] for b in AUTO_CANDIDATES if BACKENDS[b].available() and batch_invariant(BACKENDS[b], n, k)]
            times = {name: sum(CALIBRATION_ROWS[m] * t for m, t in ts.items())
                     for name, ts in time_backends(eligible, n, k).items()}
            # our kernel unless another is clearly faster: calibration is short and a busy machine is noisy
            if "smallgemm" in times:
                times["smallgemm"] /= PREFER_OWN
            known[(n, k)] = min(times, key=times.get) if times else "mkl"
        os.makedirs(cache_dir(), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            json.dump({"cpu": cpu_model(), "threads": threads, "torch": torch.__version__,
                       "choice": {f"{n}x{k}": v for (n, k), v in sorted(known.items())}}, f, indent=1)
        os.replace(tmp, path)
    return {s: known[s] for s in shapes}


# -- installing into a model --------------------------------------------------------------------------------
class Installed:
    """What `install` changed: the swapped modules, so that `stock()` can put nn.Linear back."""

    def __init__(self, swaps, choice, policy: str, attention=None):
        self.swaps = swaps  # [(parent, attribute, original nn.Linear, our Linear)]
        self.choice = choice  # (N, K) -> backend name
        self.policy = policy  # what install() was asked for: "auto", "stock" or a backend name
        self.attention = attention  # (transformers model, its previous attention name), or None

    def describe(self) -> str:
        if not self.swaps:
            return "stock F.linear"
        names = sorted(set(self.choice.values()))
        attn = f", attention {attention.NAME}" if self.attention is not None else ""
        return "+".join(names) + f" ({len(self.swaps)} linear layers{attn})"

    @contextlib.contextmanager
    def stock(self):
        """Run with the model's original nn.Linear modules (e.g. stock transformers `generate`)."""
        for parent, attr, orig, _ in self.swaps:
            setattr(parent, attr, orig)
        if self.attention is not None:
            attention.set_attention(self.attention[0], self.attention[1])
        try:
            yield
        finally:
            for parent, attr, _, fast in self.swaps:
                setattr(parent, attr, fast)
            if self.attention is not None:
                attention.set_attention(self.attention[0], attention.NAME)


def install(model: nn.Module, policy: str = "auto") -> Installed:
    """Swap every float32 CPU nn.Linear in `model` for a `Linear` on the chosen backend.
    policy: "auto" (measure, cached), a backend name, or "stock" (change nothing)."""
    if policy not in ("auto", "stock", *BACKENDS):
        raise ValueError(f"FastPath.kernels must be auto, stock or one of {', '.join(BACKENDS)}; got {policy!r}")
    targets = [(parent, attr, mod) for parent in model.modules() for attr, mod in parent.named_children()
               if type(mod) is nn.Linear and mod.weight.device.type == "cpu" and mod.weight.dtype == torch.float32]
    if policy == "stock" or not targets:
        return Installed([], {}, policy)
    shapes = [tuple(m.weight.shape) for _, _, m in targets]
    if policy == "auto":
        choice = choose(shapes)
    else:
        if not BACKENDS[policy].available():
            raise RuntimeError(f"kernel backend {policy!r} is not available here: {library_error()}")
        choice = {s: policy for s in shapes}
    swaps = []
    for parent, attr, mod in targets:
        fast = Linear(mod.weight, mod.bias, choice[tuple(mod.weight.shape)])
        fast.prepare()  # pack now, at load, not inside the first timed decode
        setattr(parent, attr, fast)
        swaps.append((parent, attr, mod, fast))
    attn = None
    config = getattr(model, "config", None)
    if library() is not None and getattr(config, "_attn_implementation", None) in ("sdpa", "eager"):
        attn = (model, attention.set_attention(model, attention.NAME))  # a transformers model: its attention too
    return Installed(swaps, choice, policy, attn)


def stream_bandwidth(mb: int = 256, threads: int | None = None, reps: int = 5) -> float:
    """GB/s reading a buffer far beyond the caches with all threads (the smallgemm library's AVX2
    loop where available, else torch.sum): the bound a weight-streaming step cannot beat."""
    a = torch.ones(mb * 2 ** 20 // 4)
    threads = threads or torch.get_num_threads()
    lib = library()
    f = (lambda: lib.stream_read(a.data_ptr(), a.numel(), threads)) if lib is not None else (lambda: a.sum())
    f()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t0)
    return a.numel() * 4 / 1e9 / best
