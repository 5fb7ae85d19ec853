"""The gguf weight format (FastPath(weights="gguf"), issue 54 item 1): the target's products multiply from
Q4_1 / Q8_0 blocks (tiny models: their own weights quantized as a GGUF file holds them,
gguf_blocks.quantize_model). Within the format the oracle holds (greedy EAGLE-1/2/3 == greedy vanilla) on
both decoder passes, the one-call-per-layer pass (layer.c, the default) and the torch operations
(FastPath(passes="ops")), and sampling keeps the target's distribution; the float32 format is unchanged;
what cannot run in the format says so. The default model's test (slow) also prints how many tokens agree
with float32. The fused pass's own checks (row invariance, biases, mixed formats): test_gguf_layers.py."""
from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from conftest import tiny_head, tiny_target
from eagle_core import DecodeSettings, Engine, FastPath, from_model
from eagle_core.cpu import path_line, path_status, weights_line
from eagle_core.cpu.kernels import qblocks
from eagle_core.cpu.quant_linear import QuantLinear
from eagle_core.target import gguf_blocks
from test_engine import PROMPTS, TREES
from test_portable import N_DRAWS, second_token_draws
from test_seam import WIDE, _target8

pytest.importorskip("gguf")
GGUF = FastPath(weights="gguf")
GGUF_OPS = FastPath(weights="gguf", passes="ops")  # the torch operations per layer, on the same blocks
FORMATS = [FastPath(), GGUF, GGUF_OPS]
IDS = ["float32", "gguf", "gguf-ops"]


@pytest.fixture
def block_calls(monkeypatch) -> list:
    """The rows of every product run from blocks (qblocks.matmul), in order."""
    calls = []
    real = qblocks.matmul
    monkeypatch.setattr(qblocks, "matmul", lambda *a, **kw: calls.append(a[1].shape[0]) or real(*a, **kw))
    return calls


def _greedy(engine, prompt, **tree):
    return engine.run(prompt, DecodeSettings(max_new_tokens=32, chat_template=False, **tree)).summary.token_ids


@pytest.mark.parametrize("fast", FORMATS, ids=IDS)
@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_greedy_eagle_1_2_equal_vanilla_in_each_format(kind, fast, block_calls):
    """The oracle in each format and pass, on the CPU decoder: EAGLE-1, EAGLE-2 (narrow and wide trees) and a
    chain give vanilla's tokens, with multi-token acceptance; in gguf products ran from blocks (the LM head
    through qblocks.matmul: one row for vanilla steps, many for trees), and the decoder's layers as layer.c
    calls unless the ops pass was asked (a silent fall back to ops fails here)."""
    target = tiny_target(kind, seed=2, vocab=8, fast=fast)
    assert target.forward_path == "cpu" and target.weight_format == fast.weights
    engine = Engine(target, tiny_head(target, seed=1))
    assert engine.drafter.cpu is not None  # the drafter's CPU path is on in both formats
    taus = []
    for prompt in PROMPTS:
        van = _greedy(engine, prompt, method="vanilla")
        for name in ("eagle1", "eagle2", "eagle2-wide", "chain"):
            run = engine.run(prompt, DecodeSettings(max_new_tokens=32, chat_template=False, **TREES[name]))
            assert run.summary.token_ids == van, name
            taus.append(run.summary.tau)
    assert max(taus) > 1.5
    fused = fast.passes != "ops"
    assert target.cpu_decoder.passes == ("layers" if fused else "ops")
    assert (target.cpu_decoder.c_calls > 0) == fused
    if fast.weights == "gguf":
        assert max(block_calls) > 1 and 1 in block_calls
    else:
        assert not block_calls


@pytest.mark.parametrize("fast", [GGUF, GGUF_OPS], ids=["gguf", "gguf-ops"])
def test_greedy_eagle3_equals_vanilla_in_gguf(fast, block_calls):
    """EAGLE-3 reads the residual stream entering chosen layers: the fused pass captures it too."""
    from test_head3 import tiny_head3

    t8 = _target8(vocab=8, seed=1, fast=fast)
    assert t8.forward_path == "cpu" and sum(isinstance(m, QuantLinear) for m in t8.model.modules()) == 8 * 7 + 1
    e3 = Engine(t8, head3=tiny_head3(t8, seed=11), head3_name="random")
    for prompt in PROMPTS:
        assert _greedy(e3, prompt, method="eagle3", **WIDE) == _greedy(e3, prompt, method="vanilla")
    assert max(block_calls) > 1 and (t8.cpu_decoder.c_calls > 0) == (fast.passes != "ops")




