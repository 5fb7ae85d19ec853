"""EAGLE-3: checkpoints in the official layout (strict), greedy eagle3 == vanilla on tiny random
targets, sampled eagle3 keeps the target's distribution, and the captured target layers."""
import json
import os

import pytest
import torch
from safetensors.torch import save_file

from conftest import CharTokenizer
from eagle_core import DecodeSettings, Engine, from_model, run_from_json, run_to_json
from eagle_core.drafting.shipped import load_default_head3, random_head3
from eagle_core.drafting.head3 import Eagle3Config, Eagle3Head, default_layers, load_head3, save_head3

# The official EAGLE-3 key layout (yuhuili/EAGLE3-* checkpoints; vLLM llama_eagle3.py maps
# midlayer.* -> layers.0.*, SGLang llama_eagle3.py keeps midlayer.*).
OFFICIAL_KEYS = {
    "fc.weight", "midlayer.self_attn.q_proj.weight", "midlayer.self_attn.k_proj.weight",
    "midlayer.self_attn.v_proj.weight", "midlayer.self_attn.o_proj.weight", "midlayer.mlp.gate_proj.weight",
    "midlayer.mlp.up_proj.weight", "midlayer.mlp.down_proj.weight", "midlayer.hidden_norm.weight",
    "midlayer.input_layernorm.weight", "midlayer.post_attention_layernorm.weight", "norm.weight",
    "lm_head.weight", "d2t", "t2d",
}


