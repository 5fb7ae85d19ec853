"""A linear layer that multiplies from a GGUF file's own Q4_1 / Q8_0 blocks (kernels/qblocks.c).

    QuantLinear.from_blocks(blocks)           one weight (eagle_core/target/gguf_blocks.py's Blocks)
    QuantLinear.stacked([q, k, v])            several weights on one input as one product (rows stacked:
                                              every output is computed alone, so stacking changes no bit)
    swap_in(model, blocks)                    put QuantLinear in place of a transformers model's nn.Linear
                                              layers that have blocks (the LM head too)

A drop-in for a float32 nn.Linear in a forward: x (..., in_features) float32 -> (..., out_features)
float32. Its numbers are dequant(W) . x with x rounded per block of 32 to int8 (not the float32
product's bits: the tests bound the difference); a row's output is the same alone or in any batch,
with any thread count, so greedy EAGLE equals greedy vanilla in this format by construction.
The packed blocks are the file's bytes, interleaved in groups of 16 rows (qblocks.c), 96 MB for the
default model against 538 MB of float32.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .kernels import qblocks


class QuantLinear(nn.Module):
    def __init__(self, fmt: str, blocks, out_features: int, in_features: int, bias: torch.Tensor | None = None,
                 tile: int = 0):
        super().__init__()
        if fmt not in qblocks.FORMATS:
            raise ValueError(f"format {fmt!r}: one of {', '.join(qblocks.FORMATS)}")
        self.fmt, self.out_features, self.in_features, self.tile = fmt, int(out_features), int(in_features), int(tile)
        self.blocks = np.ascontiguousarray(np.asarray(blocks).view(np.uint8))  # the file's bytes (dequantized_weight)
        self.register_buffer("packed", qblocks.pack(fmt, self.blocks, self.out_features, self.in_features),
                             persistent=False)
        self.bias = None if bias is None else nn.Parameter(bias.detach().float().clone(), requires_grad=False)

    @classmethod
    def from_blocks(cls, blocks, bias=None, tile: int = 0) -> "QuantLinear":
        return cls(blocks.fmt, blocks.data, blocks.out_features, blocks.in_features, bias, tile)

    @classmethod
    def stacked(cls, parts: list, bias=None, tile: int = 0) -> "QuantLinear":
        """One product over the rows of several weights of one format and in_features (q, k, v; gate, up)."""
        if len({(p.fmt, p.in_features) for p in parts}) != 1:
            raise ValueError("stacked weights need one format and one in_features")
        data = np.concatenate([np.asarray(p.data) for p in parts])
        return cls(parts[0].fmt, data, data.shape[0], parts[0].in_features, bias, tile)

    @property
    def nbytes(self) -> int:
        return self.packed.numel()

    def dequantized_weight(self) -> torch.Tensor:
        """(out_features, in_features) float32: the weights these blocks stand for."""
        return torch.from_numpy(qblocks.dequantize(self.fmt, self.blocks, self.out_features, self.in_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        y = qblocks.matmul(self.fmt, x.reshape(-1, self.in_features), self.packed, self.out_features,
                           self.in_features, tile=self.tile)
        if self.bias is not None:
            y = y + self.bias
        return y.view(*lead, self.out_features).to(x.dtype)

    def extra_repr(self) -> str:
        return (f"{self.fmt}, in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, {self.nbytes / 1e6:.2f} MB")


def swap_in(model: nn.Module, blocks: dict, tile: int = 0) -> list[str]:
    """Replace each linear layer of `model` named in `blocks` (gguf_blocks.read) by a QuantLinear over its
    blocks, biases kept; shapes must match. A linear layer: nn.Linear or eagle_core.cpu.kernels' Linear
    (anything with a 2-D `weight` and `bias`). Only the products change: the embedding stays as loaded.
    -> the names replaced."""
    done = []
    for name, mod in list(model.named_modules()):
        weight = getattr(mod, "weight", None)
        if name not in blocks or isinstance(mod, QuantLinear) or not isinstance(weight, torch.Tensor) \
                or weight.dim() != 2 or not hasattr(mod, "bias"):
            continue
        b = blocks[name]
        if (b.out_features, b.in_features) != tuple(weight.shape):
            raise ValueError(f"{name}: blocks {(b.out_features, b.in_features)} for a weight {tuple(weight.shape)}")
        parent = model.get_submodule(name.rpartition(".")[0]) if "." in name else model
        setattr(parent, name.rpartition(".")[2], QuantLinear.from_blocks(b, mod.bias, tile))
        done.append(name)
    return done
