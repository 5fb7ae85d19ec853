"""The target's attention on a CPU for decode steps and verification trees (attention.c).

Registered with transformers' AttentionInterface under NAME, the documented way to give a model
another attention function (no modeling file is copied or patched). Calls it cannot serve exactly
(more than MAX_ROWS query rows, i.e. a long prefill; a per-head mask; dropout; another dtype or
device) go to transformers' own SDPA function unchanged.

A call arrives with the engine's own 4D tree mask, SDPA's mask (registered for NAME, see
`register`), or None, which means causal over the last n positions of the cache.
"""
from __future__ import annotations

import torch

from .build import library

NAME = "eagle_cpu"
MAX_ROWS = 64  # beyond this (a prompt's prefill) torch's flash kernel is the faster one


def additive(mask: torch.Tensor) -> torch.Tensor:
    """A bool mask (True = may attend) as the kernel's additive float32 mask (0 or -inf)."""
    return torch.zeros(mask.shape).masked_fill_(~mask, float("-inf"))


def _sdpa(*args, **kwargs):
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    return sdpa_attention_forward(*args, **kwargs)


def _eligible(query, key, value, attention_mask, dropout) -> bool:
    n, L = query.shape[2], key.shape[2]
    if query.shape[0] != 1 or n > MAX_ROWS or dropout or query.device.type != "cpu":
        return False
    if not all(t.dtype == torch.float32 for t in (query, key, value)):
        return False
    if attention_mask is not None:
        m = attention_mask
        if m.dim() != 4 or m.shape[0] != 1 or m.shape[1] != 1 or m.shape[2] != n or m.shape[3] != L:
            return False
    return query.shape[1] % key.shape[1] == 0


def _rows_contiguous(t):
    """(G, L, d) with each head's rows packed (a view into a larger cache buffer is fine as it is)."""
    return t if t.stride(2) == 1 and t.stride(1) == t.shape[2] else t.contiguous()


def _batched_step(query, key, value, attention_mask, dropout, kwargs) -> bool:
    """A decode step of a batch (B > 1 rows, one new token each), as batched generation makes."""
    B, _, n, _ = query.shape
    if B == 1 or n != 1 or dropout or query.device.type != "cpu" or kwargs.get("softcap") is not None \
            or kwargs.get("position_bias") is not None or query.shape[1] % key.shape[1]:
        return False
    m = attention_mask
    return m is None or (m.dim() == 4 and m.shape[1] == 1 and m.shape[0] == B and m.shape[2] == 1
                         and m.shape[3] == key.shape[2])


