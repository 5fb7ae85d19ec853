"""Every environment variable is read through eagle_core/environment.py and checked: a bad value is one
line naming the variable, the value and what is allowed, in-process (SettingError) and at start (the
app and the CLI stop with that line and exit code 2, no traceback); booleans take only their documented
values; docs/app.md lists each variable once, with what it allows and its default."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from eagle_core import environment
from eagle_core.environment import BY_NAME, VARIABLES, SettingError, flag, problems, value

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# one bad value for every variable that can have one (free text: a path, a hub id, a compiler, has none)
BAD = {
    "EAGLE_PORTABLE": "maybe", "EAGLE_HUB_PROBE_S": "soon", "EAGLE_APP_HEAD3_LAYER_IDS": "middle",
    "EAGLE_APP_HEAD3_ROPE_THETA": "-1", "EAGLE_APP_DTYPE": "float8", "EAGLE_APP_THREADS": "many",
    "EAGLE_APP_RUN_BUDGET_S": "abc", "EAGLE_APP_FAIR_BUDGET_S": "0", "EAGLE_APP_PROGRESS_S": "-2",
    "EAGLE_APP_ALLOW_SWITCH": "sometimes", "SPACES_ZERO_GPU": "perhaps", "EAGLE_FIXED_TREE": "later",
    "EAGLE_QB_TUNING": "tile=17", "EAGLE_F32_TUNING": "from=14",
}
FREE_TEXT = {"EAGLE_EXPLAINER_CACHE", "CC", "SPACE_ID", "EAGLE_APP_MODEL", "EAGLE_APP_HEAD", "EAGLE_APP_HEAD3"}


def test_every_variable_is_either_checked_here_or_free_text():
    assert set(BAD) | FREE_TEXT == set(BY_NAME), set(BY_NAME) ^ (set(BAD) | FREE_TEXT)
    assert len(VARIABLES) == len(BY_NAME)  # each once


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_value_is_one_line_naming_the_variable_the_value_and_what_is_allowed(name):
    with pytest.raises(SettingError) as e:
        value(name, {name: BAD[name]})
    text = str(e.value)
    assert "\n" not in text
    assert text.startswith(f"{name}={BAD[name]!r}: ")
    assert f"allowed: {BY_NAME[name].allowed}" in text and f"default: {BY_NAME[name].default}" in text
    assert problems({name: BAD[name]}) == [text]


def test_problems_lists_every_bad_value_and_nothing_when_all_are_good():
    assert problems({}) == []
    assert len(problems(BAD)) == len(BAD)
    engine = problems(BAD, used_by=("engine",))  # the CLI's check: the engine's variables only
    assert [line.split("=")[0] for line in engine] == ["EAGLE_PORTABLE", "EAGLE_HUB_PROBE_S", "EAGLE_FIXED_TREE",
                                                      "EAGLE_QB_TUNING", "EAGLE_F32_TUNING"]


@pytest.mark.parametrize("raw,expected", [("1", True), ("true", True), ("YES", True), (" on ", True), ("0", False),
                                          ("false", False), ("No", False), ("off", False), ("", False)])
def test_booleans_take_only_their_documented_values(raw, expected):
    assert flag("EAGLE_PORTABLE", {"EAGLE_PORTABLE": raw}) is expected
    assert flag("EAGLE_PORTABLE", {}) is False
    for bad in ("maybe", "2", "y", "enabled"):
        with pytest.raises(SettingError, match="EAGLE_PORTABLE"):
            flag("EAGLE_PORTABLE", {"EAGLE_PORTABLE": bad})


def test_good_values_are_parsed():
    env = {"EAGLE_APP_THREADS": " 2 ", "EAGLE_APP_RUN_BUDGET_S": "7.5", "EAGLE_APP_PROGRESS_S": "0",
           "EAGLE_APP_DTYPE": "bf16", "EAGLE_APP_HEAD3_LAYER_IDS": "Outputs", "EAGLE_APP_MODEL": "",
           "EAGLE_APP_ALLOW_SWITCH": "0", "SPACES_ZERO_GPU": "t"}
    assert value("EAGLE_APP_THREADS", env) == 2
    assert environment.seconds("EAGLE_APP_RUN_BUDGET_S", 60.0, env) == 7.5
    assert environment.seconds("EAGLE_APP_FAIR_BUDGET_S", 20.0, env) == 20.0  # unset: the default
    assert value("EAGLE_APP_PROGRESS_S", env) == 0.0
    assert value("EAGLE_APP_DTYPE", env) == "bfloat16" and value("EAGLE_APP_HEAD3_LAYER_IDS", env) == "outputs"
    assert value("EAGLE_APP_MODEL", env) is None  # empty is as if unset
    assert value("EAGLE_APP_ALLOW_SWITCH", env) is False and value("SPACES_ZERO_GPU", env) is True


def test_the_portable_switch_refuses_what_it_does_not_know(monkeypatch):
    from eagle_core.cpu.kernels.build import portable_forced

    monkeypatch.setenv("EAGLE_PORTABLE", "maybe")
    with pytest.raises(SettingError, match=r"EAGLE_PORTABLE='maybe'.*allowed: 1, true"):
        portable_forced()
    monkeypatch.setenv("EAGLE_PORTABLE", "on")
    assert portable_forced() is True


def test_the_page_shown_instead_of_the_app_carries_the_lines():
    from eagle_app.environment_check import message_markdown

    lines = problems({"EAGLE_APP_THREADS": "many", "EAGLE_PORTABLE": "<b>"})
    page = message_markdown(lines)
    assert "EAGLE_APP_THREADS=&#x27;many&#x27;" in page and "&lt;b&gt;" in page and "<b>" not in page


def _clean_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in BY_NAME or k == "CC"}
    return {**env, **extra}


def _one_line_and_stop(out: subprocess.CompletedProcess, name: str) -> None:
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {name}="), out.stderr


def test_the_app_stops_at_start_with_the_one_line_and_no_traceback():
    out = subprocess.run([sys.executable, "-c", "import app"], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env=_clean_env(EAGLE_APP_RUN_BUDGET_S="abc"))
    _one_line_and_stop(out, "EAGLE_APP_RUN_BUDGET_S")
    assert "allowed: a number of seconds > 0" in out.stderr


def test_the_cli_stops_at_start_with_the_one_line_and_no_traceback():
    out = subprocess.run([sys.executable, "-m", "eagle_core", "generate", "--prompt", "hi", "--method", "vanilla"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120, env=_clean_env(EAGLE_PORTABLE="maybe"))
    _one_line_and_stop(out, "EAGLE_PORTABLE")


def test_the_docs_list_each_variable_once_with_what_it_allows_and_its_default():
    text = open(os.path.join(ROOT, "docs", "app.md"), encoding="utf-8").read()
    section = text.split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    names = [re.match(r"\| `([A-Z0-9_]+)`", row).group(1) for row in rows]
    assert sorted(names) == sorted(BY_NAME), set(names) ^ set(BY_NAME)
    assert len(names) == len(set(names))
    for row, name in zip(rows, names):
        var = BY_NAME[name]
        assert var.allowed in row and var.default in row, name
