"""Which heads to use: the ones shipped in assets/ for the default target (EAGLE-1/2:
assets/head-smollm2-135m, EAGLE-3: assets/head3-smollm2-135m), or a given directory.
engine_loading.load_engine builds an Engine from them."""
from __future__ import annotations

import os

import torch

from .head import EagleHead, HeadConfig, load_head
from ..target.hub import local_dir

ASSETS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "assets")
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
    head, vocab = load_head(local_dir(path, "EAGLE head"), target.hidden_size, target.vocab_size, target.device,
                            target.dtype)
    return head, vocab, path


# -- EAGLE-3 ----------------------------------------------------------------------------------
DEFAULT_HEAD3_DIR = os.path.join(ASSETS, "head3-smollm2-135m")  # the shipped EAGLE-3 head


def random_head3(target, seed: int = 0, draft_vocab: list[int] | None = None):
    """An untrained EAGLE-3 head for `target` over `draft_vocab` (default: the shipped EAGLE-2
    head's draft vocabulary if it fits the target, else the full vocabulary). It drafts badly
    but decoding stays lossless."""
    from .head3 import Eagle3Config, Eagle3Head

    if draft_vocab is None:
        from .head import read_draft_vocab

        if target.name == "smollm2-135m" and os.path.isdir(DEFAULT_HEAD_DIR):
            draft_vocab = read_draft_vocab(DEFAULT_HEAD_DIR, target.vocab_size)
        draft_vocab = draft_vocab or list(range(target.vocab_size))
    torch.manual_seed(seed)
    head = Eagle3Head(Eagle3Config.for_target(target.config, draft_vocab_size=len(set(draft_vocab))))
    head.set_draft_vocab(draft_vocab)
    return head.to(device=target.device, dtype=target.dtype).eval()


def load_default_head3(target, path: str | None = None, layer_ids: str = "inputs", rope_theta: float | None = None):
    """(EAGLE-3 head, name). `path` (a directory or a hub id) None: the shipped EAGLE-3 head for
    the default target if there is one, else a random head named "random (untrained)".
    `layer_ids`: the convention of the head's aux-layer ids ("inputs": official, vLLM; "outputs":
    SGLang, SpecForge); `rope_theta`: the trainer's RoPE base where the config's is not it
    (head3.Eagle3Config.from_json_dict)."""
    from .head3 import load_head3

    if path is None and target.name == "smollm2-135m" and os.path.exists(os.path.join(DEFAULT_HEAD3_DIR, "config.json")):
        return load_head3(DEFAULT_HEAD3_DIR, target, target.device, target.dtype), "assets/head3-smollm2-135m"
    if path is None:
        return random_head3(target), "EAGLE-3 random (untrained)"
    return load_head3(local_dir(path, "EAGLE-3 head"), target, target.device, target.dtype, layer_ids, rope_theta), path
