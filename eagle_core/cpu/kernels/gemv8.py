"""A draft's weights as int8 rows with one float32 scale per row, multiplied by gemv8.c.

Half the bytes of float16 storage for products whose weights come from memory twice a cycle (see
gemv8.c). `linear_of(w, SmallGemm8.name)` gives an nn.Linear-like module over the rows' int8 form;
on a CPU eagle_core/drafting/drafter.py takes it for the draft LM head's rows and the head's own products.
"""
from __future__ import annotations

import torch

from .build import library


class SmallGemm8:
    """Weights as int8 rows with one float32 scale per row (gemv8.c: half the bytes of float16
    storage). Its product is its own, y = scale * (x . q) in a fixed order per output, so a row is the
    same alone or in a batch, and an output the same whichever weights it is stacked with, but not the
    bits of a float32 product. Not a backend to choose by policy: the drafter takes it for the draft
    LM head's rows and the head's products (eagle_core/drafting/drafter.py), whose numbers only choose the draft."""

    name = "smallgemm8"
    ROWS = 8  # gemv8.c's rows per call; more are run 8 at a time

    @staticmethod
    def serves(w: torch.Tensor) -> bool:
        return (library() is not None and w.dtype == torch.float32 and w.device.type == "cpu" and w.dim() == 2
                and w.shape[1] % 8 == 0 and w.numel() > 0 and bool(torch.isfinite(w).all()))

    @staticmethod
    def quantize(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """w (N, K) -> (q (N, K) int8 in [-127, 127], scale (N,)): q * scale the nearest such values."""
        s = w.abs().amax(dim=1) / 127
        s = torch.where(s > 0, s, torch.ones_like(s))
        return (w / s[:, None]).round().clamp(-127, 127).to(torch.int8).contiguous(), s.contiguous()

    @staticmethod
    def rounded(w: torch.Tensor) -> torch.Tensor:
        """The float32 values the int8 rows stand for (quantizing them again gives the same q)."""
        q, s = SmallGemm8.quantize(w)
        return q.float() * s[:, None]

    @staticmethod
    def prepare(w):
        """-> (buffer, N, K): the N float32 scales, then the (N, K) int8 rows, in one int8 buffer (the
        form kernels/layer.c reads through one pointer)."""
        if not SmallGemm8.serves(w):
            raise ValueError("smallgemm8 needs a finite float32 CPU weight (N, K) with K a multiple of 8")
        q, s = SmallGemm8.quantize(w)
        n, k = q.shape
        buf = torch.empty(4 * n + n * k, dtype=torch.int8)
        buf[: 4 * n].view(torch.float32).copy_(s)
        buf[4 * n:].view(n, k).copy_(q)
        return buf, n, k

    @staticmethod
    def int16_rows(k: int) -> bool:
        """True if this machine's product rounds each row of x to int16 first (gemv8.c: AVX-512 VNNI)."""
        return library() is not None and bool(library().gemv8_int16(k))

    @staticmethod
    def x_as_int16(x: torch.Tensor) -> torch.Tensor:
        """The float32 values gemv8.c's int16 path multiplies for x (m, k): each row rounded to the
        nearest multiple of its scale max|x| / 32767 (a zero row: itself)."""
        s = x.abs().amax(dim=1, keepdim=True) / 32767
        s = torch.where(s > 0, s, torch.ones_like(s))
        return torch.round(x / s) * s

    @staticmethod
    def run(state, x, bias):
        buf, n, k = state
        scales = buf.data_ptr()
        y = torch.empty(x.shape[0], n)
        for r in range(0, x.shape[0], SmallGemm8.ROWS):
            rows = min(SmallGemm8.ROWS, x.shape[0] - r)
            library().gemv8(x[r:].data_ptr(), rows, k, scales + 4 * n, scales, n, k, y[r:].data_ptr(), n,
                            torch.get_num_threads())
        return y + bias if bias is not None else y
