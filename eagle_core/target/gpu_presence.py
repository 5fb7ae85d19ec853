"""Never silently on the CPU: an NVIDIA GPU that this torch cannot use is said out loud.

A torch wheel is built for one CUDA version; a driver older than it (e.g. an R580 driver under a
CUDA 13 build) leaves `torch.cuda.is_available()` False, and every "auto" device falls back to the
CPU. `gpu_mismatch()` notices that case from the device files (/dev/nvidia0, ...) or `nvidia-smi`,
and returns a message naming the driver, the CUDA version it supports and torch's own (docs/gpu.md,
"A GPU that torch cannot use"). The page, the CLI and gpu_check show it.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys

import torch


def _smi(args, which=shutil.which, run=subprocess.run) -> str:
    exe = which("nvidia-smi")
    if exe is None:
        return ""
    try:
        out = run([exe, *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout if out.returncode == 0 else ""


def nvidia_gpu(dev: str = "/dev", proc: str = "/proc/driver/nvidia/version", which=shutil.which,
               run=subprocess.run) -> dict | None:
    """{"names": [...], "driver": str | None, "driver_cuda": str | None} when an NVIDIA GPU shows (a
    /dev/nvidiaN device file, or nvidia-smi listing one), else None."""
    try:
        files = sorted(f for f in os.listdir(dev) if re.fullmatch(r"nvidia\d+", f))
    except OSError:
        files = []
    listing = _smi(["-L"], which, run)
    names = re.findall(r"^GPU \d+: (.+?)(?: \(UUID:.*)?$", listing, re.M)
    if not files and not names:
        return None
    table = _smi([], which, run)  # the header: "Driver Version: 580.65.06   CUDA Version: 13.0"
    driver = re.search(r"Driver Version:\s*([\d.]+)", table)
    cuda = re.search(r"CUDA Version:\s*([\d.]+)", table)
    if driver is None:
        try:
            with open(proc, encoding="utf-8") as f:
                driver = re.search(r"Kernel Module\s+([\d.]+)", f.read())
        except OSError:
            pass
    return {"names": names or [f"/{dev.strip('/')}/{f}" for f in files], "driver": driver.group(1) if driver else None,
            "driver_cuda": cuda.group(1) if cuda else None}


def gpu_mismatch(gpu: dict | None = None, cuda_available: bool | None = None, torch_cuda: str | None = "?") -> str | None:
    """A message when an NVIDIA GPU is present and torch cannot use it, else None. The arguments stand
    in for the machine in tests: `gpu` as nvidia_gpu() returns it, torch's CUDA availability and version."""
    if cuda_available is None:
        cuda_available = torch.cuda.is_available()
    if cuda_available:
        return None
    gpu = nvidia_gpu() if gpu is None else gpu
    if not gpu:
        return None
    if torch_cuda == "?":
        torch_cuda = torch.version.cuda
    driver = gpu.get("driver") or "unknown"
    supports = f", which supports CUDA up to {gpu['driver_cuda']}" if gpu.get("driver_cuda") else ""
    built = f"built for CUDA {torch_cuda}" if torch_cuda else "a CPU-only build"
    return (f"An NVIDIA GPU is present ({', '.join(gpu['names'])}; driver {driver}{supports}) but torch "
            f"{torch.__version__} ({built}) cannot use it, so this runs on the CPU. Install a torch build for a CUDA "
            f"version the driver supports (docs/gpu.md).")


@functools.lru_cache(maxsize=1)
def cached_mismatch() -> str | None:
    """gpu_mismatch() for this machine, asked once per process."""
    return gpu_mismatch()


_warned = []


def warn_if_gpu_unused(stream=None) -> str | None:
    """Print the mismatch message to stderr once per process (the CLI); returns it."""
    msg = cached_mismatch()
    if msg and not _warned:
        _warned.append(msg)
        print(f"warning: {msg}", file=stream or sys.stderr, flush=True)
    return msg
