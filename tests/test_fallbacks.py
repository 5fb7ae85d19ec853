"""Fallbacks named where the user looks (issue 53, item 2): no C compiler, no AVX2, EAGLE_PORTABLE=1, a
backend rejected by the batch-invariance check, a backend forced by name. One function says which path
runs, why and about how much slower (eagle_core.cpu.path_status); the CLI prints its line on stderr, the
page's model line and the hardware panel show it. Identity with vanilla is promised only on a checked path.
"""
from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from conftest import tiny_head, tiny_target
from eagle_core import DecodeSettings, Engine, FastPath
from eagle_core.cpu import kernels, path_line, path_status
from eagle_core.cpu.kernels import build
from eagle_core.cpu.status import SLOWER_WITHOUT_KERNELS

needs_library = pytest.mark.skipif(kernels.library() is None, reason=f"kernels unavailable: {kernels.library_error()}")


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """An empty engine cache (no kernel plan; the library already loaded stays) and no EAGLE_PORTABLE."""
    monkeypatch.setenv("EAGLE_EXPLAINER_CACHE", str(tmp_path))
    monkeypatch.delenv(build.PORTABLE_ENV, raising=False)
    monkeypatch.setattr(build, "_LIB", list(build._LIB))
    monkeypatch.setattr(kernels.calibration, "REJECTED", {})
    monkeypatch.setattr(kernels.backends, "_SMALLGEMM", kernels.backends._LazyFn())
    return monkeypatch


def _no_compiler(mp):
    def fail(path, defines=()):
        raise subprocess.CalledProcessError(1, ["/bin/false"], stderr=b"")
    mp.setenv("CC", "/bin/false")
    mp.setattr(build, "_LIB", [])  # decided again, in an empty cache
    mp.setattr(build, "compile_kernels", fail)  # the cache is empty (`fresh`): no library to load either


def test_no_compiler_is_named_with_its_cost_and_identity_kept(fresh):
    _no_compiler(fresh)
    target = tiny_target("llama", seed=1, vocab=8)
    st = path_status(target)
    assert st.fallback and st.identical and st.slower == SLOWER_WITHOUT_KERNELS
    line = st.line()
    assert "\n" not in line and "the C compiler '/bin/false' failed" in line
    assert f"about {SLOWER_WITHOUT_KERNELS:g}x slower" in line and "docs/performance.md" in line
    assert "still equals vanilla" in line
    assert "smallgemm" not in target.kernels.choice.values()
    assert target.config._attn_implementation == kernels.attention.NAME  # its torch twin (attend_rows), row invariant
    engine = Engine(target, tiny_head(target, seed=11))  # and greedy EAGLE equals vanilla on it
    s = dict(max_new_tokens=24, chat_template=False)
    assert (engine.run("hello world", DecodeSettings(method="eagle2", depth=4, tree_top_k=4, total_tokens=12, **s))
            .summary.token_ids == engine.run("hello world", DecodeSettings(method="vanilla", **s)).summary.token_ids)


def test_no_avx2_is_named(fresh):
    fresh.setattr(build, "_has_avx2_fma", lambda: False)
    fresh.setattr(build, "_LIB", [])  # decided again
    line = path_line(tiny_target("llama", seed=1, vocab=8))
    assert "needs an x86-64 CPU with AVX2 and FMA" in line and f"about {SLOWER_WITHOUT_KERNELS:g}x slower" in line


def test_eagle_portable_is_named_and_promises_no_identity(fresh):
    fresh.setenv(build.PORTABLE_ENV, "1")
    target = tiny_target("llama", seed=1, vocab=8)
    st = path_status(target)
    assert not st.identical and "EAGLE_PORTABLE=1" in st.line() and "portable path" in st.line()
    assert "may part from vanilla" in st.line()


def test_stock_kernels_asked_for_are_named(fresh):
    line = path_line(tiny_target("llama", seed=1, vocab=8, fast=FastPath.portable()))
    assert 'FastPath(kernels="stock") was asked for' in line and "may part from vanilla" in line


def test_a_backend_forced_by_name_is_not_promised_identity(fresh):
    line = path_line(tiny_target("llama", seed=1, vocab=8, fast=FastPath(kernels="mkl")))
    assert "FastPath(kernels='mkl') was asked for" in line and "may part from vanilla" in line


@needs_library
def test_the_engines_kernels_say_nothing(fresh):
    assert path_line(tiny_target("llama", seed=1, vocab=8, fast=FastPath(kernels="smallgemm"))) is None


@needs_library
def test_a_rejected_smallgemm_is_named(fresh):
    fresh.setattr(kernels.calibration, "batch_invariant", lambda b, n, k: b.name != "smallgemm")
    st = path_status(tiny_target("llama", seed=1, vocab=8))
    assert st.identical and "smallgemm failed the batch-invariance check" in st.line()


def test_a_gpu_target_has_nothing_to_explain():
    from types import SimpleNamespace

    t = SimpleNamespace(fast=FastPath.portable(), kernels=None, device="cuda:0", dtype=torch.float16)
    assert path_line(t) is None and not path_status(t).identical


def test_the_cli_prints_the_line_on_stderr(fresh, capsys):
    import eagle_core.engine_loading as loading
    from eagle_core.__main__ import main

    fresh.setenv(build.PORTABLE_ENV, "1")
    target = tiny_target("llama", seed=1, vocab=8)
    engine = Engine(target, tiny_head(target, seed=11), head_name="random")
    fresh.setattr(loading, "load_engine", lambda *a, **k: engine)
    assert main(["generate", "--prompt", "hi", "--method", "eagle", "--max-new-tokens", "4", "--json",
                 "--no-chat-template"]) == 0
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("CPU path:")]
    assert len(lines) == 1 and "EAGLE_PORTABLE=1" in lines[0] and "slower" in lines[0]


