"""Drafting with an EAGLE head: chain, EAGLE-1 static tree, EAGLE-2 dynamic tree.

EAGLE (Li et al. 2024, arXiv:2401.15077) drafts a fixed tree of top-k ranks; EAGLE-2
(arXiv:2406.16858) grows the tree per context, expanding the nodes with the highest cumulative
draft log-probability and keeping the best `total_tokens`. EAGLE-3 (arXiv:2503.01840) keeps
this drafting but changes the head (it fuses low, middle and high target layers) and its
training: `draft3.Eagle3Drafter` subclasses this drafter and reuses every tree below.

The `Drafter` owns nothing mutable; each generation gets a `HeadCache` holding the head's keys
and values for the committed context, so a cycle runs the head only on new positions:

1. catch up  — feed the pairs (f_t, x_{t+1}) for the tokens the last cycle committed (true
               target features); the last output is the predicted feature at the root.
2. expand    — run the head on a frontier of draft nodes, each paired with its parent's
               predicted feature, attending to the committed cache plus its own ancestors.
3. crop      — drop the scratch entries of the tree nodes from the head cache.

Head positions: the pair (f_t, x_{t+1}) sits at position t. With the root at target position
L, a draft node at depth d is fed at head position L + d - 1.
"""
from __future__ import annotations

import math

import torch

from ..cpu.drafting import for_drafter
from ..cpu.kernels import linear_of
from ..config import DecodeSettings
from .head import EagleHead, HeadCache, check_fits
from ..tree import DraftTree, frontier_mask, select_closed_top, static_tree_layout
from ..verify import logits_to_probs


class TreeBuilder:
    """A draft tree as it grows, node by node (node 0 the root), and where each node the head has
    run on sits in the head cache (`slots`, for the attention mask of deeper nodes)."""

    def __init__(self, root_token: int, committed: int):
        self.tokens, self.parents, self.q, self.scores = [root_token], [-1], [1.0], [0.0]
        self.q_dists: list[torch.Tensor | None] = [None]  # sampled chains: the distribution each node was drawn from
        self.committed = committed  # head-cache entries of the committed context (every node sees them)
        self.slots: dict[int, int] = {}  # node -> its head-cache entry, once the head has run on it

    def __len__(self) -> int:
        return len(self.tokens)

    def add(self, token: int, parent: int, q: float, score: float, q_dist: torch.Tensor | None = None) -> int:
        """Append a node (`score`: cumulative log q up to it); returns its index."""
        self.tokens.append(token); self.parents.append(parent); self.q.append(q); self.scores.append(score)
        self.q_dists.append(q_dist)
        return len(self.tokens) - 1

    def build(self, keep: list[int] | None = None, with_q_dists: bool = False) -> DraftTree:
        """The finished DraftTree: all nodes, or only `keep` (ascending, ancestor-closed, 0 first)."""
        keep = list(range(len(self))) if keep is None else keep
        remap = {old: new for new, old in enumerate(keep)}
        return DraftTree(tuple(self.tokens[i] for i in keep), tuple(remap[self.parents[i]] if i else -1 for i in keep),
                         tuple(self.q[i] for i in keep), tuple(self.scores[i] for i in keep),
                         q_dists=tuple(self.q_dists[i] for i in keep) if with_q_dists else None)


