"""The CPU decoder forward (eagle_core.cpu.forward): what it computes is what transformers computes with
the same kernels, bit for bit where the kernels are bitwise (smallgemm: one accumulator per output,
so the fused q/k/v and gate/up products give the same bits as separate ones); rows stay invariant;
EAGLE greedy equals vanilla through it; and everything it does not serve goes to transformers."""
import contextlib

import pytest
import torch

from conftest import CharTokenizer, tiny_head, tiny_target
from test_kernels import _row_invariance, needs_smallgemm
from eagle_core import DecodeSettings, Engine, FastPath, from_model
from eagle_core.cpu import forward as cpu_forward, kernels
from eagle_core.tree import tree_attention_mask, tree_positions

BITWISE = kernels.library() is not None  # smallgemm installed: assert equal bits, else a tight tolerance
CONFIGS = {  # name -> (model type, config overrides): what the CPU decoder must get right
    "llama": ("llama", {}),
    "qwen2": ("qwen2", {}),  # q/k/v biases, fused with their weights
    "llama-biases": ("llama", dict(attention_bias=True, mlp_bias=True)),  # o_proj and MLP biases too
    "llama-yarn": ("llama", dict(rope_parameters={"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0,
                                                  "original_max_position_embeddings": 128})),  # cos/sin scaled
    "llama-linear-rope": ("llama", dict(rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0})),
    "mistral": ("mistral", dict(sliding_window=None)),
    "mistral-wide-window": ("mistral", dict(sliding_window=4096)),  # a window beyond the context: not in effect
    "llama-mha": ("llama", dict(num_key_value_heads=4)),  # no grouped heads
}


def build(kind: str = "llama", vocab: int = 64, seed: int = 0, ctx: int = 512, attn: str = "sdpa", fast=None, **over):
    """A tiny random target as conftest.tiny_target, for any of the three families and config overrides."""
    from transformers import AutoModelForCausalLM, LlamaConfig, MistralConfig, Qwen2Config

    torch.manual_seed(seed)
    common = dict(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=ctx, bos_token_id=None, eos_token_id=None,
                  pad_token_id=0, tie_word_embeddings=False)
    cfg = {"llama": LlamaConfig, "qwen2": Qwen2Config, "mistral": MistralConfig}[kind](**{**common, **over})
    cfg._attn_implementation = attn
    model = AutoModelForCausalLM.from_config(cfg)
    with torch.no_grad():
        model.lm_head.weight.mul_(20.0)
        for name, p in model.named_parameters():  # random biases are zeros: make them count
            if name.endswith("bias"):
                p.copy_(torch.randn_like(p) * 0.1)
    model.generation_config.eos_token_id = None
    return from_model(model, CharTokenizer(vocab), name=f"tiny-{kind}", eos_ids=(-1,), fast=fast)


@contextlib.contextmanager
def transformers_path(target):
    """The same target, kernels and cache through transformers (the reference)."""
    saved, target.cpu_decoder = target.cpu_decoder, None
    try:
        yield
    finally:
        target.cpu_decoder = saved


