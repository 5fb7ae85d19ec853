"""The Space as scripts/make_space.py assembles it: only what the app needs, large files flagged,
and the assembled folder imports and builds the page on its own (no tests, docs or training data)."""
from __future__ import annotations

import os
import subprocess
import sys

from scripts.make_space import LARGE, assemble, main, space_files


def test_dry_run_lists_what_would_go(capsys):
    assert main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "assets/head-smollm2-135m/model.safetensors" in out and "app.py" in out
    assert "(large-file storage)" in out  # the EAGLE-3 head is over 10 MB
    files = dict(space_files())
    assert "README.md" in files and "requirements.txt" in files
    assert not [f for f in files if f.startswith(("tests/", "docs/", "scripts/", "train_data/", "assets/train_data/",
                                                  "eagle_core/train/"))]
    assert all(size <= LARGE or f.startswith("assets/") for f, size in files.items())


def test_upload_without_a_token_is_refused(capsys, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    assert main(["--repo", "someone/eagle"]) == 2
    assert "token" in capsys.readouterr().err


def test_the_assembled_space_builds_its_page(tmp_path):
    assemble(str(tmp_path))
    code = "import app, gradio as gr; assert isinstance(app.demo, gr.Blocks); print('page built')"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and "page built" in done.stdout, done.stderr[-2000:]
