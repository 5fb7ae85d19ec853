"""The drafting pass of the draft heads (eagle_core.cpu.head_pass): the same bits as the head's
modules for a catch-up and for tree expansions through its torch operations, and their values to
float32 rounding as one layer.c call per layer (the default); the same caches after them, the same
trees and q values in a whole decode (greedy identical to vanilla), and the module path wherever
the pass does not apply."""
import pytest
import torch

from conftest import CharTokenizer
from test_kernels import needs_smallgemm
from eagle_core import DecodeSettings, Engine, FastPath, from_model
from eagle_core.cpu import head_pass as head_pass
from eagle_core.cpu import kernels
from eagle_core.drafting.shipped import random_head3
from eagle_core.drafting.head import EagleHead, HeadConfig
from eagle_core.cpu.kernels import SmallGemm8, SmallGemm16

pytestmark = needs_smallgemm


def _target(kind: str = "llama", layers: int = 8, kernels: str = "smallgemm", seed: int = 0, **fast):
    """A tiny random target; `fast`: FastPath fields besides `kernels` (the engine's defaults otherwise)."""
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    torch.manual_seed(seed)
    cfg = (LlamaConfig if kind == "llama" else Qwen2Config)(
        vocab_size=32, hidden_size=64, intermediate_size=128, num_hidden_layers=layers, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=512, bos_token_id=None, eos_token_id=None, pad_token_id=0,
        tie_word_embeddings=False)
    model = AutoModelForCausalLM.from_config(cfg)
    with torch.no_grad():
        model.lm_head.weight.mul_(20.0)
    model.generation_config.eos_token_id = None
    return from_model(model, CharTokenizer(32), name=f"tiny-{kind}", eos_ids=(-1,), fast=FastPath(kernels=kernels, **fast))


def _eagle2(target, layers: int = 1, seed: int = 1) -> EagleHead:
    torch.manual_seed(seed)
    cfg = HeadConfig.for_target(target.config, qkv_bias=target.config.model_type == "qwen2", num_hidden_layers=layers)
    head = EagleHead(cfg).eval()
    with torch.no_grad():  # norms and biases away from their initial 1 / 0, so a misplaced one shows
        for name, p in head.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
            elif name.endswith("bias"):
                p.copy_(torch.randn_like(p) * 0.1)
    return head


def _eagle3(target, norm_before_residual: bool = False):
    head = random_head3(target, seed=2)
    head.midlayer.norm_before_residual = norm_before_residual
    with torch.no_grad():
        for name, p in head.named_parameters():
            if name.endswith("norm.weight"):
                p.uniform_(0.5, 1.5)
    return head


def _float16_values(head):
    """Every weight rounded to a float16 value (kept float32), as a head read from its float16
    checkpoint: the head pass then reads its products from float16 storage (kernels.SmallGemm16)."""
    with torch.no_grad():
        for p in head.parameters():
            p.copy_(p.half().float())
    return head


AS_LOADED = "as loaded"
HEADS = {
    # the heads' weights as loaded (float32 or float16 values), or their products from int8 rows (the default)
    "eagle2": lambda: Engine(t := _target(head_weights=AS_LOADED), _eagle2(t)).drafter,
    "eagle2-float16-values": lambda: Engine(t := _target(head_weights=AS_LOADED), _float16_values(_eagle2(t, layers=2))).drafter,
    "eagle3-float16-values": lambda: Engine(t := _target(head_weights=AS_LOADED), head3=_float16_values(_eagle3(t))).drafter3,
    "eagle2-qwen2-two-layers": lambda: Engine(t := _target("qwen2", head_weights=AS_LOADED), _eagle2(t, layers=2)).drafter,
    "eagle3": lambda: Engine(t := _target(head_weights=AS_LOADED), head3=_eagle3(t)).drafter3,
    "eagle3-norm-before-residual": lambda: Engine(t := _target(head_weights=AS_LOADED), head3=_eagle3(t, True)).drafter3,
    "eagle2-int8": lambda: Engine(t := _target(), _float16_values(_eagle2(t, layers=2))).drafter,
    "eagle3-int8": lambda: Engine(t := _target(), head3=_float16_values(_eagle3(t))).drafter3,
}


# Where a head's products are int8 rows (kernels/gemv8.c) on a machine with AVX-512 VNNI, each row of
# their input is rounded to int16 first: a float32 rounding difference in that input (layer.c's norm
# against torch's) can move a value to the next int16 step, 1/65,534 of the row's largest value, so
# the two paths agree to ~1e-3 there, not 1e-5.
INT8_TOL = 2e-3