def grouped_step(query, key, value, attention_mask, scaling):
    """One query token per row against its row's keys, each key/value head shared by H/G query
    heads, without copying the cache H/G times (SDPA's CPU path repeats k and v to H heads, which
    for a batch of 32 rows of ~500 positions moves ~70 MB per layer and step). query (B, H, 1, d),
    key/value (B, G, L, d), mask None or (B, 1, 1, L) (bool: True = may attend, or additive)."""
    B, H, _, d = query.shape
    G, L = key.shape[1], key.shape[2]
    q = query.reshape(B, G, H // G, d)  # head h reads kv head h // (H / G), as transformers' repeat_kv
    s = torch.matmul(q, key.transpose(-1, -2)) * (scaling if scaling is not None else d ** -0.5)  # (B, G, H/G, L)
    if attention_mask is not None:
        m = attention_mask.view(B, 1, 1, L)
        s = s.masked_fill(~m, float("-inf")) if m.dtype == torch.bool else s + m
    out = torch.matmul(torch.softmax(s, dim=-1), value)  # (B, G, H/G, d)
    return out.reshape(B, 1, H, d)


def attention_forward(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None,
                      is_causal=None, **kwargs):
    """query (1, H, n, d), key/value (1, G, L, d) -> ((1, n, H, d), None), as transformers expects.
    (A batched decode step, B rows of one token, goes to `grouped_step`.)"""
    if _batched_step(query, key, value, attention_mask, dropout, kwargs):
        return grouped_step(query, key, value, attention_mask, scaling), None
    if kwargs.get("softcap") is not None or kwargs.get("position_bias") is not None \
            or not _eligible(query, key, value, attention_mask, dropout):
        return _sdpa(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                     is_causal=is_causal, **kwargs)
    d, L = query.shape[-1], key.shape[2]
    q, k, v = query[0].contiguous(), _rows_contiguous(key[0]), _rows_contiguous(value[0])
    if k.stride(0) != v.stride(0):
        k, v = k.contiguous(), v.contiguous()
    mask = None
    if attention_mask is not None:
        mask = attention_mask[0, 0]
        if mask.dtype == torch.bool:
            mask = additive(mask)
        mask = mask.to(torch.float32).contiguous()
    scale = scaling if scaling is not None else d ** -0.5
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    lib = library()
    if lib is None:  # no C kernels here (no compiler, no AVX2): the same invariance from torch, row by row
        return attend_rows(q, k, v, L, mask, scale, causal).unsqueeze(0), None
    return _attend(lib, q, k, v, L, mask, scale, causal).unsqueeze(0), None


MASKED = -1e30  # additive mask values at or below this are "not visible" (attention.c's MASKED)


def attend_rows(q, k, v, length: int, mask, scale: float, causal) -> torch.Tensor:
    """attention.c's contract in torch, for a CPU without the kernels: each query row attends over
    exactly the keys it may see, gathered in cache order into a fresh tensor, with the same torch
    operations on the same shapes as that token decoded alone (where those keys are the whole cache).
    So a tree node gets the same bits as vanilla's step: row invariant by construction, like the
    products' `rowwise` backend. q (H, n, d); k, v (G, >= length, d); mask None or (n, length) additive.
    -> (n, H, d)."""
    H, n, d = q.shape
    G = k.shape[0]
    out = torch.empty(n, H, d)
    for i in range(n):
        if mask is not None:
            seen = (mask[i, :length] > MASKED).nonzero()[:, 0]
        else:
            seen = torch.arange(length - n + i + 1 if causal else length)
        bias = mask[i].index_select(0, seen) if mask is not None else torch.zeros(len(seen))
        kk, vv = k.index_select(1, seen), v.index_select(1, seen)  # (G, m, d), fresh and contiguous
        s = torch.matmul(q[:, i].reshape(G, H // G, d), kk.transpose(-1, -2)) * scale + bias  # (G, H/G, m)
        out[i] = torch.matmul(torch.softmax(s, dim=-1), vv).reshape(H, d)
    return out


def _attend(lib, q, k, v, length: int, mask, scale: float, causal) -> torch.Tensor:
    """attention.c on q (H, n, d) contiguous, k/v (G, >= length, d) with packed rows and one head
    stride, mask None or (n, length) additive float32 contiguous. -> (n, H, d)."""
    H, n, d = q.shape
    out = torch.empty(n, H, d)
    rc = lib.attend(q.data_ptr(), k.data_ptr(), v.data_ptr(), None if mask is None else mask.data_ptr(),
                    out.data_ptr(), H, k.shape[0], n, length, d, k.stride(0), float(scale), int(bool(causal)),
                    torch.get_num_threads())
    if rc != 0:
        raise MemoryError("attention kernel: out of memory")
    return out


def register() -> None:
    """Our attention, and SDPA's mask builder under the same name: without one transformers builds
    no mask at all for an unknown attention name, and a left-padded batch would attend to its
    padding. With it a padded call gets SDPA's mask (and goes to SDPA, batch > 1 or a per-row
    mask shape we do not serve); an unpadded single sequence still gets None (causal)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(NAME, attention_forward)
    AttentionMaskInterface.register(NAME, sdpa_mask)


def set_attention(model, name: str) -> str:
    """Switch `model` to attention `name`; returns the previous name."""
    old = model.config._attn_implementation
    if name == NAME:
        register()
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(name)
    else:
        model.config._attn_implementation = name
    return old


def attend_cache(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, length: int, mask=None) -> torch.Tensor:
    """A draft head's attention through attention.c: q (H, n, d) contiguous float32; k, v (G, M, d)
    the head cache's buffers, the first `length` rows of each head valid; mask (n, length) bool
    (True = may attend) or None (causal: row i sees keys up to length - n + i). -> (n, H, d)."""
    return _attend(library(), q, k, v, length, None if mask is None else additive(mask), q.shape[-1] ** -0.5,
                   mask is None)


def serves_cache(q: torch.Tensor, k: torch.Tensor, mask=None) -> bool:
    """Can attend_cache serve a draft head's call: one sequence, CPU float32, a bool mask or none,
    the kernel built."""
    return ((mask is None or mask.dtype is torch.bool) and q.shape[0] == 1 and q.device.type == "cpu" and q.dtype is torch.float32 and k.dtype is torch.float32
            and k.stride(-1) == 1 and k.stride(-2) == k.shape[-1] and library() is not None)
