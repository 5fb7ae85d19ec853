"""Where two greedy decodes of the same prompt part, and whether that is a near-tie.

In float32 with the engine's kernels, EAGLE's greedy output is vanilla's token for token. In half
precision (bf16 / fp16, as GPUs run) a forward over k tokens rounds differently from a forward
over one, so where the target's two best tokens are nearly tied the two decodes can pick
differently and part from there on; each is still a greedy decode of the target to within
rounding. `first_parting` finds the first position where the outputs differ and asks the target
(one ordinary forward over the prompt and the shared prefix) how far apart the two candidates'
logits are there, against the logits' scale. A real bug (a wrong mask, a stale cache) parts at a
clear winner; rounding parts at a near-tie.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import torch

# a near-tie: the two logits differ by at most this many units of the dtype's rounding error at the
# logits' scale (a k-row and a 1-row forward through L layers drift by a few such units per layer)
NEAR_TIE_UNITS = 8


@dataclass(frozen=True)
class Parting:
    position: int  # index among the new tokens where the outputs first differ
    vanilla_token: int
    eagle_token: int
    margin: float  # logit(vanilla's token) - logit(EAGLE's token) there, from one ordinary forward
    scale: float  # the largest |logit| there
    dtype: str  # the target's dtype, e.g. "bfloat16"

    @property
    def tolerance(self) -> float:
        eps = torch.finfo(getattr(torch, self.dtype)).eps
        return NEAR_TIE_UNITS * eps * max(self.scale, 1.0)

    @property
    def near_tie(self) -> bool:
        return abs(self.margin) <= self.tolerance

    def to_dict(self) -> dict:
        return {**asdict(self), "near_tie": self.near_tie, "tolerance": self.tolerance}


def first_difference(a, b) -> int | None:
    """The first index where the sequences differ (over the shorter one), or None."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None


@torch.inference_mode()
def first_parting(target, prompt_ids, vanilla_ids, eagle_ids) -> Parting | None:
    """None when one output is a prefix of the other (identical as far as both went)."""
    i = first_difference(vanilla_ids, eagle_ids)
    if i is None:
        return None
    seq = torch.tensor([list(prompt_ids) + list(vanilla_ids[:i])], device=target.device)
    feats = target.model.get_decoder()(input_ids=seq).last_hidden_state[:, -1:]
    logits = target.logits(feats)[0, -1]
    v, e = int(vanilla_ids[i]), int(eagle_ids[i])
    return Parting(i, v, e, float(logits[v] - logits[e]), float(logits.abs().max()),
                   str(target.dtype).replace("torch.", ""))
