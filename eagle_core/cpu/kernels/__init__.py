"""The engine's CPU kernels: every linear layer on one batch-invariant path, and tree attention.

    linear       `install(model)`, which routes a model's nn.Linear layers through the backends
    backends     the linear-layer backends (smallgemm, onednn, openblas, mkl, rowwise): packing, calling
    calibration  choosing a backend per weight shape, once per machine (batch invariant only)
    attention    the tree-attention kernel of the target's own decoder forward and of the draft heads
    rows, compact, gemv8   the cycle's small kernels (reached through FastPath, cpu/options.py)
    build        compiling the C kernels (smallgemm.c, attention.c, ...) once per machine

FastPath(kernels=...) (eagle_core/cpu/options.py) forces one backend by name, or "stock" to install none.
"""
from . import attention
from .backends import (ALIGN, BACKENDS, Linear, Mkl, OneDnn, OpenBlas, RowWise, SmallGemm, SmallGemm16, SmallGemm8,
                       linear_of, weight_version)
from .build import cache_dir, cpu_model, library, library_error, source_bytes
from .calibration import (AUTO_CANDIDATES, CALIBRATION_ROWS, INVARIANCE_ROWS, PREFER_OWN, batch_invariant, choose,
                          stream_bandwidth, time_backends)
from .linear import Installed, install, uninstall

__all__ = [
    "ALIGN", "AUTO_CANDIDATES", "BACKENDS", "CALIBRATION_ROWS", "INVARIANCE_ROWS", "Installed", "Linear", "Mkl",
    "OneDnn", "OpenBlas", "PREFER_OWN", "RowWise", "SmallGemm", "SmallGemm16", "SmallGemm8", "attention",
    "batch_invariant", "cache_dir", "choose", "cpu_model", "install", "library", "library_error", "linear_of",
    "source_bytes", "stream_bandwidth", "time_backends", "uninstall", "weight_version",
]
