"""Every script in scripts/ answers --help with its usage and writes nothing. Run in a copy of the
repository's tracked files (git ls-files), so that a script that took "--help" for an output folder, or
wrote a record, shows up as a new or changed file there, and the working tree is never touched. The
scripts are found in the copy, so a new one is covered without naming it here. Each --help must load
neither torch nor a model (a script parses its arguments before its heavy imports): this stays fast."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def tracked_files() -> list[str]:
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [f for f in out.decode().split("\0") if f and os.path.isfile(os.path.join(ROOT, f))]


def tree_state(root: str) -> dict[str, tuple[int, int]]:
    """Every file under root -> (size, modification time in ns)."""
    state = {}
    for d, _, files in os.walk(root):
        for f in files:
            path = os.path.join(d, f)
            st = os.stat(path)
            state[os.path.relpath(path, root)] = (st.st_size, st.st_mtime_ns)
    return state


@pytest.fixture(scope="module")
def copy(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    for f in tracked_files():
        os.makedirs(os.path.join(root, os.path.dirname(f)), exist_ok=True)
        shutil.copy2(os.path.join(ROOT, f), os.path.join(root, f))
    return str(root)


def test_every_script_answers_help_and_writes_nothing(copy):
    scripts = sorted(f for f in os.listdir(os.path.join(copy, "scripts"))
                     if f.endswith(".py") and f != "__init__.py")
    assert len(scripts) >= 8, scripts
    before = tree_state(copy)
    # no bytecode caches in the copy (Python's, not the script's); no torch thread pool to start
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    failed = []
    for name in scripts:
        out = subprocess.run([sys.executable, os.path.join("scripts", name), "--help"], cwd=copy, env=env,
                             capture_output=True, text=True, timeout=120)
        if out.returncode != 0 or not out.stdout.lstrip().startswith("usage:"):
            failed.append(f"{name}: exit {out.returncode}, {(out.stdout + out.stderr).strip()[-300:]}")
    assert not failed, "\n".join(failed)
    after = tree_state(copy)
    assert after == before, {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
