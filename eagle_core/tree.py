"""Draft trees as plain data, and the pure functions the target needs to verify one.

A tree is stored flat, in verification order: node 0 is the root (the last committed token,
not yet seen by the target), and every node's parent comes before it. Everything here is a
pure function of `parents` (and `depths`), so it can be tested on hand-built trees.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class DraftTree:
    """A drafted tree before verification. Lists are indexed by node; node 0 is the root."""

    tokens: tuple[int, ...]
    parents: tuple[int, ...]  # parents[0] = -1
    q: tuple[float, ...]  # draft probability of each node at its parent (root: 1.0)
    scores: tuple[float, ...]  # cumulative log q (root: 0.0)
    # For sampled chains (the min(1, p/q) rule) the full draft distribution at each parent:
    # q_dists[i] is the distribution node i was sampled from (None for deterministic drafts).
    q_dists: tuple[torch.Tensor | None, ...] | None = None

    def __post_init__(self):
        n = len(self.tokens)
        assert len(self.parents) == len(self.q) == len(self.scores) == n, "tree fields differ in length"
        assert n >= 1 and self.parents[0] == -1, "node 0 must be the root"
        for i in range(1, n):
            assert 0 <= self.parents[i] < i, f"node {i}: parent {self.parents[i]} must come before it"

    def __len__(self) -> int:
        return len(self.tokens)

    @classmethod
    def root_only(cls, token: int) -> "DraftTree":
        """The tree of a cycle that drafts nothing: the root alone."""
        return cls((token,), (-1,), (1.0,), (0.0,))

    @property
    def depths(self) -> tuple[int, ...]:
        return depths_from_parents(self.parents)


def depths_from_parents(parents) -> tuple[int, ...]:
    depths = []
    for i, p in enumerate(parents):
        depths.append(0 if p < 0 else depths[p] + 1)
    return tuple(depths)


def children_lists(parents) -> list[list[int]]:
    """children[i] = node indices whose parent is i, in index (= draft rank) order."""
    children: list[list[int]] = [[] for _ in parents]
    for i, p in enumerate(parents):
        if p >= 0:
            children[p].append(i)
    return children


def ancestor_mask(parents) -> torch.Tensor:
    """(n, n) bool: mask[i, j] is True iff node j is node i or one of its ancestors."""
    n = len(parents)
    mask = torch.zeros(n, n, dtype=torch.bool)
    for i, p in enumerate(parents):
        if p >= 0:
            mask[i] = mask[p]
        mask[i, i] = True
    return mask


def frontier_mask(parents, slots: dict, committed: int, frontier, base: int) -> torch.Tensor:
    """The drafter's side of ancestor_mask: (m, base + m) bool over the head's cache when the head runs
    on `frontier` (m nodes of one depth, their entries base + j): each may attend to the committed
    context (entries [0, committed)), its ancestors below the root (at their entries `slots`), and
    itself. Built on the host; the portable drafter and the CPU's fused pass read the same mask."""
    m = len(frontier)
    mask = torch.zeros(m, base + m, dtype=torch.bool)
    mask[:, :committed] = True
    rows, cols = [], []
    for j, node in enumerate(frontier):
        a = parents[node]
        while a > 0:  # ancestors below the root were expanded earlier and have entries
            rows.append(j)
            cols.append(slots[a])
            a = parents[a]
        rows.append(j)
        cols.append(base + j)
    mask[rows, cols] = True
    return mask


def tree_attention_mask(parents, context_len: int, dtype=torch.float32, device=None) -> torch.Tensor:
    """The 4D additive mask for one verification forward: (1, 1, n, context_len + n).

    Each tree node sees the whole committed context plus its ancestors and itself. 0 means
    "may attend", the dtype's most negative value means "may not" (works for eager and SDPA).
    """
    allowed = ancestor_mask(parents)  # (n, n)
    n = allowed.shape[0]
    mask = torch.zeros(n, context_len + n, dtype=dtype, device=device)
    mask[:, context_len:].masked_fill_(~allowed.to(device), torch.finfo(dtype).min)
    return mask[None, None]  # (1, 1, n, L + n)


def tree_positions(parents, context_len: int) -> torch.Tensor:
    """Position id of each node: context_len + depth (the root sits right after the context)."""
    return torch.tensor(depths_from_parents(parents), dtype=torch.long) + context_len


def root_to_leaf_paths(parents) -> list[list[int]]:
    children = children_lists(parents)
    paths = []
    for leaf in (i for i, c in enumerate(children) if not c):
        path = [leaf]
        while parents[path[-1]] >= 0:
            path.append(parents[path[-1]])
        paths.append(path[::-1])
    return paths


def select_closed_top(scores, parents, total: int) -> list[int]:
    """Indices of the best `total` nodes by score, always ancestor-closed, in index order.

    A child's cumulative log-probability never exceeds its parent's, so the best set is
    closed under "parent of" except for exact ties; breaking ties by index (parents have
    smaller indices than children) makes it closed always.
    """
    order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))
    kept = set(order[:total])
    for i in kept:
        assert parents[i] < 0 or parents[i] in kept, "selection is not ancestor-closed"
    return sorted(kept)


def static_tree_layout(paths) -> tuple[list[tuple[int, ...]], list[int]]:
    """Sort rank paths into verification order and return (paths, parent index per path).

    The root is not included; parent -1 means "child of the root".
    """
    ordered = sorted(set(map(tuple, paths)), key=lambda p: (len(p), p))
    where = {p: i for i, p in enumerate(ordered)}
    parents = [where[p[:-1]] if len(p) > 1 else -1 for p in ordered]
    return ordered, parents
