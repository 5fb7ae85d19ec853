"""The drafter's CPU fast path: where its products' weights live and which pass drafts.

`Drafter` (eagle_core/drafting/drafter.py) is the portable drafter: the head's modules and torch's
top k, as on a GPU. On a CPU with the engine's kernels it holds one `CpuDrafting`, built once from
the target's options (`target.fast`, cpu/options.py), and asks it first at each of its steps (top
k, a head pass, a catch-up, an expansion); a None answer means "not here", and the portable code
runs. Decided here, once:

  draft LM head   a reduced draft vocabulary's rows as int8 with a scale per row (kernels/gemv8.c),
                  float16 values or float32 (FastPath.draft_rows); an EAGLE-3 head's own float16
                  LM head read from float16 panels (the same bits from half the bytes)
  head products   the head's own products as int8 rows (FastPath.head_weights)
  passes          the head's pass in a few calls (head_pass.py) and, where that pass is one layer.c
                  call, a whole drafting pass with its top k in one call (fused_pass.py)

int8 rows move the draft's q by their rounding; verification, and so the output, never reads them
(docs/performance.md, "Drafting from int8 weights").
"""
from __future__ import annotations

import torch

from ..tree import frontier_mask
from . import fused_pass, head_pass, kernels


def head_products_int8(head, on: bool) -> None:
    """The head's products from int8 rows (on), or back to the backend kernels.install gave them."""
    for lin in head_pass.products(head):
        if not isinstance(lin, kernels.Linear):
            continue
        if on and lin.backend is not kernels.SmallGemm8 and kernels.SmallGemm8.serves(lin.weight.detach()):
            lin.installed_backend = lin.backend
            lin.backend, lin._state, lin._version = kernels.SmallGemm8, None, None
        elif not on and lin.backend is kernels.SmallGemm8:
            lin.backend, lin._state, lin._version = lin.installed_backend, None, None


class CpuDrafting:
    """One drafter's CPU path (see the module docstring). `lm` is the draft LM-head product the
    drafter uses on every path; `head_pass` and `fused` are its passes (None: not here, with the reason
    in `head_pass_note` / `fused_note`)."""

    def __init__(self, drafter, fast):
        head, target = drafter.head, drafter.target
        self.head, self.embed, self.vocab_map = head, drafter.embed, drafter.vocab_map
        self.lm_weight, self.lm, own = self._draft_lm(drafter.lm_weight, target, fast)
        if target.on_kernels:
            kernels.install(head, target.kernels.policy)
        head_products_int8(head, own and fast.head_weights == "int8")
        self.head_pass, self.head_pass_note = head_pass.build(head, fast)
        self.fused, self.fused_note = fused_pass.build(self, fast)

    def _draft_lm(self, w, target, fast):
        """-> (the draft LM head's weight as the products read it, its product, whether it is on the
        engine's own kernels)."""
        backend = target.linear_backend(tuple(w.shape))
        own = (backend is not None and kernels.library() is not None and w.dtype is torch.float32
               and w.device.type == "cpu" and target.kernels.policy in ("auto", "smallgemm"))
        rows = fast.draft_rows if own and self.vocab_map is not None else "float32"
        if rows == "int8" and kernels.SmallGemm8.serves(w):
            w, backend = kernels.SmallGemm8.rounded(w), kernels.SmallGemm8.name  # a quarter of float32's bytes
        elif rows in ("int8", "float16"):
            w = w.half().float()  # float16 values, read as float16 by smallgemm: half the bytes
        if own and backend != kernels.SmallGemm8.name and kernels.SmallGemm16.exact(w):
            backend = "smallgemm16"  # float16 values (an EAGLE-3 head's own LM head): same bits, half the bytes
        return w, kernels.linear_of(w, backend), own

    # -- the drafter's steps; None: not served here -------------------------------------------------
    def top(self, feats: torch.Tensor, k: int):
        """(m, H) features -> their top k as (log q values, target ids) host lists, in one call."""
        if self.fused is not None and feats.is_contiguous() and self.fused.applies(feats):
            return self.fused.top(feats, k)
        return None

    def run(self, emb, feats, positions, cache, mask):
        """The head on (emb, feats) rows through the head pass -> (n, H)."""
        if self.head_pass is not None and self.head_pass.applies(feats):
            return self.head_pass(emb.to(feats.dtype), feats, positions, cache, mask)
        return None

    def catch_up(self, next_tokens, feats, start_pos: int, cache, fuse: bool = False):
        """The committed pairs in one kernel call -> the predicted features (m, H). fuse: EAGLE-3's
        captured target layers, fused by the head's fc in the same call."""
        if self.fused is None or not self.fused.applies(feats):
            return None
        rows = feats if feats.is_contiguous() else feats.contiguous()
        return self.fused.run(next_tokens, list(rows), start_pos, 1, cache, None, fuse=fuse)[0]

    def fuse(self, feats):
        """EAGLE-3: the captured target layers (m, 3H) -> (m, H) through the head pass's fc."""
        return self.head_pass.fuse(feats) if self.head_pass is not None and self.head_pass.applies(feats) else None

    def expand_top(self, cache, tree, frontier: list[int], parents: list[torch.Tensor], pos: int, k: int):
        """The drafter's expansion and each node's top k in one kernel call -> (features (m, H),
        (values, ids) host lists or None); None where the fused pass does not apply."""
        if self.fused is None or not self.fused.applies(parents[0]):
            return None
        base = cache.length
        mask = frontier_mask(tree.parents, tree.slots, tree.committed, frontier, base)  # tree.py's, as the drafter's
        tree.slots.update({node: base + j for j, node in enumerate(frontier)})
        return self.fused.run([tree.tokens[i] for i in frontier], parents, pos, 0, cache, mask.numpy().tobytes(),
                              min(k, self.lm.out_features))  # the kernel's mask: a byte per entry, 1 = may attend


def for_drafter(drafter) -> CpuDrafting | None:
    """The drafter's CPU path, or None where the target runs the portable path (no kernels installed:
    another device, FastPath(kernels="stock") or EAGLE_PORTABLE=1)."""
    target = drafter.target
    if not target.on_kernels:  # (the gguf format's target has no float32 layer left, yet runs the kernels)
        return None
    return CpuDrafting(drafter, target.fast)
