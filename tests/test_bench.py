"""Smoke test of the benchmark harness through its real CLI entry (seconds, default model)."""
import json
import os
import subprocess
import sys

import pytest

from eagle_core.bench.prompts import load_prompts
from eagle_core.bench.report import summarize
from test_kernels import needs_smallgemm

PROMPTS = [
    {"prompt": "Name three primary colors.", "category": "writing"},
    {"turns": ["What is 12 times 7?", "And divided by 2?"], "category": "math"},
]
STATS_KEYS = {"tokens_per_s", "tau", "speedup_vs_vanilla", "speedup_vs_hf", "identical_to_vanilla"}


@pytest.fixture(scope="module")
def bench_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("bench")
    prompts = d / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    out = d / "bench.json"
    cmd = [sys.executable, "-m", "eagle_core.bench", "--prompts", str(prompts), "--max-new-tokens", "8",
           "--methods", "vanilla,hf,hf-pld,eagle", "--repeats", "1", "--warmup", "0", "--tree", "3,4,8",
           "--weights", "float32",  # hf == vanilla holds in float32 (row-invariant products in both); see test_gguf_format
           "--json-out", str(out), "--md-out", str(d / "bench.md"),
           "--save-tokens", "--quiet"]
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=repo)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text()), proc.stdout, (d / "bench.md").read_text()


def test_json_shape(bench_run):
    result, _, _ = bench_run
    assert set(result["methods"]) == {"vanilla", "hf", "hf-pld", "eagle"}
    for name, entry in result["methods"].items():
        assert STATS_KEYS <= set(entry["overall"]), name
        assert set(entry["by_category"]) == {"writing", "math"}
        for st in entry["by_category"].values():
            assert STATS_KEYS <= set(st)
            assert st["tokens_per_s"] > 0
    assert result["methods"]["vanilla"]["overall"]["speedup_vs_vanilla"] == pytest.approx(1.0)
    assert result["methods"]["eagle"]["overall"]["tau"] >= 1.0
    assert len(result["samples"]) == 2 * 4


def test_greedy_outputs_identical(bench_run):
    result, _, _ = bench_run
    ids = {(s["method"], s["prompt"]): s["token_ids"] for s in result["samples"]}
    for p in range(2):
        assert ids[("eagle", p)] == ids[("vanilla", p)]
        assert ids[("hf", p)] == ids[("vanilla", p)]
        assert ids[("hf-pld", p)] == ids[("vanilla", p)]
        assert 0 < len(ids[("vanilla", p)]) <= 8
    for m in ("eagle", "hf", "hf-pld"):
        assert result["methods"][m]["overall"]["identical_to_vanilla"] == 1.0


def test_markdown_table(bench_run):
    _, stdout, md = bench_run
    assert "| eagle |" in md and "| hf-pld |" in md
    assert md.strip() in stdout


def test_load_prompts_first_turn_and_limit(tmp_path):
    f = tmp_path / "p.jsonl"
    f.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS) + "\n")
    ps = load_prompts(str(f))
    assert [p.text for p in ps] == ["Name three primary colors.", "What is 12 times 7?"]
    assert [p.category for p in ps] == ["writing", "math"]
    assert len(load_prompts(str(f), limit=1)) == 1
    f.write_text(json.dumps({"text": "x"}) + "\n")
    with pytest.raises(ValueError):
        load_prompts(str(f))


