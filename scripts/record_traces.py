"""Record every trace the app ships and the measured records its Learn tab, lesson and hardware panel read:
one command, run on a quiet machine after any change to the engine's speed or to a head.

    python scripts/record_traces.py                        # everything: records, examples, lesson
    python scripts/record_traces.py --examples --lesson    # the traces only (assets/traces/, assets/lesson/)
    python scripts/record_traces.py --records --mgsm DIR   # the records, MGSM's rows included
    python scripts/record_traces.py --examples --out /tmp/rec --allow-busy   # a development try

What it does: with the app's own engine and Worker (the default model and heads, or EAGLE_APP_MODEL /
EAGLE_APP_HEAD) it records the examples (viz/examples.py, EXAMPLES: the page's own method and tree) and the
lesson's steps (eagle_app/lesson_plan.py, STEPS: each step's settings; a step without a file has no trace);
--records re-records assets/learn/ (tau per tree; the hardware panel's timings in each weight format with step
8's prompt decoded in each; tau per language for both heads) and the README's rows. All its torch work runs on
the app's one engine thread (a second thread's OpenMP team slowed every timing in the process by ~20%:
docs/app.md, "Re-recording the shipped traces"). It warms the engine up first (an untimed decode of every
method and tree it records) and stamps every file with the CPU model, date, command, load and calibrated t(1).

What it refuses (it stops with a message and writes nothing more):
- a busy machine: its load (os.getloadavg() per core) at start over --max-load, other processes using over
  quiet.MAX_OTHERS of the CPUs while it waits, or a calibration pass (the target's one-row forward, timed) over
  quiet.MAX_SLOWDOWN x this CPU's own t(1) (the hardware record's, if it names this CPU model; else the time to read
  the weights at quiet.T1_BYTES_PER_S; eagle_core/machine/quiet.py), checked at start and before every file;
  --allow-busy (development only) records anyway and stamps the files busy: the tests reject them;
- a trace unfit to teach with (viz/traces.py, shipped_problems: a cold cycle, a vanilla step the calibration
  cannot explain, a verdict its numbers do not fit), or a greedy example EAGLE does not win (the one the page
  opens on by LIMITS["opening"]): it tries TRIES times, then stops;
- any argument it does not know (argparse's error): --help prints this and writes nothing.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from eagle_core.machine.quiet import MAX_LOAD, busy_reasons, load_per_core, others_cpu, reference_t1  # noqa: E402,F401
from viz.records import README_LANGUAGES, languages_row, write_readme_rows  # noqa: E402,F401

COMMAND = "python scripts/record_traces.py"
TRIES = 3
CALIBRATION_REPEATS = 15
MT_ZH = os.path.join(ROOT, "assets", "prompts", "mt_bench_zh_question.jsonl")
LANGUAGE_NEW_TOKENS = 96


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog=COMMAND, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="Without --examples, --lesson or --records: all three (docs/app.md).")
    ap.add_argument("--examples", action="store_true", help="the example traces (assets/traces/)")
    ap.add_argument("--lesson", action="store_true", help="the lesson's traces and manifest (assets/lesson/)")
    ap.add_argument("--records", action="store_true",
                    help="assets/learn/: tau_by_tree.json and hardware_recorded.json (the hardware panel), "
                         "per_language.json (both heads), the README's rows and docs/img/hardware.png")
    ap.add_argument("--out", metavar="DIR", default=None,
                    help="write under DIR (traces/, lesson/, learn/) instead of assets/; README and docs untouched")
    ap.add_argument("--mgsm", metavar="DIR", default=None,
                    help="folder with mgsm_en.jsonl and mgsm_zh.jsonl (MGSM, not shipped) for per_language.json's "
                         "MGSM rows; without it those rows are kept as the file has them")
    ap.add_argument("--max-load", type=float, default=MAX_LOAD, help=f"load per core at start (default {MAX_LOAD})")
    ap.add_argument("--allow-busy", action="store_true",
                    help="development only: record on a busy machine; every file is stamped busy and the tests "
                         "reject it")
    a = ap.parse_args(argv)
    if not (a.examples or a.lesson or a.records):
        a.examples = a.lesson = a.records = True
    return a


def command_line(argv) -> str:
    """The command as the files record it: folders given to --mgsm and --out read DIR (a path of the machine
    that recorded means nothing to a reader, and may name a private place)."""
    out, argv = [COMMAND], list(argv)
    for i, a in enumerate(argv):
        flag = a.split("=")[0]
        if flag in ("--mgsm", "--out") and "=" in a:
            out.append(f"{flag}=DIR")
        elif i > 0 and argv[i - 1] in ("--mgsm", "--out"):
            out.append("DIR")
        else:
            out.append(a)
    return " ".join(out)


def calibrate(target, repeats: int = CALIBRATION_REPEATS) -> float:
    """The target's one-row forward (body + LM head, 300-token cache, as the hardware record's t(1)), median ms."""
    from eagle_app.engine_thread import ENGINE_THREAD
    from eagle_core.machine import measure_forward

    t = ENGINE_THREAD.submit(measure_forward, target, ctx=300, sizes=[1], repeats=repeats).result()[1]
    return round(t["body_ms"] + t["lm_head_ms"], 2)


class Machine:
    """This machine as the recorder found it; `check` measures it again and returns the stamp a file carries."""

    def __init__(self, engine, args, argv, recorded_path: str):
        import torch

        from eagle_core.cpu.kernels import cpu_model

        self.engine, self.args = engine, args
        self.cpu, self.command, self.torch = cpu_model(), command_line(argv), torch.__version__
        self.start_load = load_per_core()  # taken by main before the engine loaded, set again there
        self.recorded_path = recorded_path
        self.ref_ms, self.ref_source = reference_t1(engine.target, self.cpu, recorded_path, ROOT)

    def check(self, what: str, first: bool = False) -> dict:
        import torch

        calib = calibrate(self.engine.target)
        others = others_cpu()
        why = busy_reasons(self.start_load, others, calib, self.ref_ms, self.args.max_load, check_load=first)
        print(f"[{what}] t(1) {calib:.1f} ms (this CPU's own: {self.ref_ms:.1f} ms, {self.ref_source}); others use "
              f"{'?' if others is None else f'{others:.0%}'} of the CPUs; load at start {self.start_load} per core",
              flush=True)
        if why and not self.args.allow_busy:
            raise SystemExit(f"refusing to record {what}: the machine is busy ({'; '.join(why)}). Stop what else "
                             f"runs, wait a minute for the load to fall, and run `{self.command}` again.")
        return {"cpu": self.cpu, "date": time.strftime("%Y-%m-%d", time.gmtime()), "command": self.command,
                "load_per_core_at_start": self.start_load, "others_cpu": others, "calibration_t1_ms": calib,
                "reference_t1_ms": self.ref_ms, "reference": self.ref_source, "threads": torch.get_num_threads(),
                "torch": self.torch, "warm": True, "busy": bool(why), **({"busy_why": "; ".join(why)} if why else {})}


# ------------------------------------------------------------------------------------------- decoding
def start_engine():
    """The app's engine (the default model and heads, or EAGLE_APP_MODEL / EAGLE_APP_HEAD), loaded."""
    from eagle_app.model import model_from_env

    holder = model_from_env().start()
    holder.ready.wait()
    if holder.engine is None:
        raise SystemExit(holder.error)
    return holder.engine


