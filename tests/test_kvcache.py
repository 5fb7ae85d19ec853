"""The growing KV cache layer holds exactly what transformers' DynamicLayer holds."""
import torch
from transformers.cache_utils import DynamicLayer

from eagle_core.decode import compact_cache
from eagle_core.kvcache import GROW_BY, GrowingLayer


class _Cache:  # what compact_cache needs: .layers
    def __init__(self, layers):
        self.layers = layers


def test_growing_layer_matches_dynamic_layer_through_appends_crop_and_compaction():
    g = torch.Generator().manual_seed(0)
    ours, ref = GrowingLayer(), DynamicLayer()
    steps = [5, 1, 1, 7, GROW_BY + 40, 3]  # one append past the first buffer's room
    for i, n in enumerate(steps):
        k, v = torch.randn(1, 2, n, 8, generator=g), torch.randn(1, 2, n, 8, generator=g)
        ko, vo = ours.update(k, v)
        kr, vr = ref.update(k, v)
        assert torch.equal(ko, kr) and torch.equal(vo, vr), i
        if i == 3:  # a verification: keep tree entries 0, 2, 5 of the 7 just added
            context = ko.shape[-2] - 7
            compact_cache(_Cache([ours, ref]), context, [0, 2, 5])
            assert torch.equal(ours.keys, ref.keys) and ours.keys.shape[-2] == context + 3
        if i == 4:
            ours.crop(-10), ref.crop(-10)
    assert torch.equal(ours.keys, ref.keys) and torch.equal(ours.values, ref.values)
    assert ours.get_seq_length() == ref.get_seq_length()


def test_appending_writes_in_place_instead_of_copying_the_cache():
    layer = GrowingLayer()
    layer.update(torch.zeros(1, 2, 10, 8), torch.zeros(1, 2, 10, 8))
    ptr = layer.keys.data_ptr()
    for _ in range(20):
        layer.update(torch.ones(1, 2, 1, 8), torch.ones(1, 2, 1, 8))
    assert layer.keys.data_ptr() == ptr, "a single-token append must not move the cache"
    assert layer.keys.shape[-2] == 30 and layer.keys[..., 10:, :].eq(1).all()