def test_summarize_hand_worked():
    from eagle_core.bench.journal import Sample

    def smp(method, prompt, toks, wall, tau=1.0, cycles=3):
        return Sample(method, prompt, 0, "c", tuple(toks), wall, cycles, tau)

    samples = [smp("vanilla", 0, [1, 2, 3, 4], 2.0), smp("vanilla", 1, [5, 6], 2.0),
               smp("eagle", 0, [1, 2, 3, 4], 1.0, tau=3.0, cycles=1), smp("eagle", 1, [5, 7], 0.5, tau=2.0, cycles=1)]
    st = summarize(samples, ["vanilla", "eagle"], greedy=True)["methods"]["eagle"]["overall"]
    assert st["tokens_per_s"] == pytest.approx(6 / 1.5)
    assert st["speedup_vs_vanilla"] == pytest.approx(4.0 / 1.5)  # ratio of means: (6/1.5) / (6/4)
    assert st["speedup_vs_vanilla_median"] == pytest.approx(3.0)  # per-prompt ratios 2 and 4
    assert st["tau"] == pytest.approx(2.5)
    assert st["identical_to_vanilla"] == pytest.approx(0.5)
    assert st["speedup_vs_hf"] is None


def test_best_setting_maximises_tokens_per_second():
    from eagle_core.bench.costmodel import best_setting
    from eagle_core.config import TreeSetting, parse_tree, parse_trees

    small, big, huge = parse_trees(["3,4,8", "5,8,24", "6,10,60"])
    assert small == TreeSetting(3, 4, 8) == parse_tree("3,4,8") and small.label == "d3/k4/t8"
    assert (small.depth, small.width, small.total_tokens) == (3, 4, 8)  # one order everywhere
    with pytest.raises(ValueError, match="depth,top_k,total_tokens"):
        parse_tree("60,6")
    cycle_ms = {small: 100.0, big: 150.0, huge: 300.0}
    best, tps = best_setting({small: 2.5, big: 3.3, huge: 4.5}, cycle_ms)
    assert best == small and tps == pytest.approx(25.0)  # 25 vs 22 vs 15 tokens/s
    best, _ = best_setting({small: 2.0, big: 3.3}, cycle_ms)
    assert best == big
    with pytest.raises(ValueError):
        best_setting({}, cycle_ms)


class _CharTokenizer:
    """Just enough of a tokenizer for the engine: ids = characters mod the vocabulary."""

    chat_template = bos_token_id = eos_token_id = None
    add_bos_token = False
    unk_token_id = pad_token_id = 0

    def __call__(self, text, add_special_tokens=False, split_special_tokens=True):
        return {"input_ids": [3 + ord(c) % 29 for c in text]}

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(97 + i % 26) for i in ids)

    def convert_tokens_to_ids(self, token):
        return 0


