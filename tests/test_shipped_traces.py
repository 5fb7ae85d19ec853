"""Every trace the app ships is a warm, quiet, checked run that tells what it is shipped for (issue 52, item 3).

For each file in assets/traces/ and assets/lesson/: the stamp (CPU model, date, command, not busy), a vanilla
step plausible for the CPU and for the machine's calibration, verification against the vanilla step, no cold
first cycle, a plausible prefill, and the verdict the page shows (viz/verdict.py) fitting the numbers; all of it
viz/traces.py's `shipped_problems`, which the recorder (scripts/record_traces.py) applies before it writes. The
examples are the page's own settings, each greedy one shows EAGLE ahead, and the page opens on one where EAGLE
wins by LIMITS["opening"]. Each check is tested on hand-made runs, and the recorder's command line without a
model. No model is loaded: a few seconds.

The shipped files are re-recorded on a quiet machine with `python scripts/record_traces.py` (docs/app.md,
"Re-recording the shipped traces").
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from eagle_core.machine import quiet
from eagle_core.trace import ACCEPTED, REJECTED, CycleRecord, DraftNode, Run, RunSummary
from viz.examples import EXAMPLE_METHOD, EXAMPLE_TREE, EXAMPLES, TRACE_DIR, example_settings, example_traces
from viz.traces import LIMITS, bundle_to_json, load_bundle, shipped_problems, speedup

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LESSON_DIR = os.path.join(ROOT, "assets", "lesson")
RECORDED = os.path.join(ROOT, "assets", "learn", "hardware_recorded.json")
SCRIPT = os.path.join(ROOT, "scripts", "record_traces.py")


def recorder():
    spec = importlib.util.spec_from_file_location("record_traces", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def shipped_files() -> list[str]:
    names = [os.path.join(TRACE_DIR, n) for n in sorted(os.listdir(TRACE_DIR)) if n.endswith(".json")]
    names += [os.path.join(LESSON_DIR, n) for n in sorted(os.listdir(LESSON_DIR))
              if n.endswith(".json") and n != "lesson.json"]
    return names


def rows_cost():
    return recorder().rows_cost(RECORDED)


# ------------------------------------------------------------------------------------- the shipped files
@pytest.mark.parametrize("path", shipped_files(), ids=lambda p: os.path.relpath(p, ROOT))
def test_every_shipped_trace_is_plausible(path):
    eagle, vanilla, recorded, _ = load_bundle(path)
    problems = shipped_problems(eagle, vanilla, recorded, rows_cost())
    assert not problems, f"{os.path.relpath(path, ROOT)}: " + "; ".join(problems) + \
        " (re-record on a quiet machine: python scripts/record_traces.py)"


def test_the_examples_are_the_pages_settings_and_greedy_ones_win():
    from eagle_core import PRESETS

    shipped = sorted(n for n in os.listdir(TRACE_DIR) if n.endswith(".json"))
    assert shipped == sorted(e.file for e in EXAMPLES), "run python scripts/record_traces.py --examples"
    assert EXAMPLE_METHOD == "eagle2" and EXAMPLE_TREE == "cpu"
    for e in EXAMPLES:
        eagle, vanilla, _, _ = load_bundle(os.path.join(TRACE_DIR, e.file))
        want = example_settings(e)
        got = eagle.summary.settings
        assert {k: got.get(k) for k in want} == want, e.file
        assert {k: got[k] for k in PRESETS["cpu"]} == PRESETS["cpu"]  # the tree the page opens with on a CPU
        if eagle.summary.settings.get("temperature", 0.0) == 0.0:
            assert speedup(eagle, vanilla) > 1.0, f"{e.file}: EAGLE {speedup(eagle, vanilla):.2f}x vanilla"


def test_the_page_opens_on_a_trace_where_eagle_wins():
    first = next(iter(example_traces().values()))  # what callbacks/page.on_page_load shows
    assert os.path.basename(first) == EXAMPLES[0].file
    eagle, vanilla, recorded, _ = load_bundle(first)
    assert eagle.summary.settings.get("temperature", 0.0) == 0.0
    assert speedup(eagle, vanilla) >= LIMITS["opening"], f"the page opens on {speedup(eagle, vanilla):.2f}x"
    assert recorded and recorded.get("cpu")


def test_each_lesson_trace_is_its_steps_settings():
    from eagle_app.lesson_plan import MANIFEST, STEPS, load_meta

    meta = load_meta(MANIFEST)
    assert meta.get("recorded", {}).get("cpu") and not meta["recorded"].get("busy"), \
        "assets/lesson/lesson.json has no quiet recording stamp: python scripts/record_traces.py --lesson"
    for step in STEPS:
        if not getattr(step, "file", None):
            continue
        eagle, _, _, _ = load_bundle(os.path.join(LESSON_DIR, step.file))
        got = eagle.summary.settings
        assert {k: got.get(k) for k in step.settings} == step.settings, step.key


# ------------------------------------------------------------------------------------- the checks, by hand
def node(i, parent, depth, decision):
    return DraftNode(i, 100 + i, f"t{i}", parent, depth, 0.5, -0.7 * depth, None if i == 0 else 0.5, decision)


def cycle(step, draft_ms, verify_ms, accepted=1, drafts=3):
    """A chain of `drafts` drafts of which the first `accepted` were accepted."""
    nodes = [node(0, -1, 0, ACCEPTED)] + [node(i, i - 1, i, ACCEPTED if i <= accepted else REJECTED)
                                          for i in range(1, drafts + 1)]
    committed = tuple(range(accepted + 1))
    return CycleRecord(step, 20 + step, tuple(nodes), tuple(range(accepted + 1)), 7, "b", committed, "x" * len(committed),
                       draft_ms, verify_ms, "greedy")


def run(method, cycles, prefill_ms=40.0, tokens=None, settings=None, ids=None):
    n = tokens if tokens is not None else sum(len(c.committed_ids) for c in cycles)
    draft_s, verify_s = sum(c.draft_ms for c in cycles) / 1e3, sum(c.verify_ms for c in cycles) / 1e3
    wall = prefill_ms / 1e3 + draft_s + verify_s
    s = RunSummary(method, "p", "x", tuple(ids or range(n)), 20, n, len(cycles) + 1, len(cycles),
                   n / len(cycles), wall, n / wall, prefill_ms, draft_s, verify_s, "max_new_tokens",
                   settings or dict(depth=3, tree_top_k=1, total_tokens=3, temperature=0.0), "m", "h", "cpu")
    return Run(s, tuple(cycles))


def vanilla_run(n=30, step_ms=15.0, first_ms=None, prefill_ms=40.0):
    cs = [CycleRecord(i, 20 + i, (node(0, -1, 0, ACCEPTED),), (0,), 7, "b", (i,), "x", 0.01,
                      first_ms if (i == 0 and first_ms) else step_ms, "greedy") for i in range(n)]
    return run("vanilla", cs, prefill_ms, ids=range(n))


def eagle_run(n_cycles=10, draft_ms=3.0, verify_ms=18.0, accepted=2, first=None, prefill_ms=40.0):
    cs = [cycle(i, *(first if (i == 0 and first) else (draft_ms, verify_ms)), accepted=accepted)
          for i in range(n_cycles)]
    return run("eagle2", cs, prefill_ms)


STAMP = {"cpu": "AMD EPYC (family 25, model 17)", "date": "2026-12-07", "command": "python scripts/record_traces.py",
         "calibration_t1_ms": 14.0, "busy": False}


def test_a_good_pair_passes():
    """30 tokens: 10 cycles of 3 at 21 ms against 30 steps of 15 ms."""
    e, v = eagle_run(), vanilla_run()
    assert shipped_problems(e, v, STAMP) == []
    assert speedup(e, v) > 1.5


@pytest.mark.parametrize("missing", ["cpu", "date", "command"])
def test_a_stamp_without_cpu_date_or_command_fails(missing):
    stamp = {k: v for k, v in STAMP.items() if k != missing}
    assert any(f"no {missing}" in p for p in shipped_problems(eagle_run(), vanilla_run(), stamp))
    assert shipped_problems(eagle_run(), vanilla_run(), None)
    assert any("YYYY-MM-DD" in p for p in shipped_problems(eagle_run(), vanilla_run(), {**STAMP, "date": "7 Dec"}))


def test_a_trace_stamped_busy_fails():
    busy = {**STAMP, "busy": True, "busy_why": "load 1.01 per core"}
    problems = shipped_problems(eagle_run(), vanilla_run(), busy)
    assert any("busy" in p for p in problems)
    assert shipped_problems(eagle_run(), vanilla_run(), busy, allow_busy=True) == []


def test_a_vanilla_step_implausible_for_the_cpu_fails():
    """Issue 52: the lesson's vanilla steps took 260-870 ms."""
    e, v = eagle_run(verify_ms=300.0), vanilla_run(step_ms=260.0)
    assert any("implausible for the CPU" in p for p in shipped_problems(e, v, {**STAMP, "calibration_t1_ms": 250.0}))


