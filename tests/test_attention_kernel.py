"""attention.c and its AVX-512 path (attention512.c): right against a float64 reference, each row the same
bits alone as among other rows (what greedy EAGLE == vanilla rests on), and the two paths bit for bit equal."""
import itertools

import pytest
import torch

from eagle_core.cpu import kernels
from eagle_core.cpu.kernels.attention import _attend, additive

lib = kernels.library()
needs_kernels = pytest.mark.skipif(lib is None, reason=f"kernels unavailable: {kernels.library_error()}")
needs_avx512 = pytest.mark.skipif(torch.backends.cpu.get_cpu_capability() != "AVX512", reason="no AVX-512 here")


def case(H, G, n, L, d, kind, seed):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(H, n, d, generator=g) * 2
    k, v = torch.randn(G, L + 3, d, generator=g), torch.randn(G, L + 3, d, generator=g)  # room past L, as a cache
    seen = torch.ones(n, L, dtype=torch.bool)
    seen[:, L - n:] = torch.tril(torch.ones(n, n, dtype=torch.bool))
    if kind == "tree":  # a tree's mask with holes in the context too, and a row that sees nothing
        seen &= torch.rand(n, L, generator=g) < 0.8
        seen[n // 2] = False
    return q, k, v, seen, (None if kind == "causal" else additive(seen))


def run(q, k, v, L, mask, wide: int, threads: int = 2):
    old, was = torch.get_num_threads(), lib.attention_wide(wide)
    torch.set_num_threads(threads)
    try:
        return _attend(lib, q, k, v, L, mask, q.shape[-1] ** -0.5, mask is None)
    finally:
        torch.set_num_threads(old)
        lib.attention_wide(was)


def reference(q, k, v, seen):
    H, n, d = q.shape
    G, L = k.shape[0], seen.shape[1]
    kk, vv = (t[:, :L].double().repeat_interleave(H // G, 0) for t in (k, v))
    s = (q.double() @ kk.transpose(1, 2)) * d ** -0.5
    w = torch.softmax(s.masked_fill(~seen, float("-inf")), -1).nan_to_num(0.0)  # a row that sees nothing: zeros
    return (w @ vv).transpose(0, 1).float()


@needs_kernels
@pytest.mark.parametrize("wide", [0, 1])
@pytest.mark.parametrize("H,G,n,L,d,kind", [(9, 3, 1, 300, 64, "causal"), (9, 3, 5, 37, 64, "tree"),
                                            (4, 2, 8, 100, 128, "tree"), (3, 3, 3, 20, 72, "causal"),
                                            (8, 1, 13, 61, 64, "causal"), (2, 1, 6, 6, 128, "tree")])
def test_attention_matches_a_float64_reference(wide, H, G, n, L, d, kind):
    q, k, v, seen, mask = case(H, G, n, L, d, kind, seed=L + n)
    torch.testing.assert_close(run(q, k, v, L, mask, wide), reference(q, k, v, seen), rtol=1e-5, atol=1e-5)


@needs_kernels
@pytest.mark.parametrize("wide,d", [(0, 64), (1, 64), (1, 128), (0, 40)])
def test_a_row_gets_the_same_bits_alone_as_among_a_trees_rows(wide, d):
    """Row i of an n-row call against the same query decoded alone: one row, the keys it saw (causal),
    or the whole cache with its mask row (a tree)."""
    for kind in ("causal", "tree"):
        q, k, v, seen, mask = case(9, 3, 7, 90, d, kind, seed=d)
        rows = run(q, k, v, 90, mask, wide)
        for i in range(7):
            qi = q[:, i:i + 1].contiguous()
            alone = (run(qi, k, v, 90 - 7 + i + 1, None, wide) if kind == "causal"
                     else run(qi, k, v, 90, mask[i:i + 1].contiguous(), wide))
            assert torch.equal(alone[0], rows[i]), (kind, i)


@needs_kernels
@needs_avx512
def test_the_avx512_path_gives_the_avx2_paths_bits():
    shapes = itertools.product([(9, 3), (4, 4), (8, 2), (3, 1)], [64, 128], [1, 2, 5, 8, 13], [1, 7, 8, 17, 300],
                               ["causal", "tree", "none"])
    checked = 0
    for i, ((H, G), d, n, L, kind) in enumerate(shapes):
        if n > L or (kind == "tree" and n < 2):
            continue
        q, k, v, seen, mask = case(H, G, n, L, d, "causal" if kind == "none" else kind, seed=i)
        if kind == "none":
            mask = additive(torch.ones(n, L, dtype=torch.bool))
        threads = 1 + i % 2
        wide, narrow = run(q, k, v, L, mask, 1, threads), run(q, k, v, L, mask, 0, threads)
        assert torch.equal(wide.view(torch.int32), narrow.view(torch.int32)), (H, G, d, n, L, kind, threads)
        checked += 1
    assert checked > 300
