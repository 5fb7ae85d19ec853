"""ZeroGPU: Hugging Face's shared GPUs for Spaces, supported by design (never deployed yet).

On a ZeroGPU Space (the platform sets SPACES_ZERO_GPU=true) the app's process has no GPU of its
own. CUDA work is allowed only inside a function decorated with `spaces.GPU(duration=...)`: each
call gets a GPU for at most `duration` seconds and runs in a worker process forked from the app,
so its arguments and its results (for a generator, every item it yields) are pickled across, and
nothing it changes in memory comes back. The model is loaded at start-up onto "cuda" in the main
process (the `spaces` package stands in for the device there and moves the weights to the GPU in
the worker), and every decorated function must exist before the app launches.

What the app does with that (docs/gpu.md, "ZeroGPU"):
- `gpu(duration)` is `spaces.GPU(duration=duration)` on ZeroGPU and no decorator elsewhere; the
  one function it wraps is the decode entry (eagle_app/worker.py, `gpu_decode`), which is called
  from the request's own thread (the `spaces` client reads the request from it), never from the
  private engine thread the app uses on a CPU or a dedicated GPU.
- The model loads at start-up, in the main thread, without the CUDA warm-up (eagle_app/model.py); the
  GPU worker warms up once, untimed, at the start of its first decode (worker.warm_gpu).
- Stop reaches the worker process through `STOP`, an event made before the fork.

The `spaces` package comes with a Gradio Space (the hub's ZeroGPU guide imports it without adding it
to requirements.txt; not verified here). It is not a dependency of this project, nothing imports it
off ZeroGPU, and if it were missing there the app says so and decodes without it. app.py imports
this module first, since `spaces` must be imported before anything initialises CUDA.
"""
from __future__ import annotations

import multiprocessing
import sys
import threading

from eagle_core.environment import flag


def on_zerogpu(env=None) -> bool:
    """True on a ZeroGPU Space: SPACES_ZERO_GPU is "1", "t" or "true", as the `spaces` package reads it."""
    return flag("SPACES_ZERO_GPU", env)


def _spaces():
    """The `spaces` package on ZeroGPU, else None (also None, with a warning, if ZeroGPU lacks it)."""
    if not on_zerogpu():
        return None
    try:
        import spaces  # noqa: PLC0415  (only on ZeroGPU; patches torch, so before CUDA is touched)
    except ImportError:
        print("* SPACES_ZERO_GPU is set but the `spaces` package is missing: decoding without spaces.GPU",
              file=sys.stderr)
        return None
    return spaces


SPACES = _spaces()
ZERO = SPACES is not None  # decoding goes through spaces.GPU
# Stop for a decode running in the GPU worker process: a threading.Event would stay in this process.
# One event is enough, since one decode runs at a time (eagle_app/decode_queue.py).
STOP = multiprocessing.get_context("fork").Event() if ZERO else threading.Event()


def gpu(duration):
    """Decorator for the function that does the CUDA work: spaces.GPU(duration=duration) on ZeroGPU (a
    number of seconds, or a function of the call's arguments giving one), else the function itself."""
    def wrap(fn):
        return SPACES.GPU(duration=duration)(fn) if ZERO else fn
    return wrap
