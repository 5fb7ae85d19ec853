"""The target's decoder layers in one layer.c call (eagle_core/cpu/layer_loop.py) against the same layers
one call each (the loop before it, written out here): the same bits out, the same cache entries, the
same captured residual streams, under a causal and a tree mask, in both weight formats (float32
panels; the gguf format's blocks through qb_matmul)."""
import pytest
import torch

from test_cpu_decoder import BITWISE, build
from eagle_core import FastPath
from eagle_core.cpu import layer_loop
from eagle_core.tree import tree_attention_mask, tree_positions

pytestmark = pytest.mark.skipif(not BITWISE, reason="no kernels library: layer.c does not run")


class PerLayer:
    """loop_for's stand-in: each layer as its own c_layer call, as the decoder made them before."""

    def __init__(self, decoder, layers):
        self.layers, self.calls = layers, 0

    def run(self, h, dims, cache_layers, start, cos, sin, mask, want):
        D, H, G, d, inter = dims
        n = h.shape[1]
        for i, (L, lc) in enumerate(zip(self.layers, cache_layers)):
            if i in want:
                want[i] = h.clone()
            layer_loop.c_layer(h, n, D, H, G, d, inter, L.c_args, cos, sin, lc._kbuf, lc._vbuf, start, mask,
                               L.scaling, None, L.kinds)
            self.calls += 1


def scenario(target):
    """A prefill, three 1-row steps, a tree of 8 under its mask, with captures of layers 0 and 2."""
    g = torch.Generator().manual_seed(1)
    ids = lambda n: torch.randint(0, 64, (1, n), generator=g)
    cache, out = target.new_cache(), []
    out.append(target.forward(ids(40), cache))
    for i in range(3):
        out += list(target.forward_layers(ids(1), (0, 2), cache, position_ids=torch.tensor([[40 + i]])))
    parents = (-1, 0, 0, 1, 1, 2, 4, 4)
    L = cache.get_seq_length()
    mask = tree_attention_mask(parents, L, dtype=torch.float32)
    out += list(target.forward_layers(ids(len(parents)), (1,), cache, tree_positions(parents, L)[None], mask))
    return out, cache


@pytest.mark.parametrize("weights", ["float32", "gguf"])
def test_one_call_for_all_layers_gives_the_bits_of_one_call_a_layer(weights, monkeypatch):
    if weights == "gguf":
        pytest.importorskip("gguf")
    fast = FastPath(passes="layers", weights=weights)
    one = build(fast=fast)
    assert one.cpu_decoder.passes == "layers"
    ours, cache = scenario(one)
    assert one.cpu_decoder.c_calls == 5

    each = build(fast=fast)  # the same seed: the same weights
    stand_ins = []

    def per_layer(decoder, layers):
        stand_ins.append(PerLayer(decoder, layers))
        return stand_ins[-1]

    monkeypatch.setattr(layer_loop, "loop_for", per_layer)
    ref, ref_cache = scenario(each)
    assert sum(s.calls for s in stand_ins) == 5 * 3  # the reference really ran a call a layer
    assert len(ours) == len(ref) == 1 + 3 * 2 + 2
    for a, b in zip(ours, ref):
        assert torch.equal(a, b)
    for a, b in zip(cache.layers, ref_cache.layers):
        assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)


def test_the_calls_are_built_once_a_packing_and_again_after_a_repack():
    target = build(fast=FastPath(passes="layers"))
    decoder = target.cpu_decoder
    cache = target.new_cache()
    target.forward_layers(torch.tensor([[1, 2, 3]]), (0, 1), cache)
    loop = layer_loop.loop_for(decoder, decoder.layers)
    assert layer_loop.loop_for(decoder, decoder.layers) is loop and loop.layers is decoder.layers
    assert all(c.capture is None for c in loop.calls)  # the captures' pointers do not outlive a call
    before = target.forward(torch.tensor([[4]]), cache)
    with torch.no_grad():  # an edited weight: the decoder packs again, a new list of layers
        target.model.model.layers[1].mlp.down_proj.weight.mul_(2.0)
    cache.crop(-1)
    after = target.forward(torch.tensor([[4]]), cache)
    assert layer_loop.loop_for(decoder, decoder.layers) is not loop
    assert not torch.equal(before, after)  # the new weights were read, not the old packing's
