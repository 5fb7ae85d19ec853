"""What a Space variant downloads: pip's dry-run resolve of its requirements against the public index.

    python scripts/space_resolve.py --variant gpu --out docs/data/space/resolve_gpu.md
    python scripts/space_resolve.py --variant zerogpu --python ~/.pyenv/versions/3.10.13/bin/python --out ...

pip runs with every local configuration switched off (PIP_CONFIG_FILE=/dev/null, no PIP_FIND_LINKS), as a
Space's build would see the index; `--find-links DIR` adds a local folder on purpose (e.g. a CPU wheel
standing in for an index this machine cannot reach). Nothing is installed. The package list comes from
pip's `--report`; the sizes from the "Downloading NAME (SIZE)" lines of its log (pip fetches the wheels
it cannot read metadata for separately), so a package taken from a local folder has no size.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from scripts.make_space import ROOT, VARIANTS  # noqa: E402

_DOWNLOAD = re.compile(r"Downloading (\S+?\.(?:whl|tar\.gz|zip)) \(([\d.]+) (kB|MB|GB)\)")
_UNIT = {"kB": 1e-3, "MB": 1.0, "GB": 1e3}
CUDA_PREFIXES = ("nvidia-", "cuda-", "triton")


def parse(report: dict, log: str) -> list[tuple[str, str, float | None]]:
    """(name, version, MB or None) of every package the report would install, largest first."""
    sizes = {m.group(1): float(m.group(2)) * _UNIT[m.group(3)] for m in _DOWNLOAD.finditer(log)}
    rows = []
    for item in report["install"]:
        name = os.path.basename(item["download_info"]["url"]).replace("%2B", "+")
        rows.append((item["metadata"]["name"], item["metadata"]["version"], sizes.get(name)))
    return sorted(rows, key=lambda r: (-(r[2] or 0), r[0].lower()))


def listing(variant: str, python: str, rows, note: str = "") -> str:
    known = [r for r in rows if r[2] is not None]
    cuda = [r for r in rows if r[0].lower().startswith(CUDA_PREFIXES)]
    lines = [f"# pip dry-run resolve: Space variant `{variant}` ({VARIANTS[variant].requirements}, Python {python})", ""]
    if note:
        lines += [note, ""]
    lines += [f"{len(rows)} packages; {sum(r[2] for r in known):.0f} MB in the {len(known)} whose size pip printed; "
              f"{len(cuda)} CUDA packages (nvidia-*, cuda-*, triton): {sum(r[2] or 0 for r in cuda):.0f} MB.", "",
              "| package | version | MB |", "|---|---|---|"]
    lines += [f"| {n} | {v} | {'-' if s is None else f'{s:.1f}'} |" for n, v, s in rows]
    return "\n".join(lines) + "\n"


def resolve(variant: str, python: str, find_links: str | None) -> tuple[dict, str]:
    env = {k: v for k, v in os.environ.items() if k != "PIP_FIND_LINKS"}
    env["PIP_CONFIG_FILE"] = os.devnull  # no local index, find-links or constraints
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        cmd = [python, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--retries", "0", "--timeout", "10",
               "--report", report, "-r", os.path.join(ROOT, VARIANTS[variant].requirements)]
        if find_links:
            cmd += ["--find-links", find_links]
        done = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"pip could not resolve {variant}:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
        with open(report) as f:
            return json.load(f), done.stdout + done.stderr


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variant", choices=sorted(VARIANTS), required=True)
    ap.add_argument("--python", default=sys.executable, help="the interpreter to resolve for (ZeroGPU: a 3.10)")
    ap.add_argument("--find-links", default=None, help="a local folder of wheels to add (said in the listing)")
    ap.add_argument("--out", default=None, help="write the listing here (default: print it)")
    a = ap.parse_args(argv)
    report, log = resolve(a.variant, a.python, a.find_links)
    version = report.get("environment", {}).get("python_full_version", "?")
    note = f"With `--find-links {a.find_links}` (a local folder) beside the public index." if a.find_links else ""
    text = listing(a.variant, version, parse(report, log), note)
    if a.out:
        os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
        with open(a.out, "w") as f:
            f.write(text)
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
