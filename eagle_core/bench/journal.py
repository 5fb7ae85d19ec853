"""The samples a benchmark run produces, and the journal that makes a run of hours resumable."""
from __future__ import annotations

import dataclasses
import datetime
import json
import os
from dataclasses import dataclass

from .prompts import Prompt


@dataclass(frozen=True)
class Sample:
    """One timed generation of one method on one prompt."""

    method: str
    prompt_index: int
    repeat: int
    category: str
    token_ids: tuple[int, ...]  # generated ids, EOS excluded
    wall_s: float  # measured by the harness around the whole call (prefill included)
    cycles: int  # target forwards after the prefill (draft/verify cycles)
    tau: float | None  # tokens committed per cycle (engine) / per target forward after prefill (hf)
    draft_s: float | None = None  # engine methods only (None for transformers generate)
    verify_s: float | None = None
    prefill_s: float | None = None
    stop_reason: str = ""

    @property
    def new_tokens(self) -> int:
        return len(self.token_ids)


def sample_to_dict(s: Sample, tokens: bool = True) -> dict:
    d = {"method": s.method, "prompt": s.prompt_index, "repeat": s.repeat, "category": s.category,
         "new_tokens": s.new_tokens, "wall_s": round(s.wall_s, 5), "cycles": s.cycles, "tau": s.tau,
         "draft_s": s.draft_s, "verify_s": s.verify_s, "prefill_s": s.prefill_s, "stop_reason": s.stop_reason}
    if tokens:
        d["token_ids"] = list(s.token_ids)
    return d


def sample_from_dict(d: dict) -> Sample:
    return Sample(d["method"], d["prompt"], d["repeat"], d["category"], tuple(d["token_ids"]), d["wall_s"],
                  d["cycles"], d["tau"], d.get("draft_s"), d.get("verify_s"), d.get("prefill_s"),
                  d.get("stop_reason", ""))


class Journal:
    """An append-only JSONL record of a benchmark run, so a run of hours survives interruptions.

    Line 1 is {"journal": KEY}: everything that must not change within one run (model, head, tree,
    methods, tokens, sampling, seed). Each start of the command appends {"segment": {...}} (when, and
    the machine's state); each finished prompt appends {"prompt": KEY, "repeat": R, "samples": [...]}
    with all its methods in one line. Rerunning the same command skips the prompts already done.
    Prompts are matched by a hash of their text, not their position, so --limit, --per-category and
    --categories may differ between the run and the reports made from it. A torn last line (the
    process killed mid-write) is ignored and that prompt is run again.
    """

    def __init__(self, path: str, key: dict | None = None):
        self.path, self.key = path, key
        self.done: dict[tuple[str, int], list[Sample]] = {}
        self.segments: list[dict] = []
        if os.path.exists(path) and os.path.getsize(path) > 0:
            with open(path, encoding="utf-8") as f:
                text = f.read()
            if key is not None and not text.endswith("\n"):  # drop a torn last line before appending
                text = text[: text.rfind("\n") + 1]
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
            lines = text.splitlines()
            try:
                found = json.loads(lines[0])["journal"]
            except (ValueError, KeyError, TypeError):
                raise ValueError(f"{path}: not a benchmark journal") from None
            if key is not None and found != key:
                diff = sorted(k for k in set(found) | set(key) if found.get(k) != key.get(k))
                raise ValueError(f"{path} was written by a run with different settings ({', '.join(diff)}); "
                                 "use another --journal file, or the same settings to resume")
            self.key = found
            for i, line in enumerate(lines[1:], 2):
                try:
                    d = json.loads(line)
                except ValueError:
                    if i == len(lines):
                        break  # torn last line
                    raise ValueError(f"{path}:{i}: unreadable line") from None
                if "segment" in d:
                    self.segments.append(d["segment"])
                elif "prompt" in d:
                    self.done[(d["prompt"], d["repeat"])] = [sample_from_dict(x) for x in d["samples"]]
        elif key is None:
            raise ValueError(f"{path}: no such journal")
        else:
            self._append({"journal": key})

    def _append(self, obj: dict) -> None:
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(obj, separators=(",", ":")) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def start_segment(self, machine: dict, todo: int) -> None:
        seg = {"started": datetime.datetime.now().isoformat(timespec="seconds"), "todo": todo, **machine}
        self.segments.append(seg)
        self._append({"segment": seg})

    def get(self, prompt: Prompt, repeat: int, methods: list[str]) -> list[Sample] | None:
        """This prompt's samples from an earlier segment, renumbered for the current selection."""
        old = self.done.get((prompt.key, repeat))
        if old is None or {s.method for s in old} < set(methods):
            return None
        return [dataclasses.replace(s, prompt_index=prompt.index, category=prompt.category)
                for s in old if s.method in methods]

    def select(self, prompts: list[Prompt], repeats: int, methods: list[str]) -> dict[tuple[int, int], list[Sample]]:
        """(repeat, prompt index) -> samples, for the selected prompt runs this journal holds."""
        found = {}
        for r in range(repeats):
            for p in prompts:
                got = self.get(p, r, methods)
                if got is not None:
                    found[(r, p.index)] = got
        return found

    def record(self, prompt: Prompt, repeat: int, samples: list[Sample]) -> None:
        self.done[(prompt.key, repeat)] = samples
        self._append({"prompt": prompt.key, "repeat": repeat, "samples": [sample_to_dict(s) for s in samples]})
