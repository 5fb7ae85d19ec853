"""A linear layer that multiplies from a GGUF file's own Q4_1 / Q8_0 blocks (kernels/qblocks.c).

    QuantLinear.from_blocks(blocks)           one weight (eagle_core/target/gguf_blocks.py's Blocks)
    QuantLinear.stacked([q, k, v])            several weights on one input as one product (rows stacked:
                                              every output is computed alone, so stacking changes no bit)
    QuantLinear.stacked_modules([q, k, v])    the same from QuantLinear layers (the CPU decoder's q/k/v, gate/up)
    swap_in(model, blocks)                    put QuantLinear in place of a transformers model's nn.Linear
                                              layers that have blocks (the LM head too)
    require_kernels()                         a clear error where qblocks.c cannot be built
    attention_in(installed, model)            the engine's attention in a model whose products are all
                                              QuantLinear (kernels.install then had nothing to swap)
    blocks_in_layers()                        layer.c handed qblocks.c's qb_matmul, so the CPU decoder's
                                              one-call-per-layer pass multiplies from the blocks too
    layer_kinds(products)                     the storage kinds layer.c reads a layer's four products as

A drop-in for a float32 nn.Linear in a forward: x (..., in_features) float32 -> (..., out_features)
float32. Its numbers are dequant(W) . x with x rounded per block of 32 to int8 (not the float32
product's bits: the tests bound the difference); a row's output is the same alone or in any batch,
with any thread count, so greedy EAGLE equals greedy vanilla in this format by construction.
The packed blocks are the file's bytes, interleaved in groups of 16 rows (qblocks.c), 96 MB for the
default model against 538 MB of float32.
"""
from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import torch
from torch import nn

from .kernels import attention, qblocks
from .kernels.qtuning import ensure


LAYER_KINDS = {qblocks.Q4_1: 3, qblocks.Q8_0: 4}  # qblocks.c's fmt -> layer.c's gemm kind


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

    @classmethod
    def stacked_modules(cls, parts: list["QuantLinear"], tile: int = 0) -> "QuantLinear":
        """`stacked` over QuantLinear layers of one format and in_features, their biases stacked too
        (all or none)."""
        if len({(p.fmt, p.in_features) for p in parts}) != 1 or len({p.bias is None for p in parts}) != 1:
            raise ValueError("stacked layers need one format, one in_features and biases on all or none")
        data = np.concatenate([p.blocks for p in parts])
        bias = None if parts[0].bias is None else torch.cat([p.bias.detach() for p in parts])
        return cls(parts[0].fmt, data, data.shape[0], parts[0].in_features, bias, tile or parts[0].tile)

    @property
    def layer_kind(self) -> int:
        """The storage kind layer.c's gemm reads these blocks as (3: Q4_1, 4: Q8_0)."""
        return LAYER_KINDS[qblocks.fmt_of(self.fmt)]

    @property
    def nbytes(self) -> int:
        """The packed blocks' bytes (what a product reads)."""
        fmt = qblocks.fmt_of(self.fmt)
        return -(-self.out_features // qblocks.GROUP) * (self.in_features // qblocks.BLOCK) * qblocks.GROUP_BLOCK_BYTES[fmt]

    def release(self) -> None:
        """Drop the packed copy (the CPU decoder multiplies from a stacked one of its own); a later
        forward packs it again from the file's bytes."""
        self.packed = None

    def dequantized_weight(self) -> torch.Tensor:
        """(out_features, in_features) float32: the weights these blocks stand for."""
        return torch.from_numpy(qblocks.dequantize(self.fmt, self.blocks, self.out_features, self.in_features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        packed = self.packed
        if packed is None:  # released (see release); packed whole before it is published
            packed = qblocks.pack(self.fmt, self.blocks, self.out_features, self.in_features)
            self.packed = packed
        y = qblocks.matmul(self.fmt, x.reshape(-1, self.in_features), packed, self.out_features,
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


def require_kernels() -> None:
    """Build (or find) kernels/qblocks.c; a ValueError saying so where it cannot be (never a silent
    fall back to float32: the caller asked for this format)."""
    try:
        lib = qblocks.library()
    except Exception as e:  # no compiler, or it failed
        raise ValueError(f"the gguf weight format needs kernels/qblocks.c compiled, which failed here ({e}); "
                         "use --weights float32") from e
    # The products' knobs for this thread count, measured now if this CPU has none cached (a few
    # seconds, once), so the first decode's timed prefill does not pay for it. layer.c's calls reach
    # the same library with tile 0 and so run these knobs too.
    ensure(lib, torch.get_num_threads())


def attention_in(installed, model) -> None:
    """Where kernels.install found no float32 linear layer left (every product a QuantLinear) it set no
    attention either: give the transformers model the engine's row-invariant attention all the same, as
    install does (recorded in `installed`, so Installed.stock() undoes it)."""
    config = getattr(model, "config", None)
    if installed.attention is None and getattr(config, "_attn_implementation", None) in ("sdpa", "eager"):
        installed.attention = (model, attention.set_attention(model, attention.NAME))


def layer_kinds(prods) -> int:
    """layer.c's decoder_layer `kinds` for four QuantLinear products (q/k/v, o, gate/up, down): one kind,
    or, for a file mixing Q4_1 and Q8_0 within a layer, bit 16 and one kind per product in 4 bits each."""
    kinds = [p.layer_kind for p in prods]
    return kinds[0] if len(set(kinds)) == 1 else (1 << 16) | sum(k << 4 * j for j, k in enumerate(kinds))


def blocks_in_layers() -> bool:
    """Can kernels/layer.c multiply from blocks? Hands it qblocks.c's exported qb_matmul (once per loaded
    engine library; layer_has_qblocks says whether it holds one), so the process runs one copy of
    qblocks.c, with its defaults and whatever tuning that library has. False where either library
    is missing (the CPU decoder then runs its torch operations on the same blocks)."""
    from . import kernels

    lib = kernels.library()
    if lib is None:
        return False
    if not lib.layer_has_qblocks():
        try:
            entry = qblocks.library().qb_matmul
        except (OSError, subprocess.SubprocessError):
            return False
        lib.layer_set_qblocks(ctypes.cast(entry, ctypes.c_void_p))
    return True
