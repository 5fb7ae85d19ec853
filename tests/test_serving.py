"""Conformance of `export-serving` with what vLLM's and SGLang's EAGLE loaders expect.

The expectations below are data read from their model files (not run here: no GPU, no internet):
  vLLM   vllm/model_executor/models/llama_eagle.py   (EagleLlamaForCausalLM: fc Linear(2H, H, bias=False),
         layers.0.* without input_layernorm, embed_tokens skipped, unknown names skipped silently)
         vllm/model_executor/models/llama_eagle3.py  (Eagle3LlamaForCausalLM: midlayer. -> layers.0.,
         d2t -> draft_id_to_target_id, t2d skipped, qkv input 2H, fc 3H -> H without bias, norm, lm_head
         [draft_vocab_size, H]; draft_vocab_size defaults to vocab_size)
         vllm/transformers_utils/configs/eagle.py     (architectures: LlamaForCausalLM -> Eagle{arch} for
         "eagle", -> Eagle3{arch} for "eagle3"; LlamaForCausalLMEagle3 kept)
  SGLang python/sglang/srt/models/llama_eagle.py     (LlamaForCausalLMEagle: fc Linear(2H, H) with bias,
         lm_head tied to embed_tokens if tie_word_embeddings, hot_vocab_size rows otherwise)
         python/sglang/srt/models/llama_eagle3.py    (LlamaForCausalLMEagle3: fc bias = config.bias or False,
         midlayer.*, d2t -> hot_token_id, t2d skipped, unknown names ignored)
"""
import json
import os

import pytest
import torch
from safetensors.torch import load_file

from conftest import tiny_head, tiny_target
from eagle_core.drafting.head import save_head
from eagle_core.drafting.head3 import save_head3
from eagle_core.train.serving import TOKEN_MAP_FILE, export_serving
from test_head3 import tiny_head3, tiny_target8

H, I, NH, NKV, D = 64, 128, 4, 2, 16  # the tiny heads' sizes
LAYER = {"self_attn.q_proj.weight": (NH * D, H), "self_attn.k_proj.weight": (NKV * D, H),
         "self_attn.v_proj.weight": (NKV * D, H), "self_attn.o_proj.weight": (H, NH * D),
         "mlp.gate_proj.weight": (I, H), "mlp.up_proj.weight": (I, H), "mlp.down_proj.weight": (H, I),
         "post_attention_layernorm.weight": (H,)}
LAYER3 = {**LAYER, "self_attn.q_proj.weight": (NH * D, 2 * H), "self_attn.k_proj.weight": (NKV * D, 2 * H),
          "self_attn.v_proj.weight": (NKV * D, 2 * H), "hidden_norm.weight": (H,), "input_layernorm.weight": (H,)}

# What each loader's model holds after its own renaming of checkpoint names: (name -> shape),
# plus the architecture names it accepts and the config fields it reads.
EXPECT = {
    ("vllm", "eagle2"): dict(
        rename=lambda k: k,
        params={"fc.weight": (H, 2 * H), **{f"layers.0.{k}": s for k, s in LAYER.items()}},
        archs={"LlamaForCausalLM"}, config={"num_hidden_layers": 1, "hidden_size": H}),
    ("sglang", "eagle2"): dict(
        rename=lambda k: k,
        params={"fc.weight": (H, 2 * H), "fc.bias": (H,), **{f"layers.0.{k}": s for k, s in LAYER.items()}},
        archs={"LlamaForCausalLMEagle"}, config={"num_hidden_layers": 1, "tie_word_embeddings": False}),
    ("vllm", "eagle3"): dict(
        rename=lambda k: None if k == "t2d" else "draft_id_to_target_id" if k == "d2t" else k.replace("midlayer.", "layers.0."),
        params={"fc.weight": (H, 3 * H), "norm.weight": (H,), "lm_head.weight": (7, H), "draft_id_to_target_id": (7,),
                **{f"layers.0.{k}": s for k, s in LAYER3.items()}},
        archs={"LlamaForCausalLM", "LlamaForCausalLMEagle3"}, config={"draft_vocab_size": 7, "num_hidden_layers": 1}),
    ("sglang", "eagle3"): dict(
        rename=lambda k: None if k in ("t2d", "d2t") else k,  # d2t is read separately (hot_token_id)
        params={"fc.weight": (H, 3 * H), "norm.weight": (H,), "lm_head.weight": (7, H),
                **{f"midlayer.{k}": s for k, s in LAYER3.items()}},
        archs={"LlamaForCausalLMEagle3"}, config={"draft_vocab_size": 7, "tie_word_embeddings": False}),
}


def _head_dir(tmp_path, kind, bias=True):
    d = str(tmp_path / f"src-{kind}")
    if kind == "eagle2":
        target = tiny_target()
        save_head(tiny_head(target, bias=bias), d, draft_vocab=[1, 2, 3, 5, 8])
    else:
        target = tiny_target8()
        save_head3(tiny_head3(target, draft_vocab=[0, 1, 2, 3, 5, 8, 13]), d)
    return d