@pytest.fixture
def decoder_calls(monkeypatch):
    """Counts calls of the CPU decoder (to show which path a forward took)."""
    calls = []
    real = cpu_forward.CpuDecoder.forward
    monkeypatch.setattr(cpu_forward.CpuDecoder, "forward", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    return calls


def row_exact(target) -> bool:
    """Do all of `target`'s products run on smallgemm? Its result for an output column depends on
    that column's weights and the input row only, so the CPU decoder's fused products (q/k/v in
    one, gate/up in one) give the same bits as transformers' separate ones. Where calibration
    picks oneDNN for some shapes (seen on a Zen 5 EPYC with 1 thread: 576x576 and the fused
    960x576, while 192x576 stays on smallgemm), a fused product may sum in another order."""
    return all(v == "smallgemm" for v in target.kernels.choice.values())


def c_layers(target) -> bool:
    """Does `target`'s CPU decoder run its layers as layer.c calls? Their norm and silu are not
    torch's operations, so they agree with transformers to rounding, not bit for bit."""
    return target.cpu_decoder is not None and target.cpu_decoder.c_layers and BITWISE


def same(a, b, target=None, tol=1e-5):
    """Equal bits where the kernels promise them (smallgemm installed and, for a `target`, all of
    its products on it, through the CPU decoder's torch operations), else equal within `tol`."""
    if BITWISE and (target is None or (row_exact(target) and not c_layers(target))):
        assert torch.equal(a, b), (a - b).abs().max()
    else:
        torch.testing.assert_close(a, b, rtol=tol, atol=tol)


@torch.inference_mode()
def scenario(target, seed: int = 0):
    """What the engine asks of a target: a prefill, single steps on the cache, a chain without a
    mask, a verification with a hand-built tree mask, and a prefill longer than the attention
    kernel's 64 rows (its SDPA fallback). -> (hidden states and logits of each, the cache)."""
    g = torch.Generator().manual_seed(seed)
    V = target.vocab_size
    ids = lambda n: torch.randint(0, V, (1, n), generator=g)
    cache, out = target.new_cache(), []
    out.append(target.forward(ids(40), cache))
    for i in range(3):
        out.append(target.forward(ids(1), cache, position_ids=torch.tensor([[40 + i]])))
    out.append(target.forward(ids(5), cache))  # positions from the cache length
    parents = (-1, 0, 0, 1, 1, 2, 4, 4)
    L = cache.get_seq_length()
    mask = tree_attention_mask(parents, L, dtype=torch.float32)
    out.append(target.forward(ids(len(parents)), cache, tree_positions(parents, L)[None], mask))
    out.append(target.forward(ids(70), target.new_cache()))
    return [t for h in out for t in (h, target.logits(h))], cache


@pytest.mark.parametrize("layers", ["torch-ops", "c-layers"])
@pytest.mark.parametrize("name", list(CONFIGS))
def test_cpu_decoder_equals_transformers(name, layers, decoder_calls, monkeypatch):
    """Through its torch operations (FastPath(passes="ops")) bit for bit; as layer.c calls (the default)
    within float32 rounding, for every forward of at most 64 rows (the 70-row prefill takes the
    torch operations)."""
    kind, over = CONFIGS[name]
    target = build(kind, fast=FastPath(passes="layers" if layers == "c-layers" else "ops"), **over)
    assert target.forward_path == "cpu", target.forward_note
    assert "CPU decoder" in target.describe()
    ours, cache = scenario(target)
    assert len(decoder_calls) == 7
    # (a sliding-window model's cache has transformers' own window layers: the torch operations)
    grows = name != "mistral-wide-window"
    assert target.cpu_decoder.c_calls == (6 if layers == "c-layers" and BITWISE and grows else 0)
    with transformers_path(target):
        ref, ref_cache = scenario(target)
    assert len(decoder_calls) == 7
    for a, b in zip(ours, ref):
        same(a, b, target)
    for a, b in zip(cache.layers, ref_cache.layers):  # the same cache entries, in the same GrowingLayers
        assert type(a) is type(b)
        same(a.keys, b.keys, target)
        same(a.values, b.values, target)


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_other_attention_implementations(impl, decoder_calls):
    """Without the engine's attention kernel (e.g. no C compiler) the CPU decoder calls the model's own."""
    target = build("qwen2", seed=2)
    target.model.set_attn_implementation(impl)
    ours, _ = scenario(target)
    with transformers_path(target):
        ref, _ = scenario(target)
    assert len(decoder_calls) == 7
    for a, b in zip(ours, ref):
        same(a, b, target)


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_forward_layers_equals_transformers_hooks(kind, decoder_calls):
    """EAGLE-3's captured layer inputs, with a cache (decoding) and without one, batched and left
    padded with an attention mask (teacher-forced training data)."""
    target = build(kind, seed=3)
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 64, (1, 12), generator=g)
    batch = torch.randint(1, 64, (3, 9), generator=g)
    attn = torch.ones_like(batch)
    attn[1, :4] = attn[2, :2] = 0

    def run():
        cache = target.new_cache()
        a = target.forward_layers(ids, (2, 0, 1), cache)
        b = target.forward_layers(ids[:, :3], (1,), cache, position_ids=torch.arange(12, 15)[None])
        c = target.forward_layers(batch, (0, 2), attention_mask=attn)
        return [*a, *b, *c]

    ours = run()
    assert len(decoder_calls) == 3
    with transformers_path(target):
        ref = run()
    for a, b in zip(ours, ref):
        same(a, b, target)


