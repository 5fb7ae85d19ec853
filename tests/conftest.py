"""Shared fixtures: tiny random targets built in the test (no downloads), and the default model.

Tiny targets use a character tokenizer over a small vocabulary, so even an untrained head's
top-k drafts are often right: acceptance, cache compaction and the bonus token all get
exercised, not only the "everything rejected" path.
"""
from __future__ import annotations

import os
import sys

import pytest
import torch

# Tiny models gain nothing from threads, and on a busy machine a 2-thread torch process stalls
# at every parallel region; EAGLE_TEST_THREADS overrides (the default model uses 2 in CI).
torch.set_num_threads(int(os.environ.get("EAGLE_TEST_THREADS", "1")))
# The fixed cpu preset in tests and their subprocesses: what a test decodes does not depend on this machine's
# measured t(k); tests/test_tree_choice.py tests the choice itself (env={} there).
os.environ.setdefault("EAGLE_FIXED_TREE", "1")

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from eagle_core import from_model  # noqa: E402
from eagle_core.drafting.head import EagleHead, HeadConfig  # noqa: E402


class CharTokenizer:
    """Just enough of a Hugging Face tokenizer for the engine: ids = characters mod the vocab."""

    chat_template = None
    bos_token_id = None
    add_bos_token = False
    unk_token_id = 0
    pad_token_id = 0

    def __init__(self, vocab_size: int, eos_token_id: int | None = None):
        self.vocab_size = vocab_size
        self.eos_token_id = eos_token_id

    def __call__(self, text, add_special_tokens=False, split_special_tokens=True):
        return {"input_ids": [3 + (ord(c) % (self.vocab_size - 3)) for c in text]}

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(ord("a") + (i % 26)) if i >= 3 else ("" if skip_special_tokens else f"<{i}>") for i in ids)

    def convert_tokens_to_ids(self, token):
        return self.unk_token_id


def tiny_target(kind: str = "llama", vocab: int = 24, seed: int = 0, ctx: int = 512, attn: str = "sdpa",
                eos: int | None = None, fast=None):
    """`fast`: the CPU fast path's options (eagle_core.FastPath; None: the default)."""
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    torch.manual_seed(seed)
    common = dict(vocab_size=vocab, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=ctx,
                  bos_token_id=None, eos_token_id=None, pad_token_id=0, tie_word_embeddings=False)
    cfg = LlamaConfig(**common) if kind == "llama" else Qwen2Config(**common)
    cfg._attn_implementation = attn
    model = AutoModelForCausalLM.from_config(cfg)
    # random init is tiny; widen the logits so the target's argmax is far from ties
    with torch.no_grad():
        model.lm_head.weight.mul_(20.0)
    model.generation_config.eos_token_id = None
    tok = CharTokenizer(vocab, eos_token_id=eos)
    return from_model(model, tok, name=f"tiny-{kind}", eos_ids=(eos,) if eos is not None else (-1,), fast=fast)


def draft_node_mask(kv_len: int, committed: int, ancestors) -> torch.Tensor:
    """(1, kv_len) bool: what the drafter lets one new head-cache entry (the last) see: the
    committed context, its ancestors' slots and itself."""
    mask = torch.zeros(1, kv_len, dtype=torch.bool)
    mask[0, :committed] = True
    mask[0, list(ancestors)] = True
    mask[0, -1] = True
    return mask


def draft_chain(head, embeds, feats, t: int):
    """A head (EAGLE-1/2 or EAGLE-3: same call) run as the drafter runs it below row t: rows 0..t
    committed through its cache, then one node per depth k + 1 (embeds[k] at row t, position t + k,
    reading the previous node's output). -> ([output at depth 1, 2, ...], each (1, 1, H), cache)."""
    cache = head.new_cache(64)
    f = head(embeds[0][:, :t + 1], feats[:, :t + 1], torch.arange(t + 1), cache=cache)[:, -1:]
    outs, committed, ancestors = [f], t + 1, []
    for k in range(1, len(embeds)):
        mask = draft_node_mask(cache.length + 1, committed, ancestors)
        ancestors.append(cache.length)
        f = head(embeds[k][:, t:t + 1], f, torch.tensor([t + k]), mask=mask, cache=cache)
        outs.append(f)
    return outs, cache


def tiny_head(target, seed: int = 0, bias: bool = True, layers: int = 1) -> EagleHead:
    torch.manual_seed(seed)
    cfg = HeadConfig.for_target(target.config, bias=bias, qkv_bias=getattr(target.config, "model_type", "") == "qwen2",
                                num_hidden_layers=layers)
    head = EagleHead(cfg).eval()
    if layers > 1:  # deeper heads: norms away from 1, so a norm applied in the wrong place shows
        with torch.no_grad():
            for name, p in head.named_parameters():
                if name.endswith("layernorm.weight"):
                    p.uniform_(0.5, 1.5)
    return head


@pytest.fixture(scope="session")
def default_target():
    from eagle_core import load_target

    return load_target()


# The fast loop (README): `python -m pytest -q -m "not slow"` runs the tests that need neither the default
# model, a browser, a server nor other processes; the full suite (CI) runs everything. A test is slow when it
# takes one of these fixtures or lives in one of these files (each of their tests loads the model, starts
# processes or drives Chromium).
HEAVY_FIXTURES = {"default_target", "engine", "_app_model", "page_url", "browser"}
SLOW_FILES = {"test_browser.py", "test_lesson_browser.py", "test_clone.py", "test_hub_offline.py",
              "test_default_model.py", "test_tempfiles.py", "test_zerogpu.py"}
SLOW_TESTS = ("test_bench.py::test_journal_resumes_and_reports", "test_bench.py::test_json_shape",
              "test_gpu_check.py::test_gpu_check_short_runs_end_to_end", "test_portable.py::test_cli_runs_the_default",
              "test_portable.py::test_half_precision_parts_only", "test_gpu_app.py::test_the_page_opens_with_the_gpu",
              "test_space.py::test_the_assembled_space_builds", "test_hardware.py::test_the_panel_runs_on_the_default",
              "test_page_fit.py::test_page_fits")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: loads the default model, starts processes or drives a browser "
                                       "(left out of the fast loop, -m 'not slow')")


def pytest_collection_modifyitems(config, items):
    for item in items:
        where = f"{item.path.name}::{item.name}"
        if (item.path.name in SLOW_FILES or HEAVY_FIXTURES & set(getattr(item, "fixturenames", ()))
                or where.startswith(SLOW_TESTS)):
            item.add_marker(pytest.mark.slow)