@pytest.mark.parametrize("engine, kind", list(EXPECT))
def test_export_matches_the_loader(tmp_path, engine, kind):
    out = str(tmp_path / f"{engine}-{kind}")
    info = export_serving(_head_dir(tmp_path, kind), out, engine, drop_fc_bias=True)
    exp = EXPECT[(engine, kind)]
    cfg = json.load(open(os.path.join(out, "config.json")))
    sd = load_file(os.path.join(out, "model.safetensors"))
    assert cfg["architectures"][0] in exp["archs"]
    for k, v in exp["config"].items():
        assert cfg[k] == v, k
    loaded = {exp["rename"](k): tuple(v.shape) for k, v in sd.items() if exp["rename"](k) is not None}
    assert loaded == exp["params"]  # every parameter filled, nothing silently dropped
    assert "embed_tokens.weight" not in sd  # both share the target's embedding
    assert all(v.dtype == torch.float16 for k, v in sd.items() if k not in ("d2t", "t2d"))
    if kind == "eagle3":
        ids = torch.arange(7) + sd["d2t"]  # the target ids the engines draft
        assert sd["d2t"].dtype == torch.int64 and ids.tolist() == [0, 1, 2, 3, 5, 8, 13]
        assert "eagle_config" not in cfg  # default layers: both engines use (2, N//2, N-3) themselves
    if engine == "sglang" and kind == "eagle2":
        hot = torch.load(os.path.join(out, TOKEN_MAP_FILE), weights_only=True)
        assert hot.tolist() == [1, 2, 3, 5, 8] and cfg["hot_vocab_size"] == 5
        assert "--speculative-token-map" in info["command"] and "--speculative-algorithm EAGLE " in info["command"]
    if engine == "vllm":
        assert f'"method": "{"eagle3" if kind == "eagle3" else "eagle"}"' in info["command"]
    assert os.path.exists(os.path.join(out, "SERVE.txt"))


def test_vllm_refuses_to_drop_a_bias_silently(tmp_path):
    with pytest.raises(ValueError, match="drop fc.bias silently"):
        export_serving(_head_dir(tmp_path, "eagle2"), str(tmp_path / "o"), "vllm")


def test_a_bad_draft_vocabulary_is_a_one_line_refusal(tmp_path):
    """SGLang's token map is written from draft_vocab.json: a repeated id there is refused, by the
    CLI in one line naming the file, instead of exporting a map that drafts the same token twice."""
    import argparse
    from eagle_core.train.serving import run_export_serving

    head = _head_dir(tmp_path, "eagle2")
    with open(os.path.join(head, "draft_vocab.json"), "w") as f:
        json.dump({"token_ids": [3, 3, 4]}, f)
    with pytest.raises(ValueError, match="distinct token ids"):
        export_serving(head, str(tmp_path / "o"), "sglang")
    args = argparse.Namespace(head=head, out=str(tmp_path / "o"), engine="sglang", target_layers=None,
                              model_id="m", drop_fc_bias=False)
    with pytest.raises(SystemExit, match="export-serving: .*draft_vocab.json"):
        run_export_serving(args)


def test_sglang_gets_a_zero_bias_for_a_bias_free_head(tmp_path):
    out = str(tmp_path / "o")
    export_serving(_head_dir(tmp_path, "eagle2", bias=False), out, "sglang")
    sd = load_file(os.path.join(out, "model.safetensors"))
    assert torch.equal(sd["fc.bias"], torch.zeros(H, dtype=torch.float16))


def test_explicit_layers_are_converted_per_engine(tmp_path):
    """vLLM's layer ids are layer INPUTS (captured before layer i), SGLang's layer OUTPUTS (it adds 1)."""
    target = tiny_target8(layers=10)
    head = tiny_head3(target)
    head.config.layers = (1, 4, 8)
    src = str(tmp_path / "src")
    save_head3(head, src)
    for engine, ids in (("vllm", [1, 4, 8]), ("sglang", [0, 3, 7])):
        out = str(tmp_path / engine)
        export_serving(src, out, engine, target_layers=10)
        assert json.load(open(os.path.join(out, "config.json")))["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == ids


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_a_two_layer_head_exports_both_layers(tmp_path, engine):
    """Both engines build num_hidden_layers EAGLE-1/2 decoder layers, every one after the first
    with an input_layernorm: the export carries the count and every layer's weights."""
    src = str(tmp_path / "src")
    save_head(tiny_head(tiny_target(), bias=False, layers=2), src)
    out = str(tmp_path / engine)
    export_serving(src, out, engine)
    cfg = json.load(open(os.path.join(out, "config.json")))
    sd = load_file(os.path.join(out, "model.safetensors"))
    assert cfg["num_hidden_layers"] == 2
    expect = {"fc.weight": (H, 2 * H), **({"fc.bias": (H,)} if engine == "sglang" else {}),
              **{f"layers.{i}.{k}": s for i in (0, 1) for k, s in LAYER.items()},
              "layers.1.input_layernorm.weight": (H,)}
    assert {k: tuple(v.shape) for k, v in sd.items()} == expect
