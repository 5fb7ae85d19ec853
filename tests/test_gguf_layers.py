"""The one-call-per-layer pass (kernels/layer.c's decoder_layer) in the gguf weight format: its products
multiply from the packed Q4_1 / Q8_0 blocks through qblocks.c's qb_matmul, handed to layer.c at load.

Row invariance holds by construction (integer sums per block, every other op row-wise): a forward of n
rows equals n one-row forwards bit for bit, which is what makes greedy EAGLE reproduce greedy vanilla.
Against the torch-ops pass on the same blocks the fused pass is NOT bit-equal in general: layer.c's
RMSNorm sums in another order than torch's and its silu uses its own exp, so the two differ at float32
rounding (and an int8 rounding of an activation may then flip), hence a tolerance, not equality, there.
The oracle runs on both passes in test_gguf_format.py."""
from __future__ import annotations

import pytest
import torch

from conftest import CharTokenizer, tiny_head, tiny_target
from eagle_core import DecodeSettings, Engine, FastPath, from_model
from eagle_core.cpu import forward as cpu_forward
from eagle_core.target import gguf_blocks

pytest.importorskip("gguf")
GGUF = FastPath(weights="gguf")
GGUF_OPS = FastPath(weights="gguf", passes="ops")
IDS = torch.tensor([[1, 2, 3, 4, 5, 6, 7, 1, 2, 3, 5, 7, 2]])  # 13 rows: a verification's size


def _pair(build):
    """The same model in the gguf format, fused (layer.c) and ops: build(fast) -> Target."""
    fused, ops = build(GGUF), build(GGUF_OPS)
    assert fused.cpu_decoder.passes == "layers" and ops.cpu_decoder.passes == "ops"
    return fused, ops


def _check(fused, ops):
    """n rows at once == n single rows, bit for bit (and as many layer.c calls); fused within rounding of ops."""
    calls = fused.cpu_decoder.c_calls
    whole = fused.forward(IDS, fused.new_cache())
    assert fused.cpu_decoder.c_calls == calls + 1  # the fused pass ran, no silent fall back
    cache = fused.new_cache()
    rows = torch.cat([fused.forward(IDS[:, i:i + 1], cache) for i in range(IDS.shape[1])], dim=1)
    assert torch.equal(rows, whole)
    ref = ops.forward(IDS, ops.new_cache())
    assert ops.cpu_decoder.c_calls == 0
    scale = ref.abs().max().item()
    assert scale > 0.1 and (whole - ref).abs().max().item() < 1e-3 * scale


def _biased_llama(fast, blocks_fmt=None):
    """A tiny Llama with a bias on every product (attention_bias, mlp_bias): layer.c adds them after the
    product from blocks, as QuantLinear.forward does. blocks_fmt: {module-name suffix: format} overrides."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    torch.manual_seed(3)
    cfg = LlamaConfig(vocab_size=8, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, attention_bias=True, mlp_bias=True,
                      pad_token_id=0, tie_word_embeddings=False)
    model = AutoModelForCausalLM.from_config(cfg)
    with torch.no_grad():
        model.lm_head.weight.mul_(20.0)
        for name, p in model.named_parameters():
            if name.endswith(".bias"):
                p.normal_(0.0, 0.1)  # from_config zeroes them: make them matter
    blocks = gguf_blocks.quantize_model(model)
    if blocks_fmt:
        other = {f: gguf_blocks.quantize_model(model, fmt=f) for f in set(blocks_fmt.values())}
        blocks.update({n: other[f][n] for n in blocks for s, f in blocks_fmt.items() if n.endswith(s)})
    return from_model(model, CharTokenizer(8), name="tiny-biased", eos_ids=(-1,), fast=fast, blocks=blocks)


@pytest.mark.parametrize("kind", ["llama", "qwen2"])  # qwen2: biases on q/k/v
def test_fused_pass_is_row_invariant_and_near_the_ops_pass(kind):
    _check(*_pair(lambda fast: tiny_target(kind, seed=2, vocab=8, fast=fast)))


def test_biases_on_every_product():
    fused, ops = _pair(_biased_llama)
    assert all(L.o.bias is not None and L.down.bias is not None for L in fused.cpu_decoder.layers)
    _check(fused, ops)


def test_a_layer_mixing_q4_1_and_q8_0():
    """o_proj and down_proj in Q8_0, the rest Q4_1: layer.c reads one kind per product (bit 16 set)."""
    mixed = {"o_proj": "q8_0", "down_proj": "q8_0"}
    fused, ops = _pair(lambda fast: _biased_llama(fast, mixed))
    L = fused.cpu_decoder.layers[0]
    assert (L.o.fmt, L.qkv.fmt) == ("q8_0", "q4_1") and L.kinds == (1 << 16) | 3 | 4 << 4 | 3 << 8 | 4 << 12
    _check(fused, ops)
    engine = Engine(fused, tiny_head(fused, seed=1))
    for prompt in ("a", "hello world"):
        settings = dict(max_new_tokens=24, chat_template=False, depth=6, tree_top_k=8, total_tokens=40)
        van = engine.run(prompt, DecodeSettings(method="vanilla", **settings)).summary.token_ids
        assert engine.run(prompt, DecodeSettings(method="eagle2", **settings)).summary.token_ids == van


def test_without_qblocks_in_layer_c_the_ops_pass_runs_and_says_so(monkeypatch):
    """Where layer.c cannot be handed qb_matmul the decoder keeps the torch operations, and forward_note
    (the CLI's Weights: line, Target.describe()) says the ops pass runs, not the fused one."""
    monkeypatch.setattr(cpu_forward, "blocks_in_layers", lambda: False)
    t = tiny_target("llama", seed=2, vocab=8, fast=GGUF)
    assert t.cpu_decoder.passes == "ops" and t.forward_note == "ops pass"
    t.forward(IDS, t.new_cache())
    assert t.cpu_decoder.c_calls == 0
