"""Public target / EAGLE-head pairs the app offers where torch sees a CUDA GPU (the model picker,
eagle_app/picker.py), each head's config checked against the code that trained or serves it. None
of them has been loaded here: this machine has no GPU and cannot reach the hub (docs/gpu.md).

What each config says, and what the engine does with it:
- aux-layer ids (EAGLE-3): with no `eagle_config` in the head's config, the official EAGLE code
  reads the hidden states ENTERING decoder layers 2, L//2 and L-3 (SafeAILab/EAGLE,
  eagle/model/modeling_llama_kv.py: `if idx==len(self.layers)-3 or idx==len(self.layers)//2 or
  idx==2: all_hidden_states += (hidden_states,)` before the layer runs) - the "inputs" convention,
  the engine's default (eagle_core/drafting/head3.py).
- draft vocabulary: `draft_vocab_size` with `d2t`/`t2d` in the weights, or the full vocabulary.
- `norm_before_residual`: absent means False in the official code and vLLM.
- `hidden_act`: silu for all three (anything else is refused by name).
- RoPE base: the one the head's TRAINER used, which is not always the config's `rope_theta`. The official
  EAGLE-3 trainer (SafeAILab/EAGLE eagle/traineagle3/cnets.py, `_init_rope`) and AngelSlim's
  (angelslim/compressor/speculative/train/models/draft/llama_eagle3.py, `_init_rope`) build
  `LlamaRotaryEmbedding(head_dim, max_position_embeddings)` without a base, so 10000, whatever the config
  says; the EAGLE-1 trainer (eagle/model/cnets1.py, used by eagle/train/main.py) takes `rope_theta` when the
  config has one, else 10000. `Pair.rope_theta` states it per pair and the loader uses it. For AngelSlim's
  Qwen3-1.7B head (config 1e6) a public measurement gave acceptance length 2.40 at base 10000 against 2.32
  at 1e6 (wejoncy/sfllm pull request 32; the same finding: sgl-project/SpecForge issue 265).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from eagle_core.environment import value

from . import zerogpu


@dataclass(frozen=True)
class Pair:
    key: str  # what the picker shows
    target: str  # hub id (or None: the embedded default)
    head: str | None  # an EAGLE-1/2 head (eagle2, eagle1, chain)
    head3: str | None  # an EAGLE-3 head (eagle3)
    layer_ids: str  # the EAGLE-3 head's aux-layer convention: "inputs" (official, vLLM) or "outputs"
    gated: bool  # the target needs an accepted licence and HF_TOKEN
    weights_gb: float  # the target's weights in the dtype it would load in (bfloat16 on an A100-class GPU)
    facts: str  # the head's config as checked
    sources: tuple[str, ...]  # where the facts come from
    rope_theta: float | None = None  # the RoPE base the head's trainer used (None: the config's)
    rope_source: str = ""  # why: the trainer's code that fixes it
    needs: tuple[str, ...] = ()  # optional packages (requirements-extra.txt) the target's tokenizer needs

    @property
    def methods(self) -> tuple[str, ...] | None:
        """The methods the pair can serve: vanilla, and those its heads draft for (None: the default's, all)."""
        if self.target is None:
            return None
        return ("vanilla",) + (("eagle2", "eagle1", "chain") if self.head else ()) + (("eagle3",) if self.head3 else ())


DEFAULT = Pair("SmolLM2-135M-Instruct (embedded) + the shipped heads", None, None, None, "inputs", False, 0.5,
               "trained by this project (docs/training.md)", ("assets/head-smollm2-135m", "assets/head3-smollm2-135m"),
               None, "this project's trainer takes the target's rope_theta (100000 for SmolLM2) and writes it in the head's config")

PAIRS = (
    DEFAULT,
    Pair("Llama-3.1-8B-Instruct + EAGLE-3 (yuhuili)", "meta-llama/Llama-3.1-8B-Instruct", None,
         "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "inputs", True, 16.1,
         "LlamaForCausalLM layout, 1 layer, hidden 4096, intermediate 14336, 32 heads / 8 KV heads, vocab 128256, "
         "draft_vocab_size 32000 (d2t/t2d), hidden_act silu, rms_norm_eps 1e-5, no norm_before_residual, no "
         "eagle_config: aux layers = inputs of 2, 16, 29 (L = 32)",
         ("SafeAILab/EAGLE eagle/traineagle3/config.json (the config the official trainer writes for this head)",
          "SafeAILab/EAGLE eagle/model/modeling_llama_kv.py (aux layers 2, L//2, L-3, inputs)"),
         10000.0, "SafeAILab/EAGLE eagle/traineagle3/cnets.py: the official EAGLE-3 trainer builds RoPE with base 10000 "
                  "whatever rope_theta the config says"),
    Pair("Qwen3-1.7B + EAGLE-3 (AngelSlim)", "Qwen/Qwen3-1.7B", None, "AngelSlim/Qwen3-1.7B_eagle3", "inputs", False,
         4.1,
         "Eagle3LlamaForCausalLM, 1 layer, hidden 2048, intermediate 6144, 16 heads / 8 KV heads, head_dim 128, "
         "vocab 151936, draft_vocab_size 32000, hidden_act silu, rms_norm_eps 1e-6, no norm_before_residual, no "
         "eagle_config: aux layers = inputs of 2, 14, 25 (L = 28) as AngelSlim's own PyTorch inference reads them. "
         "Its newer trainer's default differs at the high layer (outputs of 1, 13, 25): a head retrained with it "
         "would need the ids in its config. Its config says rope_theta 1000000; its trainer used 10000",
         ("Tencent/AngelSlim angelslim/compressor/speculative/train/configs/qwen3-1.7b-eagle3.json",
          "Tencent/AngelSlim angelslim/compressor/speculative/inference/models/eagle3/target/modeling_qwen3_kv.py",
          "Tencent/AngelSlim angelslim/compressor/speculative/train/models/target/target_model_wrapper.py"),
         10000.0, "Tencent/AngelSlim angelslim/compressor/speculative/train/models/draft/llama_eagle3.py: the trainer builds "
                  "RoPE with base 10000 whatever rope_theta (1e6) the config says; acceptance length 2.40 at 10000 against "
                  "2.32 at 1e6 (wejoncy/sfllm pull request 32)"),
    Pair("Vicuna-7B v1.3 + EAGLE (yuhuili)", "lmsys/vicuna-7b-v1.3", "yuhuili/EAGLE-Vicuna-7B-v1.3", None, "inputs", False,
         13.5,
         "EAGLE-1/2 head (used for EAGLE-2 trees too): LlamaForCausalLM layout, 1 layer, hidden 4096, intermediate "
         "11008, 32 heads, vocab 32000, hidden_act silu, rms_norm_eps 1e-6, no \"bias\" key (fc with bias); the "
         "target ships .bin weights only and no chat template (prompts go in as plain text)",
         ("SafeAILab/EAGLE eagle/train/vicuna_7B_config.json (the official trainer's config for this head)",
          "SafeAILab/EAGLE eagle/model/ea_model.py (the head layout: fc has a bias unless the config says \"bias\": false)"),
         10000.0, "SafeAILab/EAGLE eagle/model/cnets1.py, the EAGLE-1 trainer's model: the config's rope_theta if it has one, "
                  "else 10000; eagle/train/vicuna_7B_config.json has none (Vicuna-7B's own base is 10000 too)",
         ("sentencepiece", "protobuf")),
)
BY_KEY = {p.key: p for p in PAIRS}


def picker_shown(env=None) -> bool:
    """Whether the page offers the pairs. Only where torch sees a CUDA GPU (the pairs need 4-16 GB of it),
    never on ZeroGPU (a Space there loads its model at start-up: EAGLE_APP_MODEL and friends), and since a
    switch changes the model for every user of the app: on a machine of one's own by default, on a shared
    Hugging Face Space (SPACE_ID set) only if its operator sets EAGLE_APP_ALLOW_SWITCH=1 (=0 turns it off
    anywhere)."""
    if zerogpu.ZERO or not torch.cuda.is_available():
        return False
    allowed = value("EAGLE_APP_ALLOW_SWITCH", env)
    return allowed if allowed is not None else not value("SPACE_ID", env)


def missing_packages(pair: Pair) -> list[str]:
    """The optional packages the pair needs and this Python lacks (said before anything downloads)."""
    from eagle_core.target.model import SENTENCEPIECE_PACKAGES, missing_packages as absent

    return absent({p: SENTENCEPIECE_PACKAGES.get(p, p) for p in pair.needs})


def gated_without_token(pair: Pair) -> bool:
    """A gated target, no token to fetch it with, and not in the local cache: loading it would fail."""
    if not pair.gated or pair.target is None:
        return False
    from huggingface_hub import get_token, snapshot_download

    if get_token():
        return False
    try:
        snapshot_download(pair.target, allow_patterns=["config.json"], local_files_only=True)
        return False
    except Exception:  # not cached
        return True