@needs_smallgemm
@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_cpu_decoder_is_row_invariant(kind, decoder_calls):
    """A token's logits are the same bits alone and inside 5/16/24-row chains and trees."""
    target = tiny_target(kind, vocab=64)
    assert target.forward_path == "cpu"
    one_by_one, rows = _row_invariance(target)
    assert decoder_calls
    for (shape, m), logits in rows.items():
        for i in range(m if shape == "chain" else 1):
            assert torch.equal(logits[i], one_by_one[i]), (shape, m, i)


@pytest.mark.parametrize("layers", ["torch-ops", "c-layers"])
@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_eagle_greedy_equals_vanilla_through_lean(kind, layers, decoder_calls, monkeypatch):
    target = tiny_target(kind, seed=1, vocab=8, fast=FastPath(passes="layers" if layers == "c-layers" else "ops"))
    engine = Engine(target, tiny_head(target, seed=11))
    trees = [dict(method="eagle2", depth=6, tree_top_k=8, total_tokens=40), dict(method="eagle1"),
             dict(method="chain", chain_length=5)]
    van = engine.run("hello world", DecodeSettings(method="vanilla", max_new_tokens=40, chat_template=False))
    runs = [engine.run("hello world", DecodeSettings(max_new_tokens=40, chat_template=False, **t)) for t in trees]
    assert all(r.summary.token_ids == van.summary.token_ids for r in runs)
    assert max(c.accepted_drafts for c in runs[0].cycles) >= 2  # multi-token acceptance was exercised
    assert decoder_calls and (target.cpu_decoder.c_calls > 0) == c_layers(target)
    with transformers_path(target):  # and the output is the transformers path's, sampling included
        assert engine.run("hello world", DecodeSettings(method="vanilla", max_new_tokens=40,
                                                        chat_template=False)).summary.token_ids == van.summary.token_ids
        s = DecodeSettings(method="eagle2", temperature=1.0, seed=5, max_new_tokens=30, chat_template=False)
        ref = engine.run("hello", s).summary.token_ids
    if BITWISE and not c_layers(target):  # (the same bits, so the same draws)
        assert engine.run("hello", s).summary.token_ids == ref