def _passes(drafter, head_pass: bool):
    """A catch-up of 20 committed rows, then two depths of tree expansion with the drafter's own
    masks: (each pass's output, the head cache's keys and values)."""
    saved = drafter.cpu.head_pass
    drafter.cpu.head_pass = saved if head_pass else None
    try:
        g = torch.Generator().manual_seed(0)
        width = drafter.head.fc.weight.shape[1] if hasattr(drafter.head, "midlayer") else drafter.head.config.hidden_size
        feats = torch.randn(20, width, generator=g)
        toks = torch.randint(0, 32, (20,), generator=g)
        cache = drafter.new_cache(64)
        with torch.inference_mode():
            root = drafter.catch_up(cache, feats, toks, 0)
            s = DecodeSettings(method="eagle2", depth=3, tree_top_k=2, total_tokens=6)
            tree = drafter.draft(s, cache, int(toks[-1]), root, 20, 3)
            # the expansions the tree made, rerun by hand to compare their outputs too
            m = torch.ones(2, 22, dtype=torch.bool)
            m[0, 21] = m[1, 20] = False
            out = drafter._run(toks[:2], torch.stack([root, root]), torch.tensor([20, 20]), cache, m)
        lc = cache.layers
        return [root, out, *(c.k[:, :, :22] for c in lc), *(c.v[:, :, :22] for c in lc)], tree
    finally:
        drafter.cpu.head_pass = saved


@pytest.mark.parametrize("layers", ["torch-ops", "c-layers"])
@pytest.mark.parametrize("name", sorted(HEADS))
def test_head_pass_gives_the_modules_bits(name, layers):
    """Through its torch operations the modules' bits; as one layer.c call per layer (the default)
    the modules' values to float32 rounding (its norm and silu are computed in C), the same trees."""
    drafter = HEADS[name]()
    assert drafter.cpu.head_pass is not None, drafter.cpu.head_pass_note
    drafter.cpu.head_pass.c_layers = layers == "c-layers"
    runs = [lin.run for L in drafter.cpu.head_pass.layers for lin in (L.qkv, L.o, L.gate_up, L.down)]
    storage = SmallGemm8.run if "int8" in name else SmallGemm16.run
    assert all(r is storage for r in runs) if "float16" in name or "int8" in name else SmallGemm16.run not in runs
    (got, tree), (want, tree_ref) = _passes(drafter, True), _passes(drafter, False)
    for a, b in zip(got, want):
        if layers == "c-layers":
            tol = INT8_TOL if "int8" in name else 1e-5
            torch.testing.assert_close(a, b, rtol=tol, atol=tol)
        else:
            assert torch.equal(a, b), (a - b).abs().max()
    assert (drafter.cpu.head_pass.c_calls > 0) == (layers == "c-layers")
    assert tree.tokens == tree_ref.tokens and tree.parents == tree_ref.parents
    if layers == "c-layers":
        assert tree.q == pytest.approx(tree_ref.q, rel=1e-4, abs=1e-6)
    else:
        assert tree.q == tree_ref.q


@pytest.mark.parametrize("method", ["eagle2", "eagle3"])
def test_decode_through_the_lean_pass_is_the_module_decode_and_vanilla(method):
    t = _target()
    e = Engine(t, _eagle2(t), head3=_eagle3(t))
    drafter = e.drafter if method == "eagle2" else e.drafter3
    calls = []
    real = drafter.cpu.head_pass

    class Spy:  # the head pass, counting its calls
        def __getattr__(self, name):
            return getattr(real, name)

        def __call__(self, *a, **k):
            calls.append(1)
            return real(*a, **k)

    s = DecodeSettings(method=method, depth=3, tree_top_k=2, total_tokens=6, max_new_tokens=40)
    van = e.run("abcab", DecodeSettings(method="vanilla", max_new_tokens=40)).summary.token_ids
    if drafter.cpu.fused is not None:  # EAGLE-2: the head pass's arithmetic as one kernel call (cpu/fused_pass.py)
        fused_run = drafter.cpu.fused.run
        drafter.cpu.fused.run = lambda *a, **k: (calls.append(1), fused_run(*a, **k))[1]
    saved, drafter.cpu.head_pass = drafter.cpu.head_pass, Spy()
    head_pass_run = e.run("abcab", s)
    drafter.cpu.head_pass = None
    module_run = e.run("abcab", s)
    drafter.cpu.head_pass = saved
    assert calls, "the head pass was not used"
    assert head_pass_run.summary.token_ids == module_run.summary.token_ids == van
    _same_trees(head_pass_run, module_run)


def _same_trees(a_run, b_run):
    """Every cycle's tree the same tokens and parents, its q values the same to float32 rounding
    (the head pass's layer.c computes norm and silu in C), amplified where the products are int8
    (INT8_TOL)."""
    for a, b in zip(a_run.cycles, b_run.cycles, strict=True):
        assert [(n.token_id, n.parent) for n in a.nodes] == [(n.token_id, n.parent) for n in b.nodes]
        assert [n.q for n in a.nodes] == pytest.approx([n.q for n in b.nodes], rel=INT8_TOL, abs=1e-5)


