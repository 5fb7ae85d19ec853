"""A model or head named by a Hugging Face hub id (e.g. yuhuili/EAGLE3-LLaMA3.1-Instruct-8B) or by a
local directory: the directory to load it from. A hub id is downloaded once (config, tokenizer and
weights only) into the hub client's cache; a gated repository or no network is a one-line message.

No network fails fast. The hub client asks for a repository's revision with no time limit and
retries on errors: measured here, with the hub's address answering nothing, `snapshot_download`
was still waiting after 300 s (and the issue saw 47 s of retries). So before downloading, one
request with a short timeout (`probe_timeout_s`, EAGLE_HUB_PROBE_S) asks the hub for the repository; if nothing
answers, the local cache is used when it has the repository, else the message says so at once.
"""
from __future__ import annotations

import os
import re
import threading

from ..environment import seconds

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")
WEIGHT_FILES = ["*.json", "*.safetensors", "*.bin"]
# a target also needs its tokenizer; its *.bin weights only where it has no safetensors (both would double
# the download), and never the original/ checkpoints some repositories carry beside the transformers ones
TARGET_FILES = ["*.json", "*.safetensors", "tokenizer*", "*.model", "*.tiktoken", "*.txt"]
IGNORE = ["original/*"]
GATED_HINT = "a gated repository: accept its licence on the hub and set HF_TOKEN"


def probe_timeout_s() -> float:
    """Seconds the probe waits for the hub to connect and answer (each): EAGLE_HUB_PROBE_S, default 5."""
    return seconds("EAGLE_HUB_PROBE_S", 5.0)


def probe(name: str, timeout: float | None = None) -> tuple[str | None, list[str] | None]:
    """Ask the hub once about repository `name`: (None, its files) if it answered, (None, None) if it
    answered without a file list (gated, missing: the download then says which), or (why, None) if it
    did not answer within `timeout` s. The request runs in a thread of its own and is waited for
    `timeout` s in all: httpx's timeouts are per phase (measured here: 10 s in all for a 5 s one,
    with a silent server) and do not cover the name lookup."""
    import httpx
    from huggingface_hub import constants
    from huggingface_hub.utils import build_hf_headers

    timeout = probe_timeout_s() if timeout is None else timeout
    answer: list = []

    def ask():
        try:
            answer.append(httpx.get(f"{constants.ENDPOINT}/api/models/{name}", headers=build_hf_headers(),
                                    timeout=httpx.Timeout(timeout), follow_redirects=True))
        except Exception as e:  # noqa: BLE001  (reported below, by kind)
            answer.append(e)

    asker = threading.Thread(target=ask, daemon=True)  # left behind if the hub never answers
    asker.start()
    asker.join(timeout)
    r = answer[0] if answer else httpx.TimeoutException("")
    if isinstance(r, httpx.TimeoutException):
        return f"gave no answer within {timeout:g} s", None
    if isinstance(r, Exception):
        return f"could not be reached ({type(r).__name__})", None
    try:
        files = [s["rfilename"] for s in r.json().get("siblings", [])] if r.status_code == 200 else None
    except (ValueError, KeyError, TypeError, AttributeError):
        files = None
    return None, files


def local_dir(name: str, what: str = "head", download=None, patterns=None) -> str:
    """`name` if it is a directory, else the downloaded snapshot of hub repository `name` (the files
    matching `patterns`, default WEIGHT_FILES). `download`: a stand-in for snapshot_download (tests);
    the real one first probes the hub (see the module's docstring)."""
    if os.path.isdir(name):
        return name
    if not HUB_ID.match(name):
        raise FileNotFoundError(f"{what} {name!r}: no such directory, and not a hub id (organisation/name)")
    patterns = list(patterns or WEIGHT_FILES)
    if download is None:
        from huggingface_hub import constants
        from huggingface_hub import snapshot_download as download

        why, files = (None, None) if constants.HF_HUB_OFFLINE else probe(name)
        if why is not None or constants.HF_HUB_OFFLINE:
            return _cached(download, name, what, patterns, why or "is off (HF_HUB_OFFLINE=1)")
        if "*.bin" not in patterns and files is not None and not any(f.endswith(".safetensors") for f in files):
            patterns.append("*.bin")  # a target published as PyTorch .bin files only (e.g. Vicuna-7B v1.3)
    try:
        return download(name, allow_patterns=patterns, ignore_patterns=IGNORE)
    except Exception as e:  # offline, gated, missing: one line, never a traceback
        kind = type(e).__name__
        if "Gated" in kind or re.search(r"\b(401|403)\b", str(e)):
            hint = GATED_HINT
        elif "NotFound" in kind or re.search(r"\b404\b", str(e)):
            hint = "no such repository on the hub"
        else:
            hint = "no network? a local directory works offline"
        raise ValueError(f"could not fetch {what} {name!r} from the Hugging Face hub ({hint}; {kind})") from None


def _cached(download, name: str, what: str, patterns: list[str], why: str) -> str:
    """The hub is out of reach: the repository from the local cache, or a one-line message."""
    try:
        return download(name, allow_patterns=patterns, ignore_patterns=IGNORE, local_files_only=True)
    except Exception:
        raise ValueError(f"could not fetch {what} {name!r}: the Hugging Face hub {why} and the repository is "
                         "not in the local cache (no network? a local directory works offline)") from None
