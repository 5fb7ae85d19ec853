"""Building an Engine in one place: the target plus the heads its methods need.

    from eagle_core import load_engine, DecodeSettings
    engine = load_engine()                      # embedded SmolLM2-135M-Instruct + both shipped heads
    run = engine.run("Hello!", DecodeSettings(method="eagle3"))

Every command line, the benchmark, the evaluation and the app build their engine here;
`decode.Engine` itself only takes parts that are already loaded.
"""
from __future__ import annotations

import torch

from .config import METHODS, DecodeSettings
from .cpu.options import FastPath
from .decode import Engine
from .drafting.shipped import load_default_head, load_default_head3
from .drafting.head import check_fits
from .target import Target, load_target, parse_dtype

EAGLE12_METHODS = ("eagle2", "eagle1", "chain")  # the methods that draft with an EAGLE-1/2 head


def fits3(head3, target) -> bool:
    """Whether `target` has the layers the EAGLE-3 head reads."""
    try:
        check_fits(head3.config, target)
        return True
    except ValueError:
        return False


def load_engine(model: str | Target | None = None, head: str | None = None, head3: str | None = None,
                device: str | None = None, *, methods=None, full_vocab: bool = False,
                dtype: torch.dtype | str | None = None, head3_layer_ids: str = "inputs", warm: bool = True,
                head3_rope_theta: float | None = None, fast: FastPath | None = None) -> Engine:
    """An Engine for `model` with the heads `methods` need.

    model       a hub id or a directory (None: the embedded SmolLM2-135M-Instruct), or a Target
                already loaded (then `device` is not used)
    head        an EAGLE-1/2 head directory; None: the shipped head if it fits the target, else a
                random untrained one (decoding stays lossless, tau ~ 1)
    head3       an EAGLE-3 head directory; None: the shipped EAGLE-3 head for the default target,
                else a random untrained one
    device      cpu, cuda, mps; None: the best available
    methods     the methods the engine must serve. The EAGLE-1/2 head is loaded for eagle2, eagle1
                and chain, the EAGLE-3 head for eagle3, no head for vanilla; a head directory given
                explicitly is always loaded (so a wrong one fails here). None: every method the
                target can serve (the default EAGLE-3 head is left out if the target has too few
                layers for one: then eagle3 requests are refused with a clear message)
    dtype       the target's (and heads') dtype: float32, bfloat16, float16; None: the default policy
                (float32 on a CPU, and on a GPU for small targets; target.default_dtype)
    head3_layer_ids  "inputs" (official, vLLM) or "outputs" (SGLang, SpecForge): what the EAGLE-3
                head's aux-layer ids count
    head3_rope_theta  the RoPE base the EAGLE-3 head's trainer used, where its config says another
                (eagle_app/public_models.py names it per published head); None: the config's
    full_vocab  draft the EAGLE-1/2 head over the target's full vocabulary instead of its own
                reduced draft vocabulary (verification always uses the full one)
    fast        the CPU fast path's options (eagle_core/cpu/options.py: the kernels, how far the passes
                are fused, how the draft's weights are stored); None: FastPath.default(). Chosen once,
                here: the target and both drafters read them
    warm        on CUDA, run every method once before returning (warm_up); False where no CUDA work
                may run at load (a ZeroGPU Space loads outside its GPU calls, eagle_app/zerogpu.py)
    """
    optional3 = methods is None and head3 is None
    methods = METHODS if methods is None else tuple(methods)
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"unknown method {unknown[0]!r}; choose from {', '.join(METHODS)}")
    if isinstance(dtype, str) or dtype is None:
        dtype = parse_dtype(dtype)
    if isinstance(model, Target) and fast is not None and fast != model.fast:
        raise ValueError("the fast path's options are chosen when the target loads: pass them to load_target")
    target = model if isinstance(model, Target) else load_target(model, device=device, dtype=dtype, fast=fast)
    parts = {}
    if head is not None or any(m in EAGLE12_METHODS for m in methods):
        h, vocab, name = load_default_head(target, head)
        parts.update(head=h, draft_vocab=None if full_vocab else vocab, head_name=name)
    if head3 is not None or "eagle3" in methods:
        h3, name3 = load_default_head3(target, head3, head3_layer_ids, head3_rope_theta)
        if not (optional3 and not fits3(h3, target)):
            parts.update(head3=h3, head3_name=name3)
    engine = Engine(target, **parts)
    if warm and str(target.device).startswith("cuda"):
        warm_up(engine)
    return engine


def warm_up(engine: Engine) -> None:
    """One short untimed run of every method the engine serves. On CUDA the first forward pays
    for the context, kernel selection and memory pools; without this the first timed run (EAGLE,
    which always runs first) would carry that cost and vanilla would not."""
    for method in METHODS:
        if method == "vanilla" or engine.drafter_for(method) is not None:
            engine.run("Hello", DecodeSettings(method=method, max_new_tokens=4, depth=2, tree_top_k=2, total_tokens=4))

