"""Never silently on the CPU: an NVIDIA GPU that torch cannot use is found from its device files or
nvidia-smi (both faked here) and named with the driver's and torch's CUDA versions."""
from __future__ import annotations

import subprocess

from eagle_core.target import gpu_presence
from eagle_core.target.gpu_presence import gpu_mismatch, nvidia_gpu

SMI_TABLE = """+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 570.86.15              Driver Version: 570.86.15      CUDA Version: 12.8     |
|-----------------------------------------+------------------------+----------------------+
"""
SMI_LIST = "GPU 0: Tesla T4 (UUID: GPU-1b2c3d4e-0000-1111-2222-333344445555)\n"


def fake_smi(calls):
    def run(cmd, **kw):
        calls.append(cmd[1:])
        return subprocess.CompletedProcess(cmd, 0, SMI_LIST if cmd[1:] == ["-L"] else SMI_TABLE, "")
    return run


def test_nvidia_smi_names_the_gpu_driver_and_its_cuda(tmp_path):
    calls = []
    gpu = nvidia_gpu(dev=str(tmp_path), which=lambda n: "/usr/bin/nvidia-smi", run=fake_smi(calls))
    assert gpu == {"names": ["Tesla T4"], "driver": "570.86.15", "driver_cuda": "12.8"}
    msg = gpu_mismatch(gpu, cuda_available=False, torch_cuda="13.0")
    assert "Tesla T4" in msg and "driver 570.86.15" in msg and "CUDA up to 12.8" in msg and "CUDA 13.0" in msg
    assert "runs on the CPU" in msg


def test_device_files_alone_are_enough_and_the_driver_comes_from_proc(tmp_path):
    (tmp_path / "nvidia0").touch()
    (tmp_path / "nvidiactl").touch()
    proc = tmp_path / "version"
    proc.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n")
    gpu = nvidia_gpu(dev=str(tmp_path), proc=str(proc), which=lambda n: None)
    assert gpu["driver"] == "535.183.01" and gpu["names"] == [f"/{str(tmp_path).strip('/')}/nvidia0"]
    msg = gpu_mismatch(gpu, cuda_available=False, torch_cuda=None)
    assert "a CPU-only build" in msg and "535.183.01" in msg


def test_no_gpu_or_a_usable_one_says_nothing(tmp_path):
    (tmp_path / "nvidiactl").touch()  # a control file is not a GPU
    assert nvidia_gpu(dev=str(tmp_path), which=lambda n: None) is None
    assert gpu_mismatch({}, cuda_available=False) is None
    assert gpu_mismatch({"names": ["T4"]}, cuda_available=True) is None


def test_the_cli_warns_on_stderr_once_and_pick_device_says_it(monkeypatch, capsys):
    from eagle_core.target import pick_device

    monkeypatch.setattr(gpu_presence, "cached_mismatch", lambda: "An NVIDIA GPU is present (T4)")
    monkeypatch.setattr(gpu_presence, "_warned", [])
    monkeypatch.setattr(gpu_presence.torch.cuda, "is_available", lambda: False)
    assert pick_device(None) in ("cpu", "mps")
    pick_device("auto")
    err = capsys.readouterr().err
    assert err.count("warning: An NVIDIA GPU is present (T4)") == 1


def test_the_page_shows_it_beside_the_model(monkeypatch):
    from eagle_app import model as app_model

    class T:
        name, device = "tiny", "cpu"

        def describe(self):
            return "tiny (cpu)"

    class E:
        target, head_name, head3_name = T(), None, None

    monkeypatch.setattr(app_model, "cached_mismatch", lambda: "An NVIDIA GPU is present (T4; driver 535)")
    line = app_model.model_line(E(), 1.0)
    assert "GPU not used:</b> An NVIDIA GPU is present (T4; driver 535)" in line
    monkeypatch.setattr(app_model, "cached_mismatch", lambda: None)
    assert "GPU not used" not in app_model.model_line(E(), 1.0)