def test_a_vanilla_step_far_over_the_calibration_fails():
    """Busy during the run though quiet at the calibration just before it."""
    problems = shipped_problems(eagle_run(verify_ms=45.0), vanilla_run(step_ms=40.0), STAMP)
    assert any("calibrated" in p for p in problems)


def test_a_verification_over_two_vanilla_steps_fails():
    """Issue 52: the 12-draft tree cost 2.2 vanilla steps a cycle."""
    e = eagle_run(verify_ms=36.0, accepted=3)
    assert any("vanilla steps" in p for p in shipped_problems(e, vanilla_run(), STAMP))
    # a big tree may cost what the hardware record says its rows cost
    assert not any("vanilla steps" in p for p in shipped_problems(e, vanilla_run(), STAMP, lambda rows: 2.0))


def test_a_cold_first_cycle_fails():
    """Issue 52: a first draft of 89 ms against 3.5 ms for the others."""
    e = eagle_run(first=(89.0, 18.0))
    assert any("first cycle is cold: draft" in p for p in shipped_problems(e, vanilla_run(), STAMP))
    v = vanilla_run(first_ms=80.0)
    assert any("vanilla's first cycle is cold: verify" in p for p in shipped_problems(eagle_run(), v, STAMP))
    assert shipped_problems(eagle_run(first=(6.0, 21.0)), vanilla_run(), STAMP) == []  # a little dearer is warm


