"""The documentation's references still resolve after files move (issue 29).

Checked in README.md and docs/*.md: every backticked repository path (`docs/...`, `eagle_core/...`,
`assets/...`, ...), every path a code block passes to a command, every local markdown link and
image, and every section a page cites by name (`docs/training.md`, "What limits tau"). Paths to
what commands create (data/, runs/, serve/, out/) and to things outside the repository
(../shared/..., ~/...) are not checked. The training data is moving from assets/train_data/ to
train_data/ on another branch, so either location counts for a path under either.
Also the size limits: README at most 150 lines, docs/ at most 8 top-level entries.
No model, no network: a few hundred milliseconds.
"""
import glob
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
README_MAX_LINES = 150
DOCS_MAX_ENTRIES = 8  # seven now; room for docs/gpu.md
# First path components that name what commands create, not repository files.
GENERATED = {"data", "runs", "serve", "out", "logs"}
TRAIN_DATA_HOMES = ("train_data", os.path.join("assets", "train_data"))


def doc_files(root: str = ROOT) -> list[str]:
    return [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))


def _expand_braces(path: str) -> list[str]:
    """`eval_head{3..11}_mt16.json` -> one path per number; `{a,b}` -> one per item."""
    m = re.search(r"\{([^{}]*)\}", path)
    if not m:
        return [path]
    body = m.group(1)
    rng = re.fullmatch(r"(\d+)\.\.(\d+)", body)
    items = [str(i) for i in range(int(rng.group(1)), int(rng.group(2)) + 1)] if rng else body.split(",")
    return [q for item in items for q in _expand_braces(path[: m.start()] + item + path[m.end():])]


def _exists(root: str, rel: str) -> bool:
    """rel (relative to root, may hold * or {..}) names existing files or folders."""
    candidates = [rel]
    for home in TRAIN_DATA_HOMES:
        if rel == home or rel.startswith(home + "/"):
            candidates = [other + rel[len(home):] for other in TRAIN_DATA_HOMES]
    def one(path: str) -> bool:
        full = os.path.join(root, path)
        return bool(glob.glob(full)) if any(c in path for c in "*?[") else os.path.exists(full)

    # a glob needs one match; `{3..11}` needs every one of its paths
    return any(all(one(p) for p in _expand_braces(cand)) for cand in candidates)


def _repo_path(token: str, top_level: set[str]) -> str | None:
    """The repository path a backticked span or command argument names, or None if it names none."""
    token = token.strip().strip("'\"").rstrip(".,;:)")
    token = token.split("::")[0]  # `kernels/attention.py::grouped_step`
    if "/" not in token or re.search(r"\s|[<>=()|$]|^-|://", token):
        return None
    if token.startswith(("/", "~", "..", "./")):
        return None  # absolute, home, outside the repository (../shared), or relative
    first = token.split("/")[0]
    if first in GENERATED:
        return None
    if first not in top_level and first != "train_data":
        return None  # not a repository path (`tok/s`, `p/q`, `train/features.py` inside eagle_core/)
    return token.rstrip("/")


def broken_references(md_path: str, root: str = ROOT) -> list[str]:
    """Every reference in one markdown file that does not resolve, as 'file:line: reference'."""
    top_level = {e for e in os.listdir(root) if not e.startswith(".")} | {".ci"}
    text = open(md_path, encoding="utf-8").read()
    rel_md = os.path.relpath(md_path, root)
    bad = []

    def report(pos: int, what: str) -> None:
        bad.append(f"{rel_md}:{text.count(chr(10), 0, pos) + 1}: {what}")

    fences = [m.span() for m in re.finditer(r"^```.*?^```", text, flags=re.S | re.M)]
    in_fence = lambda pos: any(a <= pos < b for a, b in fences)  # noqa: E731
    # 1. backticked paths in the prose
    for m in re.finditer(r"`([^`\n]+)`", text):
        if in_fence(m.start()):
            continue
        rel = _repo_path(m.group(1), top_level)
        if rel and not _exists(root, rel):
            report(m.start(), f"`{m.group(1)}`")
    # 2. paths that commands in code blocks read (outputs under data/, runs/, ... are skipped)
    for a, b in fences:
        for m in re.finditer(r"[^\s`]+", text[a:b]):
            rel = _repo_path(m.group(0), top_level)
            if rel and not _exists(root, rel):
                report(a + m.start(), f"{m.group(0)} (in a code block)")
    # 3. markdown links and images to local files, relative to the page
    for m in re.finditer(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text):
        target = m.group(1).split("#")[0]
        if not target or re.match(r"[a-z]+:", target):
            continue  # an anchor on the same page, or http(s):, mailto:
        full = os.path.normpath(os.path.join(os.path.dirname(md_path), target))
        if not os.path.exists(full):
            report(m.start(), m.group(0))
    # 4. sections cited by name: `docs/training.md`, "What limits tau"
    for m in re.finditer(r"`((?:docs/)?[\w-]+\.md)`,?\s+\"([^\"]+)\"", text):
        page = os.path.join(root, m.group(1))
        if not os.path.exists(page):
            continue  # reported above as a missing path
        name = " ".join(m.group(2).split())
        headings = [" ".join(line.lstrip("#").split())
                    for line in open(page, encoding="utf-8").read().splitlines() if re.match(r"#+ ", line)]
        if not any(name in h for h in headings):
            report(m.start(), f"section \"{name}\" of {m.group(1)}")
    return bad


