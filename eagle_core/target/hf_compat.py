"""The one transformers API difference the engine meets across the versions it pins: the cache
argument of a model's forward and of the mask builders is `cache` in the transformers of
requirements.txt and `past_key_values` in 5.20.2, the last release for Python 3.10 (the ZeroGPU
variant, space/requirements-zerogpu.txt). The engine passes it as `cache_kwarg(cache)`."""
from __future__ import annotations

import functools
import inspect


@functools.cache
def cache_arg() -> str:
    """The name this transformers gives the cache argument (imported on first use, not at import)."""
    from transformers.masking_utils import create_causal_mask
    return "cache" if "cache" in inspect.signature(create_causal_mask).parameters else "past_key_values"


def cache_kwarg(cache) -> dict:
    """{name: cache} under the name this transformers takes."""
    return {cache_arg(): cache}