class Drafter:
    """The portable drafter: the head's modules and torch's top k, on any device. On a CPU with the
    engine's kernels `cpu` (eagle_core/cpu/drafting.py, decided once here from the target's options)
    is asked first at each step, and None from it means the portable code runs."""

    def __init__(self, head, target, draft_vocab: list[int] | None = None):
        self._check_fits(head, target)
        self.head = head
        self.target = target
        self.embed = target.embed
        self.vocab_map, self.lm_weight = self._draft_lm(head, target, draft_vocab)
        self.cpu = for_drafter(self)
        if self.cpu is not None:  # the draft LM head's rows as the CPU path stores them
            self.lm_weight, self.lm = self.cpu.lm_weight, self.cpu.lm
        else:
            self.lm = linear_of(self.lm_weight, None)

    @staticmethod
    def _check_fits(head, target) -> None:
        if not isinstance(head, EagleHead):
            raise TypeError(f"an EAGLE-1/2 drafter needs an EagleHead, not {type(head).__name__} "
                            "(an EAGLE-3 head drafts through draft3.Eagle3Drafter: Engine(..., head3=...))")
        check_fits(head.config, target)

    @staticmethod
    def _draft_lm(head, target, draft_vocab):
        """(target id of each draft id or None, the LM-head weight the drafts come from (N, H)).
        Reduced draft vocabulary: the head's LM-head product only over N frequent tokens.
        Verification still uses the full vocabulary, so this changes speed, never the output."""
        w = target.lm_head_weight  # float32 also where the LM head multiplies from blocks (gguf format)
        if draft_vocab is None:
            return None, w.detach()  # (V, H)
        vocab_map = torch.tensor(draft_vocab, dtype=torch.long, device=w.device)
        return vocab_map, w[vocab_map].detach().clone()

    def new_cache(self, max_len: int) -> HeadCache:
        """The head's cache for one generation; its attention goes through the target's fast path
        (FastPath.attend_cache: the engine's kernel on a CPU, torch's elsewhere)."""
        cache = self.head.new_cache(max_len)
        cache.attend_with(self.target.fast.attend_cache)
        return cache

    # -- small helpers -----------------------------------------------------------------------
    def _logits(self, feats: torch.Tensor) -> torch.Tensor:
        """(m, H) predicted features -> (m, N) draft logits over the draft vocabulary."""
        return self.lm(feats.to(self.lm_weight.dtype)).float()

    def _ids(self, idx: torch.Tensor) -> torch.Tensor:
        return self.vocab_map[idx] if self.vocab_map is not None else idx

    def _top(self, feats: torch.Tensor, k: int) -> tuple[list[list[float]], list[list[int]]]:
        """(m, H) predicted features -> each row's k best draft tokens: their log q (descending)
        and target ids, as host lists (one transfer). On a CPU one row kernel call (rows.c's
        row_topk through the target's FastPath, where torch made three calls over the whole draft
        vocabulary a row)."""
        k = min(k, self.lm.out_features)
        top = self.cpu.top(feats, k) if self.cpu is not None else None
        if top is not None:
            return top
        logits = self._logits(feats)
        v, i = self.target.fast.row_topk(logits, k) or torch.log_softmax(logits, -1).topk(k, dim=-1)
        v, i = torch.stack([v.double(), self._ids(i).double()]).tolist()  # one transfer from a device
        return v, [[int(t) for t in row] for row in i]

    def _run(self, tokens: torch.Tensor, feats: torch.Tensor, positions: torch.Tensor, cache: HeadCache, mask=None):
        """tokens (n,), feats (n, H), positions (n,) -> predicted features (n, H)."""
        emb = self.embed(tokens.to(self.lm_weight.device))
        out = self.cpu.run(emb, feats, positions, cache, mask) if self.cpu is not None else None
        if out is not None:
            return out
        emb = emb[None].to(feats.dtype)
        out = self.head(emb, feats[None].to(emb.dtype), positions, mask=mask, cache=cache)
        return out[0]

    @torch.inference_mode()
    def catch_up(self, cache: HeadCache, feats: torch.Tensor, next_tokens: torch.Tensor, start_pos: int) -> torch.Tensor:
        """Feed committed pairs (f_t, x_{t+1}) for t = start_pos.. ; returns the root's predicted feature (H,)."""
        assert cache.length == start_pos, f"head cache holds {cache.length} positions, expected {start_pos}"
        out = self.cpu.catch_up(next_tokens, feats, start_pos, cache) if self.cpu is not None else None
        if out is not None:
            return out[-1]
        pos = torch.arange(start_pos, start_pos + feats.shape[0], device=feats.device)
        return self._run(next_tokens, feats, pos, cache)[-1]

    # -- the three drafting shapes -------------------------------------------------------------
    @torch.inference_mode()
    def draft(self, s: DecodeSettings, cache: HeadCache, root_token: int, root_feat: torch.Tensor,
              root_pos: int, max_depth: int, generator=None) -> DraftTree:
        """Draft a tree below `root_token`; `max_depth` caps the depth (context / token budget)."""
        if max_depth <= 0:
            return DraftTree.root_only(root_token)
        committed = cache.length
        tree = TreeBuilder(root_token, committed)
        try:
            if s.method in ("eagle2", "eagle3"):  # EAGLE-3 drafts EAGLE-2's dynamic tree
                return self._dynamic(s, cache, tree, root_feat, root_pos, min(s.depth, max_depth))
            if s.method == "eagle1":
                return self._static(s, cache, tree, root_feat, root_pos, max_depth)
            if s.method == "chain":
                return self._chain(s, cache, tree, root_feat, root_pos, min(s.chain_length, max_depth), generator)
            raise ValueError(f"method {s.method!r} does not draft")
        finally:
            cache.crop(committed)  # drop the tree's scratch entries

    def _expand_top(self, cache: HeadCache, tree: TreeBuilder, frontier: list[int], parents: list[torch.Tensor],
                    pos: int, k: int):
        """_expand, then each node's top k: -> (features (m, H), (values, target ids) host lists or
        None: then the caller asks _top). On a CPU one kernel call (eagle_core/cpu/fused_pass.py)."""
        out = self.cpu.expand_top(cache, tree, frontier, parents, pos, k) if self.cpu is not None else None
        if out is not None:
            return out
        return self._expand(cache, tree, frontier, torch.stack(parents), pos), None

    def _expand(self, cache: HeadCache, tree: TreeBuilder, frontier: list[int], parent_feats: torch.Tensor,
                pos: int) -> torch.Tensor:
        """Run the head on `frontier` nodes (all at one depth, each fed its parent's predicted
        feature, at head position `pos`); each sees the committed context, its ancestors and itself.
        -> their predicted features (m, H)."""
        m = len(frontier)
        base = cache.length
        mask = frontier_mask(tree.parents, tree.slots, tree.committed, frontier, base)  # copied to the device once
        tree.slots.update({node: base + j for j, node in enumerate(frontier)})
        dev = parent_feats.device
        toks = torch.tensor([tree.tokens[i] for i in frontier], device=dev)
        positions = torch.full((m,), pos, dtype=torch.long, device=dev)
        return self._run(toks, parent_feats, positions, cache, mask.to(dev))  # (m, H)

    def _dynamic(self, s, cache, tree: TreeBuilder, root_feat, root_pos, depth) -> DraftTree:
        """EAGLE-2: expand the best `width` frontier nodes by cumulative log q, `width` children
        each, for `depth` levels; then keep the best `total` nodes (s.tree_top_k, s.total_tokens)."""
        width, total = s.tree_top_k, s.total_tokens
        feats_of: dict[int, torch.Tensor] = {0: root_feat}  # predicted feature AT each node
        (vs,), (ts,) = self._top(root_feat[None], width)
        frontier = [tree.add(t, 0, math.exp(v), v) for v, t in zip(vs, ts)]
        for d in range(1, depth):
            parents = [feats_of[tree.parents[i]] for i in frontier]
            out, top = self._expand_top(cache, tree, frontier, parents, root_pos + d - 1, width)
            for j, node in enumerate(frontier):
                feats_of[node] = out[j]
            vs, ts = top or self._top(out, width)  # (m, width) each; scores: a node's log q plus its parent's
            new = [tree.add(t, node, math.exp(v), tree.scores[node] + v)
                   for node, row_v, row_t in zip(frontier, vs, ts) for v, t in zip(row_v, row_t)]
            # the next frontier: the best `width` of this depth's new nodes by cumulative score
            best = sorted(range(len(new)), key=lambda b: -tree.scores[new[b]])[:width]
            frontier = sorted(new[b] for b in best)
        drafts = select_closed_top(tree.scores[1:], [p - 1 if p > 0 else -1 for p in tree.parents[1:]], total)
        return tree.build([0] + [i + 1 for i in drafts])

    def _static(self, s, cache, tree: TreeBuilder, root_feat, root_pos, max_depth) -> DraftTree:
        """EAGLE-1: a fixed tree of rank paths (entry (0, 1) = 2nd choice after the 1st choice). Each
        expanded node keeps the top ranks its children need, from the same drafting pass as EAGLE-2's
        (on a CPU one kernel call per depth: _expand_top)."""
        paths, _ = static_tree_layout(p for p in s.static_tree if len(p) <= max_depth)
        ranks: dict[tuple, int] = {}  # a parent's path -> how many of its top ranks its children use
        for p in paths:
            ranks[p[:-1]] = max(ranks.get(p[:-1], 0), p[-1] + 1)
        node_of, path_of = {(): 0}, {0: ()}
        (v0,), (t0,) = self._top(root_feat[None], ranks[()])
        tops = {0: (v0, t0)}  # node -> its top ranks: (log q values, target ids)
        feats_of = {0: root_feat}
        for depth in range(1, max(len(p) for p in paths) + 1):
            level = [p for p in paths if len(p) == depth]
            # expand the parents of this level that are not expanded yet (all at depth - 1 >= 1)
            need = sorted({node_of[p[:-1]] for p in level} - tops.keys())
            if need:
                k = max(ranks[path_of[i]] for i in need)
                parents = [feats_of[tree.parents[i]] for i in need]
                out, top = self._expand_top(cache, tree, need, parents, root_pos + depth - 2, k)
                vs, ts = top or self._top(out, k)
                for j, i in enumerate(need):
                    feats_of[i], tops[i] = out[j], (vs[j], ts[j])
            for p in level:
                par = node_of[p[:-1]]
                v, t = tops[par][0][p[-1]], int(tops[par][1][p[-1]])
                node_of[p] = tree.add(t, par, math.exp(v), tree.scores[par] + v)
                path_of[node_of[p]] = p
        return tree.build()

    def _chain(self, s, cache, tree: TreeBuilder, root_feat, root_pos, length, generator) -> DraftTree:
        """A single path. Greedy: the head's argmax each step (the drafting pass's top 1). Sampling: draw from the head's q
        (same temperature / top-p / top-k as the target) and keep q for the min(1, p/q) rule."""
        feat = root_feat
        for d in range(1, length + 1):
            if s.greedy:  # the head's argmax: the drafting pass's top 1 (one kernel call a step on a CPU)
                if d == 1:
                    (v,), (t,) = self._top(feat[None], 1)
                else:
                    out, top = self._expand_top(cache, tree, [len(tree) - 1], [feat], root_pos + d - 2, 1)
                    feat = out[0]
                    (v,), (t,) = top or self._top(out, 1)
                tok, qv, qd = int(t[0]), math.exp(v[0]), None
                tree.add(tok, len(tree) - 1, qv, tree.scores[-1] + math.log(max(qv, 1e-30)), qd)
                continue
            if d > 1:
                feat = self._expand(cache, tree, [len(tree) - 1], feat[None], root_pos + d - 2)[0]
            probs = logits_to_probs(self._logits(feat[None])[0], s.temperature, s.top_p, s.top_k)
            i = int(torch.multinomial(probs.cpu(), 1, generator=generator))
            tok, qv = int(self._ids(torch.tensor([i], device=probs.device))[0]), float(probs[i])
            qd = torch.zeros(self.target.vocab_size)
            qd[self._ids(torch.arange(probs.shape[0], device=probs.device)).cpu()] = probs.cpu()
            tree.add(tok, len(tree) - 1, qv, tree.scores[-1] + math.log(max(qv, 1e-30)), qd)
        return tree.build(with_q_dists=not s.greedy)
