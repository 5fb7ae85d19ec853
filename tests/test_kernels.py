"""The CPU linear-layer path (eagle_core.cpu.kernels): correct, batch invariant, a drop-in for nn.Linear."""
import pytest
import torch
from torch import nn

from eagle_core.cpu import kernels

needs_smallgemm = pytest.mark.skipif(kernels.library() is None, reason=f"smallgemm unavailable: {kernels.library_error()}")


def _reference(x, w, b=None):
    y = x.double() @ w.double().T
    return (y + b.double() if b is not None else y).float()


@needs_smallgemm
@pytest.mark.parametrize("n,k", [(1, 1), (7, 3), (8, 8), (9, 33), (17, 70), (40, 576), (100, 129), (48, 300)])
@pytest.mark.parametrize("m", [1, 2, 5, 6, 7, 13, 25, 49, 97])  # past 12 and 48: the blocked path's tiles and passes
def test_smallgemm_matches_float64_reference(n, k, m):
    g = torch.Generator().manual_seed(n * 1000 + k * 10 + m)
    w, x, b = torch.randn(n, k, generator=g), torch.randn(m, k, generator=g), torch.randn(n, generator=g)
    st = kernels.SmallGemm.prepare(w)
    torch.testing.assert_close(kernels.SmallGemm.run(st, x, None), _reference(x, w), rtol=1e-5, atol=1e-5 * k ** 0.5)
    torch.testing.assert_close(kernels.SmallGemm.run(st, x, b), _reference(x, w, b), rtol=1e-5, atol=1e-5 * k ** 0.5)


@needs_smallgemm
@pytest.mark.parametrize("threads", [1, 2])
def test_smallgemm_row_is_bit_identical_alone_and_in_any_batch(threads):
    """The property greedy losslessness rests on: a row's output does not depend on its batch."""
    old = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        g = torch.Generator().manual_seed(1)
        w, x = torch.randn(1000, 300, generator=g), torch.randn(100, 300, generator=g)  # k: 2 blocks and a part
        st = kernels.SmallGemm.prepare(w)
        alone = torch.cat([kernels.SmallGemm.run(st, x[i:i + 1].contiguous(), None) for i in range(100)])
        # 7-12: one AVX-512 tile where the CPU has it; 13+: row tiles sharing each k block; 49+: a second pass
        for m in (2, 5, 7, 8, 12, 13, 16, 17, 24, 31, 32, 48, 49, 64, 100):
            assert torch.equal(kernels.SmallGemm.run(st, x[:m].contiguous(), None), alone[:m]), m
        assert kernels.batch_invariant(kernels.SmallGemm, 1000, 576)
    finally:
        torch.set_num_threads(old)


@needs_smallgemm
@pytest.mark.parametrize("n,k", [(1, 1), (7, 3), (9, 33), (17, 70), (40, 576), (576, 1152)])
def test_float16_storage_gives_the_float32_kernels_bits(n, k):
    """A weight whose values are all float16s, packed as float16 (SmallGemm16): every row count,
    with and without a bias, gives exactly SmallGemm's output; other weights are refused."""
    g = torch.Generator().manual_seed(n + k)
    w = torch.randn(n, k, generator=g).half().float()
    b = torch.randn(n, generator=g)
    st32, st16 = kernels.SmallGemm.prepare(w), kernels.SmallGemm16.prepare(w)
    assert st16[0].dtype == torch.float16 and st16[0].numel() == st32[0].numel()  # half the bytes
    for m in (1, 2, 5, 6, 7, 13, 25, 50):
        x = torch.randn(m, k, generator=g)
        for bias in (None, b):
            assert torch.equal(kernels.SmallGemm16.run(st16, x, bias), kernels.SmallGemm.run(st32, x, bias)), (m, bias is None)
    assert kernels.SmallGemm16.exact(w) and not kernels.SmallGemm16.exact(torch.full((n, k), 0.1))  # 0.1: no float16
    with pytest.raises(ValueError, match="float16"):
        kernels.SmallGemm16.prepare(torch.randn(n, k, generator=g))


def test_batch_invariance_check_can_fail():
    """A backend whose result depends on the batch (here: a different summation order for m > 1) is caught."""

    class Drifting(kernels.Mkl):
        @staticmethod
        def run(w, x, bias):
            if x.shape[0] == 1:
                return torch.nn.functional.linear(x, w, bias)
            return torch.stack([(w * row).flip(1).sum(1) for row in x])

    assert not kernels.batch_invariant(Drifting, 64, 257)
    assert kernels.batch_invariant(kernels.Mkl, 1, 1)  # trivially invariant shape: one product per row


