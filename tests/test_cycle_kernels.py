"""The cycle's small C kernels: the drafter's top-k per row (rows.c row_topk) and the KV cache's
compaction to the accepted path (compact.c move_rows), each against torch, and decoding unchanged
with them switched off."""
import pytest
import torch

from eagle_core.cpu import FastPath, kernels
from eagle_core.decode import compact_cache
from eagle_core.cpu.kernels import compact as compact_module, rows as rows_module
from eagle_core.cpu.kernels.compact import move_rows
from eagle_core.cpu.kernels.rows import row_topk


def _without_cycle_kernels(monkeypatch):
    """As where the kernels cannot be built (or EAGLE_PORTABLE=1): torch's top-k, row statistics
    and compaction."""
    monkeypatch.setattr(rows_module, "library", lambda: None)
    monkeypatch.setattr(compact_module, "library", lambda: None)

needs_kernels = pytest.mark.skipif(kernels.library() is None, reason=f"kernels unavailable: {kernels.library_error()}")


@needs_kernels
@pytest.mark.parametrize("v", [3, 8, 9, 64, 8192, 8197])
@pytest.mark.parametrize("k", [1, 2, 3, 8])
def test_row_topk_equals_torch_log_softmax_topk(v, k):
    if k > v:
        pytest.skip("k > V")
    g = torch.Generator().manual_seed(v * 10 + k)
    x = torch.randn(4, v, generator=g) * 5
    if v - v // 2 >= k:
        x[3, : v // 2] = float("-inf")  # masked entries never enter while k finite ones remain
    val, idx = row_topk(x, k)
    ref_v, ref_i = torch.log_softmax(x, -1).topk(k, dim=-1)
    assert torch.equal(idx, ref_i)  # no ties in random data: the same tokens in the same order
    torch.testing.assert_close(val, ref_v, rtol=1e-6, atol=2e-6)
    assert (val[:, 1:] <= val[:, :-1]).all()
    for r in range(4):  # a row's result does not depend on the other rows
        one = row_topk(x[r:r + 1].clone(), k)
        assert torch.equal(one[0], val[r:r + 1]) and torch.equal(one[1], idx[r:r + 1])


@needs_kernels
def test_row_topk_puts_the_smaller_index_first_on_ties_across_vector_and_tail():
    x = torch.zeros(1, 21)
    x[0, [17, 3, 20, 9]] = 5.0  # four equal maxima, two in the 8-wide part, one in the tail
    x[0, 12] = 4.0
    val, idx = row_topk(x, 5)
    assert idx.tolist() == [[3, 9, 17, 20, 12]]
    assert val[0, 0] == val[0, 3] and val[0, 4] < val[0, 3]


@needs_kernels
def test_row_topk_leaves_what_it_cannot_serve_to_torch(monkeypatch):
    x = torch.randn(2, 50)
    assert row_topk(x, 51) is None and row_topk(x, 0) is None
    bad = x.clone()
    bad[1, 40] = float("nan")
    assert row_topk(bad, 2) is None
    few = torch.full((1, 50), float("-inf"))
    few[0, 7] = 1.0
    assert row_topk(few, 2) is None  # fewer than k finite values
    assert row_topk(x.double(), 2) is None and row_topk(torch.randn(50, 2).T, 2) is None
    _without_cycle_kernels(monkeypatch)
    assert row_topk(x, 2) is None


class _Layer:
    def __init__(self, k, v):
        self.keys, self.values = k, v


class _Cache:
    def __init__(self, layers):
        self.layers = layers


def _layers(n=3, length=20, seed=0):
    g = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n):  # keys and values inside larger buffers, as GrowingLayer keeps them
        kb, vb = torch.randn(1, 2, length + 8, 8, generator=g), torch.randn(1, 2, length + 8, 4 + i, generator=g)
        out.append(_Layer(kb[..., :length, :], vb[..., :length, :]))
    return out