def test_sampling_keeps_the_target_distribution_in_gguf():
    """As test_seam's exactness test, in the gguf format: the 2nd token goes through drafting and the
    point-mass rule; its frequencies follow the format's own p(x2) (the model's forward on its blocks)."""
    first = tiny_target("llama", seed=5, vocab=8, fast=FastPath.portable())
    with torch.no_grad():
        first.model.lm_head.weight.mul_(0.05)  # a spread-out distribution, so sampling matters
    target = from_model(first.model, first.tokenizer, name="tiny", eos_ids=first.eos_ids, fast=GGUF)
    assert isinstance(target.lm_head, QuantLinear)
    tv, accepted = second_token_draws(target, "eagle2", dict(depth=1, tree_top_k=3, total_tokens=3))
    assert accepted > N_DRAWS // 10  # drafts really were accepted, not only bonus tokens
    assert tv < 0.07  # sampling noise with 600 draws over 8 outcomes is ~0.03


def test_the_target_says_which_format_runs():
    f32 = tiny_target("llama", seed=1, vocab=8)
    q = tiny_target("llama", seed=1, vocab=8, fast=GGUF)
    assert f32.weight_format == "float32" and "gguf" not in f32.describe() and f32.forward_note == ""
    assert q.weight_format == "gguf" and "weights gguf (15 products from Q4_1/Q8_0 blocks" in q.describe()
    assert q.forward_note == "one layer.c call per layer, products from the blocks"  # the fused pass, in both formats
    assert f32.cpu_decoder.passes == q.cpu_decoder.passes == "layers" and q.fast.passes == "fused"
    ops = tiny_target("llama", seed=1, vocab=8, fast=GGUF_OPS)
    assert ops.forward_note == "ops pass" and ops.cpu_decoder.passes == "ops" and "(ops pass)" in ops.describe()
    assert "CPU decoder (one layer.c call per layer, products from the blocks)" in q.describe()
    assert weights_line(q).startswith("Weights: gguf") and weights_line(f32).startswith("Weights: float32")
    assert "the CPU decoder (one layer.c call per layer" in weights_line(q)
    assert path_line(q) is None and path_status(q).identical  # the engine's kernels, row invariant
    # the LM head of blocks: its float32 weight is the dequantized Q8_0 (not tied here), vocab from it
    assert isinstance(q.lm_head, QuantLinear) and q.lm_head.fmt == "q8_0" and q.vocab_size == 8
    assert torch.equal(q.lm_head_weight, q.lm_head.dequantized_weight())
    assert q.config._attn_implementation == f32.config._attn_implementation  # the engine's attention in both


def test_a_tied_lm_head_reads_the_embedding_where_the_blocks_equal_it():
    """The default model's case: the LM head's Q8_0 blocks are the embedding's, whose float32 tensor
    equals their dequantization exactly; lm_head_weight is that tensor, not a copy."""
    from transformers import AutoModelForCausalLM, LlamaConfig

    from conftest import CharTokenizer

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=16, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True, pad_token_id=0)
    model = AutoModelForCausalLM.from_config(cfg)
    blocks = gguf_blocks.quantize_model(model)
    with torch.no_grad():
        model.model.embed_tokens.weight.copy_(torch.from_numpy(blocks["lm_head"].dequantize()))
    t = from_model(model, CharTokenizer(16), fast=GGUF, blocks=blocks)
    assert t.lm_head_weight.data_ptr() == t.embed.weight.data_ptr()


def test_what_cannot_run_in_the_format_says_so():
    from transformers import AutoModelForCausalLM, LlamaConfig

    from conftest import CharTokenizer
    from eagle_core import load_target

    with pytest.raises(ValueError, match="portable path"):
        FastPath(kernels="stock", weights="gguf")
    with pytest.raises(ValueError, match="weights must be one of"):
        FastPath(weights="q4")
    with pytest.raises(ValueError, match="default model's GGUF file"):
        load_target("some/other-model", fast=GGUF)
    with pytest.raises(ValueError, match="on a CPU with float32"):
        load_target(None, device="cpu", dtype=torch.bfloat16, fast=GGUF)
    cfg = LlamaConfig(vocab_size=16, hidden_size=48, intermediate_size=96, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=2, pad_token_id=0)
    with pytest.raises(ValueError, match="not a multiple of 32"):
        from_model(AutoModelForCausalLM.from_config(cfg), CharTokenizer(16), fast=GGUF)
    model = tiny_target("llama", seed=0, vocab=8, fast=FastPath.portable()).model
    partial = {k: v for k, v in gguf_blocks.quantize_model(model).items() if "down_proj" not in k}
    with pytest.raises(ValueError, match="no Q4_1 / Q8_0 blocks for 2 of its 15 products"):
        from_model(model, CharTokenizer(8), fast=GGUF, blocks=partial)


