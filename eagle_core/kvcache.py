"""The target's KV cache: transformers' DynamicCache, with layers that grow in place.

A stock DynamicLayer appends by `torch.cat([keys, new])`, copying the whole cache of every layer
at every step (O(L) per token, 60 copies per step for a 30-layer model). `GrowingLayer` keeps its
keys and values as views into a buffer with room to spare and writes new entries into it, so a
step copies only its own n entries. Everything that reads or trims the cache (attention, `crop`,
the engine's compaction to the accepted path) sees ordinary tensors of the usual shape; if some
code replaces `keys` with a tensor of its own, the next update moves it into a fresh buffer.
"""
from __future__ import annotations

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

GROW_BY = 256  # entries of room added at a time (beyond doubling), so short prompts regrow rarely


class GrowingLayer(DynamicLayer):
    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        super().lazy_initialization(key_states, value_states)
        self._kbuf = self._vbuf = None

    def _length(self) -> int:
        return self.keys.shape[-2] if self.keys.dim() == 4 else 0

    def _in_buffer(self, need: int) -> bool:
        kb, vb = self._kbuf, self._vbuf
        return (kb is not None and kb.shape[-2] >= need and self.keys.dim() == 4
                and self.keys.data_ptr() == kb.data_ptr() and self.values.data_ptr() == vb.data_ptr()
                and self.keys.stride() == kb.stride() and self.values.stride() == vb.stride()
                and self.keys.shape[:2] == kb.shape[:2])

    def reserve(self, n: int, key_like: torch.Tensor, value_like: torch.Tensor) -> int:
        """Room in the buffers for n more entries, shaped like `key_like` / `value_like` (B, G, *, d);
        -> the current length L. The caller writes entries L .. L + n - 1 of `_kbuf` / `_vbuf`
        (eagle_core/cpu/forward.py's fused layers do, in C) and then calls `commit(L + n)`."""
        if not self.is_initialized:
            self.lazy_initialization(key_like, value_like)
        L = self._length()
        if not self._in_buffer(L + n):
            b, h, _, d = key_like.shape
            cap = 2 * (L + n) + GROW_BY
            kb = key_like.new_empty(b, h, cap, d)
            vb = value_like.new_empty(b, h, cap, value_like.shape[-1])
            if L:
                kb[..., :L, :].copy_(self.keys)
                vb[..., :L, :].copy_(self.values)
            self._kbuf, self._vbuf = kb, vb
        return L

    def commit(self, length: int) -> None:
        self.keys, self.values = self._kbuf[..., :length, :], self._vbuf[..., :length, :]

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        n = key_states.shape[-2]
        L = self.reserve(n, key_states, value_states)
        self._kbuf[..., L:L + n, :].copy_(key_states)
        self._vbuf[..., L:L + n, :].copy_(value_states)
        self.commit(L + n)
        return self.keys, self.values

    def reset(self) -> None:
        self._kbuf = self._vbuf = None
        super().reset()


def new_cache(config) -> DynamicCache:
    """A DynamicCache for `config` whose full-attention layers are GrowingLayers."""
    cache = DynamicCache(config=config)
    cache.layers = [GrowingLayer() if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache
