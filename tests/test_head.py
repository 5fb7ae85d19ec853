"""Checkpoints in the published EAGLE key layout: round trips and strict-load failures."""
import json
import os

import pytest
import torch
from safetensors.torch import save_file

from conftest import tiny_head, tiny_target
from eagle_core.drafting.head import EagleHead, HeadConfig, load_head, save_head

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


@pytest.mark.parametrize("content, why", [
    ({"token_ids": [1, 5, 5]}, "distinct token ids in \\[0, "),
    ({"token_ids": [1, 5, 999]}, "distinct token ids in \\[0, "),
    ({"token_ids": [-1, 5]}, "distinct token ids in \\[0, "),
    ({"token_ids": [1.5, 5]}, "distinct token ids in \\[0, "),
    ({"token_ids": []}, "distinct token ids in \\[0, "),
    ({"ids": [1, 5]}, "not a draft vocabulary"),
    ("[1, 5", "not a draft vocabulary"),
])
def test_a_bad_draft_vocabulary_is_refused_by_name(tmp_path, content, why):
    """draft_vocab.json is read in one place (head.read_draft_vocab): loading a head, `train
    --draft-vocab-from`, `export`, the serving export and the random EAGLE-3 fallback all refuse a
    file with repeated, out-of-range or non-integer ids, naming the file."""
    from eagle_core.drafting.head import read_draft_vocab

    target = tiny_target()
    save_head(tiny_head(target), str(tmp_path), draft_vocab=[1, 5, 7], dtype=torch.float32)
    f = tmp_path / "draft_vocab.json"
    f.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(ValueError, match=why) as e:
        load_head(str(tmp_path), target.hidden_size, target.vocab_size)
    assert "draft_vocab.json" in str(e.value)
    with pytest.raises(ValueError, match=why):
        read_draft_vocab(str(f), target.vocab_size)
    f.unlink()
    assert load_head(str(tmp_path), target.hidden_size, target.vocab_size)[1] is None
    assert read_draft_vocab(str(tmp_path), target.vocab_size) is None
    f.write_text(json.dumps({"token_ids": [7, 1, 5]}))  # the file's order is kept
    assert read_draft_vocab(str(tmp_path), target.vocab_size) == [7, 1, 5]


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


def test_one_fit_check_names_every_mismatch_in_one_message(tmp_path):
    """head.check_fits is the fit check of both heads: loading an EAGLE-1/2 or EAGLE-3 head, the
    EAGLE-3 drafter and load_engine all go through it, and a head that does not fit gets ONE message
    naming each size that differs (not only the first)."""
    from test_head3 import tiny_head3, tiny_target8

    from eagle_core import Engine
    from eagle_core.drafting.head import check_fits
    from eagle_core.drafting.head3 import load_head3, save_head3
    from eagle_core.engine_loading import fits3

    target = tiny_target()  # hidden 64, vocabulary 24, 2 layers
    head = tiny_head(target)
    assert check_fits(head.config, target) == ()
    save_head(head, str(tmp_path / "h2"), dtype=torch.float32)
    both = r"^EAGLE-1/2 head does not fit the target: head hidden size 64, target hidden size 32 \(.*\); " \
           r"head vocabulary 24, target vocabulary 30$"
    with pytest.raises(ValueError, match=both):
        check_fits(head.config, hidden_size=32, vocab_size=30)
    with pytest.raises(ValueError, match=both):
        load_head(str(tmp_path / "h2"), 32, 30)
    # EAGLE-3: the sizes and the layers it reads, in the same one message
    t8 = tiny_target8()
    h3 = tiny_head3(t8)
    assert check_fits(h3.config, t8) == (2, 4, 5) and fits3(h3, t8)
    save_head3(h3, str(tmp_path / "h3"), dtype=torch.float32)
    small = tiny_target(vocab=30)  # 2 layers: (2, N//2, N-3) = (2, 1, -1) is not there
    msg = (r"^EAGLE-3 head does not fit the target: head vocabulary 24, target vocabulary 30; "
           r"head reads target layers \(2, 1, -1\); the target has 2 layers$")
    with pytest.raises(ValueError, match=msg):
        load_head3(str(tmp_path / "h3"), small)
    with pytest.raises(ValueError, match=msg):
        Engine(small, head3=h3)
    assert not fits3(h3, small)