def test_the_cli_and_the_benchmark_take_the_option(capsys):
    from eagle_core.__main__ import build_parser, main
    from eagle_core.bench.harness import build_parser as bench_parser
    from eagle_core.config import fast_from_args

    a = build_parser().parse_args(["generate", "--prompt", "x", "--weights", "gguf"])
    assert fast_from_args(a) == replace(FastPath.default(), weights="gguf")
    f32 = build_parser().parse_args(["generate", "--prompt", "x", "--weights", "float32"])
    assert fast_from_args(f32) is None  # float32: as before (auto: tests/test_auto_weights.py)
    assert bench_parser().parse_args(["--weights", "gguf"]).weights == "gguf"
    assert main(["generate", "--prompt", "x", "--weights", "gguf", "--model", "some/other-model", "--device", "cpu"]) == 2
    assert "error: the gguf weight format reads the default model's GGUF file" in capsys.readouterr().err


def test_token_agreement_between_two_runs_known_answer():
    from eagle_core.bench.harness import token_agreement

    def sample(method, prompt, ids):
        return {"method": method, "prompt": prompt, "repeat": 0, "token_ids": ids}
    a = [sample("vanilla", 0, [1, 2, 3, 4]), sample("vanilla", 1, [5, 6, 7]), sample("eagle", 0, [9]),
         sample("vanilla", 2, [1])]
    b = [sample("vanilla", 0, [1, 2, 9, 4]), sample("vanilla", 1, [5, 6, 7]), sample("eagle", 0, [8])]
    assert token_agreement(a, b) == {"method": "vanilla", "prompts": 2, "identical": 1, "same_prefix_tokens": 2 + 3,
                                     "tokens": 7}


@pytest.mark.slow
def test_default_model_eagle2_equals_vanilla_in_gguf(default_target):
    """The default model on its file's own blocks: greedy EAGLE-2 gives vanilla's 32 tokens in that format,
    on the fused pass (layer.c, the default) and on the ops pass; how many of them float32 also gives, and
    whether the two passes gave the same tokens, is printed (reported, not asserted: the passes' norms
    differ at float32 rounding, so their tokens may part where two logits nearly tie)."""
    from eagle_core import load_engine, load_target

    q = load_target(fast=GGUF)
    assert q.weight_format == "gguf" and q.forward_path == "cpu"
    assert sum(isinstance(m, QuantLinear) for m in q.model.modules()) == 211
    assert q.lm_head_weight.data_ptr() == q.embed.weight.data_ptr() and q.vocab_size == 49152
    prompt = "Write a short poem about the sea."
    settings = dict(max_new_tokens=32, depth=5, tree_top_k=4, total_tokens=12)
    engine = load_engine(q, methods=("eagle2",))
    van = engine.run(prompt, DecodeSettings(method="vanilla", **settings)).summary.token_ids
    eag = engine.run(prompt, DecodeSettings(method="eagle2", **settings))
    assert eag.summary.token_ids == van and len(van) == 32
    assert q.cpu_decoder.passes == "layers" and q.cpu_decoder.c_calls > 0  # the fused pass ran
    ops = load_engine(load_target(fast=GGUF_OPS), methods=("eagle2",))
    ops_van = ops.run(prompt, DecodeSettings(method="vanilla", **settings)).summary.token_ids
    assert ops.run(prompt, DecodeSettings(method="eagle2", **settings)).summary.token_ids == ops_van
    assert ops.target.cpu_decoder.c_calls == 0
    f32 = load_engine(default_target, methods=()).run(prompt, DecodeSettings(method="vanilla", **settings))
    same = sum(a == b for a, b in zip(van, f32.summary.token_ids))
    prefix = next((i for i, (a, b) in enumerate(zip(van, f32.summary.token_ids)) if a != b), len(van))
    print(f"\ngguf vs float32, greedy vanilla, 32 tokens: {same} positions equal, first {prefix} identical; "
          f"EAGLE-2 tau in gguf {eag.summary.tau:.2f}; fused and ops passes' tokens identical: {van == ops_van}")