def decode_runs(engine, prompt: str, settings, compare: bool = True) -> dict:
    """{"eagle": Run, "vanilla": Run} as the app records them: through its Worker, on its engine thread
    (byte tokens readable), with no time limit."""
    from eagle_app.worker import Worker

    w = Worker(engine, prompt, settings, compare=compare, budget_s=1e6, fair_s=1e6).start()
    w.wait()
    runs = {}
    while not w.events.empty():
        what, kind, payload = w.events.get()
        if what == "done":
            runs[kind] = payload
        elif what == "error":
            raise SystemExit(f"the decode failed: {payload}")
    return runs


def warm_up(engine, jobs) -> None:
    """An untimed decode of every (method, tree, greedy or not) the recording will time, EAGLE and vanilla."""
    seen = set()
    for prompt, settings in jobs:
        key = (settings.method, settings.depth, settings.tree_top_k, settings.total_tokens, settings.greedy)
        if key not in seen:
            seen.add(key)
            decode_runs(engine, prompt, settings.with_(max_new_tokens=min(16, settings.max_new_tokens)))
    print(f"warmed up: {len(seen)} method/tree pair(s)", flush=True)


def rows_cost(recorded_path: str):
    """t(rows)/t(1) from a hardware record (None without one): how much a big tree may cost to verify."""
    try:
        from eagle_core.machine.hardware import interp, load_recorded
        fwd = load_recorded(recorded_path)["forward_ms"]
        return lambda rows: interp(fwd, rows) / fwd[1]
    except (OSError, ValueError, KeyError):
        return None


