"""The GPU acceptance command's short mode, end to end on this machine's CPU: the report has every
section, float32 greedy is identical, and every parting in half precision is a near-tie."""
from __future__ import annotations

import json

from eagle_core.bench.gpu_check import main


def test_gpu_check_short_runs_end_to_end(tmp_path):
    out = tmp_path / "check.md"
    assert main(["--short", "--out", str(out)]) == 0
    report = out.read_text(encoding="utf-8")
    for section in ("Greedy EAGLE-2 (gpu tree) against vanilla, per dtype", "## Speed", "One forward of k new tokens",
                    "App start-up"):
        assert section in report, section
    r = json.loads((tmp_path / "check.json").read_text(encoding="utf-8"))
    assert r["identity"]["float32"]["identical"] == r["identity"]["float32"]["prompts"] == 1
    assert "bfloat16" in r["identity"]
    assert all(p["near_tie"] for v in r["identity"].values() for p in v["partings"])
    assert {"vanilla", "eagle2 gpu", "eagle2 cpu", "eagle3 gpu", "eagle3 cpu"} <= set(r["speed"])
    assert sorted(int(k) for k in r["t_k"]) == [1, 2, 4] and r["app_startup_s"] > 0


class MetaTarget:
    """A stand-in target on the `meta` device (a device no tensor reaches by default): it records the
    device of every tensor handed to it, and the clock's device synchronisations, in order."""

    device, vocab_size, hidden_size, dtype = "meta", 12, 4, None

    def __init__(self, events):
        import torch

        self.events, self.dtype = events, torch.float32

    def new_cache(self):
        class Cache:
            layers = []

            def crop(self, n):
                pass
        return Cache()

    def forward(self, x, cache, position_ids=None, attention_mask=None):
        import torch

        self.events.append(("forward", [str(t.device) for t in (x, position_ids, attention_mask) if t is not None]))
        return torch.empty(1, x.shape[1], self.hidden_size, device=x.device)

    def logits(self, f):
        self.events.append(("logits", [str(f.device)]))
        return f


def _timed_on_meta(monkeypatch, measure):
    """Run `measure(target)` on a MetaTarget; -> the events (forwards, logits, syncs)."""
    from eagle_core import clock
    from eagle_core.machine import timing

    events = []
    record = lambda device: events.append(("sync", [str(device)]))  # noqa: E731
    monkeypatch.setattr(timing, "sync", record)
    monkeypatch.setattr(clock, "sync", record)
    measure(MetaTarget(events))
    return events


def _check_device_and_sync(events):
    forwards = [e for e in events if e[0] in ("forward", "logits")]
    assert forwards and all(d == "meta" for _, devs in forwards for d in devs), forwards
    # every timed forward ends in a synchronisation before the clock is read again
    for i, (kind, _) in enumerate(events):
        if kind == "logits":
            nxt = [e for e in events[i + 1:] if e[0] in ("sync", "forward")]
            assert nxt and nxt[0] == ("sync", ["meta"]), events[i:i + 3]


def test_forward_costs_times_on_the_targets_device_and_synchronises(monkeypatch):
    """gpu_check's t(k) (forward_costs.time_forward) crashed on CUDA: its prompt, tokens and positions
    were made on the CPU and handed to a CUDA target, and the clock never waited for the device."""
    from eagle_core.bench import forward_costs

    monkeypatch.setattr(forward_costs.kernels, "stream_bandwidth", lambda reps=1: 50.0)
    _check_device_and_sync(_timed_on_meta(monkeypatch, lambda t: forward_costs.time_forward(
        t, rows=(1, 2, 4), context=5, repeats=2, bandwidth=[])))


def test_costmodel_forward_times_on_the_targets_device_and_synchronises(monkeypatch):
    """The cost model's and the hardware panel's t(k) (eagle_core.machine.timing.measure_forward)."""
    from eagle_core.machine import timing

    _check_device_and_sync(_timed_on_meta(monkeypatch, lambda t: timing.measure_forward(
        t, ctx=5, sizes=(1, 3), repeats=2)))


def test_gpu_check_writes_each_part_as_it_finishes(tmp_path, monkeypatch):
    """A run that stops at t(k) keeps the identity part already measured, and says where it stopped."""
    import pytest

    from eagle_core.bench import gpu_check

    class Engine:
        target = None

    seen = []
    monkeypatch.setattr(gpu_check, "load_engine", lambda *a, **k: Engine())
    monkeypatch.setattr(gpu_check, "identity", lambda *a: {"identical": 1, "prompts": 1, "partings": []})

    def broken(*a, **k):
        seen.append(gpu_check.markdown(json.loads((tmp_path / "check.json").read_text(encoding="utf-8"))))
        raise RuntimeError("Expected all tensors to be on the same device")

    monkeypatch.setattr(gpu_check, "time_forward", broken)
    out = tmp_path / "check.md"
    with pytest.raises(RuntimeError):
        main(["--short", "--out", str(out), "--device", "cpu"])
    assert "| float32 | 1 / 1 | - |" in seen[0]  # on disk before t(k) started
    report = out.read_text(encoding="utf-8")
    assert "| float32 | 1 / 1 | - |" in report and "The run stopped:** RuntimeError: Expected all tensors" in report
    assert "One forward of k new tokens" not in report


def test_gpu_check_names_a_gpu_torch_cannot_use(tmp_path, monkeypatch):
    from eagle_core.bench import gpu_check

    r = {"machine": {"device": "cpu", "cpu": "x", "torch": "2"}, "short": True, "identity": {}, "speed": None,
         "t_k": None, "gpu_unused": "An NVIDIA GPU is present (Tesla T4; driver 535.1)"}
    assert "**GPU not used:** An NVIDIA GPU is present (Tesla T4; driver 535.1)" in gpu_check.markdown(r)
