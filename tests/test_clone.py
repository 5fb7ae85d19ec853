"""A copy of the repository with nothing beside it (issue 46): the documented benchmark and `train eval`
commands run there on the shipped prompts, and nothing they open or list lies outside the copy's
reach of the project's old ../shared notes. The copy holds exactly the files git tracks; the default
model comes from its installed package and the user cache, as on any machine."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Records every file opened and every directory listed, then runs the module as `python -m` would.
RUNNER = """
import json, os, runpy, sys
seen = []
def hook(event, args):
    if event in ("open", "os.listdir", "os.scandir") and args and isinstance(args[0], (str, bytes, os.PathLike)):
        seen.append(os.fsdecode(args[0]))
sys.addaudithook(hook)
module, out = sys.argv[1], sys.argv[2]
sys.argv = [module] + sys.argv[3:]
try:
    runpy.run_module(module, run_name="__main__", alter_sys=True)
finally:
    with open(out, "w") as f:
        json.dump([os.path.abspath(p) for p in seen], f)
"""


def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip("not a git checkout: nothing to copy by git ls-files")
    return [f for f in out.stdout.split("\0") if f and os.path.isfile(os.path.join(ROOT, f))]


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    """tmp/alone/repo: the tracked files only, and nothing beside the repository."""
    home = tmp_path_factory.mktemp("alone")
    repo = home / "repo"
    for f in tracked_files():
        dst = repo / f
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(os.path.join(ROOT, f), dst)
    assert sorted(os.listdir(home)) == ["repo"]
    return repo


def run_in(repo, module: str, *args: str) -> list[str]:
    """Run `python -m module args` in `repo`; -> every path it opened or listed (it must succeed)."""
    seen = repo.parent / f"seen-{module.replace('.', '-')}.json"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["EAGLE_TEST_THREADS"] = env.get("EAGLE_TEST_THREADS", "1")
    out = subprocess.run([sys.executable, "-c", RUNNER, module, str(seen), *args], cwd=repo, env=env,
                         capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-3000:]
    paths = json.loads(seen.read_text())
    seen.unlink()
    return paths


def shared_access(paths: list[str], repo) -> list[str]:
    """The paths under the copy's ../shared or the original checkout's ../shared."""
    homes = [os.path.realpath(os.path.join(d, os.pardir, "shared")) for d in (str(repo), ROOT)]
    return [p for p in paths if any(os.path.realpath(p) == h or os.path.realpath(p).startswith(h + os.sep) for h in homes)]


def test_the_benchmark_runs_from_a_clone_on_the_shipped_prompts(clone):
    paths = run_in(clone, "eagle_core.bench", "--limit", "2", "--max-new-tokens", "8", "--methods", "vanilla,eagle",
                   "--threads", "1", "--quiet", "--json-out", "bench.json")
    assert os.path.join(str(clone), "assets", "prompts", "mt_bench_question.jsonl") in paths
    assert not shared_access(paths, clone)
    result = json.loads((clone / "bench.json").read_text())
    assert set(result["methods"]) == {"vanilla", "eagle"} and len(result["samples"]) == 4  # 2 prompts x 2 methods


def test_train_eval_runs_from_a_clone_on_the_shipped_prompts(clone):
    paths = run_in(clone, "eagle_core.train", "eval", "--limit", "1", "--max-new-tokens", "8", "--tree", "2,2,3",
                   "--threads", "1", "--json-out", "eval.json")
    assert os.path.join(str(clone), "assets", "prompts", "mt_bench_question.jsonl") in paths
    assert not shared_access(paths, clone)
    assert (clone / "eval.json").exists()


def test_the_training_data_commands_ask_for_their_prompt_directories(clone):
    out = subprocess.run([sys.executable, "-m", "eagle_core.train", "ids-fixed", "--out", "x"], cwd=clone,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 2 and "--train-dir and --eval-dir" in out.stderr and "not shipped" in out.stderr
    assert "shared" not in out.stderr


def test_the_shipped_prompts_carry_their_sources_and_the_licence(clone):
    sources = (clone / "assets" / "prompts" / "SOURCES.md").read_text(encoding="utf-8")
    for name in os.listdir(clone / "assets" / "prompts"):
        if name.endswith(".jsonl"):
            assert f"`{name}`" in sources, name
    assert "https://github.com/lm-sys/FastChat" in sources and "Apache-2.0" in sources
    licence = (clone / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence and "END OF TERMS AND CONDITIONS" in licence
    with open(clone / "assets" / "prompts" / "mt_bench_question.jsonl", encoding="utf-8") as f:
        assert sum(1 for line in f if line.strip()) == 80


def test_no_product_file_or_doc_refers_to_shared():
    """Outside tests/ and the raw records under docs/data/, nothing cites or builds a path to ../shared
    (os.path.join(..., "shared", ...) included): public sources instead."""
    bad = []
    for f in tracked_files():
        if f.startswith(("tests/", "docs/data/")) or not f.endswith((".py", ".md", ".txt", ".json")):
            continue
        with open(os.path.join(ROOT, f), encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                if any(s in line for s in ("../shared", "shared/data", "shared/REFERENCE", '"shared"', "'shared'")):
                    bad.append(f"{f}:{n}")
    assert not bad, bad
