"""The portable path a GPU takes: stock modules (no custom CPU kernels, no CPU decoder), the tree
mask through transformers' own attention, and half precision.

- float32, stock: greedy EAGLE-1/2/3 and chain equal vanilla token for token, and sampling keeps
  the target's distribution (the point-mass and min(1, p/q) rules).
- bfloat16 / float16, stock: a k-row forward rounds differently from a 1-row one, so greedy
  decodes may part; where they do, it must be at a near-tie (eagle_core.divergence), never at a
  clear winner. A broken tree mask (siblings seeing each other) parts at a clear winner: the
  control that shows this test can fail.
"""
from __future__ import annotations

import pytest
import torch

from conftest import tiny_head, tiny_target
from eagle_core import DecodeSettings, Engine, FastPath, from_model
from eagle_core.divergence import first_parting
from test_engine import PROMPTS, TREES  # the same trees and prompts as the kernel-path oracle tests
from test_head3 import tiny_head3, tiny_target8

WIDE = dict(depth=6, tree_top_k=8, total_tokens=40)
DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16}


def stock(target, dtype=torch.float32):
    """The same tiny model, on the stock path, in `dtype`."""
    t = from_model(target.model.to(dtype), target.tokenizer, name=target.name, eos_ids=target.eos_ids,
                   fast=FastPath.portable())
    assert t.forward_path == "transformers" and t.dtype == dtype
    return t


def greedy(engine, prompt, **tree):
    return engine.run(prompt, DecodeSettings(max_new_tokens=40, chat_template=False, **tree)).summary.token_ids


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
@pytest.mark.parametrize("seed, vocab", [(0, 24), (1, 8), (3, 8)])
def test_float32_stock_greedy_equals_vanilla(kind, seed, vocab):
    target = stock(tiny_target(kind, seed=seed, vocab=vocab))
    engine = Engine(target, tiny_head(target, seed=seed + 10))
    for prompt in PROMPTS:
        van = greedy(engine, prompt, method="vanilla")
        for tree in TREES.values():
            assert greedy(engine, prompt, **tree) == van, tree


@pytest.mark.parametrize("seed, vocab", [(0, 24), (1, 8)])
def test_float32_stock_eagle3_greedy_equals_vanilla(seed, vocab):
    target = stock(tiny_target8(vocab=vocab, seed=seed))
    engine = Engine(target, head3=tiny_head3(target, seed=seed + 10), head3_name="random")
    for prompt in PROMPTS:
        assert greedy(engine, prompt, method="eagle3", **WIDE) == greedy(engine, prompt, method="vanilla")


def partings(engine, target, methods):
    """(runs, [Parting of each run that differed from vanilla])."""
    runs, parted = 0, []
    for prompt in PROMPTS:
        ids = target.encode_prompt(prompt, chat_template=False)
        van = greedy(engine, prompt, method="vanilla")
        for tree in methods:
            out = greedy(engine, prompt, **tree)
            runs += 1
            p = first_parting(target, ids, van, out)
            if p is not None:
                parted.append(p)
    return runs, parted


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_half_precision_parts_only_at_near_ties(dtype):
    total, parted = 0, []
    for kind, seed, vocab in (("llama", 0, 24), ("llama", 1, 8), ("qwen2", 2, 24), ("llama", 3, 8)):
        target = stock(tiny_target(kind, seed=seed, vocab=vocab), DTYPES[dtype])
        engine = Engine(target, tiny_head(target, seed=seed + 10).to(DTYPES[dtype]))
        n, p = partings(engine, target, TREES.values())
        total, parted = total + n, parted + p
    t8 = stock(tiny_target8(vocab=8, seed=1), DTYPES[dtype])
    e3 = Engine(t8, head3=tiny_head3(t8, seed=11).to(DTYPES[dtype]), head3_name="random")
    n, p = partings(e3, t8, [dict(method="eagle3", **WIDE)])
    total, parted = total + n, parted + p
    assert all(p.near_tie for p in parted), [p.to_dict() for p in parted if not p.near_tie]
    assert len(parted) <= total // 4, (len(parted), total)  # mostly identical all the same


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_broken_tree_mask_parts_at_a_clear_winner(monkeypatch, dtype):
    """The control: a tree mask that hides the committed context from the tree's nodes. Greedy
    EAGLE then accepts drafts the target would not have chosen, and the parting is no near-tie
    (in float32 already a leak between siblings is caught; bfloat16's tolerance is wider)."""
    import eagle_core.decode as decode

    real = decode.tree_attention_mask

    def broken(parents, L, dtype=torch.float32, device="cpu"):
        mask = real(parents, L, dtype=dtype, device=device).clone()
        if mask.dtype == torch.float32:
            mask[..., L:] = 0  # siblings and cousins see each other
        else:
            mask[..., 1:L] = torch.finfo(mask.dtype).min  # the context is hidden (but its first token)
        return mask

    monkeypatch.setattr(decode, "tree_attention_mask", broken)
    target = stock(tiny_target("llama", seed=1, vocab=8), dtype)
    engine = Engine(target, tiny_head(target, seed=11).to(dtype))
    _, parted = partings(engine, target, [TREES["eagle2-wide"]])
    assert parted and any(not p.near_tie for p in parted), [p.to_dict() for p in parted]


