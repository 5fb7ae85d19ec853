"""Heads as their publishers write them, on tiny random models built here (no downloads):
full-vocabulary EAGLE-3 heads without d2t / t2d, `norm_before_residual`, `hidden_act`, the two
conventions of aux-layer ids, Qwen3 targets, and heads named by hub id."""
from __future__ import annotations


import pytest
import torch

from conftest import CharTokenizer, tiny_head
from eagle_core import DecodeSettings, Engine, from_model
from eagle_core.drafting.head3 import Eagle3Config, Eagle3Head, load_head3, read_config3
from eagle_core.target.hub import local_dir
from test_head3 import _official_sd, _write_official, tiny_target8

WIDE = dict(depth=4, tree_top_k=4, total_tokens=12)
PROMPTS = ["a", "hello world"]


def greedy(engine, prompt, method):
    tree = WIDE if method != "vanilla" else {}
    return engine.run(prompt, DecodeSettings(method=method, max_new_tokens=30, chat_template=False, **tree)).summary.token_ids


def test_full_vocabulary_eagle3_head_without_d2t_t2d_loads_and_is_lossless(tmp_path):
    """The official trainer writes no d2t / t2d when the draft vocabulary is the whole vocabulary."""
    target = tiny_target8(vocab=24, seed=1)
    cfg = Eagle3Config.for_target(target.config)  # draft_vocab_size = vocab_size
    sd = _official_sd(cfg, range(cfg.vocab_size))
    del sd["d2t"], sd["t2d"]
    _write_official(str(tmp_path / "full"), cfg, sd)
    head = load_head3(str(tmp_path / "full"), target)
    assert head.t2d.all() and (head.draft_ids() == torch.arange(24)).all()
    engine = Engine(target, head3=head, head3_name="full")
    for prompt in PROMPTS:
        assert greedy(engine, prompt, "eagle3") == greedy(engine, prompt, "vanilla")
    reduced = Eagle3Config.for_target(target.config, draft_vocab_size=8)  # a reduced one still needs them
    sd = _official_sd(reduced, range(8))
    del sd["d2t"], sd["t2d"]
    _write_official(str(tmp_path / "reduced"), reduced, sd)
    with pytest.raises(ValueError, match="missing keys"):
        load_head3(str(tmp_path / "reduced"), target)


def test_norm_before_residual_is_honoured(tmp_path):
    target = tiny_target8(vocab=24, seed=2)
    cfg = Eagle3Config.for_target(target.config)
    sd = _official_sd(cfg, range(cfg.vocab_size))
    _write_official(str(tmp_path / "nbr"), cfg, sd, norm_before_residual=True)
    assert read_config3(str(tmp_path / "nbr")).norm_before_residual
    assert Eagle3Config.from_json_dict(read_config3(str(tmp_path / "nbr")).to_json_dict()).norm_before_residual
    before, after = load_head3(str(tmp_path / "nbr"), target), Eagle3Head(cfg)
    after.load_state_dict(before.state_dict())
    emb, h = torch.randn(1, 3, 64), torch.randn(1, 3, 64) * 3
    pos = torch.arange(3)
    with torch.no_grad():
        assert not torch.allclose(before(emb, h, pos), after(emb, h, pos), atol=1e-4)  # the flag is not ignored
        before.midlayer.hidden_norm.weight.fill_(1.0)
        after.midlayer.hidden_norm.weight.fill_(1.0)
        unit = h / h.pow(2).mean(-1, keepdim=True).add(cfg.rms_norm_eps).sqrt()  # hidden_norm(unit) == unit
        torch.testing.assert_close(before(emb, unit, pos), after(emb, unit, pos), atol=1e-5, rtol=1e-5)
    engine = Engine(target, head3=load_head3(str(tmp_path / "nbr"), target), head3_name="nbr")
    assert greedy(engine, "hello world", "eagle3") == greedy(engine, "hello world", "vanilla")


