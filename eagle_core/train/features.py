"""Batches of token ids + loss masks, and the target features of them by ONE teacher-forced forward.

Both trainers read token-id records (ids, prompt_len): EAGLE-2 (loop.py) needs the last hidden
state after the final norm (what the LM head reads), EAGLE-3 (eagle3.py) also the residual stream
entering three chosen layers. A right-padded batch with an attention mask goes through the target
once; every real position gets the feature it would get in a forward of its own sequence alone
(causal attention: padding sits after the real tokens, so no real position can see it, even with
eagle_core.cpu.kernels' CPU attention, which receives no padding mask). One forward over B x T
tokens keeps the CPU's matrix units far busier than token-by-token decoding does.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class IdBatch:
    ids: torch.Tensor  # (B, T) long, right-padded with 0
    attention: torch.Tensor  # (B, T) long, 1 on real tokens
    answer: torch.Tensor  # (B, T) bool, the loss mask: True on answer tokens (position >= prompt_len)
    lengths: tuple[int, ...]  # real tokens per row (after truncation to max_seq)
    prompt_lens: tuple[int, ...]


def id_batch(records, idx, max_seq: int) -> IdBatch:
    """Records `idx` (dicts with `ids` and `prompt_len`), each cut to `max_seq` tokens, right-padded."""
    seqs = [records[i] for i in idx]
    lengths = tuple(min(len(r["ids"]), max_seq) for r in seqs)
    T = max(lengths)
    ids = torch.zeros(len(seqs), T, dtype=torch.long)
    attn = torch.zeros_like(ids)
    for b, (r, n) in enumerate(zip(seqs, lengths)):
        ids[b, :n] = r["ids"][:n].long()
        attn[b, :n] = 1
    pos = torch.arange(T)
    plen = torch.tensor([r["prompt_len"] for r in seqs])
    answer = (pos >= plen[:, None]) & attn.bool()
    return IdBatch(ids, attn, answer, lengths, tuple(int(p) for p in plen))


def length_batches(records, idx, tokens_per_batch: int, max_seq: int) -> list[list[int]]:
    """Records `idx` sorted by length and cut into batches of at most `tokens_per_batch` padded
    tokens (each sequence counted up to `max_seq`): batches of similar length pad little."""
    idx = sorted(idx, key=lambda i: len(records[i]["ids"]))
    out, cur, cur_max = [], [], 0
    for i in idx:
        L = min(len(records[i]["ids"]), max_seq)
        if cur and max(cur_max, L) * (len(cur) + 1) > tokens_per_batch:
            out.append(cur)
            cur, cur_max = [], 0
        cur.append(i)
        cur_max = max(cur_max, L)
    return out + [cur] if cur else out


@torch.no_grad()
def teacher_forced(target, batch: IdBatch, layers: tuple[int, ...] = ()):
    """-> (final (B, T, H): the last hidden state after the final norm, captured (B, T, len(layers) * H)
    or None). Values at padded positions are meaningless."""
    dev = target.device
    ids, attn = batch.ids.to(dev), batch.attention.to(dev)
    if layers:
        return target.forward_layers(ids, tuple(layers), attention_mask=attn)
    out = target.body(input_ids=ids, attention_mask=attn, use_cache=False)
    return out.last_hidden_state, None


def cached(records, idx) -> bool:
    """True if every record `idx` carries cached features (train/featcache.py)."""
    return all("layers" in records[i] for i in idx)


def cached_features(records, idx, batch: IdBatch, layers: tuple[int, ...], device="cpu"):
    """(final, captured) like `teacher_forced`, but read from records with cached features
    (float32, zero at padded positions). Refuses a cache made for other captured layers."""
    B, T = batch.ids.shape
    seqs = [records[i] for i in idx]
    for r in seqs:
        if tuple(r["layer_ids"]) != tuple(layers):
            raise ValueError(f"the feature cache holds layers {tuple(r['layer_ids'])}, the head reads {tuple(layers)}")
    H, C = seqs[0]["feats"].shape[-1], seqs[0]["layers"].shape[-1]
    final, captured = torch.zeros(B, T, H), torch.zeros(B, T, C)
    for b, (r, n) in enumerate(zip(seqs, batch.lengths)):
        final[b, :n] = r["feats"][:n].float()
        captured[b, :n] = r["layers"][:n].float()
    return final.to(device), captured.to(device)