N_DRAWS = 600


def second_token_draws(target, method: str, tree: dict, n: int = N_DRAWS) -> tuple[float, int]:
    """(total variation between the 2nd generated token's frequencies over `n` seeds and the target's own
    marginal p(x2) at temperature 1, drafts accepted in the first cycles): the exactness measure of the
    sampling tests (an 8-token vocabulary, the prompt "hi", a tiny head)."""
    engine = Engine(target, tiny_head(target, seed=6))
    ids = target.encode_prompt("hi", chat_template=False)
    with torch.no_grad():
        p1 = torch.softmax(target.model(torch.tensor([ids])).logits[0, -1].double(), -1)
        p2 = sum(p1[a] * torch.softmax(target.model(torch.tensor([ids + [a]])).logits[0, -1].double(), -1)
                 for a in range(8))
    counts, accepted = torch.zeros(8, dtype=torch.float64), 0
    for seed in range(n):
        run = engine.run("hi", DecodeSettings(method=method, max_new_tokens=3, temperature=1.0, seed=seed,
                                              chat_template=False, **tree))
        counts[run.summary.token_ids[1]] += 1
        accepted += run.cycles[0].accepted_drafts
    return 0.5 * float((counts / counts.sum() - p2).abs().sum()), accepted


@pytest.mark.parametrize("method", ["eagle2", "chain"])
def test_float32_stock_sampling_keeps_the_target_distribution(method):
    """The 2nd generated token goes through drafting and the point-mass (eagle2) or min(1, p/q)
    (chain) rule; its frequencies must follow the target's marginal p(x2) at temperature 1."""
    target = stock(tiny_target("llama", seed=5, vocab=8))
    with torch.no_grad():
        target.model.lm_head.weight.mul_(0.05)  # a spread-out distribution, so sampling matters
    tree = dict(depth=1, tree_top_k=3, total_tokens=3) if method == "eagle2" else dict(chain_length=2)
    tv, accepted = second_token_draws(target, method, tree)
    assert accepted > N_DRAWS // 10  # drafts really were accepted, not only bonus tokens
    assert tv < 0.07  # sampling noise with 600 draws over 8 outcomes is ~0.03


def test_dtype_policy(monkeypatch):
    """float32 wherever affordable (it alone keeps greedy identity); bf16 only where native."""
    from eagle_core.target import model as tg

    assert tg.default_dtype("cpu", 8e9) == torch.float32
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))  # a T4
    assert tg.default_dtype("cuda", 135e6) == torch.float32
    assert tg.default_dtype("cuda", 8e9) == torch.float16
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (8, 0))  # an A100
    assert tg.default_dtype("cuda", 8e9) == torch.bfloat16 and tg.default_dtype("cuda", 1e9) == torch.float32


def test_params_are_estimated_from_the_config(default_target):
    from eagle_core.target import estimate_params

    n = sum(p.numel() for p in default_target.model.parameters())
    assert abs(estimate_params(default_target.config) - n) / n < 0.01


def test_half_precision_logits_are_float32():
    t32 = tiny_target("llama", seed=4, vocab=24)
    feats = torch.randn(1, 3, 64)
    ref = torch.nn.functional.linear(feats, t32.model.lm_head.weight.to(torch.bfloat16).float())
    t16 = stock(t32, torch.bfloat16)
    out = t16.logits(feats.to(torch.bfloat16))
    assert out.dtype == torch.float32
    torch.testing.assert_close(out, torch.nn.functional.linear(feats.to(torch.bfloat16).float(),
                                                               t16.lm_head.weight.float()))
    assert (out - ref).abs().max() < 0.1  # and close to the float32 product


