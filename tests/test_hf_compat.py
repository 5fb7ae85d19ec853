"""The engine passes the KV cache to transformers under the name this transformers takes (`cache`
now, `past_key_values` in 5.20.2, the ZeroGPU variant's pin): the mask builder and the models agree."""
from __future__ import annotations

import inspect

from transformers.models.llama.modeling_llama import LlamaModel
from transformers.models.qwen2.modeling_qwen2 import Qwen2Model

from eagle_core.target.hf_compat import cache_arg, cache_kwarg


def test_the_cache_argument_is_the_one_the_models_take():
    name = cache_arg()
    assert name in ("cache", "past_key_values")
    for model in (LlamaModel, Qwen2Model):
        assert name in inspect.signature(model.forward).parameters, model.__name__
    marker = object()
    assert cache_kwarg(marker) == {name: marker}
