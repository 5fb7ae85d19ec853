"""Every environment variable the project reads, in one table, each checked against what it allows.

`VARIABLES` is the list docs/app.md prints ("Environment variables"); every other module asks
`value(NAME)` instead of reading os.environ. A bad value is a `SettingError` whose message is one line
naming the variable, the value and what is allowed (`EAGLE_APP_THREADS='many': not a whole number;
allowed: a whole number >= 1; default: torch's choice`). `problems()` lists every bad value at once: the
app (app.py) and the CLI (python -m eagle_core) call it at start, print the lines and stop (the app
serves a page that shows them instead of its own). Values are read when asked for, not cached, so that
a test (or a process that sets one before loading) sees the value it set.

Also here, since it follows from two of these variables: where the engine keeps what it builds once
per machine (`cache_root`): converted weights, compiled kernels and their calibration.
`$EAGLE_EXPLAINER_CACHE` when set; on a Hugging Face Space (`SPACE_ID` set) with a writable `/data` (a
persistent volume; hub-docs spaces-storage.md), `/data/eagle-explainer`, so the first start's work
survives restarts; else `~/.cache/eagle-explainer`.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Mapping

TRUE = ("1", "true", "yes", "on")
FALSE = ("0", "false", "no", "off", "")  # empty: as if unset
BOOLEAN = "1, true, yes, on / 0, false, no, off (any case; empty = unset)"


class SettingError(ValueError):
    """A bad value in one environment variable; str() is the one-line message."""

    def __init__(self, name: str, raw: str, why: str, allowed: str, default: str):
        self.name, self.raw = name, raw
        super().__init__(f"{name}={raw!r}: {why}; allowed: {allowed}; default: {default}")


@dataclass(frozen=True)
class Variable:
    """One environment variable: `parse` turns its text into the value (None when unset or empty) or
    raises ValueError with the reason; `allowed` and `default` are what the docs and the message say."""

    name: str
    parse: Callable[[str], Any]
    allowed: str
    default: str
    meaning: str
    used_by: str  # "engine", "app" or "CLI and app"


def _boolean(raw: str) -> bool | None:
    text = raw.strip().lower()
    if text in TRUE:
        return True
    if text in FALSE:
        return None if text == "" else False
    raise ValueError("not a yes/no value")


def _zero_gpu_flag(raw: str) -> bool | None:
    """SPACES_ZERO_GPU as the `spaces` package reads it (1, t, true; anything else is off there): the
    platform sets it, so only clear off-values are taken besides, and anything else is refused here
    rather than read differently from `spaces`."""
    text = raw.strip().lower()
    if text in ("1", "t", "true"):
        return True
    if text in ("0", "f", "false", ""):
        return None if text == "" else False
    raise ValueError("not one of the values the `spaces` package reads")


def _number(kind: type, low: float, strict: bool) -> Callable[[str], Any]:
    def parse(raw: str):
        text = raw.strip()
        if not text:
            return None
        try:
            x = kind(text)
        except ValueError:
            raise ValueError("not a whole number" if kind is int else "not a number") from None
        if not math.isfinite(x) or (x <= low if strict else x < low):
            raise ValueError("out of range")
        return x

    return parse


def _text(raw: str) -> str | None:
    return raw.strip() or None


def _choice(*choices: str, aliases: Mapping[str, str] | None = None) -> Callable[[str], str | None]:
    def parse(raw: str):
        text = raw.strip().lower()
        if not text:
            return None
        text = (aliases or {}).get(text, text)
        if text not in choices:
            raise ValueError("not one of the choices")
        return text

    return parse


def _knobs(raw: str, read) -> str | dict | None:
    """A tuning variable's value: "auto" (or empty: None), "off", or "key=value,..." knobs, each part
    turned into (name, value) by read(key, value), which returns None for a part it cannot read."""
    text = raw.strip().lower()
    if text in ("", "auto", "off"):
        return text or None
    knobs = {}
    for part in text.split(","):
        key, _, val = (p.strip() for p in part.partition("="))
        knob = read(key, val)
        if knob is None:
            raise ValueError(f"cannot read {part.strip()!r}")
        knobs[knob[0]] = knob[1]
    return knobs


def _qb_tuning(raw: str) -> str | dict | None:
    """EAGLE_QB_TUNING: "auto" (measure once, cached), "off" (qblocks.c's compiled defaults, nothing
    measured), or knobs fixed by hand, "tile=8,prefetch=1024,split=rows" (any of the three)."""
    def read(key, val):
        if key == "split" and val in ("groups", "rows"):
            return key, val
        return (key, int(val)) if key in ("tile", "prefetch") and val.isdigit() else None

    knobs = _knobs(raw, read)
    if isinstance(knobs, dict) and (not 1 <= knobs.get("tile", 1) <= 16 or knobs.get("prefetch", 0) % 64
                                    or knobs.get("prefetch", 0) > 16384):
        raise ValueError("out of range")
    return knobs


def _f32_tuning(raw: str) -> str | dict | None:
    """EAGLE_F32_TUNING: "auto" (measure once, cached), "off" (smallgemm.c's compiled blocking), or the
    blocking fixed by hand, "from=9,height=8" (either): blocked from 2..13 rows, tiles of 1..12."""
    def read(key, val):
        names = {"from": "blocked_from", "height": "height"}
        return (names[key], int(val)) if key in names and val.isdigit() else None

    knobs = _knobs(raw, read)
    if isinstance(knobs, dict) and (not 2 <= knobs.get("blocked_from", 13) <= 13
                                    or not 1 <= knobs.get("height", 12) <= 12):
        raise ValueError("out of range")
    return knobs


SECONDS = "a number of seconds > 0"
VARIABLES: tuple[Variable, ...] = (
    Variable("EAGLE_PORTABLE", _boolean, BOOLEAN, "off",
             "on: no C kernel at all, the portable path everywhere (what a GPU runs)", "engine"),
    Variable("EAGLE_EXPLAINER_CACHE", _text, "a directory", "/data/eagle-explainer on a Space with a writable "
             "/data, else ~/.cache/eagle-explainer", "where converted weights and compiled kernels are kept", "engine"),
    Variable("EAGLE_HUB_PROBE_S", _number(float, 0, True), SECONDS, "5",
             "how long a hub id waits for the hub before saying there is no network", "engine"),
    Variable("EAGLE_FIXED_TREE", _boolean, BOOLEAN, "off: chosen per machine and weight format at start-up",
             "on: a CPU's default tree is the fixed cpu preset, not chosen from this machine's measured "
             "t(k) (reproducible runs and tests)", "engine"),
    Variable("CC", _text, "a C compiler command", "cc", "compiles the CPU kernels on first use", "engine"),
    Variable("EAGLE_QB_TUNING", _qb_tuning, "auto, off, or tile=1..16,prefetch=0..16384 (a multiple of 64),"
             "split=groups or rows (any of them)", "auto: measured on first use per CPU model and thread count, cached",
             "the GGUF-block products' row tile, prefetch distance and thread split (qtuning.py)", "engine"),
    Variable("EAGLE_F32_TUNING", _f32_tuning, "auto, off, or from=2..13,height=1..12 (either)",
             "auto: measured on first use per CPU model and thread count, cached",
             "from how many rows the float32 products run blocked, and their tallest tile (ftuning.py)", "engine"),
    Variable("SPACE_ID", _text, "any text (set by a Hugging Face Space)", "unset",
             "on a Space: the cache goes to /data, the model picker is off", "engine"),
    Variable("EAGLE_APP_MODEL", _text, "a hub id or a directory", "the embedded SmolLM2-135M-Instruct",
             "the target model", "app"),
    Variable("EAGLE_APP_HEAD", _text, "a hub id or a directory", "the shipped EAGLE-2 head", "the EAGLE-2 head", "app"),
    Variable("EAGLE_APP_HEAD3", _text, "a hub id or a directory", "the shipped EAGLE-3 head", "the EAGLE-3 head", "app"),
    Variable("EAGLE_APP_HEAD3_LAYER_IDS", _choice("inputs", "outputs"), "inputs (official, vLLM), outputs "
             "(SGLang, SpecForge)", "inputs", "what the EAGLE-3 head's layer ids count", "app"),
    Variable("EAGLE_APP_HEAD3_ROPE_THETA", _number(float, 0, True), "a number > 0", "the head's config",
             "the RoPE base the EAGLE-3 head's trainer used (docs/gpu.md)", "app"),
    Variable("EAGLE_APP_DTYPE", _choice("float32", "bfloat16", "float16", "auto",
                                        aliases={"fp32": "float32", "bf16": "bfloat16", "fp16": "float16",
                                                 "half": "float16"}),
             "float32, bfloat16, float16, auto (also fp32, bf16, fp16, half)",
             "auto: float32 on a CPU and for small targets on a GPU", "the target's precision", "app"),
    Variable("EAGLE_APP_THREADS", _number(int, 1, False), "a whole number >= 1", "torch's choice",
             "torch's CPU threads for the app (as the CLI's --threads)", "app"),
    Variable("EAGLE_APP_RUN_BUDGET_S", _number(float, 0, True), SECONDS, "60 (20 on ZeroGPU)",
             "each decode (EAGLE, then vanilla) stops after this long", "app"),
    Variable("EAGLE_APP_FAIR_BUDGET_S", _number(float, 0, True), SECONDS, "20",
             "each decode stops after this long while someone waits in line", "app"),
    Variable("EAGLE_APP_PROGRESS_S", _number(float, 0, False), "a number of seconds >= 0", "0 (none)",
             "a progress line that often while the runs are timed (0: the page stays still)", "app"),
    Variable("EAGLE_APP_ALLOW_SWITCH", _boolean, BOOLEAN, "on with a GPU of one's own, off on a Space",
             "allows / forbids the model picker", "app"),
    Variable("SPACES_ZERO_GPU", _zero_gpu_flag, "1, t, true / 0, f, false (set by a ZeroGPU Space)", "off",
             "decode inside spaces.GPU", "app"),
)
BY_NAME = {v.name: v for v in VARIABLES}


def value(name: str, env: Mapping[str, str] | None = None) -> Any:
    """The parsed value of `name` (None when unset or empty); a bad value raises SettingError."""
    var = BY_NAME[name]  # a KeyError here is a programming error: every variable is in VARIABLES
    raw = (os.environ if env is None else env).get(name)
    if raw is None:
        return None
    try:
        return var.parse(raw)
    except ValueError as e:
        raise SettingError(name, raw, str(e), var.allowed, var.default) from None


def problems(env: Mapping[str, str] | None = None, used_by: tuple[str, ...] = ("engine", "app")) -> list[str]:
    """One line for each variable (of those used by `used_by`) whose value is bad; [] when all are good."""
    out = []
    for var in VARIABLES:
        if var.used_by in used_by:
            try:
                value(var.name, env)
            except SettingError as e:
                out.append(str(e))
    return out


def flag(name: str, env: Mapping[str, str] | None = None) -> bool:
    """A yes/no variable: True / False when set, False when unset."""
    return bool(value(name, env))


def seconds(name: str, default: float, env: Mapping[str, str] | None = None) -> float:
    got = value(name, env)
    return default if got is None else float(got)


# ---- where the engine keeps what it builds once per machine ----------------------------------------
PERSISTENT = "/data"  # where a Space's persistent storage is mounted


def _writable_dir(path: str) -> bool:
    return os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)


def cache_root() -> str:
    explicit = value("EAGLE_EXPLAINER_CACHE")
    if explicit:
        return explicit
    # only on a Space: elsewhere a /data of the machine's own is none of the engine's business
    if value("SPACE_ID") and _writable_dir(PERSISTENT):
        return os.path.join(PERSISTENT, "eagle-explainer")
    return os.path.join(os.path.expanduser("~"), ".cache", "eagle-explainer")


def runs_root() -> str:
    """Where training runs keep their checkpoints and exports by default: under the cache, outside the
    repository, so that a run's state is never committed by accident (docs/training.md, "Resuming")."""
    return os.path.join(cache_root(), "runs")
