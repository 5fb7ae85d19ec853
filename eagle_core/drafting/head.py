"""The EAGLE-1/2 auto-regression head, and its checkpoint format.

Architecture of EAGLE (Li et al. 2024, arXiv:2401.15077), which EAGLE-2 (arXiv:2406.16858)
keeps. At position t the head sees the target's feature f_t (its last hidden state, after the
final norm: what the LM head consumes) and the embedding of the token
that FOLLOWED it, x_{t+1} (the one-token shift), and predicts f_{t+1}:

    h = fc(cat(embed(x_{t+1}), f_t))            # (n, 2H) -> (n, H)
    h = h + attn(h)                             # NO pre-attention RMSNorm in layer 0
    h = h + mlp(post_attention_layernorm(h))    # SwiGLU
    (layers 1, 2, ..: ordinary Llama layers, h = h + attn(input_layernorm(h)), then the MLP)
    f_{t+1} ≈ h                                 # no final norm
    draft logits = target.lm_head(h)            # the target's frozen LM head

The published heads have one decoder layer (`num_hidden_layers` 1). The official code, vLLM and
SGLang all build `num_hidden_layers` of them and give every layer but the first its
input_layernorm, so a deeper head (keys `layers.1.*`, ..) loads there unchanged.

The token embedding and LM head belong to the target and are passed in, never copied into the
head's weights. Checkpoints use the published EAGLE layout (config.json + model.safetensors or
pytorch_model.bin, keys `fc.*`, `layers.0.*`) and load strictly.
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields

import torch
from torch import nn

from .head_layers import (AttentionBlock, HeadBase, HeadCache, LayerCache, RMSNorm, _rope_theta, apply_rope,
                         rope_inv_freq, unroll)


@dataclass
class HeadConfig:
    hidden_size: int  # H: must equal the target's hidden size
    intermediate_size: int  # MLP width
    num_attention_heads: int
    num_key_value_heads: int  # < num_attention_heads means grouped-query attention
    vocab_size: int  # the target's vocabulary (the embedding / LM head it drafts through)
    rms_norm_eps: float = 1e-5
    max_position_embeddings: int = 2048
    rope_theta: float = 10000.0
    rope_scaling: dict | None = None  # None, {"rope_type": "linear", "factor": f} or "llama3"
    bias: bool = True  # fc has a bias (EAGLE-LLaMA3 heads say "bias": false)
    qkv_bias: bool = False  # q/k/v projections have biases (Qwen2 targets)
    head_dim: int | None = None
    num_hidden_layers: int = 1  # decoder layers (the published heads: 1)

    @property
    def dim_per_head(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    def to_json_dict(self) -> dict:
        d = asdict(self)
        if d["head_dim"] is None:
            del d["head_dim"]
        # fields the published configs carry, so other EAGLE tools can read ours
        d.update(hidden_act="silu", architectures=["LlamaForCausalLM"], model_type="llama")
        return d

    @classmethod
    def from_json_dict(cls, d: dict) -> "HeadConfig":
        n = d.get("num_hidden_layers", 1)
        if type(n) is not int or n < 1:
            raise ValueError(f"head config.json: num_hidden_layers must be a positive integer, got {n!r}")
        names = {f.name for f in fields(cls)}
        kw = {k: v for k, v in d.items() if k in names}
        kw.setdefault("num_key_value_heads", d.get("num_attention_heads"))
        missing = {"hidden_size", "intermediate_size", "num_attention_heads", "vocab_size"} - kw.keys()
        if missing:
            raise ValueError(f"head config.json lacks {sorted(missing)}")
        return cls(**kw)

    @classmethod
    def for_target(cls, target_config, **overrides) -> "HeadConfig":
        """A head shaped like one decoder layer of the target (the usual choice)."""
        c = target_config
        kw = dict(
            hidden_size=c.hidden_size,
            intermediate_size=c.intermediate_size,
            num_attention_heads=c.num_attention_heads,
            num_key_value_heads=getattr(c, "num_key_value_heads", None) or c.num_attention_heads,
            vocab_size=c.vocab_size,
            rms_norm_eps=getattr(c, "rms_norm_eps", 1e-5),
            max_position_embeddings=c.max_position_embeddings,
            rope_theta=_rope_theta(c),
            head_dim=getattr(c, "head_dim", None),
        )
        kw.update(overrides)
        return cls(**kw)


class DecoderLayer(AttentionBlock):
    """A Llama decoder layer; the first (index 0) has no pre-attention norm (EAGLE-1/2 drop it)."""

    def __init__(self, cfg: HeadConfig, index: int = 0):
        super().__init__()
        H, d = cfg.hidden_size, cfg.dim_per_head
        self.n_heads, self.n_kv, self.d = cfg.num_attention_heads, cfg.num_key_value_heads, d
        self.self_attn = nn.Module()
        self.self_attn.q_proj = nn.Linear(H, self.n_heads * d, bias=cfg.qkv_bias)
        self.self_attn.k_proj = nn.Linear(H, self.n_kv * d, bias=cfg.qkv_bias)
        self.self_attn.v_proj = nn.Linear(H, self.n_kv * d, bias=cfg.qkv_bias)
        self.self_attn.o_proj = nn.Linear(self.n_heads * d, H, bias=False)
        self.mlp = nn.Module()
        self.mlp.gate_proj = nn.Linear(H, cfg.intermediate_size, bias=False)
        self.mlp.up_proj = nn.Linear(H, cfg.intermediate_size, bias=False)
        self.mlp.down_proj = nn.Linear(cfg.intermediate_size, H, bias=False)
        self.post_attention_layernorm = RMSNorm(H, cfg.rms_norm_eps)
        if index > 0:
            self.input_layernorm = RMSNorm(H, cfg.rms_norm_eps)

    def qkv(self, h, cos, sin):
        B, n, _ = h.shape
        a = self.self_attn
        if hasattr(self, "input_layernorm"):
            h = self.input_layernorm(h)  # the residual stays the un-normed h (finish)
        q = a.q_proj(h).view(B, n, self.n_heads, self.d).transpose(1, 2)  # (B, nh, n, d)
        k = a.k_proj(h).view(B, n, self.n_kv, self.d).transpose(1, 2)  # (B, nkv, n, d)
        v = a.v_proj(h).view(B, n, self.n_kv, self.d).transpose(1, 2)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

    def forward(self, h, cos, sin, mask, cache: LayerCache | None):
        # h: (B, n, H); see AttentionBlock.attend for the mask and the cache
        return self.finish(h, self.attend(*self.qkv(h, cos, sin), mask, cache))


class EagleHead(HeadBase):
    def __init__(self, cfg: HeadConfig):
        super().__init__()
        self.config = cfg
        self.fc = nn.Linear(2 * cfg.hidden_size, cfg.hidden_size, bias=cfg.bias)
        self.layers = nn.ModuleList([DecoderLayer(cfg, i) for i in range(cfg.num_hidden_layers)])
        # float32 RoPE frequencies; a plain attribute (not a buffer) so .to(bfloat16) keeps them exact
        self._inv_freq = rope_inv_freq(cfg)

    def new_cache(self, max_len: int) -> HeadCache:
        p = self.fc.weight
        return HeadCache(self.config, max_len, p.device, p.dtype, len(self.layers))

    def forward(self, token_embeds, features, positions, mask=None, cache: HeadCache | None = None):
        """Predict next features.

        token_embeds: (B, n, H) embeddings of x_{t+1}; features: (B, n, H) target (or predicted)
        features f_t; positions: (n,) position ids t; mask: (n, kv_len) bool or None for causal
        attention over cache + new entries. Returns (B, n, H) predicted f_{t+1}.
        """
        if mask is None:
            mask = self.causal_mask(features.shape[1], cache, features.device)
        cos, sin = self.rope(positions, features.dtype, features.device)
        h = self.fc(torch.cat((token_embeds, features), dim=-1))
        for i, layer in enumerate(self.layers):
            h = layer(h, cos, sin, mask, cache.layers[i] if cache is not None else None)
        return h

    def unrolled(self, token_embeds_steps, features, positions):
        """The training-time test for EAGLE-1/2: len(token_embeds_steps) draft steps over whole
        sequences, as eagle_core/drafting/head3.py's Eagle3Head.unrolled does for EAGLE-3.

        features (B, T, H) = the target's f_t at row t; token_embeds_steps[k] (B, T, H) =
        embed(x_{t+k+1}) at row t. Step 0 is the ordinary teacher-forced pass. At step k row t
        reads the head's own step k-1 prediction at row t (its guess of f_{t+k}), sits at position
        t + k and attends to step 0's keys at rows <= t plus its own earlier steps' keys at row t
        only: what a draft node at depth k + 1 sees at inference (the committed context computed
        from the target's features, then its ancestors in the tree). Returns every step's
        predicted features, each (B, T, H); step k row t predicts f_{t+k+1}."""
        first = self.layers[0]

        def step_input(emb, f, cos, sin):
            h = self.fc(torch.cat((emb, f), dim=-1))
            return (h, *first.qkv(h, cos, sin))

        return unroll(self.layers, self.rope, token_embeds_steps, features, positions, step_input)


# ---------------------------------------------------------------------------------------------
# Checkpoints of both heads (EAGLE-1/2 here, EAGLE-3 in head3.py): config.json + model.safetensors
# (or pytorch_model.bin) in the published key layout, read and written by the functions below. An
# optional draft_vocab.json holds an EAGLE-1/2 head's reduced draft vocabulary (token ids it may draft).

DRAFT_VOCAB_FILE = "draft_vocab.json"
OPTIONAL_KEYS = {"embed_tokens.weight"}  # published heads carry a copy of the target's embedding


def check_fits(config, target=None, *, hidden_size: int | None = None, vocab_size: int | None = None,
               num_layers: int | None = None) -> tuple[int, ...]:
    """Whether a head (a HeadConfig or an Eagle3Config) can draft for a target: the one fit check of
    both heads, used when a head loads, when a drafter is built and when the engine picks its heads.
    The target's sizes come from `target` or are given one by one (a size left None is not checked).
    Raises ONE ValueError naming every mismatch; returns the target layers an EAGLE-3 head reads
    (() for an EAGLE-1/2 head, which reads the last layer's output)."""
    if target is not None:
        hidden_size, vocab_size = target.hidden_size, target.vocab_size
        num_layers = int(target.config.num_hidden_layers)
    eagle3 = hasattr(config, "layers_for")
    wrong = []
    reads = getattr(config, "target_hidden_size", None)
    if hidden_size is not None and reads not in (None, config.hidden_size) and reads != hidden_size:
        wrong.append(f"head reads target hidden size {reads}, target hidden size {hidden_size}")
    if hidden_size is not None and config.hidden_size != hidden_size:
        wrong.append(f"head hidden size {config.hidden_size}, target hidden size {hidden_size} "
                     "(the head drafts through the target's embedding)")
    if vocab_size is not None and config.vocab_size != vocab_size:
        wrong.append(f"head vocabulary {config.vocab_size}, target vocabulary {vocab_size}")
    layers: tuple[int, ...] = ()
    if eagle3 and num_layers is not None:
        try:
            layers = config.layers_for(num_layers)
        except ValueError as e:
            wrong.append(str(e))
    if wrong:
        raise ValueError(f"{'EAGLE-3' if eagle3 else 'EAGLE-1/2'} head does not fit the target: " + "; ".join(wrong))
    return layers


def save_head(head, path: str, draft_vocab: list[int] | None = None, dtype=torch.float16, meta=None,
              fmt: str = "safetensors"):
    """Write either head: `path/config.json` (+ `meta` under "eagle_explainer") and its weights in
    `dtype` (integer buffers, EAGLE-3's d2t / t2d, as they are) as model.safetensors, or
    pytorch_model.bin with fmt="bin"; and draft_vocab.json if `draft_vocab` is given."""
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump({**head.config.to_json_dict(), **({"eagle_explainer": meta} if meta else {})}, f, indent=2)
    sd = {k: (v.detach().to("cpu", dtype) if v.is_floating_point() else v.detach().cpu()).contiguous()
          for k, v in head.state_dict().items()}
    if fmt == "safetensors":
        from safetensors.torch import save_file

        save_file(sd, os.path.join(path, "model.safetensors"))
    else:
        torch.save(sd, os.path.join(path, "pytorch_model.bin"))
    if draft_vocab is not None:
        write_draft_vocab(path, draft_vocab)


def write_draft_vocab(path: str, token_ids) -> None:
    """Write `path/draft_vocab.json` (the format `read_draft_vocab` reads)."""
    with open(os.path.join(path, DRAFT_VOCAB_FILE), "w") as f:
        json.dump({"token_ids": [int(t) for t in token_ids]}, f)


def read_draft_vocab(path: str, vocab_size: int) -> list[int] | None:
    """The draft vocabulary of a head directory (its draft_vocab.json; None if it has none) or of
    such a file: distinct token ids in [0, vocab_size), in the file's order. A file that is not
    that is a ValueError naming it. Every reader of the file goes through here (loading a head,
    `train --draft-vocab-from`, `export`, the serving export, the random EAGLE-3 fallback)."""
    f = path
    if os.path.isdir(path):
        f = os.path.join(path, DRAFT_VOCAB_FILE)
        if not os.path.exists(f):
            return None
    try:
        with open(f) as fh:
            ids = json.load(fh)["token_ids"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{f}: not a draft vocabulary ({e})") from None
    if (not isinstance(ids, list) or not ids or len(set(ids)) != len(ids)
            or not all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t < vocab_size for t in ids)):
        raise ValueError(f"{f}: the draft vocabulary must be distinct token ids in [0, {vocab_size})")
    return ids


def read_config_json(path: str) -> dict:
    """A head directory's config.json as a dict (FileNotFoundError naming the directory if absent)."""
    cfg_file = os.path.join(path, "config.json")
    if not os.path.exists(cfg_file):
        raise FileNotFoundError(f"no config.json in {path}")
    with open(cfg_file) as f:
        return json.load(f)


def read_state_dict(path: str) -> dict[str, torch.Tensor]:
    st, binf = os.path.join(path, "model.safetensors"), os.path.join(path, "pytorch_model.bin")
    if os.path.exists(st):
        from safetensors.torch import load_file

        return load_file(st)
    if os.path.exists(binf):
        return torch.load(binf, map_location="cpu", weights_only=True)
    raise FileNotFoundError(f"no model.safetensors or pytorch_model.bin in {path}")


def load_head(path: str, target_hidden_size: int | None = None, target_vocab_size: int | None = None,
              device="cpu", dtype=torch.float32) -> tuple[EagleHead, list[int] | None]:
    """Load a head strictly; with the target's sizes, also check that it fits (check_fits).
    Returns (head, draft vocabulary token ids or None)."""
    cfg = HeadConfig.from_json_dict(read_config_json(path))
    check_fits(cfg, hidden_size=target_hidden_size, vocab_size=target_vocab_size)
    sd = read_state_dict(path)
    if "fc.bias" in sd and not cfg.bias:
        raise ValueError("checkpoint has fc.bias but config.json says \"bias\": false")
    head = EagleHead(cfg)
    load_state_strict(head, sd)
    draft_vocab = read_draft_vocab(path, cfg.vocab_size)
    return head.to(device=device, dtype=dtype).eval(), draft_vocab


def load_state_strict(head, sd: dict[str, torch.Tensor], layout: str = "the EAGLE layout", check=None):
    """Copy `sd` into either head; any missing, unexpected or mis-shaped key is an error naming
    `layout`. `check(sd)`, once the keys and shapes are right: a head's own checks (ValueError),
    returning the state dict to load (EAGLE-3: d2t / t2d, head3.py)."""
    own = head.state_dict()
    cfg = head.config
    missing = sorted(set(own) - set(sd))
    unexpected = sorted(set(sd) - set(own) - OPTIONAL_KEYS)
    if missing or unexpected:
        raise ValueError(f"head checkpoint does not match {layout}: missing keys {missing}, "
                         f"unexpected keys {unexpected}")
    if "embed_tokens.weight" in sd and tuple(sd["embed_tokens.weight"].shape) != (cfg.vocab_size, cfg.hidden_size):
        raise ValueError(f"embed_tokens.weight has shape {tuple(sd['embed_tokens.weight'].shape)}, expected "
                         f"({cfg.vocab_size}, {cfg.hidden_size}) from config.json")
    for k, t in own.items():
        if tuple(sd[k].shape) != tuple(t.shape):
            raise ValueError(f"{k}: checkpoint shape {tuple(sd[k].shape)}, config.json implies {tuple(t.shape)}")
    if check is not None:
        sd = check(sd)
    head.load_state_dict({k: sd[k] for k in own}, strict=True)
