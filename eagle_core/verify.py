"""Turning logits into distributions, and the acceptance rules that make EAGLE lossless.

p is always the target's distribution, q the draft's (the papers' names: speculative sampling,
Leviathan et al. 2023, "Fast Inference from Transformers via Speculative Decoding", and Chen et
al. 2023, "Accelerating Large Language Model Decoding with Speculative Sampling"; its tree form
as in EAGLE, arXiv:2401.15077). The three rules:

* greedy       a child is accepted iff it is the target's argmax at its parent; the output is
               therefore exactly vanilla greedy decoding.
* point_mass   (sampling, deterministic top-k drafts) at a node with target distribution p,
               try the children in rank order: accept child c with probability p(c); on a
               rejection set p(c) = 0 and renormalise before trying the next sibling; if all
               fail, sample the bonus token from what is left of p. A point-mass draft q = δ_c
               makes min(1, p/q) = p(c) and the residual max(0, p - q) = p without c, so this is
               speculative sampling applied sibling by sibling: the output is distributed as p.
* ratio        (sampling, drafts sampled from q, one child per node) accept x with probability
               min(1, p(x)/q(x)); on rejection sample from norm(max(0, p - q)). Then
               P(x) = min(p, q)(x) + (1 - Σ min(p, q)) · max(0, p - q)(x) / Σ max(0, p - q) = p(x).

After the last accepted node the bonus token is drawn from p at that node, processed exactly
like every other target distribution (same temperature, top-p, top-k).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from .trace import ACCEPTED, NOT_REACHED, REJECTED
from .tree import children_lists as _children


def logits_to_probs(logits: torch.Tensor, temperature: float, top_p: float = 1.0, top_k: int = 0) -> torch.Tensor:
    """Softmax of logits / temperature, restricted to the top_k tokens and the top_p nucleus.

    logits: (..., V). temperature 0 means greedy: returns the one-hot of the argmax.
    The nucleus is the smallest prefix of the tokens in descending p (ties: lower token id first) whose
    mass reaches top_p, the token that crosses it included. It is found among a few top candidates
    (`nucleus`), not by sorting the whole vocabulary, and equals the full sort's bit for bit.
    """
    logits = logits.float()
    if temperature == 0.0:
        return torch.nn.functional.one_hot(logits.argmax(-1), logits.shape[-1]).float()
    logits = logits / temperature
    if top_k and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if top_p < 1.0:
        rows = probs.reshape(-1, probs.shape[-1])
        keep = torch.zeros(rows.shape, dtype=torch.bool, device=probs.device)
        for r in range(rows.shape[0]):
            keep[r, nucleus(rows[r], top_p)] = True
        probs = probs.masked_fill(~keep.reshape(probs.shape), 0.0)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


FIRST_CANDIDATES = 64  # the nucleus's first candidate set; doubled until it holds the nucleus
# Slack on the stopping test: a prefix sum in float32 is off from the exact one by under 2e-7 (two
# roundings near 1), so once the candidates' last exclusive prefix sum reaches top_p + SLACK, every
# token after them has one >= top_p too and is dropped, as the full sort would drop it.
SLACK = 1e-6


def nucleus(p: torch.Tensor, top_p: float) -> torch.Tensor:
    """The token ids of the top_p nucleus of one distribution p (V,), as a full stable sort in
    descending p would keep them (drop a token once the mass before it reaches top_p), found among
    the top m tokens, m at least doubling: every token tied with the m-th is a candidate too, and a stable sort
    of the candidates in id order is then exactly the full sort's prefix, with the same prefix sums."""
    V = p.shape[-1]
    m = min(FIRST_CANDIDATES, V)
    while True:
        if 2 * m > V:  # most of the vocabulary: sorting all of it is no dearer
            vals, idx = torch.sort(p, descending=True, stable=True)
        else:
            cut = torch.topk(p, m, sorted=False).values.min()
            idx = (p >= cut).nonzero().squeeze(-1)  # ascending ids
            vals, order = torch.sort(p[idx], descending=True, stable=True)
            idx = idx[order]
        before = vals.cumsum(-1) - vals  # the mass before each candidate (exclusive prefix sum)
        if 2 * m > V or float(before[-1]) >= top_p + SLACK:
            return idx[before < top_p]
        # every other token has p below the last candidate's: at least missing / low more are needed
        low, missing = float(vals[-1]), top_p + SLACK - float(before[-1]) - float(vals[-1])
        m = max(2 * m, len(idx) + 1 + int(min(missing / low, V) if low > 0 else V))