def _torch_compacted(layers, context, keep):
    i = torch.tensor(keep) + context
    return [(torch.cat([L.keys[..., :context, :], L.keys.index_select(-2, i)], -2),
             torch.cat([L.values[..., :context, :], L.values.index_select(-2, i)], -2)) for L in layers]


@needs_kernels
@pytest.mark.parametrize("keep", [[0], [0, 1], [0, 2], [0, 1, 3], [0, 2, 5, 6], [0, 3, 4, 7]])
def test_compaction_in_one_call_equals_torch_per_layer(keep):
    layers = _layers()
    context = 12  # 8 tree entries after it
    want = _torch_compacted(layers, context, keep)
    compact_cache(_Cache(layers), context, keep, FastPath().move_rows)
    for L, (k, v) in zip(layers, want):
        assert L.keys.shape[-2] == context + len(keep)
        assert torch.equal(L.keys, k) and torch.equal(L.values, v)


@needs_kernels
def test_compaction_falls_back_to_torch_where_the_kernel_does_not_serve(monkeypatch):
    layers = _layers()
    assert not move_rows(layers, 12, [0, 2, 1])  # keep[2] < 2: a later read would see a moved row
    wide = [_Layer(torch.randn(2, 2, 20, 8), torch.randn(2, 2, 20, 8))]  # a batch of two
    assert not move_rows(wide, 12, [0, 2])
    want = _torch_compacted(wide, 12, [0, 2, 5])
    compact_cache(_Cache(wide), 12, [0, 2, 5], FastPath().move_rows)
    assert torch.equal(wide[0].keys, want[0][0])
    _without_cycle_kernels(monkeypatch)
    assert not move_rows(_layers(), 12, [0, 2])


@needs_kernels
def test_decoding_is_the_same_without_the_cycle_kernels(monkeypatch):
    """Without the row and compaction kernels: torch's top-k, row statistics and compaction. Same tokens, same trees; q equal up to float32 rounding; both equal vanilla."""
    from conftest import tiny_head, tiny_target
    from eagle_core import DecodeSettings, Engine

    target = tiny_target("llama", seed=0, vocab=40)
    engine = Engine(target, tiny_head(target, seed=4))  # a pair whose accepted paths often skip a node
    s = DecodeSettings(method="eagle2", depth=3, tree_top_k=3, total_tokens=8, max_new_tokens=24, chat_template=False)
    on = engine.run("one two three four", s)
    _without_cycle_kernels(monkeypatch)
    off = engine.run("one two three four", s)
    van = engine.run("one two three four", DecodeSettings(method="vanilla", max_new_tokens=24, chat_template=False))
    assert on.summary.token_ids == off.summary.token_ids == van.summary.token_ids
    assert [[n.token_id for n in c.nodes] for c in on.cycles] == [[n.token_id for n in c.nodes] for c in off.cycles]
    q_on = [n.q for c in on.cycles for n in c.nodes]
    q_off = [n.q for c in off.cycles for n in c.nodes]
    assert max(abs(a - b) for a, b in zip(q_on, q_off)) < 1e-5
    assert any(len(c.accepted) > 1 and list(c.accepted) != list(range(len(c.accepted))) for c in on.cycles), \
        "no cycle accepted a path that needed moving: the compaction kernel was not exercised"