def test_where_the_pass_does_not_apply_the_modules_run():
    t = _target()
    assert Engine(t, _eagle2(t)).drafter.cpu.head_pass is not None
    modules = _target(passes="modules")
    d = Engine(modules, _eagle2(modules)).drafter
    assert d.cpu.head_pass is None and "FastPath(passes='modules')" in d.cpu.head_pass_note
    stock = _target(kernels="stock")
    assert Engine(stock, _eagle2(stock)).drafter.cpu is None  # the portable drafter
    built, why = head_pass.build(_eagle2(t).to(torch.bfloat16), FastPath())
    assert built is None and "float32" in why
    hp = Engine(t, _eagle2(t)).drafter.cpu.head_pass
    x = torch.zeros(2, 64)
    assert not hp.applies(x)  # gradients on: the modules (they differentiate)
    with torch.inference_mode():
        assert hp.applies(x) and not hp.applies(x.to(torch.bfloat16))


def test_weights_edited_in_place_are_repacked():
    t = _target()
    drafter = Engine(t, _eagle2(t)).drafter
    _passes(drafter, True)
    with torch.no_grad():
        drafter.head.layers[0].mlp.up_proj.weight.mul_(1.5)
        drafter.head.fc.weight.add_(0.01)
    (got, _), (want, _) = _passes(drafter, True), _passes(drafter, False)
    for a, b in zip(got, want):  # (layer.c: the modules' values to float32 rounding)
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_an_eagle3_heads_float16_lm_head_is_read_as_float16_with_the_same_logits():
    t = _target()
    assert Engine(t, head3=_float16_values(_eagle3(t))).drafter3.lm.backend is SmallGemm8  # the default: int8 rows
    t = _target(draft_rows="float32")  # kept as they are
    d = Engine(t, head3=_float16_values(_eagle3(t))).drafter3
    assert d.lm.backend is SmallGemm16
    x = torch.randn(3, 64)
    with torch.inference_mode():
        ref = kernels.linear_of(d.lm_weight, "smallgemm")
        assert torch.equal(d._logits(x), ref(d.head.norm(x)).float())
    assert Engine(t, head3=_eagle3(t)).drafter3.lm.backend is not SmallGemm16  # float32 values: float32 storage


@pytest.mark.parametrize("method", ["eagle2", "eagle3"])
def test_the_shipped_heads_draft_the_same_trees_through_the_lean_pass(default_target, method):
    """On the default model with the shipped heads (float16 checkpoints, read as int8 rows on a CPU;
    9 query heads over 3 key/value heads): every cycle's tree, q values and the output are the
    modules' ones."""
    from eagle_core import load_default_head
    from eagle_core.drafting.shipped import load_default_head3

    head, vocab, name = load_default_head(default_target)
    head3, name3 = load_default_head3(default_target)
    e = Engine(default_target, head, vocab, name, head3=head3, head3_name=name3)
    drafter = e.drafter if method == "eagle2" else e.drafter3
    assert drafter.cpu.head_pass is not None and drafter.cpu.head_pass.layers[0].qkv.run is SmallGemm8.run
    assert drafter.cpu.head_pass.fc.run is SmallGemm8.run and drafter.head.fc.backend is SmallGemm8  # modules and head pass alike
    # the draft LM head as int8 rows with a scale per row: EAGLE-2's 8,192 target rows, EAGLE-3's own
    # float16 weights (the draft's q moves by that rounding, never the output)
    rows = default_target.lm_head.weight[drafter.vocab_map] if method == "eagle2" else head3.lm_head.weight
    assert drafter.lm.backend is SmallGemm8 and not torch.equal(drafter.lm_weight, rows)
    half_step = rows.abs().amax(1, keepdim=True) / 127 / 2
    assert ((drafter.lm_weight - rows).abs() <= half_step * 1.001).all()
    if method == "eagle2":
        van = e.run("Write a haiku about the sea.", DecodeSettings(method="vanilla", max_new_tokens=24))
        van = e.run("Write a haiku about the sea.", DecodeSettings(method="vanilla", max_new_tokens=24))
    s = DecodeSettings(method=method, max_new_tokens=24)
    head_pass_run = e.run("Write a haiku about the sea.", s)
    saved, drafter.cpu.head_pass = drafter.cpu.head_pass, None
    try:
        module_run = e.run("Write a haiku about the sea.", s)
    finally:
        drafter.cpu.head_pass = saved
    assert head_pass_run.summary.token_ids == module_run.summary.token_ids
    if method == "eagle2":
        assert head_pass_run.summary.token_ids == van.summary.token_ids
    _same_trees(head_pass_run, module_run)
