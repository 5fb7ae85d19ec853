"""Checkpoints in the published EAGLE key layout: round trips and strict-load failures."""
import json
import os

import pytest
import torch
from safetensors.torch import save_file

from conftest import tiny_head, tiny_target
from eagle_core.head import EagleHead, HeadConfig, load_head, save_head

PUBLISHED_KEYS = {
    "fc.weight", "layers.0.self_attn.q_proj.weight", "layers.0.self_attn.k_proj.weight",
    "layers.0.self_attn.v_proj.weight", "layers.0.self_attn.o_proj.weight", "layers.0.mlp.gate_proj.weight",
    "layers.0.mlp.up_proj.weight", "layers.0.mlp.down_proj.weight", "layers.0.post_attention_layernorm.weight",
}


def _write_published(path, cfg: HeadConfig, sd: dict, fmt="safetensors", extra_cfg=None):
    """Write a checkpoint the way the published EAGLE repos lay it out (not via save_head)."""
    os.makedirs(path, exist_ok=True)
    c = {"architectures": ["LlamaForCausalLM"], "hidden_size": cfg.hidden_size,
         "intermediate_size": cfg.intermediate_size, "num_attention_heads": cfg.num_attention_heads,
         "num_key_value_heads": cfg.num_key_value_heads, "num_hidden_layers": 1, "rms_norm_eps": 1e-6,
         "vocab_size": cfg.vocab_size, "max_position_embeddings": 4096, "rope_theta": 10000.0,
         "hidden_act": "silu", "model_type": "llama", **(extra_cfg or {})}
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(c, f)
    if fmt == "safetensors":
        save_file({k: v.contiguous() for k, v in sd.items()}, os.path.join(path, "model.safetensors"))
    else:
        torch.save(sd, os.path.join(path, "pytorch_model.bin"))


def _random_sd(cfg, bias=True, embed=True):
    H, I, d = cfg.hidden_size, cfg.intermediate_size, cfg.dim_per_head
    nh, nkv = cfg.num_attention_heads, cfg.num_key_value_heads
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g) * 0.02
    sd = {"fc.weight": r(H, 2 * H), "layers.0.self_attn.q_proj.weight": r(nh * d, H),
          "layers.0.self_attn.k_proj.weight": r(nkv * d, H), "layers.0.self_attn.v_proj.weight": r(nkv * d, H),
          "layers.0.self_attn.o_proj.weight": r(H, nh * d), "layers.0.mlp.gate_proj.weight": r(I, H),
          "layers.0.mlp.up_proj.weight": r(I, H), "layers.0.mlp.down_proj.weight": r(H, I),
          "layers.0.post_attention_layernorm.weight": torch.ones(H)}
    if bias:
        sd["fc.bias"] = r(H)
    if embed:
        sd["embed_tokens.weight"] = r(cfg.vocab_size, H)
    return sd


def test_head_keys_are_the_published_layout():
    target = tiny_target()
    assert set(tiny_head(target, bias=True).state_dict()) == PUBLISHED_KEYS | {"fc.bias"}
    assert set(tiny_head(target, bias=False).state_dict()) == PUBLISHED_KEYS


@pytest.mark.parametrize("bias, fmt, embed", [(True, "safetensors", True), (False, "bin", True), (True, "bin", False)])
def test_load_published_layout(tmp_path, bias, fmt, embed):
    """Vicuna-style (fc.bias, pytorch_model.bin) and LLaMA3-style ("bias": false) checkpoints load
    exactly, and the loaded head computes with those weights."""
    target = tiny_target()
    cfg = HeadConfig.for_target(target.config, bias=bias)
    sd = _random_sd(cfg, bias=bias, embed=embed)
    _write_published(tmp_path, cfg, sd, fmt, extra_cfg={} if bias else {"bias": False})
    head, vocab = load_head(str(tmp_path), target.hidden_size, target.vocab_size)
    assert vocab is None
    for k, v in head.state_dict().items():
        assert torch.equal(v, sd[k].float()), k


def test_save_load_round_trip(tmp_path):
    target = tiny_target()
    head = tiny_head(target)
    save_head(head, str(tmp_path), draft_vocab=[1, 5, 7], dtype=torch.float32)
    again, vocab = load_head(str(tmp_path), target.hidden_size, target.vocab_size)
    assert vocab == [1, 5, 7]
    x = torch.randn(1, 4, target.hidden_size)
    e = torch.randn(1, 4, target.hidden_size)
    pos = torch.arange(4)
    torch.testing.assert_close(head(e, x, pos), again(e, x, pos))


def test_strict_missing_and_unexpected_keys(tmp_path):
    target = tiny_target()
    cfg = HeadConfig.for_target(target.config)
    sd = _random_sd(cfg)
    del sd["layers.0.mlp.up_proj.weight"]
    _write_published(tmp_path / "missing", cfg, sd)
    with pytest.raises(ValueError, match="missing keys.*up_proj"):
        load_head(str(tmp_path / "missing"))
    sd = _random_sd(cfg)
    sd["layers.0.input_layernorm.weight"] = torch.ones(cfg.hidden_size)  # EAGLE-1/2 heads have none
    _write_published(tmp_path / "extra", cfg, sd)
    with pytest.raises(ValueError, match="unexpected keys.*input_layernorm"):
        load_head(str(tmp_path / "extra"))


def test_strict_wrong_shape_and_target_mismatch(tmp_path):
    target = tiny_target()
    cfg = HeadConfig.for_target(target.config)
    sd = _random_sd(cfg)
    sd["layers.0.mlp.up_proj.weight"] = torch.zeros(cfg.intermediate_size + 1, cfg.hidden_size)
    _write_published(tmp_path / "shape", cfg, sd)
    with pytest.raises(ValueError, match="up_proj.*shape"):
        load_head(str(tmp_path / "shape"))
    _write_published(tmp_path / "ok", cfg, _random_sd(cfg))
    with pytest.raises(ValueError, match=f"head hidden size {cfg.hidden_size}, target hidden size 4096"):
        load_head(str(tmp_path / "ok"), target_hidden_size=4096)
    with pytest.raises(ValueError, match="vocabulary"):
        load_head(str(tmp_path / "ok"), target.hidden_size, target_vocab_size=32000)


def test_bias_flag_must_match(tmp_path):
    target = tiny_target()
    cfg = HeadConfig.for_target(target.config, bias=False)
    _write_published(tmp_path, cfg, _random_sd(cfg, bias=True), extra_cfg={"bias": False})
    with pytest.raises(ValueError, match="bias"):
        load_head(str(tmp_path))


def test_llama3_rope_scaling_config():
    cfg = HeadConfig(hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
                     vocab_size=10, rope_theta=500000.0,
                     rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                   "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})
    head = EagleHead(cfg)
    inv = head._inv_freq
    base = 1.0 / (500000.0 ** (torch.arange(0, 16, 2).float() / 16))
    assert torch.isclose(inv[0], base[0])  # highest frequency unchanged
    assert torch.isclose(inv[-1], base[-1] / 8)  # lowest frequency divided by the factor
