"""--weights auto (eagle_core/cpu/auto_format.py): the CLI's and the benchmark's default resolves to the
fastest format here, gguf where the default model's file and qblocks.c's SIMD path are here on a CPU,
float32 everywhere else with the reason said; an explicit format always wins. The CPU's paths and the
file's presence are monkeypatched, so each case runs in milliseconds and fails if the rule changes."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from eagle_core.cpu import auto_format, weights_line
from eagle_core.cpu.kernels import build, qblocks
from eagle_core.target import gguf_blocks


@pytest.fixture
def here(monkeypatch):
    """A CPU with qblocks.c's VNNI path and the default model's GGUF file; each test takes one away."""
    monkeypatch.delenv(build.PORTABLE_ENV, raising=False)
    monkeypatch.setattr(qblocks, "best_path", lambda lib=None: "vnni")
    monkeypatch.setattr(gguf_blocks, "default_gguf", lambda: "/somewhere/SmolLM2-135M-Instruct.Q4_1.gguf")
    return monkeypatch


@pytest.mark.parametrize("path", ["vnni", "avx2"])
def test_auto_is_gguf_where_the_simd_path_and_the_file_are_here(here, path):
    here.setattr(qblocks, "best_path", lambda lib=None: path)
    for device in (None, "cpu"):
        c = auto_format.resolve("auto", None, device, None)
        assert (c.weights, c.asked) == ("gguf", "auto") and f"qblocks.c's {path} path" in c.reason
    assert auto_format.resolve("auto", "smollm2-135m", "cpu", "float32").weights == "gguf"


@pytest.mark.parametrize("model, device, dtype, why", [
    (None, "cuda", None, "run on a CPU only (this is cuda)"),
    (None, "cuda:0", "bfloat16", "run on a CPU only (this is cuda)"),
    (None, "mps", None, "run on a CPU only (this is mps)"),
    ("HuggingFaceTB/SmolLM2-360M-Instruct", "cpu", None, "SmolLM2-360M-Instruct has no GGUF file here"),
    (None, "cpu", "bfloat16", "--dtype bfloat16: the gguf format takes float32 activations"),
    (None, "cpu", torch.float16, "--dtype float16"),
])
def test_auto_is_float32_off_a_cpu_another_model_or_half_precision(here, model, device, dtype, why):
    c = auto_format.resolve("auto", model, device, dtype)
    assert c.weights == "float32" and c.auto and why in c.reason


def test_auto_is_float32_on_the_portable_path_without_the_file_or_the_simd_path(here):
    here.setenv(build.PORTABLE_ENV, "1")
    assert "EAGLE_PORTABLE=1" in auto_format.resolve().reason and auto_format.resolve().weights == "float32"
    here.delenv(build.PORTABLE_ENV)
    here.setattr(qblocks, "best_path", lambda lib=None: "plain")
    c = auto_format.resolve()
    assert c.weights == "float32" and "neither AVX2 nor AVX-512 VNNI" in c.reason

    def no_compiler(lib=None):
        raise OSError("cc: not found")
    here.setattr(qblocks, "best_path", no_compiler)
    assert auto_format.resolve().weights == "float32" and "could not be built (OSError)" in auto_format.resolve().reason
    here.setattr(gguf_blocks, "default_gguf", lambda: None)
    c = auto_format.resolve()
    assert c.weights == "float32" and "GGUF file (SmolLM2-135M-Instruct.Q4_1.gguf" in c.reason


def test_an_explicit_format_always_wins(here):
    for asked in ("float32", "gguf"):
        c = auto_format.resolve(asked, None, "cpu", None)
        assert (c.weights, c.asked, c.reason, c.clause()) == (asked, asked, "", "")
    here.setattr(qblocks, "best_path", lambda lib=None: "plain")
    assert auto_format.resolve("gguf").weights == "gguf"  # asked by name: load says whether it can run
    assert auto_format.resolve("float32", None, "cpu", None).weights == "float32"
    with pytest.raises(ValueError, match="--weights must be one of auto, float32, gguf"):
        auto_format.resolve("q4")


def test_the_parsers_default_to_auto_and_fast_from_args_follows_the_resolution(here):
    from eagle_core.__main__ import build_parser
    from eagle_core.bench.harness import build_parser as bench_parser
    from eagle_core.config import fast_from_args, weights_from_args

    a = build_parser().parse_args(["generate", "--prompt", "x"])
    assert a.weights == "auto" and bench_parser().parse_args([]).weights == "auto"
    assert fast_from_args(a).weights == "gguf" and weights_from_args(a, "cpu").weights == "gguf"
    assert fast_from_args(a, auto_format.resolve("auto", None, "cuda")) is None  # float32: no FastPath change
    a = build_parser().parse_args(["generate", "--prompt", "x", "--weights", "float32"])
    assert fast_from_args(a) is None
    a = build_parser().parse_args(["generate", "--prompt", "x", "--model", "some/other", "--dtype", "float16"])
    assert fast_from_args(a) is None and "some/other has no GGUF file" in weights_from_args(a, "cpu").reason


def _target(fmt, dtype=torch.float32):
    return SimpleNamespace(weight_format=fmt, dtype=dtype, forward_path="cpu", forward_note="one layer.c call")


def test_the_weights_line_says_what_runs_and_that_auto_chose_it(here):
    auto = auto_format.resolve()
    line = weights_line(_target("gguf"), auto)
    assert line.startswith("Weights: gguf (chosen by --weights auto: the fastest format here, qblocks.c's vnni path")
    assert weights_line(_target("gguf"), auto_format.resolve("gguf")) == weights_line(_target("gguf"))
    gpu = auto_format.resolve("auto", None, "cuda")
    assert weights_line(_target("float32", torch.bfloat16), gpu) == (
        "Weights: bfloat16 (chosen by --weights auto: not gguf, because the GGUF's blocks run on a CPU only "
        "(this is cuda)), as loaded.")
    # a choice that does not match the loaded target says nothing it cannot stand behind
    assert weights_line(_target("float32"), auto) == "Weights: float32, as loaded."


def test_the_cli_resolves_before_the_load_and_the_tree_choice_sees_gguf(here, capsys):
    """The CLI's path: auto resolved with the device it picked, passed to load_engine as FastPath(weights=
    "gguf"), said on stderr, and the engine the tree choice is asked about holds the gguf target."""
    import eagle_core.cpu as cpu
    import eagle_core.engine_loading as loading
    import eagle_core.machine as machine
    from eagle_core.__main__ import main

    seen = {}

    class Engine:
        def __init__(self, fast):
            self.target = _target(fast.weights if fast else "float32")

        def generate(self, prompt, settings):
            raise ValueError("stop here")  # the decode itself is not what this test is about

    def load(*a, fast=None, **k):
        seen["fast"] = fast
        return Engine(fast)

    def choose(engine):
        seen["tree_format"] = engine.target.weight_format
        raise ValueError("tree asked")

    here.setattr(loading, "load_engine", load)
    here.setattr(cpu, "path_line", lambda t: None)
    here.setattr(machine, "choose_tree", choose)
    assert main(["generate", "--prompt", "hi", "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert seen == {"fast": seen["fast"], "tree_format": "gguf"} and seen["fast"].weights == "gguf"
    assert "Weights: gguf (chosen by --weights auto: the fastest format here, qblocks.c's vnni path" in err
    assert main(["generate", "--prompt", "hi", "--device", "cpu", "--weights", "float32"]) == 2
    assert seen["fast"] is None and seen["tree_format"] == "float32"
    assert "Weights: float32, as loaded." in capsys.readouterr().err


def test_the_benchmark_report_names_the_format():
    from eagle_core.bench.report import _weights

    assert _weights({}) == ""  # a report from before the option
    assert _weights({"weights": "float32"}) == "weights float32; "
    assert _weights({"weights": "gguf", "weights_why": "chosen by --weights auto: x"}) == \
        "weights gguf (chosen by --weights auto: x); "


def test_the_benchmark_resolves_before_the_load(here):
    """The benchmark loads with the resolved format: gguf under auto here, float32 when asked by name."""
    import eagle_core.engine_loading as loading
    from eagle_core.bench import harness

    seen = []

    def load(*a, fast=None, **k):
        seen.append(fast)
        raise ValueError("loaded nothing")

    here.setattr(loading, "load_engine", load)
    for extra in ([], ["--weights", "float32"]):
        with pytest.raises(SystemExit, match="loaded nothing"):
            harness.main(["--limit", "1", "--methods", "vanilla", "--device", "cpu", "--quiet", *extra])
    assert seen[0].weights == "gguf" and seen[1] is None
