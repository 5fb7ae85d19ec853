"""Where the engine keeps what it builds once per machine: converted weights, compiled kernels and
their calibration. `$EAGLE_EXPLAINER_CACHE`, default `~/.cache/eagle-explainer`."""
from __future__ import annotations

import os


def cache_root() -> str:
    return os.environ.get("EAGLE_EXPLAINER_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "eagle-explainer"))