def test_a_slow_prefill_fails():
    e = eagle_run(prefill_ms=900.0)
    assert any("prefill" in p for p in shipped_problems(e, vanilla_run(), STAMP))


def test_greedy_outputs_that_differ_fail():
    e, v = eagle_run(), vanilla_run()
    other = run("vanilla", list(v.cycles), ids=[5] * 30)
    assert any("differ" in p for p in shipped_problems(e, other, STAMP))


def test_a_verdict_that_does_not_fit_the_numbers_fails():
    """Issue 52: 8.18x in one step, the vanilla run timed while the machine was busier."""
    e, v = eagle_run(), vanilla_run()
    slow_wall = run("vanilla", list(v.cycles), prefill_ms=2000.0)  # the same steps, a wall time 3x longer
    problems = shipped_problems(e, slow_wall, {**STAMP, "calibration_t1_ms": 14.0}, limits={**LIMITS, "prefill_ms": 1e4})
    assert any("does not fit the verdict" in p for p in problems), problems


def test_the_page_verdict_agrees_on_a_loss():
    """A run EAGLE lost: the page's verdict says so, and the check finds nothing wrong with saying it."""
    from viz.verdict import verdict_html

    e, v = eagle_run(verify_ms=28.0, draft_ms=6.0, accepted=0), vanilla_run()
    assert speedup(e, v) < 1.0 and "eg-lost" in verdict_html(e, v)
    assert not any("verdict says" in p for p in shipped_problems(e, v, STAMP))


