"""Which machine a measurement ran on: its description (`machine_info`, stored with every result)
and its name as the page shows it (`hardware_name`: the CPU model or the GPU)."""
from __future__ import annotations

import os
import platform

import torch

from ..cpu.kernels import cpu_model


def machine_info(device: str) -> dict:
    info = {"device": str(device), "cpu": cpu_model(), "torch": torch.__version__, "threads": torch.get_num_threads(),
            "cpu_count": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()}
    if str(device).startswith("cuda"):
        info["gpu"] = torch.cuda.get_device_name()
    try:
        info["loadavg_1m"] = round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        pass
    return info


def hardware_name(device) -> str:
    """The CPU model (as lscpu names it) or the GPU's name."""
    if str(device).startswith("cuda"):
        return torch.cuda.get_device_name(torch.device(device))
    return cpu_model()