@needs_kernels
@pytest.mark.parametrize("n,k", [(1, 8), (5, 16), (37, 24), (37, 96), (3, 1728), (8192, 576)])
def test_int8_rows_product_matches_a_float64_reference_and_is_batch_invariant(n, k):
    """gemv8.c: y = scale * (x . q) per output; the same row alone, in any batch (9 and more rows go
    8 at a time) and with any thread count."""
    g = torch.Generator().manual_seed(n + k)
    w = torch.randn(n, k, generator=g) * 0.05
    w[0] = 0.0  # an all-zero row gets scale 1, q 0
    q, s = kernels.SmallGemm8.quantize(w)
    assert q.dtype == torch.int8 and int(q.abs().max()) <= 127 and s[0] == 1 and not q[0].any()
    rounded = kernels.SmallGemm8.rounded(w)
    assert torch.equal(kernels.SmallGemm8.quantize(rounded)[0], q)  # quantizing the rounded values again: the same q
    assert ((rounded - w).abs() <= s[:, None] / 2 * 1.0001).all()
    state = kernels.SmallGemm8.prepare(rounded)
    x = torch.randn(11, k, generator=g)
    y = kernels.SmallGemm8.run(state, x, None)
    xr = kernels.SmallGemm8.x_as_int16(x) if kernels.SmallGemm8.int16_rows(k) else x  # what the kernel multiplies
    ref = (xr.double() @ rounded.double().T).float()
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)
    threads = torch.get_num_threads()
    try:
        for t in {1, threads}:
            torch.set_num_threads(t)
            for m in (1, 2, 3, 8):
                assert torch.equal(kernels.SmallGemm8.run(state, x[:m].contiguous(), None), y[:m])
            assert torch.equal(kernels.SmallGemm8.run(state, x[5:6].contiguous(), None), y[5:6])
    finally:
        torch.set_num_threads(threads)
    lin = kernels.linear_of(rounded, "smallgemm8")
    with torch.inference_mode():
        assert torch.equal(lin(x), y)
    # a NaN or an infinity in a row gives that row NaN outputs (callers look for NaN), the others unchanged
    bad = x.clone()
    bad[3, 0], bad[7, -1] = float("nan"), float("inf")
    yb = kernels.SmallGemm8.run(state, bad, None)
    keep = [i for i in range(11) if i not in (3, 7)]
    assert yb[3].isnan().all() and not yb[7].isfinite().any() and torch.equal(yb[keep], y[keep])


@needs_kernels
def test_int8_rows_refuse_what_they_cannot_serve():
    assert not kernels.SmallGemm8.serves(torch.randn(4, 12))  # K not a multiple of 8
    assert not kernels.SmallGemm8.serves(torch.randn(4, 16, dtype=torch.float64))
    bad = torch.randn(4, 16)
    bad[2, 3] = float("inf")
    assert not kernels.SmallGemm8.serves(bad)
    with pytest.raises(ValueError, match="smallgemm8"):
        kernels.SmallGemm8.prepare(bad)


@needs_kernels
def test_eagle2_drafts_from_int8_rows_and_the_output_stays_vanilla(monkeypatch):
    """A reduced draft vocabulary's rows are int8 by default; float16 and float32 storage remain
    (FastPath.draft_rows) and every choice decodes exactly what vanilla decodes."""
    from conftest import tiny_head, tiny_target
    from eagle_core import DecodeSettings, Engine, FastPath

    target = tiny_target("llama", seed=0, vocab=40)
    head = tiny_head(target, seed=4)
    vocab = list(range(0, 40, 2)) + [1, 3]
    s = DecodeSettings(method="eagle2", depth=3, tree_top_k=3, total_tokens=8, max_new_tokens=24, chat_template=False)
    van = Engine(target, head, vocab).run("one two three four", DecodeSettings(method="vanilla", max_new_tokens=24,
                                                                                 chat_template=False))
    backends = {}
    for rows in ("int8", "float16", "float32"):
        target = tiny_target("llama", seed=0, vocab=40, fast=FastPath(draft_rows=rows))
        e = Engine(target, head, vocab)
        if e.drafter.lm.backend.name not in ("smallgemm8", "smallgemm16", "smallgemm"):
            pytest.skip(f"the tiny target's products are not on smallgemm here ({e.drafter.lm.backend.name})")
        backends[rows] = e.drafter.lm.backend.name
        assert e.run("one two three four", s).summary.token_ids == van.summary.token_ids
    assert backends["int8"] == "smallgemm8" and backends["float16"] == "smallgemm16"
