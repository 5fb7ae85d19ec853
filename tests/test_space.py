"""The Space as scripts/make_space.py assembles it: only what the app needs, large files flagged,
and the assembled folder imports and builds the page on its own (no tests, docs or training data);
a variant per hardware with its own requirements and card; the card's images and LICENSE go too."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from scripts.make_space import LARGE, ROOT, VARIANTS, assemble, card_images, main, space_files, space_readme


def test_dry_run_lists_what_would_go(capsys):
    assert main(["--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "assets/head-smollm2-135m/model.safetensors" in out and "app.py" in out
    assert "(large-file storage)" in out  # the EAGLE-3 head is over 10 MB
    files = dict(space_files())
    assert "README.md" in files and "requirements.txt" in files
    shown = set(card_images(open(os.path.join(ROOT, "README.md"), encoding="utf-8").read()))
    assert not [f for f in files if f.startswith(("tests/", "docs/", "scripts/", "space/", "train_data/",
                                                  "assets/train_data/", "eagle_core/train/")) and f not in shown]
    assert all(size <= LARGE or f.startswith("assets/") for f, size in files.items())


def test_the_space_leaves_the_benchmark_package_behind():
    """Issue 44: the app's hardware measurement is eagle_core/machine/; eagle_core/bench/ (the benchmark
    command lines) does not go (tests/test_layout.py checks the app never imports it)."""
    files = dict(space_files())
    assert not [f for f in files if f.startswith("eagle_core/bench/")]
    assert {"eagle_core/machine/__init__.py", "eagle_core/machine/hardware.py", "eagle_core/machine/timing.py",
            "assets/learn/hardware_recorded.json", "assets/learn/tau_by_tree.json"} <= set(files)


def test_upload_without_a_token_is_refused(capsys, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    assert main(["--repo", "someone/eagle"]) == 2
    assert "token" in capsys.readouterr().err


def test_the_assembled_space_builds_its_page(tmp_path):
    assemble(str(tmp_path))
    assert not (tmp_path / "eagle_core" / "bench").exists() and (tmp_path / "eagle_core" / "machine").is_dir()
    code = ("import app, gradio as gr, importlib.util; assert isinstance(app.demo, gr.Blocks); "
            "assert importlib.util.find_spec('eagle_core.bench') is None; "
            "from eagle_core.machine import quoted; assert quoted()['machine']; print('page built')")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and "page built" in done.stdout, done.stderr[-2000:]


def _pins(path: str) -> dict[str, str]:
    """name -> version of each `name==version` line of a requirements file."""
    out = {}
    for line in open(os.path.join(ROOT, path), encoding="utf-8"):
        m = re.match(r"\s*([A-Za-z0-9_.-]+)==(\S+)", line)
        if m:
            out[m.group(1).lower()] = m.group(2)
    return out


def test_each_variant_has_its_requirements_with_the_engine_pinned():
    base = set(_pins("requirements.txt"))
    for name, v in VARIANTS.items():
        pins = _pins(v.requirements)
        assert set(pins) == base, (name, set(pins) ^ base)  # the same packages, each pinned


def test_the_cpu_variant_asks_for_the_cpu_wheels():
    text = open(os.path.join(ROOT, VARIANTS["cpu-basic"].requirements), encoding="utf-8").read()
    assert re.search(r"^--extra-index-url https://download\.pytorch\.org/whl/cpu\s*$", text, re.M)
    assert _pins(VARIANTS["cpu-basic"].requirements)["torch"].endswith("+cpu")  # never PyPI's CUDA build


def test_the_gpu_variant_takes_a_cuda_12_build_from_pypi():
    # torch 2.11 and later are CUDA 13 builds on PyPI (driver R580+); 2.10 is the last CUDA 12 one
    major, minor = map(int, _pins(VARIANTS["gpu"].requirements)["torch"].split(".")[:2])
    assert (major, minor) <= (2, 10)
    assert VARIANTS["gpu"].hardware not in ("cpu-basic", "cpu-upgrade", "zero-a10g")


def test_the_zerogpu_variant_fits_zerogpu():
    v = VARIANTS["zerogpu"]
    assert v.python.startswith("3.10") and v.hardware == "zero-a10g"
    pins = _pins(v.requirements)
    # the versions listed in hub-docs spaces-zerogpu.md, "Supported Versions"
    assert pins["torch"] in {"2.1.0", "2.1.1", "2.1.2", "2.2.0", "2.2.2", "2.4.0", "2.5.1", "2.6.0", "2.7.1", "2.8.0"}
    assert int(pins["gradio"].split(".")[0]) >= 4
    text = open(os.path.join(ROOT, v.requirements), encoding="utf-8").read()
    for name in pins:  # each pin says where it comes from, in a comment above it or on its line
        assert re.search(rf"#[^\n]*\b{re.escape(name)}\b", text, re.I), name


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_variant_assembles_its_requirements_and_card(tmp_path, variant):
    v = VARIANTS[variant]
    assemble(str(tmp_path), variant=variant)
    assert open(tmp_path / "requirements.txt").read() == open(os.path.join(ROOT, v.requirements)).read()
    card = open(tmp_path / "README.md", encoding="utf-8").read()
    front = card.split("\n---\n", 1)[0]
    assert re.search(rf'^python_version: "{re.escape(v.python)}"$', front, re.M)
    assert re.search(rf"^suggested_hardware: {re.escape(v.hardware)}$", front, re.M)
    assert front.count("python_version:") == 1 and front.count("suggested_hardware:") == 1
    assert card.split("\n---\n", 1)[1] == open(os.path.join(ROOT, "README.md"), encoding="utf-8").read().split(
        "\n---\n", 1)[1]  # the body unchanged
    for img in card_images(card):  # every image the card shows is in the Space
        assert (tmp_path / img).is_file(), img


def test_the_card_shows_the_screenshot_and_the_space_gets_it():
    files = dict(space_files())
    assert "docs/screenshots/app-generate.png" in card_images(open(os.path.join(ROOT, "README.md")).read())
    assert "docs/screenshots/app-generate.png" in files


def test_card_images_finds_relative_images_only():
    text = ('![a](docs/a.png) ![b](./img/b.png "title") <img alt="c" src="c.gif"> ![u](https://x.org/u.png) '
            "![p](../outside.png) ![r](/root.png) [link](docs/app.md)")
    assert card_images(text) == ["c.gif", "docs/a.png", "img/b.png"]


def test_a_front_matter_key_missing_is_added():
    v = VARIANTS["zerogpu"]
    out = space_readme("---\ntitle: t\nsdk: gradio\n---\n# body\n", v)
    assert out == f'---\ntitle: t\nsdk: gradio\npython_version: "{v.python}"\nsuggested_hardware: {v.hardware}\n---\n# body\n'
    with pytest.raises(ValueError):
        space_readme("# no front matter\n", v)


def test_license_and_card_images_go_when_present(tmp_path):
    (tmp_path / "docs" / "shots").mkdir(parents=True)
    (tmp_path / "docs" / "shots" / "s.png").write_bytes(b"png")
    (tmp_path / "docs" / "other.png").write_bytes(b"not shown")
    (tmp_path / "space").mkdir()
    (tmp_path / "space" / "requirements-cpu-basic.txt").write_text("torch==2.13.0+cpu\n")
    (tmp_path / "requirements.txt").write_text("torch==2.13.0\n")
    (tmp_path / "README.md").write_text("---\ntitle: t\n---\n![s](docs/shots/s.png)\n")
    (tmp_path / "app.py").write_text("")
    names = [f for f, _ in space_files(str(tmp_path))]
    assert "LICENSE" not in names
    (tmp_path / "LICENSE").write_text("Apache License\n")
    names = [f for f, _ in space_files(str(tmp_path))]
    assert {"LICENSE", "docs/shots/s.png", "README.md", "requirements.txt", "app.py"} <= set(names)
    assert "docs/other.png" not in names
    out = tmp_path / "out"
    assemble(str(out), root=str(tmp_path))
    assert (out / "LICENSE").read_text() == "Apache License\n"
    assert (out / "requirements.txt").read_text() == "torch==2.13.0+cpu\n"
    assert (out / "docs" / "shots" / "s.png").read_bytes() == b"png"


def test_license_goes_when_the_repository_has_one():
    if not os.path.isfile(os.path.join(ROOT, "LICENSE")):
        pytest.skip("no LICENSE at the repository root yet")
    assert "LICENSE" in dict(space_files())


def test_a_dry_run_listing_gives_each_package_its_size():
    from scripts.space_resolve import listing, parse
    report = {"install": [
        {"metadata": {"name": "torch", "version": "2.10.0"},
         "download_info": {"url": "https://files.example/torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl"}},
        {"metadata": {"name": "nvidia-cublas-cu12", "version": "12.8.4.1"},
         "download_info": {"url": "https://files.example/nvidia_cublas_cu12-12.8.4.1-py3-none-manylinux_2_27_x86_64.whl"}},
        {"metadata": {"name": "mdurl", "version": "0.1.2"},
         "download_info": {"url": "file:///wheels/mdurl-0.1.2-py3-none-any.whl"}},
    ]}
    log = ("Collecting torch==2.10.0\n  Downloading torch-2.10.0-cp311-cp311-manylinux_2_28_x86_64.whl (915.5 MB)\n"
           "  Downloading nvidia_cublas_cu12-12.8.4.1-py3-none-manylinux_2_27_x86_64.whl (594.3 MB)\n")
    rows = parse(report, log)
    assert rows == [("torch", "2.10.0", 915.5), ("nvidia-cublas-cu12", "12.8.4.1", 594.3), ("mdurl", "0.1.2", None)]
    text = listing("gpu", "3.11.7", rows)
    assert "3 packages; 1510 MB in the 2 whose size pip printed; 1 CUDA packages" in text
    assert "| mdurl | 0.1.2 | - |" in text