def test_the_page_and_the_hardware_panel_say_the_same(fresh):
    from eagle_app import hardware
    from eagle_app.model import MODEL, model_line

    _no_compiler(fresh)
    target = tiny_target("llama", seed=1, vocab=8)
    engine = Engine(target, tiny_head(target, seed=11), head_name="random")
    want = path_line(target)
    assert want in model_line(engine, 1.0)
    fresh.setattr(MODEL, "engine", engine)
    assert want in hardware.recorded_views()[2]


def _cases(mp):
    """Each fallback kind the engine names, as (kind, target, a detail its line must carry in any language)."""
    yield "portable_env", lambda: (mp.setenv(build.PORTABLE_ENV, "1"), tiny_target("llama", seed=1, vocab=8))[1], \
        "EAGLE_PORTABLE=1"
    mp.delenv(build.PORTABLE_ENV, raising=False)
    yield "stock", lambda: tiny_target("llama", seed=1, vocab=8, fast=FastPath.portable()), 'kernels="stock"'
    yield "forced", lambda: tiny_target("llama", seed=1, vocab=8, fast=FastPath(kernels="mkl")), "mkl"
    yield "dtype", lambda: SimpleNamespace(fast=FastPath(), kernels=None, device="cpu", dtype=torch.bfloat16), "bfloat16"
    yield "no_library", lambda: (_no_compiler(mp), tiny_target("llama", seed=1, vocab=8))[1], \
        "C compiler '/bin/false' failed"


def test_the_chinese_page_says_every_fallback_in_chinese_with_its_facts(fresh):
    """The page in Chinese says each fallback in Chinese (no English clause of the engine's line left), with
    the same facts: the env var, the backend, the dtype, the compiler's own message, the slowdown, and
    whether greedy EAGLE stays identical; the English page and the CLI keep the engine's line."""
    from eagle_app.model import path_note

    seen = set()
    for kind, make, fact in _cases(fresh):
        target = make()
        st = path_status(target)
        assert st.kind == kind, (kind, st)
        zh, en = path_note(target, "zh"), path_note(target, "en")
        assert en.endswith(st.line()) and fact in en and fact in zh, (kind, zh)
        assert "CPU 路径" in zh and "because" not in zh and "slower" not in zh and "vanilla" not in zh, zh
        assert ("慢约" in zh) == bool(st.slower) and ("仍与普通解码" in zh) == st.identical, zh
        seen.add(kind)
    assert seen == {"portable_env", "stock", "forced", "dtype", "no_library"}


@needs_library
def test_a_rejected_smallgemm_is_said_in_chinese(fresh):
    from eagle_app.model import path_note

    fresh.setattr(kernels.calibration, "batch_invariant", lambda b, n, k: b.name != "smallgemm")
    zh = path_note(tiny_target("llama", seed=1, vocab=8), "zh")
    assert "批量不变性检查" in zh and "smallgemm" in zh and "because" not in zh


@pytest.mark.slow
def test_no_compiler_in_a_fresh_process_says_why_and_stays_identical(tmp_path):
    """CC=/bin/false and an empty cache, the default model: the CLI names the fallback, and greedy EAGLE-2
    and EAGLE-3 decode what vanilla decodes."""
    import json
    import os

    env = {**os.environ, "CC": "/bin/false", "EAGLE_EXPLAINER_CACHE": str(tmp_path)}
    env.pop(build.PORTABLE_ENV, None)
    out = {}
    for method in ("vanilla", "eagle", "eagle3"):
        r = subprocess.run([sys.executable, "-m", "eagle_core", "generate", "--prompt", "Name three rivers.",
                            "--method", method, "--max-new-tokens", "24", "--json"],
                           capture_output=True, text=True, timeout=1800, env=env)
        assert r.returncode == 0, r.stderr[-2000:]
        assert "the C compiler '/bin/false' failed" in r.stderr and "slower" in r.stderr
        out[method] = json.loads(r.stdout.strip().splitlines()[-1])["token_ids"]
    assert out["eagle"] == out["vanilla"] and out["eagle3"] == out["vanilla"]


def test_torch_attention_without_the_library_is_row_invariant():
    """attend_rows (attention.c's contract in torch, for a CPU without the kernels): a tree node's
    output equals, bit for bit, the same token decoded alone over exactly the keys it sees."""
    from eagle_core.cpu.kernels.attention import additive, attend_rows
    from eagle_core.tree import tree_attention_mask

    g = torch.Generator().manual_seed(0)
    H, G, d, ctx = 4, 2, 16, 9
    parents = (-1, 0, 0, 1, 1, 3)
    n = len(parents)
    q = torch.randn(H, n, d, generator=g)
    k, v = torch.randn(G, ctx + n, d, generator=g), torch.randn(G, ctx + n, d, generator=g)
    mask = tree_attention_mask(parents, ctx)[0, 0]  # (n, ctx + n) additive
    tree = attend_rows(q, k, v, ctx + n, mask, d ** -0.5, True)
    for i in range(n):
        seen = (mask[i] == 0).nonzero()[:, 0]
        alone = attend_rows(q[:, i:i + 1].contiguous(), k[:, seen], v[:, seen], len(seen), None, d ** -0.5, True)
        assert torch.equal(tree[i], alone[0]), i
    ref = torch.softmax((q.transpose(0, 1).reshape(n, G, H // G, d) @ k.transpose(-1, -2)[None]) * d ** -0.5
                        + mask[:, None, None], -1) @ v[None]
    torch.testing.assert_close(tree, ref.reshape(n, H, d))
    torch.testing.assert_close(attend_rows(q, k, v, ctx + n, additive(mask == 0), d ** -0.5, True), tree)  # -inf too
