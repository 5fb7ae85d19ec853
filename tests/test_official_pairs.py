"""The published heads as their trainers made them (eagle_app/public_models.py, issue 46): the RoPE base each
pair's trainer used reaches the head, the architecture names the official code, AngelSlim, vLLM and
SGLang write are accepted, and Vicuna's SentencePiece tokenizer is asked for by name. Tiny configs
written here; nothing is downloaded."""
from __future__ import annotations

import json
import os

import pytest
import torch

from eagle_app import public_models, picker
from eagle_core.drafting.head import HeadConfig
from eagle_core.drafting.head3 import ARCHITECTURES, Eagle3Config, load_head3, read_config3
from eagle_core.drafting.head_layers import rope_inv_freq
from eagle_core.target import load_target, tokenizer_missing

QWEN = next(p for p in public_models.PAIRS if p.target == "Qwen/Qwen3-1.7B")
LLAMA = next(p for p in public_models.PAIRS if p.target == "meta-llama/Llama-3.1-8B-Instruct")
VICUNA = next(p for p in public_models.PAIRS if p.target == "lmsys/vicuna-7b-v1.3")


def angelslim_config(**over) -> dict:
    """A tiny config shaped like AngelSlim's qwen3-1.7b-eagle3.json (its trainer's architecture name,
    rope_theta 1e6, tie_word_embeddings true, target_model_type)."""
    d = {"architectures": ["Eagle3LlamaForCausalLM"], "model_type": "llama", "target_model_type": "qwen3",
         "head_dim": 8, "hidden_act": "silu", "hidden_size": 32, "intermediate_size": 48, "num_attention_heads": 4,
         "num_key_value_heads": 2, "num_hidden_layers": 1, "rms_norm_eps": 1e-6, "rope_scaling": None,
         "rope_theta": 1000000, "tie_word_embeddings": True, "vocab_size": 40, "draft_vocab_size": 40,
         "max_position_embeddings": 4096}
    d.update(over)
    return d


@pytest.mark.parametrize("arch", ["LlamaForCausalLM", "Eagle3LlamaForCausalLM", "LlamaForCausalLMEagle3"])
def test_the_eagle3_names_of_every_loader_are_accepted(arch):
    """official trainer: LlamaForCausalLM; AngelSlim's trainer and vLLM's EAGLEConfig: Eagle3LlamaForCausalLM;
    SGLang: LlamaForCausalLMEagle3."""
    assert Eagle3Config.from_json_dict(angelslim_config(architectures=[arch])).hidden_size == 32
    with pytest.raises(ValueError, match="not an EAGLE-3 head"):
        Eagle3Config.from_json_dict(angelslim_config(architectures=["EagleLlamaForCausalLM"]))
    assert ARCHITECTURES[0] == "LlamaForCausalLMEagle3"  # what the exporter writes


def test_the_trainers_rope_base_replaces_the_configs():
    cfg = Eagle3Config.from_json_dict(angelslim_config())
    assert cfg.rope_theta == 1e6  # the config alone
    cfg = Eagle3Config.from_json_dict(angelslim_config(), rope_theta=QWEN.rope_theta)
    assert cfg.rope_theta == 10000.0
    d = cfg.dim_per_head
    expected = 1.0 / (10000.0 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    torch.testing.assert_close(rope_inv_freq(cfg), expected)  # the frequencies the head rotates with


def test_the_loader_builds_the_head_with_the_trainers_base(tmp_path):
    from eagle_core.drafting.head3 import Eagle3Head, save_head3

    cfg = Eagle3Config.from_json_dict(angelslim_config())
    save_head3(Eagle3Head(cfg), str(tmp_path))
    with open(tmp_path / "config.json") as f:
        assert json.load(f)["rope_theta"] == 1e6
    assert load_head3(str(tmp_path)).config.rope_theta == 1e6
    head = load_head3(str(tmp_path), rope_theta=10000.0)
    assert head.config.rope_theta == 10000.0 and read_config3(str(tmp_path), rope_theta=10000.0).rope_theta == 10000.0


def test_each_pair_states_its_trainers_base_with_a_source():
    assert QWEN.rope_theta == LLAMA.rope_theta == VICUNA.rope_theta == 10000.0 and public_models.DEFAULT.rope_theta is None
    assert "llama_eagle3.py" in QWEN.rope_source and "traineagle3/cnets.py" in LLAMA.rope_source
    assert "cnets1.py" in VICUNA.rope_source and public_models.DEFAULT.rope_source
    assert "RoPE base used: 10000" in picker.describe(QWEN.key)


def test_the_vicuna_heads_config_gives_its_trainers_base():
    """eagle/train/vicuna_7B_config.json has no rope_theta: the EAGLE-1 head then rotates with 10000."""
    vicuna_head = {"architectures": ["LlamaForCausalLM"], "hidden_act": "silu", "hidden_size": 32,
                   "intermediate_size": 48, "max_position_embeddings": 2048, "model_type": "llama",
                   "num_attention_heads": 4, "num_hidden_layers": 1, "rms_norm_eps": 1e-6, "vocab_size": 40}
    assert HeadConfig.from_json_dict(vicuna_head).rope_theta == 10000.0
    assert any(s.startswith("SafeAILab/EAGLE eagle/train/vicuna_7B_config.json") for s in VICUNA.sources)
    assert not any("shared" in s for p in public_models.PAIRS for s in p.sources)


def test_a_sentencepiece_tokenizer_without_its_packages_is_named(tmp_path, monkeypatch):
    from eagle_core.target import model as tg

    (tmp_path / "tokenizer.model").write_bytes(b"\0")
    (tmp_path / "config.json").write_text("{}")
    monkeypatch.setattr(tg, "missing_packages", lambda mods: ["sentencepiece"])
    assert tokenizer_missing(str(tmp_path)) == ["sentencepiece"]
    with pytest.raises(ImportError, match="needs sentencepiece: pip install -r requirements-extra.txt"):
        load_target(str(tmp_path), device="cpu")
    (tmp_path / "tokenizer.json").write_text("{}")
    assert tokenizer_missing(str(tmp_path)) == []  # a fast tokenizer file needs neither


def test_the_picker_names_the_missing_packages_before_any_download(monkeypatch):
    from eagle_core.target import model as tg

    monkeypatch.setattr(public_models, "picker_shown", lambda env=None: True)
    monkeypatch.setattr(tg, "missing_packages", lambda mods: [p for p in mods if p == "sentencepiece"])
    monkeypatch.setattr(public_models, "gated_without_token", lambda p: pytest.fail("reached the hub"))
    outs = list(picker.load_pair(VICUNA.key, "en", progress=lambda *a, **k: None))
    assert len(outs) == 1 and "needs sentencepiece" in outs[0][1] and "requirements-extra.txt" in outs[0][1]
    assert "requirements-extra.txt" in picker.describe(VICUNA.key)
    assert os.path.exists(os.path.join(os.path.dirname(os.path.dirname(__file__)), "requirements-extra.txt"))