def _tiny_mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(33, 70), nn.SiLU(), nn.Linear(70, 9, bias=False))


@pytest.mark.parametrize("policy", [b for b in kernels.BACKENDS if kernels.BACKENDS[b].available()])
def test_install_is_a_drop_in(policy):
    model = _tiny_mlp()
    keys = list(model.state_dict())
    x = torch.randn(5, 33)
    with torch.inference_mode():
        before = model(x)
    inst = kernels.install(model, policy)
    assert all(isinstance(m, kernels.Linear) for m in (model[0], model[2]))
    assert list(model.state_dict()) == keys, "state dict keys must not change"
    with torch.inference_mode():
        torch.testing.assert_close(model(x), before, rtol=1e-5, atol=1e-5)
        with inst.stock():
            assert type(model[0]) is nn.Linear
            assert torch.equal(model(x), before)
    assert isinstance(model[0], kernels.Linear)
    assert kernels.install(model, policy).swaps == [], "installing twice changes nothing"


@needs_smallgemm
def test_weight_changed_in_place_is_repacked_and_gradients_bypass():
    model = _tiny_mlp()
    kernels.install(model, "smallgemm")
    x = torch.randn(3, 33)
    with torch.inference_mode():
        first = model(x)
    with torch.no_grad():
        model[2].weight.mul_(2.0)  # e.g. a state dict loaded after install
    with torch.inference_mode():
        torch.testing.assert_close(model(x)[:, :], 2 * first, rtol=1e-5, atol=1e-5)
    x.requires_grad_(True)
    model(x).sum().backward()  # training still works: F.linear with autograd
    assert model[0].weight.grad is not None and x.grad is not None


def test_bad_policy_is_a_clear_error():
    with pytest.raises(ValueError, match="FastPath.kernels"):
        kernels.install(_tiny_mlp(), "fastest-please")


def test_choice_prefers_invariant_and_falls_back_without_the_library(monkeypatch, tmp_path):
    monkeypatch.setenv("EAGLE_EXPLAINER_CACHE", str(tmp_path))
    monkeypatch.setattr(kernels.SmallGemm, "available", staticmethod(lambda: False))
    choice = kernels.choose([(24, 16)])
    assert choice[(24, 16)] in kernels.BACKENDS and choice[(24, 16)] != "smallgemm"
    assert kernels.batch_invariant(kernels.BACKENDS[choice[(24, 16)]], 24, 16)
    assert (tmp_path / "kernels").exists()  # cached per machine


def test_choice_weighs_the_rows_a_decode_meets(monkeypatch, tmp_path):
    """A backend faster at 16 rows but slower at 1 and 5 (a step and the CPU tree) is not chosen,
    and the timings cover every calibration row count with the weight read cold (many copies)."""
    monkeypatch.setenv("EAGLE_EXPLAINER_CACHE", str(tmp_path))
    fake = {"smallgemm": {1: 1.0, 5: 1.2, 16: 3.0}, "onednn": {1: 1.3, 5: 1.3, 16: 1.5}}
    monkeypatch.setattr(kernels.calibration, "time_backends", lambda backends, n, k: {b.name: fake[b.name] for b in backends})
    monkeypatch.setattr(kernels.calibration, "AUTO_CANDIDATES", ("smallgemm", "onednn"))
    monkeypatch.setattr(kernels.calibration, "batch_invariant", lambda b, n, k: True)
    monkeypatch.setattr(kernels.SmallGemm, "available", staticmethod(lambda: True))
    monkeypatch.setattr(kernels.OneDnn, "available", staticmethod(lambda: True))
    assert kernels.choose([(40, 24)])[(40, 24)] == "smallgemm"  # 1.0 + 1.2 + 0.75 < 1.3 + 1.3 + 0.375
    fake["smallgemm"] = {1: 1.3, 5: 1.6, 16: 3.0}  # now onednn is >10% faster where it counts
    assert kernels.choose([(48, 24)])[(48, 24)] == "onednn"
    monkeypatch.undo()
    calls = []

    class Counting(kernels.Mkl):
        name = "counting"

        @staticmethod
        def run(w, x, bias):
            calls.append(id(w))
            return kernels.Mkl.run(w, x, bias)

    times = kernels.time_backends([Counting], 8, 16, rounds=1)
    assert set(times["counting"]) == set(kernels.CALIBRATION_ROWS)
    assert len(set(calls)) == kernels.calibration.MAX_COPIES  # a small weight: the most copies


def test_stream_bandwidth_is_a_positive_rate():
    assert 0.1 < kernels.stream_bandwidth(mb=16, reps=2) < 10_000