def row_dists(rows: torch.Tensor, s) -> "DistFn":
    """dist(i): the processed target distribution at node i (logits_to_probs of row i), made the first
    time the walk asks for it and kept: a walk asks at the nodes of its accepted path only (the root and
    each accepted draft), mostly a few of a tree's rows, and the other rows cost nothing."""
    rows = rows.float().cpu()
    made: dict[int, torch.Tensor] = {}

    def dist(i: int) -> torch.Tensor:
        if i not in made:
            made[i] = logits_to_probs(rows[i], s.temperature, s.top_p, s.top_k)
        return made[i]
    return dist


def sample(probs: torch.Tensor, generator: torch.Generator | None) -> int:
    """Draw one token id from a 1-D distribution."""
    return int(torch.multinomial(probs.float().cpu(), 1, generator=generator).item())


def uniform(generator: torch.Generator | None) -> float:
    return float(torch.rand((), generator=generator).item())


@dataclass(frozen=True)
class Verdict:
    """Outcome of verifying one tree."""

    accepted: tuple[int, ...]  # node indices of the accepted path, root (0) first
    bonus_token: int
    decisions: tuple[str, ...]  # per node; root is ACCEPTED
    p: tuple[float | None, ...]  # per node: target probability at its parent (None = not computed)
    u: tuple[float | None, ...]  # per node: the uniform draw it was tested with (sampling)
    p_test: tuple[float | None, ...]  # per node: the probability the draw was compared against
    bonus_p: float | None


# `dist(i)` returns the processed target distribution p at node i, shape (V,), float32.
DistFn = Callable[[int], torch.Tensor]


def _finish(decisions):
    """Every node that was never tested (its parent was not accepted) is NOT_REACHED."""
    return tuple(NOT_REACHED if d is None else d for d in decisions)


def verify_greedy(tokens, parents, argmax: Callable[[int], int], prob: Callable[[int, int], float] | None = None) -> Verdict:
    """Greedy rule. argmax(i) = target argmax at node i; prob(i, tok) = target p of tok at i (display)."""
    n = len(tokens)
    children = _children(parents)
    decisions: list[str | None] = [ACCEPTED] + [None] * (n - 1)
    p: list[float | None] = [None] * n
    node, accepted = 0, [0]
    while True:
        best = argmax(node)
        nxt = None
        for c in children[node]:
            if prob is not None:
                p[c] = prob(node, tokens[c])
            if nxt is None and tokens[c] == best:
                decisions[c], nxt = ACCEPTED, c
            else:
                decisions[c] = REJECTED
        if nxt is None:
            bonus_p = prob(node, best) if prob is not None else None
            return Verdict(tuple(accepted), best, _finish(decisions), tuple(p),
                           (None,) * n, (None,) * n, bonus_p)
        accepted.append(nxt)
        node = nxt


def verify_point_mass(tokens, parents, dist: DistFn, generator: torch.Generator | None) -> Verdict:
    """Sampling rule for deterministic (top-k) draft children; see the module docstring."""
    n = len(tokens)
    children = _children(parents)
    decisions: list[str | None] = [ACCEPTED] + [None] * (n - 1)
    p: list[float | None] = [None] * n
    u: list[float | None] = [None] * n
    p_test: list[float | None] = [None] * n
    node, accepted = 0, [0]
    while True:
        residual = dist(node).clone()
        nxt = None
        for c in children[node]:
            p[c] = float(dist(node)[tokens[c]])
            total = float(residual.sum())
            p_test[c] = float(residual[tokens[c]]) / total if total > 0 else 0.0
            u[c] = uniform(generator)
            if u[c] < p_test[c]:
                decisions[c], nxt = ACCEPTED, c
                break
            decisions[c] = REJECTED
            residual[tokens[c]] = 0.0
        if nxt is None:
            residual = residual / residual.sum()
            bonus = sample(residual, generator)
            return Verdict(tuple(accepted), bonus, _finish(decisions), tuple(p),
                           tuple(u), tuple(p_test), float(dist(node)[bonus]))
        accepted.append(nxt)
        node = nxt


