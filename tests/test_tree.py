"""Hand-built trees with known answers: masks, positions, paths, closed selection, static layout."""
import torch

from eagle_core.config import EAGLE1_TREE
from eagle_core.tree import (ancestor_mask, children_lists, depths_from_parents, root_to_leaf_paths,
                             select_closed_top, static_tree_layout, tree_attention_mask, tree_positions)

#        0 (root)
#       / \
#      1   2
#     / \    \
#    3   4    5
#    |
#    6
PARENTS = (-1, 0, 0, 1, 1, 2, 3)


def test_depths_children_paths():
    assert depths_from_parents(PARENTS) == (0, 1, 1, 2, 2, 2, 3)
    assert children_lists(PARENTS) == [[1, 2], [3, 4], [5], [6], [], [], []]
    # one path per leaf, in leaf index order (4, 5, 6)
    assert root_to_leaf_paths(PARENTS) == [[0, 1, 4], [0, 2, 5], [0, 1, 3, 6]]


def test_ancestor_mask_known():
    expected = torch.tensor([
        [1, 0, 0, 0, 0, 0, 0],
        [1, 1, 0, 0, 0, 0, 0],
        [1, 0, 1, 0, 0, 0, 0],
        [1, 1, 0, 1, 0, 0, 0],
        [1, 1, 0, 0, 1, 0, 0],
        [1, 0, 1, 0, 0, 1, 0],
        [1, 1, 0, 1, 0, 0, 1],
    ], dtype=torch.bool)
    assert torch.equal(ancestor_mask(PARENTS), expected)


def test_target_mask_and_positions():
    L = 5
    m = tree_attention_mask(PARENTS, L)
    assert m.shape == (1, 1, 7, L + 7)
    assert (m[0, 0, :, :L] == 0).all(), "every node sees the whole committed context"
    allowed = m[0, 0, :, L:] == 0
    assert torch.equal(allowed, ancestor_mask(PARENTS))
    assert (m[0, 0, :, L:][~allowed] == torch.finfo(torch.float32).min).all()
    assert tree_positions(PARENTS, L).tolist() == [5, 6, 6, 7, 7, 7, 8]


def test_chain_mask_is_causal():
    chain = (-1, 0, 1, 2)
    assert torch.equal(ancestor_mask(chain), torch.ones(4, 4, dtype=torch.bool).tril())


def test_select_closed_top():
    # scores of nodes 1..6 (root excluded), parents re-indexed without the root
    scores = [-0.1, -1.0, -0.5, -0.5, -2.0, -0.6]
    parents = [-1, -1, 0, 0, 1, 2]
    assert select_closed_top(scores, parents, 3) == [0, 2, 3]
    assert select_closed_top(scores, parents, 4) == [0, 2, 3, 5]
    # an exact tie between a parent and its child keeps the parent (ties break by index)
    assert select_closed_top([-0.5, -0.5], [-1, 0], 1) == [0]


def test_static_layout_eagle1_tree():
    paths, parents = static_tree_layout(EAGLE1_TREE)
    assert len(paths) == 25
    per_depth = [sum(len(p) == d for p in paths) for d in range(1, 6)]
    assert per_depth == [4, 8, 8, 3, 2]
    for p, par in zip(paths, parents):
        assert (par == -1) == (len(p) == 1)
        if par >= 0:
            assert paths[par] == p[:-1]


def test_eagle1_tree_is_the_official_default():
    """The official code's default tree (mc_sim_7b_63): two paths here used to differ from it
    ((1, 1, 0) for (0, 2, 1), (0, 0, 1, 0) for (0, 0, 0, 2))."""
    assert (0, 2, 1) in EAGLE1_TREE and (0, 0, 0, 2) in EAGLE1_TREE
    assert (1, 1, 0) not in EAGLE1_TREE and (0, 0, 1, 0) not in EAGLE1_TREE


def test_frontier_mask_sees_the_context_the_ancestors_and_itself():
    """Hand-built: root 0 -> 1, 2; 1 -> 3, 4 (3 and 4 the frontier). Nodes 1 and 2 sit at head-cache
    entries 5 and 6, the committed context is entries 0-4, the frontier goes to 7 and 8."""
    from eagle_core.tree import frontier_mask

    parents = (-1, 0, 0, 1, 1)
    mask = frontier_mask(parents, {1: 5, 2: 6}, committed=5, frontier=[3, 4], base=7)
    want = torch.tensor([[1, 1, 1, 1, 1, 1, 0, 1, 0],
                         [1, 1, 1, 1, 1, 1, 0, 0, 1]], dtype=torch.bool)
    assert torch.equal(mask, want)