def test_an_activation_other_than_silu_is_refused(tmp_path):
    target = tiny_target8(vocab=24, seed=3)
    cfg = Eagle3Config.for_target(target.config)
    _write_official(str(tmp_path / "gelu"), cfg, _official_sd(cfg, range(24)), hidden_act="gelu")
    with pytest.raises(ValueError, match="hidden_act 'gelu'"):
        load_head3(str(tmp_path / "gelu"), target)


def test_aux_layer_ids_in_either_convention(tmp_path):
    """vLLM and the official code count the layers whose INPUT is read; SGLang and SpecForge the
    layers whose OUTPUT is read. The same three layers, written both ways, load the same."""
    target = tiny_target8(vocab=24, seed=4)
    cfg = Eagle3Config.for_target(target.config)
    sd = _official_sd(cfg, range(24))
    _write_official(str(tmp_path / "vllm"), cfg, sd, eagle_config={"eagle_aux_hidden_state_layer_ids": [2, 4, 5]})
    _write_official(str(tmp_path / "sglang"), cfg, sd, eagle_config={"eagle_aux_hidden_state_layer_ids": [1, 3, 4]})
    assert read_config3(str(tmp_path / "vllm")).layers == (2, 4, 5)
    assert read_config3(str(tmp_path / "sglang"), layer_ids="outputs").layers == (2, 4, 5)
    assert read_config3(str(tmp_path / "sglang")).layers == (1, 3, 4)  # read as inputs it is another head
    with pytest.raises(ValueError, match="'inputs'"):
        read_config3(str(tmp_path / "vllm"), layer_ids="hidden_states")


def tiny_qwen3(vocab: int = 24, seed: int = 0, layers: int = 8):
    from transformers import AutoModelForCausalLM, Qwen3Config

    torch.manual_seed(seed)
    cfg = Qwen3Config(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
                      bos_token_id=None, eos_token_id=None, pad_token_id=0, tie_word_embeddings=False)
    model = AutoModelForCausalLM.from_config(cfg)
    with torch.no_grad():
        model.lm_head.weight.mul_(20.0)
    model.generation_config.eos_token_id = None
    return from_model(model, CharTokenizer(vocab), name="tiny-qwen3", eos_ids=(-1,))


@pytest.mark.parametrize("seed, vocab", [(0, 24), (1, 8)])
def test_qwen3_targets_decode_losslessly(seed, vocab):
    from eagle_core.drafting.shipped import random_head3
    from eagle_core.target import SUPPORTED_TYPES

    assert "qwen3" in SUPPORTED_TYPES
    target = tiny_qwen3(vocab, seed)
    engine = Engine(target, tiny_head(target, seed=seed + 5), head3=random_head3(target, seed=seed + 6), head3_name="r")
    for prompt in PROMPTS:
        van = greedy(engine, prompt, "vanilla")
        assert greedy(engine, prompt, "eagle2") == van and greedy(engine, prompt, "eagle3") == van


def test_a_head_named_by_hub_id(tmp_path):
    calls = []

    def download(repo, allow_patterns=None, **kw):
        calls.append((repo, tuple(allow_patterns)))
        return str(tmp_path)

    assert local_dir(str(tmp_path)) == str(tmp_path) and not calls  # a directory is used as it is
    assert local_dir("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", download=download) == str(tmp_path)
    assert calls[0][0] == "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B" and "*.safetensors" in calls[0][1]
    with pytest.raises(FileNotFoundError, match="not a hub id"):
        local_dir("no/such/dir/here")

    class GatedRepoError(Exception):
        pass

    def gated(repo, allow_patterns=None, **kw):
        raise GatedRepoError("401 Client Error")

    def offline(repo, allow_patterns=None, **kw):
        raise OSError("Temporary failure in name resolution")

    with pytest.raises(ValueError, match="HF_TOKEN"):
        local_dir("meta-llama/Llama-3.1-8B-Instruct", download=gated)
    with pytest.raises(ValueError, match="no network"):
        local_dir("yuhuili/EAGLE-LLaMA3-Instruct-8B", download=offline)