def timed(engine, machine: Machine, what: str, prompt: str, settings, compare: bool, extra=lambda runs: []):
    """Decode until the pair is plausible (viz/traces.py, shipped_problems, plus `extra`), at most TRIES
    times -> (runs, stamp); stops with a message when every try failed (--allow-busy: keeps the last)."""
    from viz.traces import shipped_problems

    tries = 1 if machine.args.allow_busy else TRIES  # a busy machine's tries would all fail alike
    for attempt in range(1, tries + 1):
        stamp = machine.check(what)
        runs = decode_runs(engine, prompt, settings, compare)
        problems = shipped_problems(runs.get("eagle"), runs.get("vanilla"), stamp,
                                    rows_cost(machine.recorded_path), allow_busy=True) + extra(runs)
        if not problems:
            return runs, stamp
        print(f"[{what}] try {attempt} of {tries} unfit: " + "; ".join(problems), flush=True)
    if machine.args.allow_busy:
        return runs, {**stamp, "busy": True, "busy_why": (stamp.get("busy_why", "") + "; " + "; ".join(problems)).strip("; ")}
    raise SystemExit(f"refusing to write {what}: {TRIES} tries were unfit ({'; '.join(problems)}). On a quiet "
                     f"machine this means the engine, the head or the chosen prompt and tree no longer show what "
                     f"the trace is for: change them (viz/examples.py, eagle_app/lesson_plan.py) and run again.")


def write_json_text(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)

# ------------------------------------------------------------------------------------------- examples
def record_examples(engine, machine: Machine, out_dir: str) -> list[str]:
    from eagle_core import DecodeSettings
    from viz.examples import EXAMPLES, example_prompts, example_settings
    from viz.traces import LIMITS, bundle_to_json, speedup

    prompts = dict(example_prompts())
    jobs = [(prompts[e.label], DecodeSettings(**example_settings(e))) for e in EXAMPLES]
    warm_up(engine, jobs)
    written = []
    for i, (e, (prompt, settings)) in enumerate(zip(EXAMPLES, jobs)):
        need = LIMITS["opening"] if i == 0 else 1.0  # the page opens on the first

        def wins(runs, need=need, greedy=settings.greedy):
            x = speedup(runs.get("eagle"), runs.get("vanilla"))
            return [f"EAGLE {x:.2f}x vanilla, the example needs {need:g}x or more"] if greedy and x < need else []

        runs, stamp = timed(engine, machine, e.file, prompt, settings, True, wins)
        written.append((os.path.join(out_dir, e.file), bundle_to_json(
            runs["eagle"], runs["vanilla"], f"{e.title} · head: {engine.head_name}", recorded=stamp)))
        print(f"{e.file}: {speedup(runs['eagle'], runs['vanilla']):.2f}x, tau {runs['eagle'].summary.tau:.2f}",
              flush=True)
    for path, text in written:  # only once every example is fit: a refusal leaves the old set whole
        write_json_text(path, text)
    for name in os.listdir(out_dir):  # a file of an example no longer listed would still be offered
        if name.endswith(".json") and name not in {e.file for e in EXAMPLES}:
            os.remove(os.path.join(out_dir, name))
    return [path for path, _ in written]


