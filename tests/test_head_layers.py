"""EAGLE-1/2 heads with more than one decoder layer (`num_hidden_layers` > 1): the layout the
official code, vLLM and SGLang build (every layer but the first has an input_layernorm), the
greedy oracle, and growing a trained one-layer head into a deeper one without changing what it
computes. (The drafter's cached path against the training-time test: test_train_ttt.py.)"""
import json

import pytest
import torch
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

from conftest import tiny_head, tiny_target
from eagle_core import DecodeSettings, Engine
from eagle_core.drafting.head import HeadConfig, load_head, save_head
from eagle_core.train.eagle2 import state_layers, warm_start
from test_head import PUBLISHED_KEYS

LAYER_KEYS = {k.removeprefix("layers.0.") for k in PUBLISHED_KEYS if k.startswith("layers.0.")}  # a layer-0 key's tail


def test_layout_and_round_trip(tmp_path):
    target = tiny_target()
    head = tiny_head(target, layers=3)
    keys = set(head.state_dict())
    assert keys == {"fc.weight", "fc.bias"} | {f"layers.0.{k}" for k in LAYER_KEYS} | {
        f"layers.{i}.{k}" for i in (1, 2) for k in LAYER_KEYS | {"input_layernorm.weight"}}
    save_head(head, str(tmp_path), dtype=torch.float32)
    assert json.load(open(tmp_path / "config.json"))["num_hidden_layers"] == 3
    again, _ = load_head(str(tmp_path), target.hidden_size, target.vocab_size)
    e, f, pos = torch.randn(1, 5, target.hidden_size), torch.randn(1, 5, target.hidden_size), torch.arange(5)
    torch.testing.assert_close(head(e, f, pos), again(e, f, pos))


@pytest.mark.parametrize("n", [0, -1, "2", 1.5, None])
def test_config_rejects_bad_layer_counts(n):
    d = HeadConfig(hidden_size=8, intermediate_size=16, num_attention_heads=2, num_key_value_heads=2,
                   vocab_size=10).to_json_dict()
    d["num_hidden_layers"] = n
    with pytest.raises(ValueError, match="num_hidden_layers must be a positive integer"):
        HeadConfig.from_json_dict(d)


def test_a_checkpoint_without_the_second_layers_norm_is_refused(tmp_path):
    target = tiny_target()
    save_head(tiny_head(target, layers=2), str(tmp_path), dtype=torch.float32)
    from safetensors.torch import load_file, save_file
    sd = load_file(str(tmp_path / "model.safetensors"))
    del sd["layers.1.input_layernorm.weight"]
    save_file(sd, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match="missing keys.*layers.1.input_layernorm"):
        load_head(str(tmp_path))


@torch.no_grad()
def test_second_layer_is_a_llama_decoder_layer():
    """Layer 1 computes what transformers' own LlamaDecoderLayer computes with its weights (the
    layer vLLM and SGLang build there), input_layernorm included."""
    target = tiny_target()
    head = tiny_head(target, layers=2, bias=False)
    c = head.config
    cfg = LlamaConfig(hidden_size=c.hidden_size, intermediate_size=c.intermediate_size,
                      num_attention_heads=c.num_attention_heads, num_key_value_heads=c.num_key_value_heads,
                      rms_norm_eps=c.rms_norm_eps, rope_theta=c.rope_theta, num_hidden_layers=1,
                      vocab_size=c.vocab_size, max_position_embeddings=c.max_position_embeddings)
    cfg._attn_implementation = "sdpa"
    ref = LlamaDecoderLayer(cfg, layer_idx=0).eval()
    missing, unexpected = ref.load_state_dict(head.layers[1].state_dict(), strict=False)
    assert not unexpected and missing == []
    T = 7
    x = torch.randn(1, T, c.hidden_size)
    pos = torch.arange(T)
    cos, sin = LlamaRotaryEmbedding(cfg)(x, pos[None])
    mask = torch.full((T, T), float("-inf")).triu(1)[None, None]
    want = ref(x, attention_mask=mask, position_ids=pos[None], position_embeddings=(cos, sin))
    want = want[0] if isinstance(want, tuple) else want
    hc, hs = head.rope(pos, x.dtype, x.device)
    got = head.layers[1](x, hc, hs, head.causal_mask(T, None, x.device), None)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
@pytest.mark.parametrize("tree", [dict(method="eagle2", depth=5, tree_top_k=8, total_tokens=30),
                                  dict(method="eagle1"), dict(method="chain", chain_length=4)])
@pytest.mark.parametrize("seed, vocab", [(0, 24), (1, 8)])
def test_eagle_greedy_equals_vanilla(kind, tree, seed, vocab):
    target = tiny_target(kind, seed=seed, vocab=vocab)
    engine = Engine(target, tiny_head(target, seed=seed + 20, layers=2))
    for prompt in ("a", "the quick brown fox jumps over the lazy dog " * 2):
        van = engine.run(prompt, DecodeSettings(method="vanilla", max_new_tokens=40, chat_template=False))
        eag = engine.run(prompt, DecodeSettings(max_new_tokens=40, chat_template=False, **tree))
        assert eag.summary.token_ids == van.summary.token_ids
    if vocab == 8 and tree["method"] == "eagle2":  # the multi-token path was exercised
        assert max(c.accepted_drafts for c in eag.cycles) >= 2


@torch.no_grad()
def test_growing_a_head_keeps_what_it_computes():
    target = tiny_target()
    small = tiny_head(target, seed=3)
    sd = small.state_dict()
    assert state_layers(sd) == 1
    big = tiny_head(target, seed=4, layers=3)
    new = warm_start(big, sd)
    assert new == {k for k in big.state_dict() if k.startswith(("layers.1.", "layers.2."))}
    H, T = target.hidden_size, 6
    e, f, pos = torch.randn(2, T, H), torch.randn(2, T, H), torch.arange(T)
    torch.testing.assert_close(big(e, f, pos), small(e, f, pos))
    embeds = [torch.randn(2, T, H) for _ in range(3)]
    for a, b in zip(big.unrolled(embeds, f, pos), small.unrolled(embeds, f, pos)):
        torch.testing.assert_close(a, b)
    # the new layers are not dead: their first gradients are non-zero where the residual is zero
    big.train()
    with torch.enable_grad():
        big(e, f, pos).square().sum().backward()
    assert big.layers[1].self_attn.o_proj.weight.grad.abs().sum() > 0
    assert big.layers[2].mlp.down_proj.weight.grad.abs().sum() > 0


def test_a_warm_start_that_does_not_fit_is_refused():
    target = tiny_target()
    with pytest.raises(ValueError, match="cannot shrink"):
        warm_start(tiny_head(target), tiny_head(target, layers=2).state_dict())
    with pytest.raises(ValueError, match="missing keys.*fc.bias"):
        warm_start(tiny_head(target, layers=2), tiny_head(target, bias=False).state_dict())