@pytest.mark.parametrize("fused", ["1", "0"])
def test_profile_buckets_cover_the_cycle(fused):
    """The cProfile breakdown finds the engine's functions and its buckets add up to the cycle,
    with the fused kernel drafting pass (where the kernels build) and without it."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    from eagle_core import DecodeSettings, Engine, FastPath, from_model, random_head
    from eagle_core.cpu import kernels
    from eagle_core.bench.cycle_profile import profile_cycles

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=32, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      bos_token_id=None, eos_token_id=None, pad_token_id=0)
    target = from_model(AutoModelForCausalLM.from_config(cfg), _CharTokenizer(), name="tiny",
                        fast=FastPath(passes="fused" if fused == "1" else "layers"))
    p = profile_cycles(Engine(target, random_head(target), None, "random"), "count to five",
                       DecodeSettings(method="eagle2", max_new_tokens=12, depth=3, tree_top_k=3, total_tokens=6))
    buckets = dict(p["buckets"])
    assert p["missing"] == [] and "Target.forward" not in p["idle"] and buckets["verify: target body"] > 0
    assert buckets["draft: head layer (FusedPass.run, HeadPass.__call__ or EagleHead.forward)"] > 0
    if fused == "1" and kernels.library() is not None:
        assert "FusedPass.run" not in p["idle"] and "Drafter._expand" in p["idle"]
    else:
        assert "FusedPass.run" in p["idle"] and buckets["draft: head inputs (embedding, concat)"] > 0
    assert sum(buckets.values()) == pytest.approx(p["cycle_ms"])
    assert buckets["other (loop, tensors, stop checks)"] > -0.05 * p["cycle_ms"]  # no double counting


def test_journal_resumes_and_reports(tmp_path):
    """A run interrupted after one prompt resumes where it stopped, and a report needs no model."""
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text("".join(json.dumps(p) + "\n" for p in PROMPTS))
    journal = tmp_path / "run.jsonl"
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    base = [sys.executable, "-m", "eagle_core.bench", "--prompts", str(prompts), "--max-new-tokens", "6",
            "--methods", "vanilla,eagle", "--warmup", "0", "--tree", "2,2,4",
            "--journal", str(journal)]

    def bench(*extra):
        proc = subprocess.run(base + list(extra), capture_output=True, text=True, timeout=300, cwd=repo)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc

    bench("--limit", "1")  # "interrupted" after the first prompt
    first = journal.read_text().splitlines()
    assert len(first) == 3 and '"segment"' in first[1] and '"prompt"' in first[2]
    out = tmp_path / "all.json"
    proc = bench("--json-out", str(out))
    assert "1 prompt runs done earlier, 1 to go" in proc.stderr
    lines = journal.read_text().splitlines()
    assert lines[:3] == first and len(lines) == 5  # a second segment and the second prompt only
    result = json.loads(out.read_text())
    assert result["config"]["n_prompts"] == 2 and len(result["config"]["segments"]) == 2
    assert result["methods"]["eagle"]["overall"]["identical_to_vanilla"] == 1.0

    # a report from the journal alone: no model is loaded (the --model given does not exist, so
    # loading it would fail the command), and a category selects prompts by text
    rep = tmp_path / "math.json"
    bench("--report-only", "--categories", "math", "--json-out", str(rep), "--model", str(tmp_path / "no-such-model"))
    math = json.loads(rep.read_text())
    assert math["config"]["n_prompts"] == 1 and set(math["methods"]["eagle"]["by_category"]) == {"math"}
    mine = [s for s in result["samples"] if s["category"] == "math"]
    assert [s["wall_s"] for s in math["samples"]] == [s["wall_s"] for s in mine]

    # other settings must not be appended to the same journal
    proc = subprocess.run(base[:-2] + ["--max-new-tokens", "7", "--journal", str(journal)] , capture_output=True,
                          text=True, timeout=300, cwd=repo)
    assert proc.returncode != 0 and "max_new_tokens" in proc.stderr


def test_journal_ignores_a_torn_last_line(tmp_path):
    from eagle_core.bench.journal import Journal, Sample
    from eagle_core.bench.prompts import Prompt

    path = str(tmp_path / "j.jsonl")
    j = Journal(path, {"methods": ["vanilla"], "temperature": 0.0})
    p = Prompt(0, "hello", "c")
    j.record(p, 0, [Sample("vanilla", 0, 0, "c", (1, 2), 0.5, 1, 1.0)])
    with open(path, "a") as f:
        f.write('{"prompt": "abc", "repe')  # killed mid-write
    again = Journal(path, {"methods": ["vanilla"], "temperature": 0.0})
    assert again.get(Prompt(7, "hello", "d"), 0, ["vanilla"])[0].prompt_index == 7
    assert again.get(Prompt(0, "other", "c"), 0, ["vanilla"]) is None
    again.record(Prompt(1, "next", "c"), 0, [Sample("vanilla", 1, 0, "c", (3,), 0.5, 1, 1.0)])
    third = Journal(path, {"methods": ["vanilla"], "temperature": 0.0})  # the torn line is gone
    assert len(third.done) == 2
    with pytest.raises(ValueError, match="temperature"):
        Journal(path, {"methods": ["vanilla"], "temperature": 1.0})


def test_eagle_by_tau_hand_worked():
    from eagle_core.bench.report import eagle_by_tau

    def smp(method, prompt, tokens, wall, tau):
        return {"method": method, "prompt": prompt, "repeat": 0, "new_tokens": tokens, "wall_s": wall, "tau": tau}

    bt = eagle_by_tau([smp("vanilla", 0, 10, 1.0, 1.0), smp("eagle", 0, 20, 1.0, 2.0),    # speedup 2 at tau 2: c = 1
                       smp("vanilla", 1, 10, 1.0, 1.0), smp("eagle", 1, 15, 2.0, 1.5),    # 0.75 at tau 1.5: c = 2
                       smp("hf", 1, 10, 0.1, 1.0)])
    assert bt["n"] == 2 and bt["break_even_tau"] == pytest.approx(1.5) and bt["faster_share"] == 0.5
    assert [(b["tau_from"], b["n"], b["speedup_mean"]) for b in bt["bins"]] == [(1.4, 1, 0.75), (2.0, 1, 2.0)]
    assert eagle_by_tau([smp("vanilla", 0, 10, 1.0, 1.0)]) is None


def test_eagle_by_vanilla_step_hand_worked():
    """Four prompts, two groups: the two where vanilla's step was fastest (10 ms) and the two where
    it was slowest (20 ms), each with its speedup, tau, cycle cost and drafting share worked by hand."""
    from eagle_core.bench.report import eagle_by_vanilla_step, render_markdown

    def pair(prompt, v_ms, e_wall, tau, draft_s):
        v = {"method": "vanilla", "prompt": prompt, "repeat": 0, "new_tokens": 100, "wall_s": v_ms / 10,
             "tau": 1.0, "cycles": 100, "verify_s": v_ms / 10, "draft_s": 0.0}
        e = {"method": "eagle", "prompt": prompt, "repeat": 0, "new_tokens": 100, "wall_s": e_wall, "tau": tau,
             "cycles": 50, "verify_s": e_wall - draft_s, "draft_s": draft_s}
        return [v, e]

    samples = (pair(0, 20, 1.0, 2.0, 0.1) + pair(1, 10, 0.8, 2.0, 0.1)    # vanilla 2.0 s / 1.0 s
               + pair(2, 20, 2.5, 2.0, 0.2) + pair(3, 10, 0.5, 2.0, 0.05))
    g = eagle_by_vanilla_step(samples, groups=2)
    fast, slow = g
    assert (fast["vanilla_ms_from"], fast["vanilla_ms_to"], fast["n"]) == (10, 10, 2)
    assert fast["speedup_mean"] == pytest.approx((1.25 + 2.0) / 2)    # 1.0 / 0.8 and 1.0 / 0.5
    assert fast["cycle_in_steps"] == pytest.approx((2 / 1.25 + 2 / 2.0) / 2)
    assert fast["draft_share"] == pytest.approx((0.002 / 0.010 + 0.001 / 0.010) / 2)  # 0.1 s / 50 cycles, 0.05 / 50
    assert slow["speedup_mean"] == pytest.approx((2.0 + 0.8) / 2) and slow["tau_mean"] == 2.0
    assert eagle_by_vanilla_step(samples[:2], groups=2) is None    # one prompt cannot make two groups
    md = render_markdown({"methods": {}, "config": {}, "eagle_by_vanilla_step": g})
    assert "| 10.0–10.0 | 2 | 1.62× | 2.00 | 1.30 | 0.150 |" in md


def test_kernel_table_shape():
    from eagle_core.cpu import kernels
    from eagle_core.bench.kernels import measure, render_markdown

    rows = measure(rows=(1, 3), repeats=2, hidden=16, kv=8, mlp=32, vocab=64, layers=2)
    names = [b for b in kernels.AUTO_CANDIDATES if kernels.BACKENDS[b].available()]
    assert [(r["weights"], r["rows"]) for r in rows][:2] == [("q, o", 1), ("q, o", 3)]
    assert all(r[n] > 0 for r in rows for n in names)
    md = render_markdown(rows, 1, 10.0)
    assert "| q, o | 16x16 | 4 | 1 |" in md
    assert md.count("(1.00x)") >= 5 * len(names), "every shape's 1-row time is its own base"
    assert "10.0 GB/s" in md and kernels.cpu_model() in md


@needs_smallgemm
def test_warm_products_read_a_forwards_bytes_from_one_weight():
    """--warm: one weight (a slice of a large one) run as often as a forward reads the bytes."""
    from eagle_core.bench.kernels import measure, render_markdown, warm_plan

    assert warm_plan(576, 576, 60) == (576, 60)  # 1.3 MB: whole
    assert warm_plan(49152, 576, 1) == (1041, 48)  # 113 MB: 1,041-row slices (2.4 MB), 48 passes
    rows, passes = warm_plan(1000, 100, 3, limit=40_000)
    assert rows == 100 and passes == 30 and rows * passes == 1000 * 3
    rows = measure(rows=(1, 2), repeats=2, backends=["smallgemm"], warm=True,
                   hidden=16, kv=8, mlp=32, vocab=64, layers=2)
    assert all(r["smallgemm"] > 0 for r in rows)
    assert "kept in the caches" in render_markdown(rows, 1, 10.0, warm=True)


def test_forward_timing_never_times_a_forward_straight_after_the_bandwidth_read(monkeypatch):
    """kernels report: the 256 MB read leaves the caches colder than a forward does, so the forward
    timed after it (k = 1, the bound's numerator) measured ~1 ms slow; an untimed forward now follows
    each read, and every timed forward comes straight after another forward."""
    from eagle_core.bench import forward_costs

    events = []

    class Cache:
        def crop(self, n):
            pass

    class Target:
        vocab_size, device = 10, "cpu"

        def new_cache(self):
            return Cache()

        def forward(self, x, cache, position_ids=None):
            events.append(("forward", x.shape[1]))
            return x

        def logits(self, f):
            return f

    monkeypatch.setattr(forward_costs.kernels, "stream_bandwidth", lambda reps=1: events.append(("read",)) or 50.0)
    bws = []
    t = forward_costs.time_forward(Target(), rows=(1, 2), context=4, repeats=3, bandwidth=bws)
    assert set(t) == {1, 2} and bws == [50.0] * 3
    after_read = [events[i + 1] for i, e in enumerate(events) if e == ("read",)]
    assert after_read == [("forward", 1)] * 3  # the untimed one
    forwards = [e for e in events if e[0] == "forward"]
    assert len(forwards) == 1 + (3 + 2) * 2 + 3  # the prompt, each round's two k, one after each read


def test_tree_sweep_runs_each_tree_with_each_method():
    """tree_sweep: vanilla, then every (method, tree), all greedy outputs identical to vanilla's."""
    from eagle_core import Engine, parse_tree, random_head, random_head3
    from eagle_core.bench.prompts import Prompt
    from eagle_core.bench.tree_sweep import render_markdown, sweep
    from test_head3 import tiny_target8

    target = tiny_target8()
    engine = Engine(target, random_head(target), None, "random", head3=random_head3(target), head3_name="random3")
    prompts = [Prompt(index=i, category="t", text=t) for i, t in enumerate(["abc", "hello"])]
    trees = [parse_tree("2,2,3"), parse_tree("3,2,5")]
    stats = sweep(engine, prompts, trees, max_new_tokens=10, log=lambda *_: None, methods=("eagle2", "eagle3"))
    assert list(stats) == ["vanilla", "eagle2 2,2,3", "eagle3 2,2,3", "eagle2 3,2,5", "eagle3 3,2,5"]
    assert all(st["identical"] == st["prompts"] == 2 and st["tokens"] == 20 for st in stats.values())
    assert all(st["tau"] >= 1.0 for st in stats.values()) and stats["vanilla"]["speedup"] == 1.0
    assert "| eagle3 3,2,5 |" in render_markdown(stats, {"cpu": "test", "threads": 1})
    only2 = sweep(engine, prompts[:1], trees[:1], max_new_tokens=4, log=lambda *_: None)
    assert list(only2) == ["vanilla", "2,2,3"]
