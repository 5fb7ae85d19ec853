"""A head named by a Hugging Face hub id (e.g. yuhuili/EAGLE3-LLaMA3.1-Instruct-8B) or by a local
directory: the directory to load it from. A hub id is downloaded once (config and weights only)
into the hub client's cache; a gated repository or no network is a one-line message."""
from __future__ import annotations

import os
import re

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
WEIGHT_FILES = ["*.json", "*.safetensors", "*.bin"]


def local_dir(name: str, what: str = "head", download=None) -> str:
    """`name` if it is a directory, else the downloaded snapshot of hub repository `name`."""
    if os.path.isdir(name):
        return name
    if not HUB_ID.match(name):
        raise FileNotFoundError(f"{what} {name!r}: no such directory, and not a hub id (organisation/name)")
    if download is None:
        from huggingface_hub import snapshot_download as download
    try:
        return download(name, allow_patterns=WEIGHT_FILES)
    except Exception as e:  # offline, gated, missing: one line, never a traceback
        kind = type(e).__name__
        if "Gated" in kind or re.search(r"\b(401|403)\b", str(e)):
            hint = "a gated repository: accept its licence on the hub and set HF_TOKEN"
        elif "NotFound" in kind or re.search(r"\b404\b", str(e)):
            hint = "no such repository on the hub"
        else:
            hint = "no network? a local directory works offline"
        raise ValueError(f"could not fetch {what} {name!r} from the Hugging Face hub ({hint}; {kind})") from None
