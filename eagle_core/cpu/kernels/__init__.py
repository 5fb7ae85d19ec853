"""The engine's CPU kernels: every linear layer on one batch-invariant path, and tree attention.

    linear     the linear-layer backends (smallgemm, onednn, openblas, mkl), their calibration
               and `install(model)`, which routes a model's nn.Linear layers through them
    attention  the tree-attention kernel of the lean decoder
    build      compiling the C kernels (smallgemm.c, attention.c, ...) once per machine

FastPath(kernels=...) (eagle_core/cpu/options.py) forces one backend by name, or "stock" to install none.
"""
from . import attention
from .build import cache_dir, cpu_model, library, library_error, source_bytes
from .linear import (ALIGN, AUTO_CANDIDATES, BACKENDS, CALIBRATION_ROWS, INVARIANCE_ROWS, PREFER_OWN, Installed, Linear,
                     Mkl, OneDnn, OpenBlas, SmallGemm, SmallGemm16, SmallGemm8, batch_invariant, choose, install,
                     linear_of, stream_bandwidth, time_backends, weight_version)

__all__ = [
    "ALIGN", "AUTO_CANDIDATES", "BACKENDS", "CALIBRATION_ROWS", "INVARIANCE_ROWS", "Installed", "Linear", "Mkl",
    "OneDnn", "OpenBlas", "PREFER_OWN", "SmallGemm", "SmallGemm16", "SmallGemm8", "attention", "batch_invariant",
    "cache_dir", "choose", "cpu_model", "install", "library", "library_error", "linear_of", "source_bytes",
    "stream_bandwidth", "time_backends", "weight_version",
]
