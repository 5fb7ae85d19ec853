"""Export a head for serving at scale: the directory layout vLLM and SGLang load for EAGLE-1/2 and EAGLE-3.

    python -m eagle_core.train export-serving --head assets/head-smollm2-135m --for vllm --out serve/vllm-eagle2

What their loaders do with a checkpoint, read from their model files (facts this module relies on):

vLLM, EAGLE-1/2 (vllm/model_executor/models/llama_eagle.py, EagleLlamaForCausalLM): config
  "architectures": ["LlamaForCausalLM"] (vLLM's EAGLEConfig renames it EagleLlamaForCausalLM for
  method "eagle"); keys fc.weight, layers.0.* (and layers.1.*, .. for a deeper head: it builds
  num_hidden_layers decoder layers, all but the first with an input_layernorm); `fc` is
  Linear(2H, H, bias=False) and load_weights skips names the model lacks, so an fc.bias is
  DROPPED SILENTLY; embed_tokens is skipped (shared with the target); the target's LM head is
  used over the full vocabulary (no reduced draft vocab).
vLLM, EAGLE-3 (llama_eagle3.py, Eagle3LlamaForCausalLM): "LlamaForCausalLM" or
  "LlamaForCausalLMEagle3"; `draft_vocab_size` (absent = vocab_size); midlayer.* -> layers.0.*;
  d2t -> draft_id_to_target_id; t2d dropped; embed_tokens optional; fc has no bias (an fc.bias is
  an unknown parameter: an error); optional target layer ids "eagle_aux_hidden_state_layer_ids"
  (top level or in "eagle_config") are the layers whose INPUT is captured (default (2, N//2, N-3)).
SGLang, EAGLE-1/2 (python/sglang/srt/models/llama_eagle.py, LlamaForCausalLMEagle): the
  architecture must be "LlamaForCausalLMEagle" (its model config rewrites a draft's
  "LlamaForCausalLM" to LlamaForCausalLMEagle3); num_hidden_layers layers as in vLLM; `fc` is
  Linear(2H, H) WITH a bias, and missing weights are not an error, so a bias-free head gets an
  explicit zero fc.bias here; lm_head has `hot_vocab_size` rows when a token map is given
  (`--speculative-token-map`, a torch file of target ids: FR-Spec, our reduced draft vocabulary);
  tie_word_embeddings true would tie lm_head to embed_tokens, so it is written false.
SGLang, EAGLE-3 (llama_eagle3.py, LlamaForCausalLMEagle3): architecture "LlamaForCausalLMEagle3";
  fc bias from config "bias" (default false); d2t -> hot_token_id, t2d skipped, unknown names
  ignored silently; tie_word_embeddings must be false; `eagle_config.eagle_aux_hidden_state_layer_ids`
  are layer OUTPUT ids (SGLang adds 1), i.e. ours minus one; written only for non-default layers.
"""
from __future__ import annotations

import json
import os

import torch

from ..drafting.head import DRAFT_VOCAB_FILE, read_draft_vocab, read_state_dict
from ..drafting.head3 import LAYER_IDS_KEY, default_layers, is_eagle3_dir, read_config3

ENGINES = ("vllm", "sglang")
TOKEN_MAP_FILE = "hot_token_map.pt"  # SGLang --speculative-token-map


def _save(sd: dict, cfg: dict, out: str):
    from safetensors.torch import save_file

    os.makedirs(out, exist_ok=True)
    save_file({k: v.contiguous() for k, v in sd.items()}, os.path.join(out, "model.safetensors"))
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


def serve_command(engine: str, eagle3: bool, out: str, model_id: str, token_map: bool = False) -> str:
    if engine == "vllm":
        spec = {"method": "eagle3" if eagle3 else "eagle", "model": out, "num_speculative_tokens": 3}
        return f"vllm serve {model_id} --speculative-config '{json.dumps(spec)}'"
    cmd = (f"python -m sglang.launch_server --model-path {model_id} --speculative-algorithm "
           f"{'EAGLE3' if eagle3 else 'EAGLE'} --speculative-draft-model-path {out} --speculative-num-steps 3 "
           f"--speculative-eagle-topk 4 --speculative-num-draft-tokens 8")
    return cmd + (f" --speculative-token-map {os.path.join(out, TOKEN_MAP_FILE)}" if token_map else "")


