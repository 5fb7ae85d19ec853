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

from . import kernels
from .config import DecodeSettings
from .head import EagleHead, HeadCache
from .tree import DraftTree, select_closed_top, static_tree_layout
from .verify import logits_to_probs


class Drafter:
    def __init__(self, head: EagleHead, target, draft_vocab: list[int] | None = None):
        if head.config.hidden_size != target.hidden_size:
            raise ValueError(f"head does not fit the target: head hidden size {head.config.hidden_size}, "
                             f"target hidden size {target.hidden_size}")
        if head.config.vocab_size != target.vocab_size:
            raise ValueError(f"head does not fit the target: head vocabulary {head.config.vocab_size}, "
                             f"target vocabulary {target.vocab_size}")
        self.head = head
        self.target = target
        self.embed = target.embed
        w = target.lm_head.weight
        # Reduced draft vocabulary: the head's LM-head product only over N frequent tokens.
        # Verification still uses the full vocabulary, so this changes speed, never the output.
        if draft_vocab is not None:
            self.vocab_map = torch.tensor(draft_vocab, dtype=torch.long, device=w.device)
            self.lm_weight = w[self.vocab_map].detach().clone()  # (N, H)
        else:
            self.vocab_map = None
            self.lm_weight = w.detach()  # (V, H)
        # The head's layers and its LM-head product run on the target's CPU kernels (eagle_core.kernels).
        self.lm = kernels.linear_of(self.lm_weight, target.linear_backend(tuple(self.lm_weight.shape)))
        if getattr(target, "kernels", None) is not None and target.kernels.swaps:
            kernels.install(head, target.kernels.policy)

    def new_cache(self, max_len: int) -> HeadCache:
        return self.head.new_cache(max_len)

    # -- small helpers -----------------------------------------------------------------------
    def _logits(self, feats: torch.Tensor) -> torch.Tensor:
        """(m, H) predicted features -> (m, N) draft logits over the draft vocabulary."""
        return self.lm(feats.to(self.lm_weight.dtype)).float()

    def _ids(self, idx: torch.Tensor) -> torch.Tensor:
        return self.vocab_map[idx] if self.vocab_map is not None else idx

    def _run(self, tokens: torch.Tensor, feats: torch.Tensor, positions: torch.Tensor, cache: HeadCache, mask=None):
        """tokens (n,), feats (n, H), positions (n,) -> predicted features (n, H)."""
        emb = self.embed(tokens.to(self.lm_weight.device))[None].to(feats.dtype)
        out = self.head(emb, feats[None].to(emb.dtype), positions, mask=mask, cache=cache)
        return out[0]

    @torch.inference_mode()
    def catch_up(self, cache: HeadCache, feats: torch.Tensor, next_tokens: torch.Tensor, start_pos: int) -> torch.Tensor:
        """Feed committed pairs (f_t, x_{t+1}) for t = start_pos.. ; returns the root's predicted feature (H,)."""
        assert cache.length == start_pos, f"head cache holds {cache.length} positions, expected {start_pos}"
        pos = torch.arange(start_pos, start_pos + feats.shape[0], device=feats.device)
        return self._run(next_tokens, feats, pos, cache)[-1]

    # -- the three drafting shapes -------------------------------------------------------------
    @torch.inference_mode()
    def draft(self, s: DecodeSettings, cache: HeadCache, root_token: int, root_feat: torch.Tensor,
              root_pos: int, max_depth: int, generator=None) -> DraftTree:
        """Draft a tree below `root_token`; `max_depth` caps the depth (context / token budget)."""
        if max_depth <= 0:
            return DraftTree((root_token,), (-1,), (1.0,), (0.0,))
        committed = cache.length
        try:
            if s.method in ("eagle2", "eagle3"):  # EAGLE-3 drafts EAGLE-2's dynamic tree
                return self._dynamic(s, cache, root_token, root_feat, root_pos, min(s.depth, max_depth))
            if s.method == "eagle1":
                return self._static(s, cache, root_token, root_feat, root_pos, max_depth)
            if s.method == "chain":
                return self._chain(s, cache, root_token, root_feat, root_pos, min(s.chain_length, max_depth), generator)
            raise ValueError(f"method {s.method!r} does not draft")
        finally:
            cache.crop(committed)  # drop the tree's scratch entries

    def _expand(self, cache, committed, slots, parents, frontier, tokens, parent_feats, pos):
        """Run the head on `frontier` nodes (all at one depth); each sees committed + ancestors + itself."""
        m = len(frontier)
        base = cache.length
        mask = torch.zeros(m, base + m, dtype=torch.bool, device=parent_feats.device)
        mask[:, :committed] = True
        for j, node in enumerate(frontier):
            a = parents[node]
            while a > 0:  # ancestors below the root were expanded earlier and have slots
                mask[j, slots[a]] = True
                a = parents[a]
            mask[j, base + j] = True
            slots[node] = base + j
        toks = torch.tensor([tokens[i] for i in frontier], device=parent_feats.device)
        positions = torch.full((m,), pos, dtype=torch.long, device=parent_feats.device)
        return self._run(toks, parent_feats, positions, cache, mask)  # (m, H)

    def _dynamic(self, s, cache, root_token, root_feat, root_pos, depth):
        """EAGLE-2: expand the best top_k frontier by cumulative log q, then keep the best total_tokens."""
        k = s.tree_top_k
        committed = cache.length
        tokens, parents, q, scores = [root_token], [-1], [1.0], [0.0]
        slots: dict[int, int] = {}
        feats_of: dict[int, torch.Tensor] = {0: root_feat}  # predicted feature AT each node
        logq = torch.log_softmax(self._logits(root_feat[None]), -1)[0]
        top_v, top_i = logq.topk(min(k, logq.shape[-1]))
        frontier = []
        for v, t in zip(top_v.tolist(), self._ids(top_i).tolist()):
            tokens.append(t); parents.append(0); q.append(math.exp(v)); scores.append(v)
            frontier.append(len(tokens) - 1)
        for d in range(1, depth):
            pf = torch.stack([feats_of[parents[i]] for i in frontier])
            out = self._expand(cache, committed, slots, parents, frontier, tokens, pf, root_pos + d - 1)
            for j, node in enumerate(frontier):
                feats_of[node] = out[j]
            logq = torch.log_softmax(self._logits(out), -1)  # (m, N)
            top_v, top_i = logq.topk(min(k, logq.shape[-1]), dim=-1)  # (m, k)
            # one host transfer per depth, not one per element
            cum = (torch.tensor([scores[i] for i in frontier], device=top_v.device)[:, None] + top_v).tolist()
            qs, ids = top_v.exp().tolist(), self._ids(top_i).tolist()
            new = []
            for j, node in enumerate(frontier):
                for r in range(len(ids[j])):
                    tokens.append(ids[j][r]); parents.append(node); q.append(qs[j][r]); scores.append(cum[j][r])
                    new.append(len(tokens) - 1)
            # the next frontier: the best top_k of this depth's new nodes by cumulative score
            best = sorted(range(len(new)), key=lambda b: -scores[new[b]])[:k]
            frontier = sorted(new[b] for b in best)
        keep = [0] + [i + 1 for i in select_closed_top(scores[1:], [p - 1 if p > 0 else -1 for p in parents[1:]],
                                                       s.total_tokens)]
        remap = {old: new for new, old in enumerate(keep)}
        return DraftTree(tuple(tokens[i] for i in keep), tuple(remap[parents[i]] if i else -1 for i in keep),
                         tuple(q[i] for i in keep), tuple(scores[i] for i in keep))

    def _static(self, s, cache, root_token, root_feat, root_pos, max_depth):
        """EAGLE-1: a fixed tree of rank paths (entry (0, 1) = 2nd choice after the 1st choice)."""
        paths, pparents = static_tree_layout(p for p in s.static_tree if len(p) <= max_depth)
        committed = cache.length
        tokens, parents, q, scores = [root_token], [-1], [1.0], [0.0]
        slots: dict[int, int] = {}
        node_of = {(): 0}
        dists = {0: torch.log_softmax(self._logits(root_feat[None]), -1)[0]}  # log q at each expanded node
        feats_of = {0: root_feat}
        for depth in range(1, max(len(p) for p in paths) + 1):
            level = [p for p in paths if len(p) == depth]
            # expand the parents of this level that are not expanded yet (all at depth - 1 >= 1)
            need = sorted({node_of[p[:-1]] for p in level} - dists.keys())
            if need:
                pf = torch.stack([feats_of[parents[i]] for i in need])
                out = self._expand(cache, committed, slots, parents, need, tokens, pf, root_pos + depth - 2)
                lq = torch.log_softmax(self._logits(out), -1)
                for j, i in enumerate(need):
                    feats_of[i], dists[i] = out[j], lq[j]
            for p in level:
                par = node_of[p[:-1]]
                lq = dists[par]
                rank_v, rank_i = lq.topk(p[-1] + 1)
                v, t = float(rank_v[-1]), int(self._ids(rank_i[-1:])[0])
                tokens.append(t); parents.append(par); q.append(math.exp(v)); scores.append(scores[par] + v)
                node_of[p] = len(tokens) - 1
        return DraftTree(tuple(tokens), tuple(parents), tuple(q), tuple(scores))

    def _chain(self, s, cache, root_token, root_feat, root_pos, length, generator):
        """A single path. Greedy: the head's argmax each step. Sampling: draw from the head's q
        (same temperature / top-p / top-k as the target) and keep q for the min(1, p/q) rule."""
        committed = cache.length
        tokens, parents, q, scores, q_dists = [root_token], [-1], [1.0], [0.0], [None]
        slots: dict[int, int] = {}
        feat = root_feat
        for d in range(1, length + 1):
            if d > 1:
                feat = self._expand(cache, committed, slots, parents, [len(tokens) - 1], tokens, feat[None],
                                    root_pos + d - 2)[0]
            logits = self._logits(feat[None])[0]
            if s.greedy:
                lq = torch.log_softmax(logits, -1)
                i = int(lq.argmax())
                tok, qv, qd = int(self._ids(torch.tensor([i], device=lq.device))[0]), float(lq[i].exp()), None
            else:
                probs = logits_to_probs(logits, s.temperature, s.top_p, s.top_k)
                i = int(torch.multinomial(probs.cpu(), 1, generator=generator))
                tok, qv = int(self._ids(torch.tensor([i], device=probs.device))[0]), float(probs[i])
                qd = torch.zeros(self.target.vocab_size)
                qd[self._ids(torch.arange(probs.shape[0], device=probs.device)).cpu()] = probs.cpu()
            tokens.append(tok); parents.append(len(tokens) - 2); q.append(qv)
            scores.append(scores[-1] + math.log(max(qv, 1e-30))); q_dists.append(qd)
        return DraftTree(tuple(tokens), tuple(parents), tuple(q), tuple(scores),
                         q_dists=tuple(q_dists) if not s.greedy else None)
