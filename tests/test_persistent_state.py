"""Where state that outlives a process goes: the engine's cache (a Space's persistent /data when it
has one) and training runs' checkpoints (outside the repository by default, and git-ignored where
the docs put them), so restarts keep the first start's work and the repository does not grow."""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from eagle_core import environment
from eagle_core.train.__main__ import build_parser

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    monkeypatch.delenv("EAGLE_EXPLAINER_CACHE", raising=False)
    monkeypatch.delenv("SPACE_ID", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    return tmp_path


def test_the_cache_defaults_to_the_home_directory(clean_env):
    assert environment.cache_root() == os.path.join(str(clean_env / "home"), ".cache", "eagle-explainer")


def test_on_a_space_with_persistent_storage_the_cache_goes_there(clean_env, monkeypatch):
    data = clean_env / "data"
    data.mkdir()
    monkeypatch.setattr(environment, "PERSISTENT", str(data))
    assert environment.cache_root().startswith(str(clean_env / "home"))  # not a Space: /data is not ours
    monkeypatch.setenv("SPACE_ID", "someone/eagle")
    assert environment.cache_root() == os.path.join(str(data), "eagle-explainer")
    monkeypatch.setenv("EAGLE_EXPLAINER_CACHE", str(clean_env / "mine"))
    assert environment.cache_root() == str(clean_env / "mine")  # an explicit setting wins


def test_a_space_without_persistent_storage_keeps_the_home_cache(clean_env, monkeypatch):
    monkeypatch.setenv("SPACE_ID", "someone/eagle")
    monkeypatch.setattr(environment, "PERSISTENT", str(clean_env / "absent"))
    assert environment.cache_root().startswith(str(clean_env / "home"))
    (clean_env / "afile").write_text("")
    monkeypatch.setattr(environment, "PERSISTENT", str(clean_env / "afile"))  # not a directory
    assert environment.cache_root().startswith(str(clean_env / "home"))


def test_the_kernels_and_weights_follow_the_cache(clean_env, monkeypatch):
    from eagle_core.cpu.kernels import build
    data = clean_env / "data"
    data.mkdir()
    monkeypatch.setattr(environment, "PERSISTENT", str(data))
    monkeypatch.setenv("SPACE_ID", "someone/eagle")
    assert build.cache_dir() == os.path.join(str(data), "eagle-explainer", "kernels")


def _defaults(argv):
    return build_parser().parse_args(argv)


def test_training_checkpoints_default_outside_the_repository(clean_env):
    runs = [_defaults(["train"]).out, _defaults(["train3"]).out, _defaults(["export"]).run, _defaults(["plot"]).run]
    for run in runs:
        run = os.path.realpath(run)
        assert os.path.commonpath([run, REPO]) != REPO, run  # not inside the repository tree
        assert os.path.commonpath([run, environment.cache_root()]) == environment.cache_root()
    assert _defaults(["export"]).run == _defaults(["train"]).out  # export finds what train wrote


@pytest.mark.skipif(shutil.which("git") is None or not os.path.exists(os.path.join(REPO, ".git")),
                    reason="not a git checkout")
def test_checkpoints_where_the_docs_put_them_are_ignored():
    names = ["runs/e3d/ckpt3.pt", "runs/head/head/model.safetensors", "train_data/eagle3d_head3/ckpt3.pt",
             "train_data/x/ckpt.pt.tmp", "data/feats/manifest.json"]
    done = subprocess.run(["git", "check-ignore", "--no-index", *names], cwd=REPO, capture_output=True, text=True)
    assert sorted(done.stdout.split()) == sorted(names)
    kept = subprocess.run(["git", "check-ignore", "--no-index", "assets/head-smollm2-135m/model.safetensors"],
                          cwd=REPO, capture_output=True, text=True)
    assert kept.stdout == ""  # a shipped head is committed