# ---- fallbacks -----------------------------------------------------------------------------------
def test_stock_kernels_take_the_transformers_path(decoder_calls):
    target = tiny_target("llama", vocab=64)
    ids = torch.randint(0, 64, (1, 9), generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        fast = target.forward(ids, target.new_cache())
        with target.stock_kernels():
            stock = target.forward(ids, target.new_cache())
            layers = target.forward_layers(ids, (1,))
    assert len(decoder_calls) == 1  # the stock forward and forward_layers went to transformers
    torch.testing.assert_close(stock, fast, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(layers[0], fast, rtol=1e-5, atol=1e-5)
    plain = build("llama", fast=FastPath(kernels="stock"))
    assert plain.forward_path == "transformers" and "not installed" in plain.forward_note


def test_the_options_can_keep_the_transformers_path(decoder_calls):
    target = tiny_target("qwen2", vocab=64, fast=FastPath(passes="modules"))
    assert target.forward_path == "transformers" and target.forward_note == "FastPath(passes='modules')"
    assert "transformers forward: FastPath(passes='modules')" in target.describe()
    van = Engine(target).run("abc", DecodeSettings(method="vanilla", max_new_tokens=8, chat_template=False))
    assert van.summary.new_tokens == 8 and not decoder_calls


@pytest.mark.parametrize("kind, over, why", [
    ("mistral", dict(sliding_window=16), "sliding window 16 in effect"),
    ("qwen2", dict(use_sliding_window=True, sliding_window=16, max_window_layers=1), "sliding-window"),
    ("llama", dict(hidden_act="gelu"), "activation"),
])
def test_unsupported_configs_fall_back(kind, over, why, decoder_calls):
    target = build(kind, **over)
    assert target.forward_path == "transformers" and why in target.forward_note, target.forward_note
    with torch.inference_mode():
        assert target.forward(torch.tensor([[3, 4, 5]]), target.new_cache()).shape == (1, 3, 64)
    assert not decoder_calls


def test_unexpected_structure_falls_back():
    from transformers import AutoModelForCausalLM, LlamaConfig

    model = AutoModelForCausalLM.from_config(LlamaConfig(vocab_size=32, hidden_size=64, intermediate_size=128,
                                                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2))
    model.model.layers[1].mlp.forward = lambda x: x  # a patched module
    t = from_model(model, CharTokenizer(32))
    assert t.forward_path == "transformers" and "patched" in t.forward_note
    model2 = AutoModelForCausalLM.from_config(model.config)
    model2.model.layers[0].mlp.register_forward_hook(lambda *a: None)  # (a hook on a projection is
    # dropped by kernels.install, which replaces the module: the CPU decoder never sees it)
    assert "hooks" in from_model(model2, CharTokenizer(32)).forward_note


def test_per_call_fallbacks(decoder_calls):
    """Hooks added after load, training mode, kernels swapped for others: transformers serves the call."""
    target = build("llama")
    ids = torch.tensor([[3, 4, 5, 6]])
    seen = []
    with torch.inference_mode():
        ref = target.forward(ids, target.new_cache())
        h = target.body.layers[1].register_forward_pre_hook(lambda m, a: seen.append(a[0]))
        same(target.forward(ids, target.new_cache()), ref, target)
        h.remove()
        assert len(seen) == 1 and len(decoder_calls) == 1
        target.model.train()
        torch.testing.assert_close(target.forward(ids, target.new_cache()), ref)
        target.model.eval()
        assert len(decoder_calls) == 1
        with target.kernels.stock():
            probe = kernels.install(target.model, "mkl")
            torch.testing.assert_close(target.forward(ids, target.new_cache()), ref, rtol=1e-5, atol=1e-5)
            for parent, attr, orig, _ in probe.swaps:
                setattr(parent, attr, orig)
        assert len(decoder_calls) == 1
        same(target.forward(ids, target.new_cache()), ref, target)
        assert len(decoder_calls) == 2


def test_weights_edited_in_place_are_repacked(decoder_calls):
    target = build("qwen2")
    ids = torch.tensor([[3, 4, 5, 6, 7]])
    with torch.no_grad():
        target.body.layers[0].self_attn.k_proj.weight.mul_(3.0)
        target.body.layers[1].mlp.up_proj.weight.add_(0.01)
        target.body.layers[2].self_attn.v_proj.bias.add_(0.5)
    with torch.inference_mode():
        ours = target.forward(ids, target.new_cache())
        with transformers_path(target):
            ref = target.forward(ids, target.new_cache())
    assert decoder_calls
    same(ours, ref, target)


# ---- the default model ---------------------------------------------------------------------------
def test_default_model_takes_the_lean_path_and_matches(default_target, decoder_calls):
    t = default_target
    assert t.forward_path == "cpu", t.forward_note
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, t.vocab_size, (1, 30), generator=g)
    parents = (-1, 0, 0, 1, 1, 2, 3)
    tree = torch.randint(0, t.vocab_size, (1, len(parents)), generator=g)

    @torch.inference_mode()
    def run():
        cache = t.new_cache()
        a = t.forward(ids, cache)
        b = t.forward(ids[:, :1], cache)
        mask = tree_attention_mask(parents, 31, dtype=torch.float32)
        c = t.forward(tree, cache, tree_positions(parents, 31)[None], mask)
        return [a, b, c, t.logits(c)]

    ours = run()
    with transformers_path(t):
        ref = run()
    for a, b in zip(ours, ref):
        same(a, b, t, tol=1e-4)


def test_default_model_eagle_greedy_equals_vanilla(default_target, decoder_calls):
    from eagle_core import load_default_head

    head, vocab, name = load_default_head(default_target)
    engine = Engine(default_target, head, vocab, name)
    s = dict(max_new_tokens=16)
    van = engine.run("Write a haiku about the sea.", DecodeSettings(method="vanilla", **s))
    eag = engine.run("Write a haiku about the sea.", DecodeSettings(method="eagle2", **s))
    assert eag.summary.token_ids == van.summary.token_ids
    assert decoder_calls
    with transformers_path(default_target):
        ref = engine.run("Write a haiku about the sea.", DecodeSettings(method="vanilla", **s))
    assert ref.summary.token_ids == van.summary.token_ids