@pytest.mark.parametrize("method", ["vanilla", "eagle", "eagle3"])
def test_cli_runs_the_default_model_in_bfloat16(method):
    """`--dtype bfloat16` for vanilla, EAGLE-2 and EAGLE-3 on the default model (the stock path:
    the CPU kernels are float32 only)."""
    import json
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "eagle_core", "generate", "--prompt", "What is 2+3?", "--method", method,
                          "--max-new-tokens", "12", "--dtype", "bfloat16", "--json"],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    d = json.loads(out.stdout.strip().splitlines()[-1])
    assert d["new_tokens"] > 0 and d["dtype"] == "bfloat16" and d["method"] == {"eagle": "eagle2"}.get(method, method)
    assert method != "vanilla" or d["tau"] == 1.0


def test_the_comparison_card_says_where_and_why_half_precision_parted():
    """The app's worker, given greedy EAGLE and vanilla runs that part (a bfloat16 tiny target that
    is known to), reports the parting, and the card explains it as a near-tie."""
    from eagle_app.worker import Worker
    from viz.text import comparison_html

    target = stock(tiny_target("llama", seed=3, vocab=8), torch.bfloat16)
    engine = Engine(target, tiny_head(target, seed=13).to(torch.bfloat16))
    partings_seen = []
    for prompt in PROMPTS:
        s = DecodeSettings(method="eagle2", depth=4, tree_top_k=4, total_tokens=12, max_new_tokens=40, chat_template=False)
        w = Worker(engine, prompt, s).start()
        w.wait()
        events = []
        while not w.events.empty():
            events.append(w.events.get())
        runs = {k: p for what, k, p in events if what == "done"}
        partings_seen += [(p, runs) for what, _, p in events if what == "parting"]
        if not any(what == "parting" for what, _, _ in events):  # no parting: the outputs are identical
            assert runs["eagle"].summary.token_ids == runs["vanilla"].summary.token_ids
    assert partings_seen, "this tiny bfloat16 target parts on one of the prompts"
    p, runs = partings_seen[0]
    assert p["near_tie"] and p["dtype"] == "bfloat16"
    card = comparison_html(runs["eagle"], runs["vanilla"], parting=p)
    assert f"part at new token {p['position'] + 1}" in card and "near-tie in bfloat16" in card
    assert "no near-tie" in comparison_html(runs["eagle"], runs["vanilla"], parting={**p, "near_tie": False})


def test_eagle_portable_turns_every_kernel_off_and_decoding_stays_lossless():
    """EAGLE_PORTABLE=1, the one engine switch: no C kernel is built or called (the library reports
    why), the target loads on stock modules and transformers' forward, the drafter is the portable
    one, and greedy EAGLE still decodes what vanilla decodes. In a fresh interpreter: the library is
    decided once per process."""
    import os
    import subprocess
    import sys

    code = """
from conftest import tiny_head, tiny_target
from eagle_core import DecodeSettings, Engine, FastPath
from eagle_core.cpu import kernels
assert kernels.library() is None and "EAGLE_PORTABLE=1" in kernels.library_error()
assert FastPath.default() == FastPath.portable()
t = tiny_target("llama", seed=0, vocab=24)
assert t.forward_path == "transformers" and not t.kernels.swaps
e = Engine(t, tiny_head(t, seed=10))
assert e.drafter.cpu is None
s = dict(max_new_tokens=30, chat_template=False)
van = e.run("abcab", DecodeSettings(method="vanilla", **s)).summary.token_ids
for tree in (dict(depth=4, tree_top_k=4, total_tokens=12), dict(depth=2, tree_top_k=2, total_tokens=3)):
    assert e.run("abcab", DecodeSettings(method="eagle2", **tree, **s)).summary.token_ids == van
print("ok")
"""
    here = os.path.dirname(os.path.abspath(__file__))
    env = {**os.environ, "EAGLE_PORTABLE": "1", "PYTHONPATH": os.pathsep.join([here, os.path.dirname(here)])}
    out = subprocess.run([sys.executable, "-c", code], cwd=here, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