@pytest.mark.parametrize("md", doc_files(), ids=lambda p: os.path.relpath(p, ROOT))
def test_every_cited_path_and_section_resolves(md):
    bad = broken_references(md)
    assert not bad, "references that do not resolve:\n" + "\n".join(bad)


def test_readme_is_at_most_150_lines():
    n = len(open(os.path.join(ROOT, "README.md"), encoding="utf-8").read().splitlines())
    assert n <= README_MAX_LINES, f"README.md has {n} lines; move detail to docs/"


def test_docs_has_at_most_8_top_level_entries():
    entries = sorted(e for e in os.listdir(os.path.join(ROOT, "docs")) if not e.startswith(".") and e != "__pycache__")
    assert len(entries) <= DOCS_MAX_ENTRIES, f"docs/ has {len(entries)} entries: {entries}"


def test_the_checker_finds_broken_references(tmp_path):
    """The checker itself: a page with good and broken references of every kind."""
    for d in ("docs/img", "assets/train_data/gen", "eagle_core"):
        os.makedirs(tmp_path / d)
    (tmp_path / "docs" / "img" / "a.png").write_bytes(b"")
    for name in ("decode.py", "draft.py"):
        (tmp_path / "eagle_core" / name).write_text("")
    (tmp_path / "docs" / "other.md").write_text("# Other\n\n## What limits tau\n")
    page = tmp_path / "docs" / "page.md"
    page.write_text(
        "# Page\n\n"
        "Good: `eagle_core/decode.py`, `train_data/gen` (still under assets/), `runs/head/log.jsonl` (made by a\n"
        "command), `../shared/data/eval`, `tok/s`, ![img](img/a.png), [other](other.md#what-limits-tau),\n"
        "`docs/other.md`, \"What limits tau\", `eagle_core/{decode,draft}.py`, `eagle_core/d*.py`.\n"
        "Broken: `eagle_core/verify.py`, ![img](img/b.png), [gone](gone.md), `docs/other.md`, \"The sixth head\",\n"
        "`train_data/heldout_gen`, `eagle_core/{decode,tree}.py`, `eagle_core/x*.py`.\n\n"
        "```bash\npython -m eagle_core.train train --data train_data/gen --init assets/head-x --out runs/x\n```\n")
    bad = broken_references(str(page), root=str(tmp_path))
    found = " ".join(bad)
    broken = ("`eagle_core/verify.py`", "img/b.png", "gone.md", '"The sixth head"', "`train_data/heldout_gen`",
              "`eagle_core/{decode,tree}.py`", "`eagle_core/x*.py`", "assets/head-x (in a code block)")
    for ref in broken:
        assert ref in found, (ref, bad)
    for ref in ("decode.py`", "`train_data/gen`", "runs/", "shared", "tok/s", "img/a.png", "other.md#",
                '"What limits tau"', "{decode,draft}", "d*.py"):
        assert ref not in found, (ref, bad)
    assert len(bad) == len(broken), bad


# ------------------------------------------------------------------ the README quotes the records (issue 52)
def test_the_readme_rows_quote_the_records():
    """Each README row that quotes a record (the hardware panel's recording, the page's opening example, tau by
    language) is the row made from that record today, naming its CPU and date; `python scripts/record_traces.py`
    writes them with the records."""
    from eagle_core.bench import hardware as cli
    from eagle_core.machine import hardware as hw

    lines = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read().split("\n")
    from viz.records import readme_rows

    rows = {cli.README_MARK: cli.readme_row(hw.quoted()), **readme_rows()}
    for mark, row in rows.items():
        assert re.match(r"\| [^|?]+, \d{4}-\d\d-\d\d \|", row), f"the record behind {mark!r} names no CPU or date: {row}"
        assert row in lines, f"README's row of {mark!r} differs from its record: run `python scripts/record_traces.py`" \
                             f" (it should read: {row})"


def test_the_readme_row_writer_replaces_its_row_or_adds_it(tmp_path):
    from eagle_core.bench.hardware import README_MARK

    readme = tmp_path / "README.md"
    readme.write_text("| a | b | c |\n|---|---|---|\n| x | " + README_MARK + " | 1 |\n| y | other | 2 |\n", encoding="utf-8")
    from viz.records import write_readme_rows

    write_readme_rows(README_MARK, str(readme), {"mark one": "| m | mark one | 1.5x |"})
    assert readme.read_text().split("\n")[3] == "| m | mark one | 1.5x |"  # added after the hardware row
    write_readme_rows(README_MARK, str(readme), {"mark one": "| m | mark one | 1.6x |"})
    text = readme.read_text()
    assert "1.6x" in text and "1.5x" not in text and text.count("mark one") == 1 and "| y | other | 2 |" in text


def test_the_readme_has_room_for_the_rows_the_recorder_adds():
    """The recorder adds its rows after the hardware panel's when missing: the README stays within its limit."""
    from viz.records import README_EXAMPLE, README_LANGUAGES

    lines = open(os.path.join(ROOT, "README.md"), encoding="utf-8").read().splitlines()
    missing = [m for m in (README_EXAMPLE, README_LANGUAGES) if not any(m in x and x.startswith("|") for x in lines)]
    assert len(lines) + len(missing) <= README_MAX_LINES, f"README.md would have {len(lines) + len(missing)} lines"
