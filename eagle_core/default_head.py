"""Which head to use: the one shipped in assets/ for the default target, or a given directory."""
from __future__ import annotations

import os

import torch

from .head import EagleHead, HeadConfig, load_head

ASSETS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "assets")
DEFAULT_HEAD_DIR = os.path.join(ASSETS, "head-smollm2-135m")


def random_head(target, seed: int = 0) -> EagleHead:
    """An untrained head shaped for `target` (tests, and a fallback that still decodes losslessly)."""
    torch.manual_seed(seed)
    head = EagleHead(HeadConfig.for_target(target.config))
    return head.to(device=target.device, dtype=target.dtype).eval()


def load_default_head(target, path: str | None = None):
    """(head, draft_vocab, name). `path` None: the shipped head if it fits the target, else a
    random head (tau ~ 1: every cycle still yields the target's own token)."""
    if path is None and os.path.exists(os.path.join(DEFAULT_HEAD_DIR, "config.json")):
        path = DEFAULT_HEAD_DIR
        try:
            head, vocab = load_head(path, target.hidden_size, target.vocab_size, target.device, target.dtype)
            return head, vocab, "assets/head-smollm2-135m"
        except ValueError:
            if target.name == "smollm2-135m":
                raise
            return random_head(target), None, "random (untrained)"
    if path is None:
        return random_head(target), None, "random (untrained)"
    head, vocab = load_head(path, target.hidden_size, target.vocab_size, target.device, target.dtype)
    return head, vocab, path
