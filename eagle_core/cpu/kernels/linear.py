"""Every float32 linear layer of a model on one batch-invariant path (eagle_core.cpu.kernels).

EAGLE pays only if verifying k drafted tokens costs about one ordinary step. At batch size 1 a
step is bound by streaming the fp32 weights from memory, so k rows could ride along nearly free,
but torch's default CPU kernel (MKL's sgemm, which takes a slow path on AMD CPUs) costs far more at
5 rows than at 1 (docs/performance.md, "Where a verification's extra time went"). So every linear layer of the target (body and LM head)
and of the draft head gets one kernel, chosen per weight shape at load time. The jobs are split:

    backends.py     the backends (smallgemm, onednn, openblas, mkl, rowwise): packing and calling
    calibration.py  choosing a backend per weight shape, once per machine
    here            `install(model)`: swap each nn.Linear for a backends.Linear that keeps the same
                    parameters (so state dicts, tied weights and `.weight` look-ups are unchanged)

Gradients, other dtypes and other devices go through F.linear unchanged: CUDA and MPS keep their own
kernels. FastPath(kernels=...) (eagle_core/cpu/options.py) forces one backend by name, or "stock" to
install none.
"""
from __future__ import annotations

import contextlib

import torch
from torch import nn

from . import attention
from .backends import BACKENDS, Linear
from .build import library_error
from .calibration import choose


class Installed:
    """What `install` changed: the swapped modules, so that `stock()` can put nn.Linear back."""

    def __init__(self, swaps, choice, policy: str, attention=None):
        self.swaps = swaps  # [(parent, attribute, original nn.Linear, our Linear)]
        self.choice = choice  # (N, K) -> backend name
        self.policy = policy  # what install() was asked for: "auto", "stock" or a backend name
        self.attention = attention  # (transformers model, its previous attention name), or None

    def describe(self) -> str:
        if not self.swaps:
            return "stock F.linear"
        names = sorted(set(self.choice.values()))
        attn = f", attention {attention.NAME}" if self.attention is not None else ""
        return "+".join(names) + f" ({len(self.swaps)} linear layers{attn})"

    @contextlib.contextmanager
    def stock(self):
        """Run with the model's original nn.Linear modules (e.g. stock transformers `generate`)."""
        for parent, attr, orig, _ in self.swaps:
            setattr(parent, attr, orig)
        if self.attention is not None:
            attention.set_attention(self.attention[0], self.attention[1])
        try:
            yield
        finally:
            for parent, attr, _, fast in self.swaps:
                setattr(parent, attr, fast)
            if self.attention is not None:
                attention.set_attention(self.attention[0], attention.NAME)


def install(model: nn.Module, policy: str = "auto") -> Installed:
    """Swap every float32 CPU nn.Linear in `model` for a `Linear` on the chosen backend.
    policy: "auto" (measure, cached), a backend name, or "stock" (change nothing)."""
    if policy not in ("auto", "stock", *BACKENDS):
        raise ValueError(f"FastPath.kernels must be auto, stock or one of {', '.join(BACKENDS)}; got {policy!r}")
    targets = [(parent, attr, mod) for parent in model.modules() for attr, mod in parent.named_children()
               if type(mod) is nn.Linear and mod.weight.device.type == "cpu" and mod.weight.dtype == torch.float32]
    if policy == "stock" or not targets:
        return Installed([], {}, policy)
    shapes = [tuple(m.weight.shape) for _, _, m in targets]
    if policy == "auto":
        choice = choose(shapes)
    else:
        if not BACKENDS[policy].available():
            raise RuntimeError(f"kernel backend {policy!r} is not available here: {library_error()}")
        choice = {s: policy for s in shapes}
    swaps = []
    for parent, attr, mod in targets:
        fast = Linear(mod.weight, mod.bias, choice[tuple(mod.weight.shape)])
        fast.prepare()  # pack now, at load, not inside the first timed decode
        setattr(parent, attr, fast)
        swaps.append((parent, attr, mod, fast))
    attn = None
    config = getattr(model, "config", None)
    if getattr(config, "_attn_implementation", None) in ("sdpa", "eager"):
        # a transformers model: its attention too (attention.c, or without the library its torch twin,
        # both row invariant, so identity with vanilla holds on every path install makes)
        attn = (model, attention.set_attention(model, attention.NAME))
    return Installed(swaps, choice, policy, attn)


def uninstall(model: nn.Module) -> int:
    """Put an nn.Linear (the same parameters) back wherever an earlier `install` left a backends.Linear,
    and the model's attention back to SDPA where it was the engine's kernel, so that the portable path
    calls no C even on a model another target set up first. -> how many layers were put back."""
    swaps = [(parent, attr, mod) for parent in model.modules() for attr, mod in parent.named_children()
             if isinstance(mod, Linear)]
    for parent, attr, mod in swaps:
        plain = nn.Linear(mod.in_features, mod.out_features, bias=mod.bias is not None, device="meta")
        plain.weight, plain.bias = mod.weight, mod.bias
        setattr(parent, attr, plain)
    config = getattr(model, "config", None)
    if getattr(config, "_attn_implementation", None) == attention.NAME:
        attention.set_attention(model, "sdpa")
    return len(swaps)
