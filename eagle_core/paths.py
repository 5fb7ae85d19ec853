"""Where the engine keeps what it builds once per machine: converted weights, compiled kernels and
their calibration. `$EAGLE_EXPLAINER_CACHE` when set; on a Hugging Face Space (`SPACE_ID` set) with a
writable `/data` (a persistent volume; hub-docs spaces-storage.md), `/data/eagle-explainer`, so the
first start's work survives restarts; else `~/.cache/eagle-explainer`."""
from __future__ import annotations

import os

PERSISTENT = "/data"  # where a Space's persistent storage is mounted


def _writable_dir(path: str) -> bool:
    return os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)


def cache_root() -> str:
    explicit = os.environ.get("EAGLE_EXPLAINER_CACHE")
    if explicit:
        return explicit
    # only on a Space: elsewhere a /data of the machine's own is none of the engine's business
    if os.environ.get("SPACE_ID") and _writable_dir(PERSISTENT):
        return os.path.join(PERSISTENT, "eagle-explainer")
    return os.path.join(os.path.expanduser("~"), ".cache", "eagle-explainer")


def runs_root() -> str:
    """Where training runs keep their checkpoints and exports by default: under the cache, outside the
    repository, so that a run's state is never committed by accident (docs/training.md, "Resuming")."""
    return os.path.join(cache_root(), "runs")
