"""The building blocks both draft heads share (head.EagleHead and head3.Eagle3Head): RMSNorm,
rotary position embeddings, the head's KV cache, masked attention with a cache, the attention
block, the training-time unroll, and HeadBase (RoPE tables and the causal mask). A `cfg` here is
either head's config (head.HeadConfig, head3.Eagle3Config)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


def _rope_theta(target_config) -> float:
    theta = getattr(target_config, "rope_theta", None)
    if theta is None:  # transformers 5 keeps it in rope_parameters
        params = getattr(target_config, "rope_parameters", None) or {}
        theta = params.get("rope_theta", 10000.0)
    return float(theta)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


def rope_inv_freq(cfg) -> torch.Tensor:
    d = cfg.dim_per_head
    inv_freq = 1.0 / (cfg.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    rs = cfg.rope_scaling or {}
    kind = rs.get("rope_type", rs.get("type"))
    if kind in (None, "default"):
        return inv_freq
    if kind == "linear":
        return inv_freq / float(rs["factor"])
    if kind == "llama3":  # Llama 3.1-style frequency-dependent scaling
        factor, lo, hi = float(rs["factor"]), float(rs.get("low_freq_factor", 1)), float(rs.get("high_freq_factor", 4))
        old_ctx = float(rs["original_max_position_embeddings"])
        wavelen = 2 * math.pi / inv_freq
        smooth = ((old_ctx / wavelen) - lo) / (hi - lo)
        scaled = torch.where(wavelen > old_ctx / lo, inv_freq / factor, inv_freq)
        mid = (wavelen <= old_ctx / lo) & (wavelen >= old_ctx / hi)
        return torch.where(mid, (1 - smooth) * inv_freq / factor + smooth * inv_freq, scaled)
    raise ValueError(f"unsupported rope_scaling {rs!r} in head config")


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: (1, heads, n, d); cos/sin: (n, d). The "rotate half" convention of HF Llama."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class LayerCache:
    """One decoder layer's keys and values, written by position."""

    def __init__(self, cfg, max_len: int, device, dtype):
        shape = (1, cfg.num_key_value_heads, max_len, cfg.dim_per_head)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.length = 0  # entries [0, length) are valid
        # (q, this cache, length, mask) -> the attention output or None: the drafter's fast path
        # (FastPath.attend_cache, set through HeadCache.attend_with); None: torch's attention
        self.attend = None

    def append(self, k: torch.Tensor, v: torch.Tensor):
        n = k.shape[2]
        if self.length + n > self.k.shape[2]:
            raise ValueError(f"head cache full ({self.k.shape[2]} positions)")
        self.k[:, :, self.length:self.length + n] = k
        self.v[:, :, self.length:self.length + n] = v
        self.length += n

    def crop(self, length: int):
        self.length = min(self.length, length)


class HeadCache:
    """The head's own KV cache (committed context + scratch tree nodes): one LayerCache per decoder
    layer, all holding the same positions."""

    def __init__(self, cfg, max_len: int, device, dtype, num_layers: int = 1):
        self.layers = [LayerCache(cfg, max_len, device, dtype) for _ in range(num_layers)]

    @property
    def length(self) -> int:
        """Entries [0, length) are valid (in every layer)."""
        return self.layers[0].length

    def crop(self, length: int):
        for c in self.layers:
            c.crop(length)

    def attend_with(self, attend) -> None:
        """Attend through `attend` (FastPath.attend_cache, or None: torch) in every layer."""
        for c in self.layers:
            c.attend = attend


def attention(q, keys, values, n_heads: int, mask=None, diagonal=()):
    """Scaled dot-product attention, grouped-query aware. q (B, nh, n, d); keys/values (B, nkv, m, d);
    mask (n, m) bool or None. `diagonal`: extra (k, v) pairs of shape (B, nkv, n, d) that query row i
    sees at row i only (the training-time test's earlier steps at the same position)."""
    rep = n_heads // keys.shape[1]
    if rep > 1:
        keys, values = keys.repeat_interleave(rep, 1), values.repeat_interleave(rep, 1)
    if not diagonal:
        return F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
    scale = 1.0 / math.sqrt(q.shape[-1])
    scores = (q @ keys.transpose(-1, -2)) * scale  # (B, nh, n, m)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    diag = [(k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)) for k, v in diagonal]
    extra = torch.stack([(q * k).sum(-1) * scale for k, _ in diag], dim=-1)  # (B, nh, n, s)
    w = torch.softmax(torch.cat([scores, extra], dim=-1).float(), dim=-1).to(q.dtype)
    m = scores.shape[-1]
    out = w[..., :m] @ values
    for j, (_, v) in enumerate(diag):
        out = out + w[..., m + j, None] * v
    return out


