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