def test_the_stamp_survives_the_file(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(bundle_to_json(eagle_run(), vanilla_run(), "t", recorded=STAMP), encoding="utf-8")
    e, v, rec, title = load_bundle(str(path))
    assert rec == STAMP and title == "t" and shipped_problems(e, v, rec) == []
    from viz.examples import load_trace_file

    assert load_trace_file(str(path))[0].summary.tau == e.summary.tau  # the page loads it as before


# ------------------------------------------------------------------------------------- the recorder
def test_help_prints_the_usage_and_writes_nothing(tmp_path):
    before = sorted(os.listdir(tmp_path))
    out = subprocess.run([sys.executable, SCRIPT, "--help"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "usage: python scripts/record_traces.py" in out.stdout
    assert "--allow-busy" in out.stdout and "refuses" in out.stdout
    assert sorted(os.listdir(tmp_path)) == before


def test_an_unknown_argument_is_an_error_not_an_output_folder(tmp_path):
    out = subprocess.run([sys.executable, SCRIPT, str(tmp_path / "folder")], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 2 and "unrecognized arguments" in out.stderr
    assert not (tmp_path / "folder").exists()


def test_the_recorded_command_names_no_private_folder():
    r = recorder()
    assert r.command_line(["--records", "--mgsm", "/data/eval", "--out=/tmp/x"]) == \
        "python scripts/record_traces.py --records --mgsm DIR --out=DIR"
    assert r.command_line([]) == "python scripts/record_traces.py"


def test_no_flag_means_everything():
    a = recorder().parse_args([])
    assert a.examples and a.lesson and a.records and not a.allow_busy
    a = recorder().parse_args(["--lesson"])
    assert a.lesson and not a.examples and not a.records


def test_a_busy_machine_is_refused():
    r = recorder()
    assert r.busy_reasons(0.1, 0.05, 14.5, 14.0) == []
    assert "load 1.01" in r.busy_reasons(1.01, 0.05, 14.5, 14.0)[0]
    assert "other processes" in r.busy_reasons(0.1, 0.6, 14.5, 14.0)[0]
    assert "calibrates at 30.0 ms" in r.busy_reasons(0.1, 0.05, 30.0, 14.0)[0]
    assert r.busy_reasons(1.01, None, 14.5, 14.0, check_load=False) == []  # the load only at start (it counts us)


def test_the_reference_t1_is_this_cpus_own_record_or_a_bound(tmp_path):
    import torch

    class Target:
        model = torch.nn.Linear(1000, 1000)  # 4 MB of float32 weights

    r = recorder()
    rec = tmp_path / "hw.json"
    rec.write_text(json.dumps({"hardware": "CPU A", "date": "2026-12-07", "forward_ms": {"1": 14.1},
                               "machine": {"loadavg_1m": 0.2, "cpu_count": 2}}))
    assert r.reference_t1(Target, "CPU A", str(rec))[0] == 14.1
    bound, why = r.reference_t1(Target, "CPU B", str(rec))  # another CPU: the weights' read time
    assert bound == pytest.approx(1e3 * 4.004e6 / quiet.T1_BYTES_PER_S, rel=1e-3) and "GB/s" in why
    rec.write_text(json.dumps({"hardware": "CPU A", "forward_ms": {"1": 19.3}, "machine": {"loadavg_1m": 2.02,
                                                                                          "cpu_count": 2}}))
    assert r.reference_t1(Target, "CPU A", str(rec))[0] != 19.3  # a record taken busy is no reference


def test_others_cpu_reads_a_share():
    share = recorder().others_cpu(0.2)
    assert share is None or 0.0 <= share <= 1.0


def test_the_language_record_on_a_tiny_model(tmp_path, monkeypatch):
    """--records' tau by language: MT-bench English and Chinese at the page's tree, stamped; MGSM rows that cannot
    be re-recorded (no --mgsm) kept after them; the README's row made from it."""
    from eagle_core import PRESETS, Engine
    from eagle_core.train import evaluate
    from tests.conftest import tiny_head, tiny_target

    r = recorder()
    target = tiny_target()
    engine = Engine(target, tiny_head(target), None, "tiny head")
    monkeypatch.setattr(r, "LANGUAGE_NEW_TOKENS", 4)
    monkeypatch.setattr(evaluate, "load_eval_prompts", lambda path, per_category=None: [("writing", "say a"),
                                                                                      ("math", "say b")])
    path = tmp_path / "per_language.json"
    old_mgsm = {"prompts": "mgsm_en.jsonl", "tree": [2, 2, 4], "temperature": 0.0, "overall": {"tau": 2.0}}
    path.write_text(json.dumps([{"head": "old", "method": "eagle2", "runs": [old_mgsm]}]))
    r.record_languages(engine, str(path), STAMP, None)
    results = json.loads(path.read_text())
    assert [res["method"] for res in results] == ["eagle2"] and results[0]["recorded"] == STAMP
    runs = results[0]["runs"]
    assert [x["prompts"] for x in runs] == ["mt_bench_question.jsonl", "mt_bench_zh_question.jsonl", "mgsm_en.jsonl"]
    assert runs[0]["tree"] == [PRESETS["cpu"][k] for k in ("depth", "tree_top_k", "total_tokens")]
    assert runs[0]["overall"]["prompts"] == 2 and runs[0]["overall"]["tau"] >= 1.0 and "kept" in runs[2]["recorded"]
    row = r.languages_row(str(path))
    assert row.startswith(f"| {STAMP['cpu']}, {STAMP['date']} | {r.README_LANGUAGES}") and "EAGLE-2" in row


@pytest.fixture()
def tiny_engine():
    from eagle_core import Engine
    from tests.conftest import tiny_head, tiny_target

    target = tiny_target()
    return Engine(target, tiny_head(target), None, "tiny head")


def stub_machine(tmp_path, allow_busy=True):
    """The recorder's Machine without the measuring: each check returns a stamp (busy, as --allow-busy makes it)."""
    from types import SimpleNamespace

    return SimpleNamespace(check=lambda what, first=False: {**STAMP, "busy": allow_busy}, recorded_path=str(tmp_path / "no.json"),
                           args=SimpleNamespace(allow_busy=allow_busy), command="python scripts/record_traces.py")


def test_the_examples_recorded_on_a_tiny_model(tmp_path, monkeypatch, tiny_engine):
    """The page's settings, stamped, titled with the head; an example no longer listed is removed."""
    import viz.examples as ex

    r = recorder()
    monkeypatch.setattr(ex, "EXAMPLE_NEW", 6)
    monkeypatch.setattr(ex, "example_prompts", lambda: [[e.label, f"say {e.label}"] for e in EXAMPLES])
    (tmp_path / "03-chinese-eagle1.json").write_text("{}")
    written = r.record_examples(tiny_engine, stub_machine(tmp_path), str(tmp_path))
    assert sorted(os.path.basename(p) for p in written) == sorted(os.listdir(tmp_path)) == sorted(e.file for e in EXAMPLES)
    for e in EXAMPLES:
        eagle, vanilla, rec, title = load_bundle(str(tmp_path / e.file))
        assert rec["cpu"] == STAMP["cpu"] and rec["busy"] and title == f"{e.title} · head: tiny head"
        assert {k: eagle.summary.settings[k] for k in example_settings(e)} == example_settings(e) and vanilla is not None


def test_the_lesson_recorded_on_a_tiny_model(tmp_path, monkeypatch, tiny_engine):
    """Only the steps with a file; each step's settings; its rule's cycle in the manifest; stale files removed."""
    from types import SimpleNamespace

    import eagle_app.lesson_plan as plan

    settings = dict(method="eagle2", depth=2, tree_top_k=2, total_tokens=3, max_new_tokens=6)
    steps = (SimpleNamespace(key="cost", file=None, prompt="say a", settings=settings, rule=None, rule_text="", vanilla=True),
             SimpleNamespace(key="tree", file="2-tree.json", prompt="say b", settings=settings,
                             rule=lambda cycles: 1, rule_text="the second cycle", vanilla=True))
    monkeypatch.setattr(plan, "STEPS", steps)
    monkeypatch.setattr(plan, "chinese_tokens", lambda tok: {"size": 24, "whole_chinese": 0})
    (tmp_path / "1-tree.json").write_text("{}")
    manifest = recorder().record_lesson(tiny_engine, stub_machine(tmp_path), str(tmp_path))
    assert sorted(os.listdir(tmp_path)) == ["2-tree.json", "lesson.json"]
    assert [(m["step"], m["key"], m["cycle"]) for m in manifest] == [(2, "tree", 2)]
    meta = json.loads((tmp_path / "lesson.json").read_text(encoding="utf-8"))
    assert meta["recorded"]["cpu"] == STAMP["cpu"] and meta["steps"][0]["rule"] == "the second cycle"
    eagle, _, rec, _ = load_bundle(str(tmp_path / "2-tree.json"))
    assert {k: eagle.summary.settings[k] for k in settings} == settings and rec["date"] == STAMP["date"]


def test_an_unfit_trace_is_refused_after_its_tries(tmp_path, monkeypatch, tiny_engine):
    """A quiet machine's runs that do not show what they are for: three tries, then a message, nothing written."""
    r = recorder()
    from eagle_core import DecodeSettings

    machine = stub_machine(tmp_path, allow_busy=False)
    calls = []
    monkeypatch.setattr(r, "decode_runs", lambda *a, **k: calls.append(1) or {"eagle": None, "vanilla": None})
    with pytest.raises(SystemExit, match="3 tries were unfit"):
        r.timed(tiny_engine, machine, "x.json", "say a", DecodeSettings(max_new_tokens=4), True,
                lambda runs: ["EAGLE 0.90x vanilla"])
    assert len(calls) == r.TRIES


def test_the_whole_command_on_a_tiny_model(tmp_path, monkeypatch, tiny_engine):
    """main's glue: the start's checks, a calibration before each file, both sets under --out, the stamp's command
    and calibration; --allow-busy marks the files busy (a tiny model's t(1) is no CPU's own)."""
    from types import SimpleNamespace

    import eagle_app.lesson_plan as plan
    import viz.examples as ex

    r = recorder()
    monkeypatch.setattr(r, "start_engine", lambda: tiny_engine)
    monkeypatch.setattr(r, "others_cpu", lambda seconds=1.0: 0.0)
    monkeypatch.setattr(r, "CALIBRATION_REPEATS", 2)
    monkeypatch.setattr(ex, "EXAMPLE_NEW", 5)
    monkeypatch.setattr(ex, "example_prompts", lambda: [[e.label, f"say {e.label}"] for e in EXAMPLES])
    settings = dict(method="eagle2", depth=2, tree_top_k=2, total_tokens=3, max_new_tokens=5)
    monkeypatch.setattr(plan, "STEPS", (SimpleNamespace(key="tree", file="3-tree.json", prompt="say b", settings=settings,
                                                        rule=lambda cycles: 0, rule_text="first", vanilla=True),))
    monkeypatch.setattr(plan, "chinese_tokens", lambda tok: {"size": 24, "whole_chinese": 0})
    r.main(["--examples", "--lesson", "--out", str(tmp_path), "--allow-busy"])
    assert sorted(os.listdir(tmp_path / "traces")) == sorted(e.file for e in EXAMPLES)
    assert sorted(os.listdir(tmp_path / "lesson")) == ["3-tree.json", "lesson.json"]
    _, _, rec, _ = load_bundle(str(tmp_path / "traces" / EXAMPLES[0].file))
    assert rec["command"] == "python scripts/record_traces.py --examples --lesson --out DIR --allow-busy"
    assert rec["calibration_t1_ms"] > 0 and rec["others_cpu"] == 0.0 and rec["busy"] and rec["warm"]
    assert not os.path.exists(tmp_path / "learn")  # no --records