def tiny_target8(vocab: int = 24, seed: int = 0, layers: int = 8, ctx: int = 512):
    """Like conftest.tiny_target, with enough layers for (2, N//2, N-3) to be distinct."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=layers,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=ctx, bos_token_id=None,
                      eos_token_id=None, pad_token_id=0, tie_word_embeddings=False)
    model = AutoModelForCausalLM.from_config(cfg)
    with torch.no_grad():
        model.lm_head.weight.mul_(20.0)  # far from argmax ties, as in conftest
    model.generation_config.eos_token_id = None
    return from_model(model, CharTokenizer(vocab), name="tiny-llama8", eos_ids=(-1,))


def tiny_head3(target, seed: int = 0, draft_vocab=None) -> Eagle3Head:
    return random_head3(target, seed=seed, draft_vocab=draft_vocab)


def _official_sd(cfg: Eagle3Config, draft_ids, embed=False):
    """A random state dict written the way the official trainer lays it out (not via save_head3)."""
    H, I, d, nh, nkv = cfg.hidden_size, cfg.intermediate_size, cfg.dim_per_head, cfg.num_attention_heads, \
        cfg.num_key_value_heads
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g) * 0.02
    ids = torch.tensor(sorted(draft_ids))
    t2d = torch.zeros(cfg.vocab_size, dtype=torch.bool)
    t2d[ids] = True
    sd = {"fc.weight": r(H, 3 * H), "midlayer.self_attn.q_proj.weight": r(nh * d, 2 * H),
          "midlayer.self_attn.k_proj.weight": r(nkv * d, 2 * H), "midlayer.self_attn.v_proj.weight": r(nkv * d, 2 * H),
          "midlayer.self_attn.o_proj.weight": r(H, nh * d), "midlayer.mlp.gate_proj.weight": r(I, H),
          "midlayer.mlp.up_proj.weight": r(I, H), "midlayer.mlp.down_proj.weight": r(H, I),
          "midlayer.hidden_norm.weight": 1 + r(H), "midlayer.input_layernorm.weight": 1 + r(H),
          "midlayer.post_attention_layernorm.weight": 1 + r(H), "norm.weight": 1 + r(H),
          "lm_head.weight": r(len(ids), H), "d2t": ids - torch.arange(len(ids)), "t2d": t2d}
    if embed:
        sd["embed_tokens.weight"] = r(cfg.vocab_size, H)
    return sd


def _write_official(path, cfg: Eagle3Config, sd, fmt="safetensors", arch="LlamaForCausalLMEagle3", **extra):
    os.makedirs(path, exist_ok=True)
    c = {"architectures": [arch], "hidden_size": cfg.hidden_size, "intermediate_size": cfg.intermediate_size,
         "num_attention_heads": cfg.num_attention_heads, "num_key_value_heads": cfg.num_key_value_heads,
         "num_hidden_layers": 1, "rms_norm_eps": 1e-5, "vocab_size": cfg.vocab_size,
         "draft_vocab_size": cfg.draft_vocab_size, "max_position_embeddings": 2048, "rope_theta": 10000.0,
         "hidden_act": "silu", "model_type": "llama", "tie_word_embeddings": False, "torch_dtype": "float16", **extra}
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(c, f)
    if fmt == "safetensors":
        save_file({k: v.contiguous() for k, v in sd.items()}, os.path.join(path, "model.safetensors"))
    else:
        torch.save(sd, os.path.join(path, "pytorch_model.bin"))


DRAFT_IDS = [1, 2, 3, 5, 8, 13, 21, 22]


def _cfg(target):
    return Eagle3Config.for_target(target.config, draft_vocab_size=len(DRAFT_IDS))


# ---- the layers ----------------------------------------------------------------------------------
def test_default_layers():
    assert default_layers(30) == (2, 15, 27)  # SmolLM2-135M
    assert default_layers(32) == (2, 16, 29)  # Llama-3.1-8B, as vLLM / SGLang / the official code
    assert default_layers(8) == (2, 4, 5)
    with pytest.raises(ValueError, match="at least 7 layers"):
        default_layers(6)


@torch.inference_mode()
def test_captured_features_are_layer_inputs():
    """Target.forward_layers captures the input of layer i = HF hidden_states[i] (embedding = [0])."""
    target = tiny_target8()
    ids = torch.tensor([[3, 4, 5, 6, 7, 8]])
    last, captured = target.forward_layers(ids, (2, 4, 5))
    hs = target.model.model(input_ids=ids, output_hidden_states=True).hidden_states
    H = target.hidden_size
    for j, i in enumerate((2, 4, 5)):
        torch.testing.assert_close(captured[..., j * H:(j + 1) * H], hs[i])
    torch.testing.assert_close(last, target.forward(ids, target.new_cache()))


# ---- checkpoints ---------------------------------------------------------------------------------
def test_head_keys_are_the_official_layout():
    target = tiny_target8()
    assert set(Eagle3Head(_cfg(target)).state_dict()) == OFFICIAL_KEYS


@pytest.mark.parametrize("fmt, arch, embed", [("safetensors", "LlamaForCausalLMEagle3", False),
                                              ("bin", "LlamaForCausalLM", True)])
def test_load_official_layout(tmp_path, fmt, arch, embed):
    target = tiny_target8()
    cfg = _cfg(target)
    sd = _official_sd(cfg, DRAFT_IDS, embed=embed)
    _write_official(tmp_path, cfg, sd, fmt, arch)
    head = load_head3(str(tmp_path), target)
    for k, v in head.state_dict().items():
        assert torch.equal(v, sd[k].to(v.dtype)), k
    assert head.draft_ids().tolist() == DRAFT_IDS


def test_save_load_round_trip(tmp_path):
    target = tiny_target8()
    head = tiny_head3(target, draft_vocab=DRAFT_IDS)
    save_head3(head, str(tmp_path), dtype=torch.float32)
    cfg = json.load(open(tmp_path / "config.json"))
    assert cfg["architectures"] == ["LlamaForCausalLMEagle3"] and cfg["draft_vocab_size"] == len(DRAFT_IDS)
    assert cfg["tie_word_embeddings"] is False
    again = load_head3(str(tmp_path), target)
    e, h, pos = torch.randn(1, 5, 64), torch.randn(1, 5, 64), torch.arange(5)
    torch.testing.assert_close(head.logits(head(e, h, pos)), again.logits(again(e, h, pos)))
    assert torch.equal(head.d2t, again.d2t) and torch.equal(head.t2d, again.t2d)


def test_strict_missing_extra_shape_arch(tmp_path):
    target = tiny_target8()
    cfg = _cfg(target)
    sd = _official_sd(cfg, DRAFT_IDS)
    del sd["midlayer.hidden_norm.weight"]
    _write_official(tmp_path / "missing", cfg, sd)
    with pytest.raises(ValueError, match="missing keys.*hidden_norm"):
        load_head3(str(tmp_path / "missing"))
    sd = _official_sd(cfg, DRAFT_IDS)
    sd["fc.bias"] = torch.zeros(cfg.hidden_size)  # EAGLE-3's fc has no bias
    _write_official(tmp_path / "extra", cfg, sd)
    with pytest.raises(ValueError, match="unexpected keys.*fc.bias"):
        load_head3(str(tmp_path / "extra"))
    sd = _official_sd(cfg, DRAFT_IDS)
    sd["lm_head.weight"] = torch.zeros(len(DRAFT_IDS) + 1, cfg.hidden_size)
    _write_official(tmp_path / "shape", cfg, sd)
    with pytest.raises(ValueError, match="lm_head.weight.*shape"):
        load_head3(str(tmp_path / "shape"))
    _write_official(tmp_path / "arch", cfg, _official_sd(cfg, DRAFT_IDS), arch="MedusaModel")
    with pytest.raises(ValueError, match="architecture 'MedusaModel'"):
        load_head3(str(tmp_path / "arch"))
    sd = _official_sd(cfg, DRAFT_IDS)
    sd["t2d"][0] = True  # marks a token d2t never maps to
    _write_official(tmp_path / "t2d", cfg, sd)
    with pytest.raises(ValueError, match="t2d"):
        load_head3(str(tmp_path / "t2d"))


def test_target_mismatch_names_both_sizes(tmp_path):
    target = tiny_target8()
    cfg = _cfg(target)
    _write_official(tmp_path, cfg, _official_sd(cfg, DRAFT_IDS))
    wide = tiny_target8(vocab=30)
    with pytest.raises(ValueError, match="head vocabulary 24, target vocabulary 30"):
        load_head3(str(tmp_path), wide)
    from transformers import AutoModelForCausalLM, LlamaConfig

    other = from_model(AutoModelForCausalLM.from_config(LlamaConfig(
        vocab_size=24, hidden_size=32, intermediate_size=64, num_hidden_layers=8, num_attention_heads=4,
        num_key_value_heads=2)), CharTokenizer(24), eos_ids=(-1,))
    with pytest.raises(ValueError, match="head hidden size 64, target hidden size 32"):
        load_head3(str(tmp_path), other)
    with pytest.raises(ValueError, match="at least 7 layers"):
        Engine(tiny_target8(layers=4), head3=Eagle3Head(_cfg(target)))


# ---- decoding ------------------------------------------------------------------------------------
PROMPTS = ["a", "hello world", "the quick brown fox jumps over the lazy dog " * 3]
TREES3 = [dict(depth=4, tree_top_k=4, total_tokens=12), dict(depth=6, tree_top_k=8, total_tokens=40)]


@pytest.mark.parametrize("tree", range(len(TREES3)))
@pytest.mark.parametrize("seed, vocab", [(0, 24), (1, 8), (3, 8)])
def test_eagle3_greedy_equals_vanilla(tree, seed, vocab):
    """The oracle, as for EAGLE-2: with vocab 8 and 8-way branching long paths get accepted."""
    target = tiny_target8(vocab=vocab, seed=seed)
    engine = Engine(target, head3=tiny_head3(target, seed=seed + 10), head3_name="random")
    for prompt in PROMPTS:
        van = engine.run(prompt, DecodeSettings(method="vanilla", max_new_tokens=40, chat_template=False))
        e3 = engine.run(prompt, DecodeSettings(method="eagle3", max_new_tokens=40, chat_template=False, **TREES3[tree]))
        assert e3.summary.token_ids == van.summary.token_ids
        assert e3.summary.new_tokens == 40 and e3.summary.head_layers == (2, 4, 5)


def test_eagle3_accepts_and_uses_its_draft_vocab():
    target = tiny_target8(vocab=8, seed=2)
    engine = Engine(target, head3=tiny_head3(target, seed=0, draft_vocab=[0, 1, 2, 3, 4, 5, 7]))
    run = engine.run("hello", DecodeSettings(method="eagle3", max_new_tokens=60, chat_template=False, **TREES3[1]))
    assert max(c.accepted_drafts for c in run.cycles) >= 2 and run.summary.tau > 2.0
    assert {n.token_id for c in run.cycles for n in c.nodes[1:]} <= {0, 1, 2, 3, 4, 5, 7}  # never token 6
    again = run_from_json(run_to_json(run))
    assert again == run and again.summary.head_layers == (2, 4, 5)


def test_engine_methods_pick_their_head():
    from conftest import tiny_head

    target = tiny_target8(seed=4)
    engine = Engine(target, tiny_head(target), None, "eagle2-head", *load_default_head3(target))  # the default EAGLE-3 head
    s = dict(max_new_tokens=12, chat_template=False)
    r2 = engine.run("abc", DecodeSettings(method="eagle2", **s))
    r3 = engine.run("abc", DecodeSettings(method="eagle3", **s))
    assert r2.summary.head == "eagle2-head" and r2.summary.head_layers == ()
    assert "random (untrained)" in r3.summary.head and r3.summary.token_ids == r2.summary.token_ids
    only3 = Engine(target, head3=tiny_head3(target))  # an EAGLE-3 head only
    with pytest.raises(ValueError, match="needs an EAGLE-1/2 head"):
        only3.generate("abc", DecodeSettings(method="eagle2", **s))
    with pytest.raises(ValueError, match="needs an EAGLE-3 head"):
        Engine(target).generate("abc", DecodeSettings(method="eagle3", **s))


N_DRAWS = 1000


def test_eagle3_sampling_keeps_the_target_distribution():
    """Seeded statistical test (the approach of test_verify's): the 2nd generated token, which
    goes through draft + point-mass verification, must follow the target's own marginal
    p(x2) = sum_x1 p(x1) p(x2 | x1) at temperature 1."""
    target = tiny_target8(vocab=8, seed=5)
    with torch.no_grad():
        target.model.lm_head.weight.mul_(0.1)  # a spread-out distribution, so sampling matters
    engine = Engine(target, head3=tiny_head3(target, seed=6))
    prompt = "hi"
    ids = target.encode_prompt(prompt, False)
    with torch.no_grad():
        p1 = torch.softmax(target.model(torch.tensor([ids])).logits[0, -1].double(), -1)
        p2 = sum(p1[a] * torch.softmax(target.model(torch.tensor([ids + [a]])).logits[0, -1].double(), -1)
                 for a in range(8))
    counts = torch.zeros(8, dtype=torch.float64)
    accepted = 0
    for seed in range(N_DRAWS):
        run = engine.run(prompt, DecodeSettings(method="eagle3", max_new_tokens=3, temperature=1.0, seed=seed,
                                                depth=1, tree_top_k=3, total_tokens=3, chat_template=False))
        counts[run.summary.token_ids[1]] += 1
        accepted += run.cycles[0].accepted_drafts
    tv = 0.5 * float((counts / counts.sum() - p2).abs().sum())
    assert accepted > N_DRAWS // 4  # drafts really were accepted, not only bonus tokens
    assert tv < 0.06  # sampling noise with 1000 draws over 8 outcomes is ~0.025