# --------------------------------------------------------------------------------------------- lesson
def record_lesson(engine, machine: Machine, out_dir: str) -> list[dict]:
    from eagle_app.lesson_plan import SEEDS, STEPS, chinese_tokens
    from eagle_core import DecodeSettings
    from viz.traces import bundle_to_json

    steps = [(i, s) for i, s in enumerate(STEPS, start=1) if getattr(s, "file", None)]
    warm_up(engine, [(s.prompt, DecodeSettings(**s.settings)) for _, s in steps])
    manifest, files, stamp = [], [], None
    for i, step in steps:
        seeds = SEEDS if step.settings.get("temperature", 0.0) > 0 else (0,)
        for seed in seeds:  # the rule looks at tokens, not times: the first seed that shows it
            settings = DecodeSettings(**{**step.settings, "seed": seed})
            runs = decode_runs(engine, step.prompt, settings, step.vanilla)
            k = pick_cycle(step, runs["eagle"].cycles)
            if k is not None:
                break
        if k is None:
            raise SystemExit(f"step {i} ({step.key}): no cycle matches its rule; change its prompt or settings")
        cycle_of = lambda runs, step=step: pick_cycle(step, runs["eagle"].cycles)  # noqa: E731
        runs, stamp = timed(engine, machine, f"lesson step {i} ({step.file})", step.prompt, settings, step.vanilla,
                            lambda runs: [] if cycle_of(runs) == k else ["the rule picked another cycle"])
        title = f"Lesson {i}: {step.key} · head: {engine.head_name}"
        files.append((os.path.join(out_dir, step.file),
                      bundle_to_json(runs["eagle"], runs.get("vanilla"), title=title, recorded=stamp)))
        manifest.append(dict(step=i, key=step.key, file=step.file, cycle=k + 1, of=len(runs["eagle"].cycles),
                             rule=step.rule_text, prompt=step.prompt,
                             settings=settings.to_dict() | {"static_tree": None}, title=title))
        print(f"step {i} {step.key}: cycle {k + 1} of {len(runs['eagle'].cycles)} (seed {seed})", flush=True)
    meta = {"command": machine.command, "model": engine.target.name, "head": engine.head_name,
            "vocab": chinese_tokens(engine.target.tokenizer), "steps": manifest}
    if stamp is not None:
        meta["recorded"] = {k: v for k, v in stamp.items() if k in ("cpu", "date", "command", "busy", "busy_why")}
    for path, text in files:  # only once every step is fit: a refusal leaves the old lesson whole
        write_json_text(path, text)
    write_json_text(os.path.join(out_dir, "lesson.json"), json.dumps(meta, ensure_ascii=False, indent=1))
    for name in os.listdir(out_dir):  # a trace of a step no longer in the plan (or renamed) would still ship
        if name.endswith(".json") and name != "lesson.json" and name not in {s.file for _, s in steps}:
            os.remove(os.path.join(out_dir, name))
    return manifest


def pick_cycle(step, cycles) -> int | None:
    """The 0-based cycle a step opens at: its rule's, or (a step without a rule) the longest accepted path."""
    if getattr(step, "rule", None) is not None:
        return step.rule(cycles)
    drafted = [i for i, c in enumerate(cycles) if c.n_draft]
    return max(drafted, key=lambda i: (cycles[i].accepted_drafts, -i)) if drafted else None


# -------------------------------------------------------------------------------------------- records
def record_records(engine, machine: Machine, learn_dir: str, to_assets: bool, mgsm: str | None) -> None:
    """assets/learn/: the hardware panel's recording (eagle_core.bench.hardware.record: tau per tree, then the
    timings) and tau per language for both heads; each stamped; into assets also the README's rows and the PNG."""
    import torch

    from eagle_app.lesson_plan import BY_KEY
    from eagle_core.bench import hardware as bench_hw
    from eagle_core.machine.hardware import record_formats

    from eagle_app.engine_thread import ENGINE_THREAD

    stamp = machine.check("the records", first=True)

    def work():  # on the engine thread, as every decode and calibration: a second thread's OpenMP team slows both
        threads = torch.get_num_threads()
        torch.set_num_threads(min(2, os.cpu_count() or 1))  # as `python -m eagle_core.bench.hardware --record`
        try:
            tau_path, hw_path = os.path.join(learn_dir, "tau_by_tree.json"), os.path.join(learn_dir, "hardware_recorded.json")
            os.makedirs(learn_dir, exist_ok=True)
            log = lambda s: print(s, file=sys.stderr, flush=True)  # noqa: E731
            bench_hw.record(engine, tau_path=tau_path, recorded_path=hw_path, log=log)
            step = BY_KEY["hardware"]  # the lesson's precision switch: each format's t(k) and its prompt decoded
            record_formats(engine, hw_path, bench_hw.record_trees(), step.prompt, step.settings, log)
            for path in (tau_path, hw_path):
                stamp_file(path, stamp)
            record_languages(engine, os.path.join(learn_dir, "per_language.json"), stamp, mgsm)
        finally:
            torch.set_num_threads(threads)
        return tau_path, hw_path

    tau_path, hw_path = ENGINE_THREAD.submit(work).result()
    if to_assets:
        bench_hw.write_readme_row()
        try:
            from eagle_core.bench.hardware_png import render_png
            from eagle_core.machine.hardware import lesson, load_recorded, load_tau_table
            m, table = load_recorded(hw_path), load_tau_table(tau_path)
            render_png(m, table, lesson(m, table), os.path.join(ROOT, "docs", "img", "hardware.png"))
        except ImportError as e:
            print(f"docs/img/hardware.png not redrawn ({e})", file=sys.stderr)


