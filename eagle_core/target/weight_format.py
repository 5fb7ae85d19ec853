"""The target's weight format (FastPath.weights): "float32", the weights as loaded, or "gguf", every decoder
product and the LM head multiplied from a GGUF file's own Q4_1 / Q8_0 blocks (QuantLinear,
eagle_core/cpu/quant_linear.py), swapped in by target/model.py before the float32 kernels are installed.

    check_place(device, dtype)        the format runs on a CPU with float32 activations, else a clear error
    products(model)                   the linear layers the format covers (decoder products, LM head)
    swap_blocks(model, blocks, name)  every one of them on its blocks, or a clear error naming what cannot be
    blocks_weight(lm_head, embed)     the float32 weight an LM head of blocks stands for (Target.lm_head_weight)
"""
from __future__ import annotations

import torch

from ..cpu.quant_linear import QuantLinear, require_kernels, swap_in


def check_place(device: str, dtype) -> None:
    """The gguf format runs on a CPU, beside float32 activations (qblocks.c)."""
    if torch.device(device).type != "cpu" or dtype not in (None, torch.float32):
        raise ValueError(f"the gguf weight format runs on a CPU with float32 activations (qblocks.c); asked for "
                         f"{device} {str(dtype).replace('torch.', '') if dtype else ''}".rstrip())


def products(model) -> dict[str, torch.nn.Module]:
    """The linear layers a weight format covers, by module name: every decoder layer's products and the
    LM head (not the embedding, not a head's own layers)."""
    out = {}
    for name, mod in model.named_modules():
        w = getattr(mod, "weight", None)
        linear = isinstance(mod, QuantLinear) or (isinstance(w, torch.Tensor) and w.dim() == 2 and hasattr(mod, "bias"))
        if linear and (".layers." in name or name == "lm_head"):
            out[name] = mod
    return out


def swap_blocks(model, blocks: dict, name: str) -> None:
    """Every product of `model` (see `products`) multiplied from its blocks, or a clear error naming the
    products that cannot be."""
    require_kernels()
    want = [n for n, m in products(model).items() if not isinstance(m, QuantLinear)]
    missing = sorted(set(want) - set(blocks))
    if missing:
        raise ValueError(f"{name}: no Q4_1 / Q8_0 blocks for {len(missing)} of its {len(products(model))} products "
                         f"({missing[0]}, ...): it cannot run in the gguf weight format")
    swap_in(model, {n: blocks[n] for n in want})
    left = [n for n, m in products(model).items() if not isinstance(m, QuantLinear)]
    if left:
        raise ValueError(f"{name}: {len(left)} products could not take their blocks ({left[0]}, ...)")


def blocks_weight(lm: QuantLinear, embed) -> torch.Tensor:
    """The float32 weight an LM head of blocks stands for: the tied embedding's tensor where it equals
    them exactly (the default model's file: no copy), else a dequantized copy."""
    w = lm.dequantized_weight()
    emb = embed.weight
    if emb.shape == w.shape and emb.dtype == w.dtype and torch.equal(emb.detach(), w):
        return emb.detach()
    return w
