"""What a cycle costs beyond its arithmetic, counted on a CPU so that a GPU's path stays lean:

- host transfers: on a GPU every `.tolist()`, `.item()`, `float(t)`, `int(t)`, `bool(t)` or `.cpu()`
  of a device tensor waits for the device. A greedy cycle makes a fixed few (one per draft depth,
  one for verification), never one per drafted node.
- untimed work: node labels, the cycle's text and its record are made outside the timed
  segments, so a slow tokenizer cannot change the measured speed (checked with a clock that moves
  only while the tokenizer works).
"""
from __future__ import annotations

import pytest
import torch
from torch.overrides import TorchFunctionMode

from conftest import tiny_head, tiny_target
from eagle_core import DecodeSettings, Engine

TRANSFERS = {"tolist", "item", "__float__", "__int__", "__bool__", "cpu", "numpy"}


class CountTransfers(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.n = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in TRANSFERS:
            self.n += 1
        return func(*args, **(kwargs or {}))


def transfers_per_cycle(engine, **tree) -> tuple[float, int]:
    s = DecodeSettings(max_new_tokens=40, chat_template=False, **tree)
    gen = engine.generate("the quick brown fox", s)
    counts, before = [], 0
    with CountTransfers() as c:
        for _ in gen:
            counts.append(c.n - before)
            before = c.n
    return max(counts[1:]), max(len(x.nodes) for x in gen.run.cycles)  # counts[0] holds the prefill's too


@pytest.mark.parametrize("method, tree, bound", [
    ("eagle2", dict(depth=2, tree_top_k=2, total_tokens=4), 2 + 1),
    ("eagle2", dict(depth=6, tree_top_k=10, total_tokens=60), 6 + 1),
    ("eagle1", {}, 5 + 1),  # the static tree's five levels
    ("chain", dict(chain_length=5), 5 + 1),
    ("vanilla", {}, 1),
])
def test_a_greedy_cycle_moves_a_few_values_to_the_host_not_one_per_node(method, tree, bound):
    target = tiny_target("llama", seed=1, vocab=24)
    engine = Engine(target, tiny_head(target, seed=3))
    most, nodes = transfers_per_cycle(engine, method=method, **tree)
    assert most <= bound, (method, most, nodes)
    if tree.get("total_tokens") == 60:
        assert nodes > 8 * bound  # a big tree really was drafted: per-node transfers would show


def test_labels_and_text_are_made_outside_the_clock(monkeypatch):
    """The engine's clock, replaced by one that moves only while the tokenizer decodes (10 ms a
    call): the timed run reads no time at all, though the labels and text took 0.3 s and more. (Real
    time does not show this on every machine: on some 2-vCPU machines the cycles after each 10 ms
    pause ran several times slower, their threads having gone to sleep.)"""
    import eagle_core.decode as decode_module

    target = tiny_target("llama", seed=2, vocab=24)
    engine = Engine(target, tiny_head(target, seed=4))
    s = DecodeSettings(method="eagle2", depth=3, tree_top_k=3, total_tokens=8, max_new_tokens=24,
                       chat_template=False)
    fast = engine.run("hello world", s)
    now, calls = [0.0], []
    slow_decode = target.tokenizer.decode

    def decode(ids, skip_special_tokens=True):
        calls.append(1)
        now[0] += 0.01
        return slow_decode(ids, skip_special_tokens=skip_special_tokens)

    monkeypatch.setattr(target.tokenizer, "decode", decode)
    monkeypatch.setattr(decode_module, "clock", lambda device: now[0])
    slow = engine.run("hello world", s)
    assert slow.summary.token_ids == fast.summary.token_ids
    assert len(calls) * 0.01 > 0.3  # the labels and text took this long ...
    assert slow.summary.wall_s == 0.0 and slow.summary.prefill_ms == 0.0  # ... and none of it was timed
    assert all(c.draft_ms == 0.0 and c.verify_ms == 0.0 for c in slow.cycles)
    assert "".join(c.committed_text for c in slow.cycles) == slow.summary.text[len(slow.first_token_text):] \
        or slow.summary.text.startswith(slow.first_token_text)


def test_text_is_decoded_incrementally():
    """The cycle texts add up to the whole output, decoding a window each time, not everything."""
    from eagle_core.decode import TextStream

    seen = []

    def decode(ids):
        seen.append(len(ids))
        return "".join(chr(ord("a") + i % 26) for i in ids)

    stream = TextStream(decode)
    ids, out = [], []
    for step in range(200):
        ids += [step, step + 1]
        out.append(stream.push(ids))
    windows = list(seen)
    assert "".join(out) == decode(ids)
    assert max(windows[-10:]) <= 6  # a window of the last pushes, not the 400 ids so far


def test_a_cuda_engine_is_warmed_up_at_load(monkeypatch):
    """On CUDA the first forward pays for start-up: load_engine runs every served method once,
    untimed, so the first timed run (EAGLE, always first) does not carry it. Checked on a CPU
    target that says it is on cuda."""
    import eagle_core.engine_loading as el

    target = tiny_target("llama", seed=2, vocab=24)
    ran = []
    monkeypatch.setattr(el, "load_default_head", lambda t, h: (tiny_head(t, seed=1), None, "tiny"))
    monkeypatch.setattr(Engine, "run", lambda self, prompt, s, stop=None: ran.append(s.method))
    el.load_engine(target, methods=("vanilla", "eagle2"))
    assert ran == []  # a CPU engine is not warmed up
    target.device = "cuda"
    el.load_engine(target, methods=("vanilla", "eagle2"))
    assert {"vanilla", "eagle2", "eagle1", "chain"} <= set(ran)
