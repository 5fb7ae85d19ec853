"""The EAGLE-3 head (Li et al. 2025, arXiv:2503.01840), and its checkpoint format.

What changes from EAGLE-1/2 (eagle_core/drafting/head.py):
  - input features: not the target's last hidden state but the residual stream ENTERING three
    target layers, low / middle / high: layers (2, N//2, N-3) of an N-layer target (N = 30 for
    SmolLM2: layers 2, 15, 27). In Hugging Face's `output_hidden_states` numbering, where
    hidden_states[0] is the embedding output, these are hidden_states[2], [N//2], [N-3]. The
    official code (eagle/model/modeling_llama_kv.py: `if idx == len(self.layers)-3 or
    idx == len(self.layers)//2 or idx == 2: all_hidden_states += (hidden_states,)` before layer
    idx runs), vLLM (`get_eagle3_aux_hidden_state_layers` -> (2, n//2, n-3), captured as
    hidden + residual before layer idx) and SGLang (`layers_to_capture = [2, n//2, n-3]`) agree.
  - `fc` (3H -> H, no bias) fuses them; the decoder layer's attention reads
    cat(input_layernorm(embed(x)), hidden_norm(h)) (2H), the residual is h itself (the fc output,
    before hidden_norm: vLLM's default `_norm_after_residual`, SGLang's `residual = hidden_states`).
  - a final `norm` and the head's OWN `lm_head` over a reduced draft vocabulary; `d2t` maps a
    draft id to a target id (target = draft + d2t[draft]), `t2d` marks the target ids drafted.
  - the output BEFORE the final norm is the feature the next draft step reads (vLLM returns
    `hidden_prenorm`, SGLang `hidden_states_to_aux`, the official trainer `hidden_states =
    hidden_states_out` before `self.norm`); logits come from lm_head(norm(h)).

    h   = fc(cat(a_2, a_{N//2}, a_{N-3}))         # (n, 3H) -> (n, H); later steps: h = own output
    x   = cat(input_layernorm(embed(x_{t+1})), hidden_norm(h))   # (n, 2H)
    h   = h + o_proj(attn(q(x), k(x), v(x)))
    h   = h + mlp(post_attention_layernorm(h))   # -> next step's input feature
    q   = softmax(lm_head(norm(h)))              # over the draft vocabulary

Checkpoints: the official layout (config.json with `draft_vocab_size`, model.safetensors or
pytorch_model.bin; keys fc.weight, midlayer.*, norm.weight, lm_head.weight, d2t, t2d; an
`embed_tokens.weight` copy of the target's is allowed and ignored), loaded strictly.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields

import torch
from torch import nn

from .head import check_fits, load_state_strict, read_config_json, read_state_dict, save_head
from .head_layers import (AttentionBlock, HeadBase, HeadCache, LayerCache, RMSNorm, _rope_theta, apply_rope,
                         rope_inv_freq, unroll)

# The names EAGLE-3 heads carry: SGLang's (written here: SGLang needs it, vLLM accepts it), the official
# trainer's (eagle/traineagle3/config.json), AngelSlim's trainer's and the one vLLM's EAGLEConfig writes
# (vllm/transformers_utils/configs/eagle.py: "Eagle3" + the target's architecture). docs/gpu.md.
ARCHITECTURES = ("LlamaForCausalLMEagle3", "LlamaForCausalLM", "Eagle3LlamaForCausalLM")
LAYER_IDS_KEY = "eagle_aux_hidden_state_layer_ids"  # vLLM's name, inside "eagle_config"


def default_layers(num_target_layers: int) -> tuple[int, int, int]:
    """The target layers whose INPUT feeds the head: (2, N//2, N-3), distinct only for N >= 7."""
    n = num_target_layers
    layers = (2, n // 2, n - 3)
    if len(set(layers)) != 3:
        raise ValueError(f"EAGLE-3 reads target layers (2, N//2, N-3); a {n}-layer target gives {layers}, "
                         "not three distinct layers (it needs at least 7 layers)")
    return layers


@dataclass
class Eagle3Config:
    hidden_size: int  # H of the head (= the target's hidden size for every published head)
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int  # the target's vocabulary (size of t2d)
    draft_vocab_size: int  # rows of the head's own lm_head (size of d2t)
    rms_norm_eps: float = 1e-5
    max_position_embeddings: int = 2048
    rope_theta: float = 10000.0
    rope_scaling: dict | None = None
    head_dim: int | None = None
    target_hidden_size: int | None = None  # None: = hidden_size
    layers: tuple[int, ...] | None = None  # target layers read (inputs of); None: (2, N//2, N-3) of the target
    norm_before_residual: bool = False  # True: the residual is hidden_norm(h), not h (vLLM's flag)

    @property
    def dim_per_head(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def feature_size(self) -> int:
        return (self.target_hidden_size or self.hidden_size) * (len(self.layers) if self.layers else 3)

    def layers_for(self, num_target_layers: int) -> tuple[int, ...]:
        layers = tuple(self.layers) if self.layers else default_layers(num_target_layers)
        if any(not 0 <= i < num_target_layers for i in layers):
            raise ValueError(f"head reads target layers {layers}; the target has {num_target_layers} layers")
        return layers

    def to_json_dict(self) -> dict:
        d = {k: v for k, v in asdict(self).items() if k not in ("layers", "head_dim", "target_hidden_size")}
        if self.head_dim is not None:
            d["head_dim"] = self.head_dim
        if self.target_hidden_size not in (None, self.hidden_size):
            d["target_hidden_size"] = self.target_hidden_size
        if self.layers:
            d["eagle_config"] = {LAYER_IDS_KEY: list(self.layers)}
        if not self.norm_before_residual:
            d.pop("norm_before_residual")
        d.update(num_hidden_layers=1, hidden_act="silu", architectures=[ARCHITECTURES[0]], model_type="llama",
                 tie_word_embeddings=False)  # SGLang ties lm_head to embed_tokens if this is true
        return d

    @classmethod
    def from_json_dict(cls, d: dict, layer_ids: str = "inputs", rope_theta: float | None = None) -> "Eagle3Config":
        """`layer_ids`: what the config's eagle_aux_hidden_state_layer_ids count. "inputs" (the
        official code and vLLM): the layers whose INPUT is read, as here. "outputs" (SGLang and
        SpecForge store the ids of the layers whose OUTPUT is read, and add one when capturing):
        converted to inputs by adding one. `rope_theta`: the RoPE base the head's trainer used, where
        it differs from the config's (the official and AngelSlim EAGLE-3 trainers build RoPE with base
        10000 whatever `rope_theta` says: eagle_app/public_models.py); None: the config's (absent: 10000)."""
        if layer_ids not in ("inputs", "outputs"):
            raise ValueError(f"layer_ids must be 'inputs' (official, vLLM) or 'outputs' (SGLang, SpecForge), not {layer_ids!r}")
        act = d.get("hidden_act", "silu")
        if act != "silu":
            raise ValueError(f"EAGLE-3 head with hidden_act {act!r}: only silu (SwiGLU, every published head) is built here")
        arch = (d.get("architectures") or [None])[0]
        if arch not in ARCHITECTURES:
            raise ValueError(f"not an EAGLE-3 head: architecture {arch!r}, expected one of {', '.join(ARCHITECTURES)}")
        if d.get("num_hidden_layers", 1) != 1:
            raise ValueError(f"an EAGLE-3 head has one decoder layer here; config says {d['num_hidden_layers']}")
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names and k != "layers"}
        kw.setdefault("num_key_value_heads", d.get("num_attention_heads"))
        if kw.get("draft_vocab_size") is None and "vocab_size" in kw:  # vLLM / SGLang: absent = full vocabulary
            kw["draft_vocab_size"] = kw["vocab_size"]
        missing = {"hidden_size", "intermediate_size", "num_attention_heads", "vocab_size"} - kw.keys()
        if missing:
            raise ValueError(f"EAGLE-3 config.json lacks {sorted(missing)}")
        ids = d.get(LAYER_IDS_KEY) or (d.get("eagle_config") or {}).get(LAYER_IDS_KEY)
        shift = 1 if layer_ids == "outputs" else 0
        if rope_theta is not None:
            kw["rope_theta"] = float(rope_theta)
        return cls(**kw, layers=tuple(int(i) + shift for i in ids) if ids else None)

    @classmethod
    def for_target(cls, target_config, draft_vocab_size: int | None = None, **overrides) -> "Eagle3Config":
        c = target_config
        kw = dict(hidden_size=c.hidden_size, intermediate_size=c.intermediate_size,
                  num_attention_heads=c.num_attention_heads,
                  num_key_value_heads=getattr(c, "num_key_value_heads", None) or c.num_attention_heads,
                  vocab_size=c.vocab_size, draft_vocab_size=draft_vocab_size or c.vocab_size,
                  rms_norm_eps=getattr(c, "rms_norm_eps", 1e-5), max_position_embeddings=c.max_position_embeddings,
                  rope_theta=_rope_theta(c), head_dim=getattr(c, "head_dim", None))
        kw.update(overrides)
        return cls(**kw)


class Eagle3Layer(AttentionBlock):
    """The `midlayer`: a Llama decoder layer whose q/k/v read cat(norm(embed), norm(h)) (2H)."""

    def __init__(self, cfg: Eagle3Config):
        super().__init__()
        H, d = cfg.hidden_size, cfg.dim_per_head
        self.n_heads, self.n_kv, self.d = cfg.num_attention_heads, cfg.num_key_value_heads, d
        self.self_attn = nn.Module()
        self.self_attn.q_proj = nn.Linear(2 * H, self.n_heads * d, bias=False)
        self.self_attn.k_proj = nn.Linear(2 * H, self.n_kv * d, bias=False)
        self.self_attn.v_proj = nn.Linear(2 * H, self.n_kv * d, bias=False)
        self.self_attn.o_proj = nn.Linear(self.n_heads * d, H, bias=False)
        self.mlp = nn.Module()
        self.mlp.gate_proj = nn.Linear(H, cfg.intermediate_size, bias=False)
        self.mlp.up_proj = nn.Linear(H, cfg.intermediate_size, bias=False)
        self.mlp.down_proj = nn.Linear(cfg.intermediate_size, H, bias=False)
        self.hidden_norm = RMSNorm(H, cfg.rms_norm_eps)
        self.input_layernorm = RMSNorm(H, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(H, cfg.rms_norm_eps)
        self.norm_before_residual = cfg.norm_before_residual

    def qkv(self, emb, h, cos, sin):
        B, n, _ = h.shape
        a = self.self_attn
        x = torch.cat((self.input_layernorm(emb), self.hidden_norm(h)), dim=-1)  # (B, n, 2H)
        q = a.q_proj(x).view(B, n, self.n_heads, self.d).transpose(1, 2)  # (B, nh, n, d)
        k = a.k_proj(x).view(B, n, self.n_kv, self.d).transpose(1, 2)  # (B, nkv, n, d)
        v = a.v_proj(x).view(B, n, self.n_kv, self.d).transpose(1, 2)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

    def residual(self, h):
        """What the attention's output is added to: h itself (the fc output / previous feature),
        or with `norm_before_residual` the normed h (as vLLM builds such heads)."""
        return self.hidden_norm(h) if self.norm_before_residual else h

    def forward(self, emb, h, cos, sin, mask, cache: LayerCache | None):
        return self.finish(self.residual(h), self.attend(*self.qkv(emb, h, cos, sin), mask, cache))


class Eagle3Head(HeadBase):
    def __init__(self, cfg: Eagle3Config):
        super().__init__()
        self.config = cfg
        self.fc = nn.Linear(cfg.feature_size, cfg.hidden_size, bias=False)
        self.midlayer = Eagle3Layer(cfg)
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.draft_vocab_size, bias=False)
        self.register_buffer("d2t", torch.zeros(cfg.draft_vocab_size, dtype=torch.long))
        self.register_buffer("t2d", torch.zeros(cfg.vocab_size, dtype=torch.bool))
        if cfg.draft_vocab_size == cfg.vocab_size:
            self.t2d.fill_(True)
        self._inv_freq = rope_inv_freq(cfg)  # float32, a plain attribute (as in head.EagleHead)

    # -- the draft vocabulary ------------------------------------------------------------------
    def draft_ids(self) -> torch.Tensor:
        """(N,) the target token id of each draft id."""
        return torch.arange(self.config.draft_vocab_size, device=self.d2t.device) + self.d2t

    def set_draft_vocab(self, token_ids) -> None:
        """Fill d2t / t2d from sorted distinct target ids (the official trainer's convention)."""
        ids = torch.tensor(sorted(set(int(t) for t in token_ids)), dtype=torch.long)
        if len(ids) != self.config.draft_vocab_size:
            raise ValueError(f"{len(ids)} distinct draft tokens, config says draft_vocab_size "
                             f"{self.config.draft_vocab_size}")
        self.d2t.copy_(ids - torch.arange(len(ids)))
        self.t2d.zero_()
        self.t2d[ids.to(self.t2d.device)] = True

    # -- compute -------------------------------------------------------------------------------
    def new_cache(self, max_len: int) -> HeadCache:
        p = self.fc.weight
        return HeadCache(self.config, max_len, p.device, p.dtype)

    def fuse(self, target_feats: torch.Tensor) -> torch.Tensor:
        """(..., 3H) the target's captured layer inputs -> (..., H)."""
        return self.fc(target_feats)

    def forward(self, token_embeds, hidden, positions, mask=None, cache: HeadCache | None = None):
        """One draft step. token_embeds (B, n, H) embeddings of x_{t+1}; hidden (B, n, H) the fused
        target feature (after `fuse`) or the head's own previous output; positions (n,); mask
        (n, kv_len) bool or None for causal. Returns (B, n, H): the next step's input feature
        (pre-norm); `logits` turns it into draft logits."""
        if mask is None:
            mask = self.causal_mask(hidden.shape[1], cache, hidden.device)
        cos, sin = self.rope(positions, hidden.dtype, hidden.device)
        return self.midlayer(token_embeds, hidden, cos, sin, mask, cache.layers[0] if cache is not None else None)

    def logits(self, h: torch.Tensor) -> torch.Tensor:
        """(..., H) -> (..., draft_vocab_size)."""
        return self.lm_head(self.norm(h))

    def unrolled(self, token_embeds_steps, fused, positions):
        """The training-time test: len(token_embeds_steps) draft steps over whole sequences.

        fused (B, T, H) = fuse(target features); token_embeds_steps[k] (B, T, H) = embed(x_{t+k+1})
        at row t. Step 0 is ordinary causal attention; at step k row t reads the head's own step
        k-1 output at row t, sits at position t + k, and attends to step 0's keys at rows <= t plus
        its own earlier steps' keys at row t only: exactly what a draft node at depth k + 1 sees
        at inference (the committed context, then its ancestors). Returns the pre-norm outputs
        of every step, each (B, T, H)."""
        layer = self.midlayer
        return unroll([layer], self.rope, token_embeds_steps, fused, positions,
                      lambda emb, h, cos, sin: (layer.residual(h), *layer.qkv(emb, h, cos, sin)))


# ---------------------------------------------------------------------------------------------
# Checkpoints in the official layout: written, read and fit-checked by head.py's functions, shared
# with the EAGLE-1/2 head; what is EAGLE-3's own is its config and the d2t / t2d pair.

save_head3 = save_head  # one writer for both heads (the name kept for the EAGLE-3 callers)


def read_config3(path: str, layer_ids: str = "inputs", rope_theta: float | None = None) -> Eagle3Config:
    return Eagle3Config.from_json_dict(read_config_json(path), layer_ids, rope_theta)


def is_eagle3_dir(path: str) -> bool:
    """True if `path` holds an EAGLE-3 config (a draft_vocab_size or an Eagle3 architecture)."""
    try:
        with open(os.path.join(path, "config.json")) as f:
            d = json.load(f)
    except (OSError, ValueError):
        return False
    return "draft_vocab_size" in d or "Eagle3" in str(d.get("architectures"))


def load_head3(path: str, target=None, device="cpu", dtype=torch.float32, layer_ids: str = "inputs",
               rope_theta: float | None = None) -> Eagle3Head:
    """Load an EAGLE-3 head strictly; with `target`, also check that it fits (head.check_fits).
    `layer_ids`: the convention of the config's aux-layer ids; `rope_theta`: the trainer's RoPE base
    if not the config's (Eagle3Config.from_json_dict)."""
    cfg = read_config3(path, layer_ids, rope_theta)
    if target is not None:
        check_fits(cfg, target)
    sd = read_state_dict(path)
    head = Eagle3Head(cfg)
    load_state3_strict(head, sd)
    return head.to(device=device, dtype=dtype).eval()


def load_state3_strict(head: Eagle3Head, sd: dict[str, torch.Tensor]):
    """Copy `sd` into `head` (head.load_state_strict); an inconsistent d2t / t2d pair is an error too."""
    cfg = head.config
    if "d2t" not in sd and "t2d" not in sd and cfg.draft_vocab_size == cfg.vocab_size:
        # a full-vocabulary head: the official trainer writes no d2t / t2d then (draft id = target id)
        sd = {**sd, "d2t": torch.zeros(cfg.vocab_size, dtype=torch.long), "t2d": torch.ones(cfg.vocab_size, dtype=torch.bool)}

    def draft_map(sd):
        ids = torch.arange(cfg.draft_vocab_size) + sd["d2t"].long()
        t2d = sd["t2d"].bool()
        if ids.min() < 0 or ids.max() >= cfg.vocab_size or len(set(ids.tolist())) != len(ids):
            raise ValueError(f"d2t maps draft ids outside [0, {cfg.vocab_size}) or onto the same target id twice")
        if int(t2d.sum()) != cfg.draft_vocab_size or not bool(t2d[ids].all()):
            raise ValueError("t2d does not mark exactly the target ids that d2t maps to")
        return {**sd, "d2t": sd["d2t"].long(), "t2d": t2d}

    load_state_strict(head, sd, "the official EAGLE-3 layout", draft_map)