def export_serving(head_dir: str, out: str, engine: str, target_layers: int | None = None,
                   model_id: str = "HuggingFaceTB/SmolLM2-135M-Instruct", drop_fc_bias: bool = False) -> dict:
    """Write `out` for `engine`; returns a summary (kind, files, dropped keys, serve command).
    `target_layers`: the target's layer count (needed only for an EAGLE-3 head with explicit layers)."""
    if engine not in ENGINES:
        raise ValueError(f"unknown serving engine {engine!r}; choose {' or '.join(ENGINES)}")
    with open(os.path.join(head_dir, "config.json")) as f:
        src_cfg = json.load(f)
    sd = read_state_dict(head_dir)
    sd.pop("embed_tokens.weight", None)  # both engines share the target's embedding
    eagle3 = is_eagle3_dir(head_dir)
    return (_export3 if eagle3 else _export12)(src_cfg, sd, head_dir, out, engine, target_layers, model_id,
                                                drop_fc_bias)


def _common_cfg(src: dict) -> dict:
    keep = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "vocab_size",
            "rms_norm_eps", "max_position_embeddings", "rope_theta", "rope_scaling", "head_dim")
    cfg = {k: src[k] for k in keep if k in src}
    cfg.update(model_type="llama", hidden_act="silu", num_hidden_layers=int(src.get("num_hidden_layers", 1)),
               tie_word_embeddings=False, torch_dtype="float16")
    return cfg


def _export12(src, sd, head_dir, out, engine, target_layers, model_id, drop_fc_bias):
    cfg, dropped, token_map = _common_cfg(src), [], False
    has_bias = "fc.bias" in sd
    if engine == "vllm":
        if has_bias and not drop_fc_bias:
            raise ValueError("this head's fc has a bias and vLLM's EAGLE-1/2 model (llama_eagle.py) has none: it would "
                             "drop fc.bias silently and draft worse (still lossless). Pass --drop-fc-bias to export anyway")
        if has_bias:
            del sd["fc.bias"]
            dropped.append("fc.bias")
        cfg.update(architectures=["LlamaForCausalLM"], bias=False)
    else:
        if not has_bias:  # SGLang's fc always has a bias and would leave a missing one uninitialised
            sd["fc.bias"] = torch.zeros(sd["fc.weight"].shape[0], dtype=sd["fc.weight"].dtype)
        cfg.update(architectures=["LlamaForCausalLMEagle"], bias=True)
        ids = read_draft_vocab(head_dir, int(cfg["vocab_size"]))
        if ids is not None:
            os.makedirs(out, exist_ok=True)
            torch.save(torch.tensor(ids, dtype=torch.int64), os.path.join(out, TOKEN_MAP_FILE))
            cfg["hot_vocab_size"] = len(ids)
            token_map = True
    if engine == "vllm" and os.path.exists(os.path.join(head_dir, DRAFT_VOCAB_FILE)):
        dropped.append(DRAFT_VOCAB_FILE + " (vLLM drafts over the full vocabulary)")
    sd = {k: v.to(torch.float16) for k, v in sd.items()}
    _save(sd, cfg, out)
    return _summary("eagle2", engine, out, sd, dropped, serve_command(engine, False, out, model_id, token_map))


def _export3(src, sd, head_dir, out, engine, target_layers, model_id, drop_fc_bias):
    c3 = read_config3(head_dir)
    cfg = _common_cfg(src)
    cfg.update(draft_vocab_size=c3.draft_vocab_size,
               architectures=["LlamaForCausalLMEagle3"])  # vLLM accepts it as is; SGLang requires it
    if c3.target_hidden_size not in (None, c3.hidden_size):
        cfg["target_hidden_size"] = c3.target_hidden_size
    if c3.layers:
        if target_layers is None:
            raise ValueError("this EAGLE-3 head reads explicit target layers: pass the target's layer count")
        if tuple(c3.layers) != default_layers(target_layers):
            ids = list(c3.layers) if engine == "vllm" else [i - 1 for i in c3.layers]  # SGLang: output ids
            cfg["eagle_config"] = {LAYER_IDS_KEY: ids}
    if engine == "sglang":
        cfg["bias"] = False
    sd = {k: (v.to(torch.float16) if v.is_floating_point() else v) for k, v in sd.items()}
    _save(sd, cfg, out)
    return _summary("eagle3", engine, out, sd, ["t2d is kept but unused by both engines"],
                    serve_command(engine, True, out, model_id))


def _summary(kind, engine, out, sd, dropped, command):
    with open(os.path.join(out, "SERVE.txt"), "w") as f:
        f.write(f"# {kind} head for {engine} (written by eagle_core.train export-serving; not run here)\n{command}\n")
    return {"kind": kind, "engine": engine, "out": out, "keys": sorted(sd), "dropped": [d for d in dropped if d],
            "command": command}


def run_export_serving(args):
    try:
        info = export_serving(args.head, args.out, args.engine, args.target_layers, args.model_id, args.drop_fc_bias)
    except (ValueError, FileNotFoundError) as e:  # a head that cannot be exported: one line, not a traceback
        raise SystemExit(f"export-serving: {e}") from None
    print(json.dumps({k: v for k, v in info.items() if k != "keys"}, indent=2))