class AttentionBlock(nn.Module):
    """What the EAGLE-1/2 decoder layer and EAGLE-3's `midlayer` share once q, k, v are made:
    attending (through the head cache when drafting) and the o_proj residual + MLP block. A
    subclass defines the projections and `qkv`."""

    def attend(self, q, k, v, mask, cache: LayerCache | None):
        """mask: (n, kv_len) bool, True = may attend (kv_len counts cached + new). The cache path is
        single-sequence (B = 1); training runs B padded sequences, no cache."""
        if cache is not None:
            start = cache.length
            cache.append(k, v)
            length = start + k.shape[2]
            out = cache.attend(q, cache, length, mask) if cache.attend is not None else None
            if out is not None:  # drafting on a CPU: the engine's kernel, through the target's FastPath
                return out
            k, v = cache.k[:, :, :length], cache.v[:, :, :length]
        return attention(q, k, v, self.n_heads, mask)

    def finish(self, h, attn_out):
        """The attention output's projection and residual (from h: the layer's input feature),
        then the MLP block."""
        B, n, _ = h.shape
        h = h + self.self_attn.o_proj(attn_out.transpose(1, 2).reshape(B, n, self.n_heads * self.d))
        m, x = self.mlp, self.post_attention_layernorm(h)
        return h + m.down_proj(F.silu(m.gate_proj(x)) * m.up_proj(x))


def unroll(layers, rope, token_embeds_steps, start, positions, step_input):
    """The training-time test's loop, for both heads: len(token_embeds_steps) draft steps over
    whole sequences. start (B, T, H) is step 0's input feature; `step_input(emb, prev, cos, sin)`
    -> (h, q, k, v) turns a step's token embeddings and previous feature into the first layer's
    residual input and projections; later layers (EAGLE-1/2 only) make theirs with `qkv(h, cos,
    sin)`. Step 0 attends causally; at step k row t sits at position t + k and attends, in every
    layer, to step 0's keys at rows <= t plus its own earlier steps' keys at row t only (what a
    draft node at depth k + 1 sees). Returns every step's output, each (B, T, H)."""
    T = start.shape[1]
    causal = torch.ones(T, T, dtype=torch.bool, device=start.device).tril()
    outs, prev = [], start
    diag = [[] for _ in layers]  # per layer: the earlier steps' (k, v), seen on the diagonal
    kv0: list = [None] * len(layers)  # per layer: step 0's (k, v), seen causally
    for k, emb in enumerate(token_embeds_steps):
        cos, sin = rope(positions + k, start.dtype, start.device)
        h, q, kk, v = step_input(emb, prev, cos, sin)
        for i, layer in enumerate(layers):
            if i:
                q, kk, v = layer.qkv(h, cos, sin)
            if kv0[i] is None:
                kv0[i] = (kk, v)
            else:
                diag[i].append((kk, v))
            h = layer.finish(h, attention(q, kv0[i][0], kv0[i][1], layer.n_heads, causal, tuple(diag[i])))
        prev = h
        outs.append(prev)
    return outs


class HeadBase(nn.Module):
    """RoPE tables and the default causal mask, shared by EagleHead and head3.Eagle3Head (both
    keep float32 inverse frequencies in `_inv_freq`, a plain attribute so .to(bfloat16) keeps
    them exact)."""

    def rope(self, positions, dtype, device):
        """cos, sin (n, d) for position ids (n,), computed in float32."""
        if self._inv_freq.device != device:
            self._inv_freq = self._inv_freq.to(device)
        freqs = positions.to(device, torch.float32)[:, None] * self._inv_freq[None]  # (n, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)

    @staticmethod
    def causal_mask(n: int, cache: HeadCache | None, device):
        """(n, past + n) bool: n new entries after the cache's, each seeing the past and itself."""
        past = cache.length if cache is not None else 0
        return torch.ones(n, past + n, dtype=torch.bool, device=device).tril(past)