def stamp_file(path: str, stamp: dict) -> None:
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    write_json_text(path, json.dumps({**d, "recorded": stamp}, indent=1, ensure_ascii=False))


def record_languages(engine, path: str, stamp: dict, mgsm: str | None) -> None:
    """per_language.json: tau by language (MGSM en/zh if given, MT-bench en/zh: 2 per category) at the page's
    tree, greedy, one result per head (EAGLE-2 first: the Learn tab quotes it; EAGLE-3 beside it). Kept MGSM
    rows go last: the language figure draws the tree of the first row."""
    from eagle_core import PRESETS
    from eagle_core.bench.prompts import MT_BENCH
    from eagle_core.config import DecodeSettings
    from eagle_core.train.evaluate import evaluate_prompts, load_eval_prompts

    tree = [PRESETS["cpu"][k] for k in ("depth", "tree_top_k", "total_tokens")]
    sets = [(os.path.join(mgsm, f"mgsm_{x}.jsonl"), None, 16) for x in ("en", "zh")] if mgsm else []
    sets += [(MT_BENCH, 2, None), (MT_ZH, 2, None)]
    old = []
    if not mgsm and os.path.exists(path):  # MGSM is not shipped: its rows stay as recorded before
        with open(path, encoding="utf-8") as f:
            old = json.load(f)
    heads = [("eagle2", engine.head_name, len(engine.draft_vocab) if engine.draft_vocab else "full")]
    if getattr(engine, "drafter3", None) is not None:
        heads.append(("eagle3", engine.head3_name, engine.drafter3.head.config.draft_vocab_size))
    results = []
    for method, name, vocab in heads:
        settings = DecodeSettings(method=method, **PRESETS["cpu"], max_new_tokens=LANGUAGE_NEW_TOKENS)
        runs = []
        for file, per_category, limit in sets:
            prompts = load_eval_prompts(file, per_category)[:limit]
            print(f"tau by language: {method}, {os.path.basename(file)}, {len(prompts)} prompts", file=sys.stderr, flush=True)
            res = evaluate_prompts(engine, prompts, settings, log=lambda _: None)
            runs.append({"prompts": os.path.basename(file), "tree": tree, "temperature": 0.0,
                         "max_new_tokens": LANGUAGE_NEW_TOKENS, **res})
        kept = [dict(r, recorded={"kept": "MGSM is not shipped: re-record with --mgsm DIR"})
                for res in old if res.get("method", "eagle2") == method for r in res.get("runs", [])
                if r.get("prompts", "").startswith("mgsm_")]
        results.append({"head": name, "method": method, "draft_vocab": vocab, "runs": runs + kept, "recorded": stamp})
    with open(path, "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1, ensure_ascii=False)


# ----------------------------------------------------------------------------------------------- main
def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = parse_args(argv)
    start_load = load_per_core()  # before this process adds its own
    if start_load is not None and start_load > args.max_load and not args.allow_busy:
        raise SystemExit(f"refusing to record: load {start_load:.2f} per core (at most {args.max_load:g}). Stop what "
                         f"else runs, wait a minute for the load to fall, and run `{command_line(argv)}` again.")
    base = args.out or os.path.join(ROOT, "assets")
    engine = start_engine()
    machine = Machine(engine, args, argv, os.path.join(base, "learn", "hardware_recorded.json")
                      if args.out and os.path.exists(os.path.join(base, "learn", "hardware_recorded.json"))
                      else os.path.join(ROOT, "assets", "learn", "hardware_recorded.json"))
    machine.start_load = start_load
    machine.check("the start", first=True)
    if args.records:
        record_records(engine, machine, os.path.join(base, "learn"), args.out is None, args.mgsm)
        machine.recorded_path = os.path.join(base, "learn", "hardware_recorded.json")  # today's t(1) from here on
        machine.ref_ms, machine.ref_source = reference_t1(engine.target, machine.cpu, machine.recorded_path, ROOT)
    if args.examples:
        record_examples(engine, machine, os.path.join(base, "traces"))
    if args.lesson:
        record_lesson(engine, machine, os.path.join(base, "lesson"))
    if args.out is None and (args.records or args.examples):
        from eagle_core.bench.hardware import README_MARK  # the rows go after the hardware panel's
        write_readme_rows(README_MARK), print("README.md: the rows quoting the records rewritten", flush=True)


if __name__ == "__main__":
    main()
