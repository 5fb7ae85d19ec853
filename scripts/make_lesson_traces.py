"""Regenerate assets/lesson/, the lesson's traces (eagle_app/lesson_plan.py STEPS): each step's prompt
decoded with the default model and the shipped head, with the step's own settings, then the cycle
its rule picks recorded in assets/lesson/lesson.json. The sampled step tries seeds 1-20 and keeps the
first whose run shows its rule. Greedy float32 runs are deterministic, so a rerun writes the same tokens.

    python scripts/make_lesson_traces.py [out_dir]
"""
from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from eagle_app.lesson_plan import LESSON_DIR, SEEDS, STEPS, chinese_tokens  # noqa: E402
from eagle_core import DecodeSettings  # noqa: E402
from make_example_traces import decode_runs, start_engine  # noqa: E402  (beside this script)


def make_lesson_traces(out_dir: str | None = None) -> list[dict]:
    from viz.traces import bundle_to_json

    out_dir = out_dir or LESSON_DIR
    os.makedirs(out_dir, exist_ok=True)
    engine, manifest = start_engine(), []
    for i, step in enumerate(STEPS, start=1):
        seeds = SEEDS if step.settings.get("temperature", 0.0) > 0 else (0,)
        for seed in seeds:
            settings = DecodeSettings(**step.settings, seed=seed)
            runs = decode_runs(engine, step.prompt, settings, step.vanilla)
            k = step.rule(runs["eagle"].cycles)
            if k is not None:
                break
        if k is None:
            raise SystemExit(f"step {i} ({step.key}): no cycle matches its rule; change its prompt or settings")
        title = f"Lesson {i}: {step.key} · head: {engine.head_name}"
        with open(os.path.join(out_dir, step.file), "w", encoding="utf-8") as f:
            f.write(bundle_to_json(runs["eagle"], runs.get("vanilla"), title=title))
        manifest.append(dict(step=i, key=step.key, file=step.file, cycle=k + 1, of=len(runs["eagle"].cycles),
                             rule=step.rule_text, prompt=step.prompt, settings=settings.to_dict() | {"static_tree": None},
                             title=title))
        print(f"step {i} {step.key}: cycle {k + 1} of {len(runs['eagle'].cycles)} (seed {seed})", flush=True)
    with open(os.path.join(out_dir, "lesson.json"), "w", encoding="utf-8") as f:
        json.dump({"command": "python scripts/make_lesson_traces.py", "model": engine.target.name, "head": engine.head_name,
                   "vocab": chinese_tokens(engine.target.tokenizer), "steps": manifest}, f, ensure_ascii=False, indent=1)
    return manifest


if __name__ == "__main__":
    make_lesson_traces(sys.argv[1] if len(sys.argv) > 1 else None)