def verify_ratio(tokens, parents, dist: DistFn, q_dists, generator: torch.Generator | None) -> Verdict:
    """Classic speculative sampling for a chain whose tokens were sampled from q.

    q_dists[i] is the draft distribution node i was sampled from (over the full vocabulary).
    """
    n = len(tokens)
    children = _children(parents)
    assert all(len(c) <= 1 for c in children), "the min(1, p/q) rule here verifies chains only"
    decisions: list[str | None] = [ACCEPTED] + [None] * (n - 1)
    p: list[float | None] = [None] * n
    u: list[float | None] = [None] * n
    p_test: list[float | None] = [None] * n
    node, accepted = 0, [0]
    while True:
        pd = dist(node)
        if not children[node]:
            bonus = sample(pd, generator)
            return Verdict(tuple(accepted), bonus, _finish(decisions), tuple(p),
                           tuple(u), tuple(p_test), float(pd[bonus]))
        c = children[node][0]
        qd = q_dists[c].to(pd.device).float()
        x = tokens[c]
        p[c] = float(pd[x])
        p_test[c] = min(1.0, p[c] / float(qd[x])) if float(qd[x]) > 0 else 0.0
        u[c] = uniform(generator)
        if u[c] < p_test[c]:
            decisions[c] = ACCEPTED
            accepted.append(c)
            node = c
            continue
        decisions[c] = REJECTED
        residual = torch.clamp(pd - qd, min=0.0)
        total = float(residual.sum())
        # total == 0 only if p == q exactly, where rejection has probability 0; guard anyway
        residual = residual / total if total > 0 else pd
        bonus = sample(residual, generator)
        return Verdict(tuple(accepted), bonus, _finish(decisions), tuple(p),
                       tuple(u), tuple(p_test), float(pd[bonus]))


def rule_for(s) -> str:
    """The rule of a run's cycles, chosen here and nowhere else: greedy at temperature 0; ratio for a
    sampled chain (its drafts are sampled from q); point_mass for sampling with deterministic top-k
    drafts (EAGLE-1/2/3's trees) and for vanilla's root alone."""
    return "greedy" if s.greedy else ("ratio" if s.method == "chain" else "point_mass")


def accept(tree, rows: torch.Tensor, s, gen, row_stats=None) -> tuple[Verdict, str]:
    """A cycle's acceptance: the target's logits at every node of `tree` (rows (n, V), node order), the
    decode settings `s` and the sampling generator -> (the verdict, its rule). What the walk needs goes
    to the host in ONE transfer (on a GPU each transfer waits for the device): greedy, each node's
    argmax and the p of each drafted token and of each argmax; sampling, every node's processed p.
    `row_stats`: the target's FastPath.row_stats (None, or an answer of None: torch's)."""
    rule = rule_for(s)
    if rule != "greedy":
        dist = row_dists(rows, s)  # the logits go over once; a node's p is made when the walk reaches it
        if rule == "ratio" and tree.q_dists is not None:  # a chain cut to its root has no q: the ratio
            # rule with nothing to test is the bonus draw from p, which the point-mass walk makes
            return verify_ratio(tree.tokens, tree.parents, dist, tree.q_dists, gen), rule
        return verify_point_mass(tree.tokens, tree.parents, dist, gen), rule
    dev = rows.device
    parent = torch.tensor([max(p, 0) for p in tree.parents], device=dev)
    stats = row_stats(rows) if row_stats is not None else None  # on a CPU one kernel call (kernels/rows.c)
    top_v, top_i, lse = stats if stats is not None else (*rows.max(-1), torch.logsumexp(rows, -1))
    p_draft = (rows[parent, torch.tensor(tree.tokens, device=dev)] - lse[parent]).exp()
    top, p_token, p_top = torch.stack([top_i.double(), p_draft.double(), (top_v - lse).exp().double()]).tolist()
    p_of = {(tree.parents[i], tree.tokens[i]): p_token[i] for i in range(1, len(tree))}
    p_of.update({(i, int(top[i])): p_top[i] for i in range(len(tree))})
    return verify_greedy(tree.tokens, tree.parents, lambda i: int(top[i]), lambda i, tok: p_of[(i, tok)]), rule
