"""One forward's products alone, at one row, in the weight format the engine runs: the part of t(1) the
products take, which `python -m eagle_core.bench.kernels --curve` sets beside the whole forward to find
the floor of t(k) (kernels.floor)."""
from __future__ import annotations

import torch

from ..cpu.kernels import qblocks, qtuning
from ..machine.timing import median_s
from .qblocks_curve import float32_product, forward_weights


def direct_calls(lib, ws, xs: dict) -> tuple[list[tuple], list]:
    """qb_matmul's arguments for each weight of `ws` (forward_weights) times xs[in_features] (one row or
    more), with the tuned knobs, and the tensors they point into, each product's output last:
    (calls, [(packed, y)])."""
    threads = torch.get_num_threads()
    qtuning.ensure(lib, threads)
    keep = [(qblocks.pack(fmt, data, n, k), torch.empty(xs[k].shape[0], n)) for fmt, data, n, k in ws]
    calls = [(qblocks.fmt_of(fmt), xs[k].data_ptr(), xs[k].shape[0], k, p.data_ptr(), n, y.data_ptr(), n, threads,
              qblocks.PATHS["auto"], 0) for (fmt, _, n, k), (p, y) in zip(ws, keep)]
    return calls, keep


def products_one_row(weights: str = "gguf", repeats: int = 7, gguf: str | None = None) -> float:
    """ms of one forward's products at one row in the weight format the engine runs (`weights`: "gguf",
    the blocks through qblocks.c with its tuned knobs, or "float32", the same weights dequantized through
    the engine's float32 product), each weight distinct so they stream as a decode's do: the part of t(1)
    the products take (kernels --curve's floor). The Python around each float32 call stays in (~0.1 ms a
    forward): an overstated one-row time only lowers the floor."""
    from ..target import gguf_blocks

    ws = forward_weights(gguf_blocks.read(gguf))
    xs = {k: torch.randn(1, k) for _, _, _, k in ws}
    if weights == "gguf":  # qb_matmul called as layer.c calls it, without qblocks.matmul's Python around each
        lib = qblocks.library()
        calls, _keep = direct_calls(lib, ws, xs)
        return 1e3 * median_s(lambda: [lib.qb_matmul(*c) for c in calls], repeats, warmup=1)
    _, prep, run = float32_product()
    states = [(prep(torch.from_numpy(qblocks.dequantize(fmt, data, n, k))), k) for fmt, data, n, k in ws]
    with torch.inference_mode():
        return 1e3 * median_s(lambda: [run(st, xs[k]) for st, k in states], repeats, warmup=1)
