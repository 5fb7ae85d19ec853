"""`train curves`: held-out top-1 and tau against cumulative training hours, read from the logs
(issue 30). No model: milliseconds, plus one small matplotlib figure."""
import copy
import json
import os

import pytest

from eagle_core.train.__main__ import main
from eagle_core.train.curves import build_curves, derive

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "docs", "data", "training_curves.json")


def _write_log(path, lines):
    with open(path, "w") as f:
        f.write("Loading weights: 100%|####| 272/272\n")  # console noise, as in pilot.log
        for r in lines:
            f.write(json.dumps(r) + "\n")
        f.write("training done\n")


def _synthetic(tmp_path):
    _write_log(tmp_path / "a.jsonl", [
        {"step": 10, "elapsed_s": 900.0, "feat_loss": 0.4},
        {"epoch_end": 1, "step": 20, "elapsed_s": 1800.0, "top1": 0.40, "top1_self": 0.45}])
    _write_log(tmp_path / "b.jsonl", [
        {"epoch_end": 0, "step": 0, "elapsed_s": 0.0, "top1": 0.38},
        {"epoch_end": 1, "step": 30, "elapsed_s": 3600.0, "top1": 0.50},
        {"step": 31, "elapsed_s": 3690.0, "feat_loss": 0.3}])  # a run's hours end at its last elapsed_s
    _write_log(tmp_path / "c.jsonl", [{"epoch_end": 1, "step": 50, "elapsed_s": 720.0, "top1": 0.30}])
    _write_log(tmp_path / "log3.jsonl", [
        {"epoch_end": 0.0, "step": 0, "elapsed_s": 0.0, "top1": 0.31},
        {"step": 10, "epoch": 0, "loss": 12.0, "acc_by_step": [0.3], "elapsed_s": 900.0},
        {"epoch_end": 0.1, "step": 20, "elapsed_s": 1800.0, "top1": 0.35}])
    run = lambda log, head, key="top1", tau=(): {"run": log, "head": head, "log": log, "top1_key": key,
                                                 "tau": [{"tree": t, "tau": v, "source": "x"} for t, v in tau]}
    data = {"families": {
        "eagle2": {"label": "EAGLE-2", "runs": [run("a.jsonl", 1, "top1_self", [("2,2,4", 1.6)]),
                                                run("b.jsonl", 2, tau=[("2,2,4", 1.7), ("6,10,60", 2.4)])]},
        "eagle3": {"label": "EAGLE-3", "runs": [run("c.jsonl", 1, tau=[("2,2,4", 1.45)])]}}}
    path = tmp_path / "curves.json"
    path.write_text(json.dumps(data))
    return data, path


def test_hours_add_up_along_a_lineage_and_extra_logs_continue_eagle3(tmp_path):
    data, _ = _synthetic(tmp_path)
    c = build_curves(data, str(tmp_path), [str(tmp_path / "log3.jsonl")])
    runs = data["families"]["eagle2"]["runs"]
    assert runs[0]["derived"] == {"steps": 20, "elapsed_s": 1800.0, "hours_start": 0.0, "hours_end": 0.5,
                                  "top1": [[20, 0.5, 0.45]]}  # top1_key picks the set
    assert runs[1]["derived"]["hours_start"] == 0.5 and runs[1]["derived"]["hours_end"] == 1.525
    assert runs[1]["derived"]["steps"] == 31
    assert c["eagle2"]["top1"] == [[(0.5, 0.45)], [(0.5, 0.38), (1.5, 0.50)]]
    assert c["eagle2"]["tau"] == {"2,2,4": [(0.5, 1.6), (1.525, 1.7)], "6,10,60": [(1.525, 2.4)]}
    assert c["eagle2"]["ends"] == [(0.5, 1, 0.45), (1.5, 2, 0.50)]
    assert c["eagle3"]["top1"] == [[(0.2, 0.30)]] and c["eagle3"]["tau"] == {"2,2,4": [(0.2, 1.45)]}
    # the continuing run: after the EAGLE-3 lineage's 0.2 h, its own elapsed_s on top
    assert c["eagle3"]["extra"] == [[(0.2, 0.31), (0.7, 0.35)]]
    assert c["eagle2"]["extra"] == []


def test_the_subcommand_writes_the_png_and_refreshes_the_data(tmp_path):
    _, path = _synthetic(tmp_path)
    out = tmp_path / "img" / "curves.png"
    main(["curves", "--data", str(path), "--root", str(tmp_path), "--out", str(out),
          "--extra-log3", str(tmp_path / "log3.jsonl"), "--refresh-data"])
    with open(out, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    assert out.stat().st_size > 10_000
    written = json.loads(path.read_text())
    assert written["families"]["eagle3"]["runs"][0]["derived"]["hours_end"] == 0.2


def test_the_shipped_data_is_what_its_logs_and_bench_files_say():
    """docs/data/training_curves.json: its derived numbers are today's reading of the logs, and
    each tau that names a bench file is that file's overall tau (16 MT-bench prompts, greedy)."""
    with open(DATA) as f:
        data = json.load(f)
    fresh = derive(copy.deepcopy(data), ROOT)
    for name, fam in data["families"].items():
        for run, again in zip(fam["runs"], fresh["families"][name]["runs"]):
            assert run["derived"] == again["derived"], run["run"]
            for t in run["tau"]:
                if "file" not in t:
                    continue
                with open(os.path.join(ROOT, t["file"])) as f:
                    bench = json.load(f)
                tree = [int(x) for x in t["tree"].split(",")]
                (r,) = [r for r in bench["runs"] if r["tree"] == tree and r["temperature"] == 0.0]
                assert r["overall"]["prompts"] == 16 and r["max_new_tokens"] == 128
                assert r["overall"]["tau"] == pytest.approx(t["tau"], abs=0.005), (run["run"], t["tree"])
    heads = [r["head"] for r in data["families"]["eagle2"]["runs"]]
    assert heads == [None] + list(range(1, 11))
    assert [r["head"] for r in data["families"]["eagle3"]["runs"]] == [1, 2, 3, 3]  # the third, then its 2nd epoch