def _row_invariance(target, prefix_len: int = 40, k: int = 24, seed: int = 0):
    """Logits of tokens decoded one at a time vs the same tokens as rows of one chain forward, and
    as the root's children in a tree forward (each sees the context and itself)."""
    g = torch.Generator().manual_seed(seed)
    prefix = torch.randint(0, target.vocab_size, (1, prefix_len), generator=g)
    chain = torch.randint(0, target.vocab_size, (1, k), generator=g)
    with torch.inference_mode():
        cache = target.new_cache()
        target.forward(prefix, cache)
        one_by_one = []
        for i in range(k):
            pos = torch.tensor([[prefix_len + i]])
            one_by_one.append(target.logits(target.forward(chain[:, i:i + 1], cache, position_ids=pos))[0, 0])
        cache.crop(-k)
        rows = {}
        for m in (5, 16, 24):
            pos = torch.arange(prefix_len, prefix_len + m)[None]
            rows[("chain", m)] = target.logits(target.forward(chain[:, :m], cache, position_ids=pos))[0]
            cache.crop(-m)
            mask = torch.full((1, 1, m, prefix_len + m), float("-inf"))
            mask[..., :prefix_len] = 0
            mask[0, 0, torch.arange(m), prefix_len + torch.arange(m)] = 0
            siblings = target.forward(chain[:, :m], cache, position_ids=torch.full((1, m), prefix_len), attention_mask=mask)
            rows[("tree", m)] = target.logits(siblings)[0]
            cache.crop(-m)
    return one_by_one, rows


@needs_smallgemm
@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_target_forward_is_row_invariant_with_the_engine_kernels(kind):
    """With linear layers and attention on eagle_core.cpu.kernels, a token's logits are the same bits
    whether it is decoded alone or verified inside a 5/16/24-row chain or tree: greedy EAGLE equals
    vanilla by construction."""
    from conftest import tiny_target

    target = tiny_target(kind, vocab=64)
    assert target.kernels.attention is not None, target.describe()
    one_by_one, rows = _row_invariance(target)
    for (shape, m), logits in rows.items():
        for i in range(m if shape == "chain" else 1):
            assert torch.equal(logits[i], one_by_one[i]), (shape, m, i)


def test_stock_kernels_restore_transformers_attention():
    from conftest import tiny_target

    target = tiny_target("llama", vocab=64)
    name = target.model.config._attn_implementation
    with target.stock_kernels():
        assert target.model.config._attn_implementation == "sdpa"
        assert all(type(m) is nn.Linear for m in target.model.modules() if isinstance(m, nn.Linear))
    assert target.model.config._attn_implementation == name


@needs_smallgemm
def test_left_padded_batch_generate_matches_stock_kernels():
    """transformers builds a padding mask for the engine's attention name too: a left-padded batch
    does not attend to its padding (it once did: no mask was built for an unknown name)."""
    from conftest import tiny_target

    target = tiny_target("llama", vocab=64)
    ids = torch.tensor([[0, 0, 0, 5, 9, 11, 3], [7, 8, 9, 10, 11, 12, 13]])
    attn = torch.tensor([[0, 0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1]])
    kw = dict(max_new_tokens=6, do_sample=False, pad_token_id=0, eos_token_id=None)
    with torch.inference_mode():
        ours = target.model.generate(input_ids=ids, attention_mask=attn, **kw)
        alone = target.model.generate(input_ids=ids[:1, 3:], attention_mask=attn[:1, 3:], **kw)
        with target.stock_kernels():
            stock = target.model.generate(input_ids=ids, attention_mask=attn, **kw)
    assert torch.equal(ours, stock)
    assert torch.equal(ours[0, 7:], alone[0, 4:]), "the padded row decodes as if unpadded"


