"""Drafting with an EAGLE-3 head: the same trees as EAGLE-1/2 (eagle_core/drafting/drafter.py), another head.

EAGLE-3 (arXiv:2503.01840) keeps EAGLE-2's dynamic tree; only what the head reads and how it
turns a feature into a token distribution change, so this drafter overrides a few small pieces
of `Drafter` and inherits the chain, static and dynamic tree code unchanged:

  fit       head.check_fits (the one fit check of both heads): the target has the layers the head
            reads (also gives `target_layers`)
  catch up  the committed pairs carry the target's captured layer inputs (m, 3H), fused by the
            head's `fc`; the head's own pre-norm output then feeds every deeper draft step
  logits    the head's own norm + lm_head over its draft vocabulary (not the target's LM head)
  ids       draft id -> target id through d2t (target = draft + d2t[draft])

`target_layers` tells the decode loop which target layers to capture during verification.
"""
from __future__ import annotations

import torch

from .drafter import Drafter
from .head import check_fits
from .head3 import Eagle3Head


class Eagle3Drafter(Drafter):
    def __init__(self, head: Eagle3Head, target):
        self.target_layers = check_fits(head.config, target)  # one ValueError naming every mismatch
        super().__init__(head, target)

    @staticmethod
    def _check_fits(head, target) -> None:
        """Done in __init__ (check_fits, which also gives the target layers the head reads)."""

    @staticmethod
    def _draft_lm(head, target, draft_vocab):
        """The head's own LM head over its draft vocabulary, and the target id of each draft id (d2t)."""
        w = head.lm_head.weight
        return head.draft_ids().to(w.device), w.detach()  # (N,), (N, H)

    def _logits(self, feats: torch.Tensor) -> torch.Tensor:
        """(m, H) head outputs (pre-norm) -> (m, N) draft logits."""
        return self.lm(self.head.norm(feats).to(self.lm_weight.dtype)).float()

    @torch.inference_mode()
    def catch_up(self, cache, feats: torch.Tensor, next_tokens: torch.Tensor, start_pos: int) -> torch.Tensor:
        """Feed committed pairs (a_t, x_{t+1}), a_t = the target's captured layer inputs (m, 3H);
        returns the root's feature (H,) for the first draft step."""
        assert cache.length == start_pos, f"head cache holds {cache.length} positions, expected {start_pos}"
        cpu = self.cpu
        out = cpu.catch_up(next_tokens, feats, start_pos, cache, fuse=True) if cpu is not None else None
        if out is not None:  # fc, norms and the layer in one call
            return out[-1]
        fused = cpu.fuse(feats) if cpu is not None else None  # (m, H), the same bits as head.fuse
        if fused is None:
            fused = self.head.fuse(feats.to(self.head.fc.weight.dtype))
        pos = torch.arange(start_pos, start_pos + feats.shape[0], device=feats.device)
        return self._run(next_tokens, fused, pos, cache)[-1]
