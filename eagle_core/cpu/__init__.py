"""The CPU fast path: the engine's own kernels and the passes built on them, chosen once at load.

    options     FastPath: the one options object (load_engine(fast=...)); EAGLE_PORTABLE=1 turns it all off
    kernels     C kernels: batch-invariant linear layers, tree attention, row top-k, cache moves
    forward     the target's decoder forward in a few calls per layer (layer.c)
    drafting    the drafter's side: its weights' storage and which pass drafts (the drafter asks it first)
    head_pass   the draft head's pass in a few calls
    fused_pass  a whole drafting pass (head, draft LM head, top k) as one kernel call
    status      which path runs and why, said once for the CLI, the page and the hardware panel; which
                weight format runs (weights_line)
    quant_linear  a linear layer over a GGUF's own Q4_1 / Q8_0 blocks (FastPath(weights="gguf"))
    auto_format   --weights auto: the fastest weight format here, resolved before the target loads
"""
from .options import FastPath
from .status import PathStatus, path_line, path_status, weights_line

__all__ = ["FastPath", "PathStatus", "path_line", "path_status", "weights_line"]