@pytest.mark.parametrize("mask_kind", ["none", "bool", "additive"])
def test_batched_decode_step_attention_equals_sdpa(mask_kind):
    """Batched generation's step (B rows, one query each, grouped kv heads, left padding masked)
    through the engine's attention: transformers' SDPA result, without repeating the cache."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    from eagle_core.cpu.kernels import attention

    g = torch.Generator().manual_seed(0)
    B, H, G, L, d = 3, 6, 2, 11, 8
    q = torch.randn(B, H, 1, d, generator=g)
    k, v = torch.randn(B, G, L, d, generator=g), torch.randn(B, G, L, d, generator=g)
    keep = torch.ones(B, 1, 1, L, dtype=torch.bool)
    keep[1, ..., :4] = keep[2, ..., :7] = False  # left padding
    mask = {"none": None, "bool": keep,
            "additive": torch.zeros(B, 1, 1, L).masked_fill(~keep, float("-inf"))}[mask_kind]
    mod = nn.Module()
    mod.num_key_value_groups, mod.is_causal, mod.training = H // G, True, False
    ours, _ = attention.attention_forward(mod, q, k, v, mask, scaling=0.3)
    ref, _ = sdpa_attention_forward(mod, q, k, v, mask, scaling=0.3)
    assert ours.shape == ref.shape == (B, 1, H, d)
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)
    if mask_kind != "none":  # the padding is really masked: changing it changes nothing
        k2 = k.clone()
        k2[1, :, :4] = 100.0
        torch.testing.assert_close(attention.attention_forward(mod, q, k2, v, mask, scaling=0.3)[0], ours)


def test_cpu_model_names_family_and_model_where_the_cpu_reports_them():
    """Figures are recorded with the CPU; "AMD EPYC" alone named machines 3.7x apart in speed."""
    import re

    from eagle_core.cpu.kernels import cpu_model

    try:
        first = open("/proc/cpuinfo").read().split("\n\n")[0]
    except OSError:
        pytest.skip("no /proc/cpuinfo")
    fam, mod = re.search(r"^cpu family\s*:\s*(\d+)", first, re.M), re.search(r"^model\s*:\s*(\d+)", first, re.M)
    if not (fam and mod):
        pytest.skip("this CPU reports no family and model (not x86)")
    assert cpu_model().endswith(f"(family {fam.group(1)}, model {mod.group(1)})")


@needs_smallgemm
@pytest.mark.parametrize("v", [1, 7, 8, 33, 49152, 49157])
def test_row_stats_match_torch_argmax_first_on_ties_and_logsumexp(v):
    """The acceptance walk's argmax must be torch's exactly (the first index of the maximum), its
    log-sum-exp close, and each row's results the same alone as in a batch."""
    from eagle_core.cpu.kernels.rows import row_stats

    g = torch.Generator().manual_seed(v)
    x = torch.randn(5, v, generator=g) * 6
    x[1] = x[1].max() + 2  # a whole row of ties: index 0
    if v > 3:
        x[2, v // 3] = x[2, v - 1] = x[2].max() + 1  # a tie across the vector part and the tail
        x[3, :v // 2] = float("-inf")  # masked entries
    mx, arg, lse = row_stats(x)
    tv, ti = x.max(-1)
    assert torch.equal(arg, ti) and torch.equal(mx, tv)
    torch.testing.assert_close(lse, torch.logsumexp(x, -1), rtol=1e-6, atol=1e-5)
    for r in range(5):
        one = row_stats(x[r:r + 1].clone())
        assert torch.equal(one[1], arg[r:r + 1]) and torch.equal(one[2], lse[r:r + 1])


@needs_smallgemm
def test_row_stats_leave_nan_rows_and_other_tensors_to_torch():
    from eagle_core.cpu.kernels.rows import row_stats

    x = torch.randn(3, 100)
    x[1, 50] = float("nan")
    assert row_stats(x) is None
    assert row_stats(torch.full((2, 10), float("-inf"))) is None
    assert row_stats(torch.randn(2, 10, dtype=torch.float64)) is None
    assert row_stats(torch.randn(10, 2).T) is None  # columns not contiguous


@needs_smallgemm
def test_without_the_row_kernel_greedy_decoding_does_not_change(monkeypatch):
    """Without the row kernel (where it cannot be built), torch's max + logsumexp: the same tokens and p."""
    from conftest import tiny_head, tiny_target
    from eagle_core import DecodeSettings, Engine
    from eagle_core.cpu.kernels import rows
    from eagle_core.cpu.kernels.rows import row_stats

    target = tiny_target("llama", seed=5, vocab=40)
    engine = Engine(target, tiny_head(target, seed=6))
    s = DecodeSettings(method="eagle2", depth=3, tree_top_k=2, total_tokens=6, max_new_tokens=16, chat_template=False)
    on = engine.run("one two three", s)
    monkeypatch.setattr(rows, "library", lambda: None)
    assert row_stats(torch.randn(2, 10)) is None
    off = engine.run("one two three", s)
    assert on.summary.token_ids == off.summary.token_ids
    p_on = [n.p for c in on.cycles for n in c.nodes]
    p_off = [n.p for c in off.cycles for n in c.nodes]
    assert [p is None for p in p_on] == [p is None for p in p_off]
    shown = [(a, b) for a, b in zip(p_on, p_off) if a is not None]
    assert shown and max(abs(a - b) for a, b in shown) < 1e-5
