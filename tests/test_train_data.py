"""Token-id training data: the format, the loss mask, the eval-overlap refusal, resuming, and
batched generation / batched teacher forcing against one prompt at a time (tiny random models)."""
import argparse
import json
import os

import numpy as np
import pytest
import torch

from conftest import tiny_target
from eagle_core.train import gen_ids
from eagle_core.train.data import generate_batch
from eagle_core.train.features import id_batch, teacher_forced
from eagle_core.train.reference_answers import build_reference_answers, encode_exchange, end_of_turn_id
from eagle_core.train.datasets import load_training_data
from eagle_core.train.ids import (is_heldout, load_id_dataset, part_records, read_part,
                                  write_part)
from eagle_core.train.eagle2 import collate
from eagle_core.train.eagle3 import target_batch

EOS = 1


def _jsonl(path, records):
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")


@pytest.fixture
def dirs(tmp_path):
    """A train directory (two files with answers, one prompt also in eval, one empty answer, one
    file excluded by licence) and an eval directory."""
    train, ev = tmp_path / "train", tmp_path / "eval"
    train.mkdir(); ev.mkdir()
    _jsonl(train / "gsm8k_train.part1.jsonl", [
        {"prompt": "two plus two", "answer": "2+2 = <<2+2=4>>4\n#### 4"},
        {"prompt": "An  EVAL question", "answer": "never trained on"},
        {"prompt": "empty answer", "answer": "   "},
    ])
    _jsonl(train / "oasst_prompts_en.jsonl", [{"prompt": f"tell me {c}"} for c in "abcdefg"])
    _jsonl(train / "t0_summarization_en.jsonl", [{"prompt": "summarise news", "completion": "x<|endoftext|>"}])
    _jsonl(ev / "bench.jsonl", [{"turns": ["an eval question", "second turn"]}])
    return str(train), str(ev)


def test_part_round_trip(tmp_path):
    seqs, plens = [[5, 6, 7, 8], [9, 10, 11], [40000, 2, 3]], [2, 1, 2]
    path = str(tmp_path / "p.npz")
    entry = write_part(path, seqs, plens, ["b.jsonl", "a.jsonl", "b.jsonl"], [3, 1, 7], 49152,
                       temperature=np.array([0, 0.8, 0], dtype=np.float32))
    assert entry["sequences"] == 3 and entry["prompt_tokens"] == 5 and entry["answer_tokens"] == 5
    assert entry["by_source"]["b.jsonl"] == {"sequences": 2, "prompt_tokens": 4, "answer_tokens": 3}
    part = read_part(path)
    assert part["tokens"].dtype == np.uint16  # 2 bytes a token for a vocabulary up to 65,536
    recs = part_records(part)
    assert [r["ids"].tolist() for r in recs] == seqs
    assert [(r["prompt_len"], r["source"], r["line"]) for r in recs] == [(2, "b.jsonl", 3), (1, "a.jsonl", 1),
                                                                           (2, "b.jsonl", 7)]
    assert [r["temperature"] for r in recs] == pytest.approx([0, 0.8, 0])
    write_part(path, [[70000, 1]], [1], ["a.jsonl"], [1], 151936)
    assert read_part(path)["tokens"].dtype == np.int32 and part_records(read_part(path))[0]["ids"].tolist() == [70000, 1]


def test_loss_mask_covers_answer_tokens_only():
    target = tiny_target(eos=EOS)
    tok = target.tokenizer
    ids, plen = encode_exchange(target, "ab", "cde", end_of_turn_id(target))
    assert ids == tok("ab")["input_ids"] + tok("cde")["input_ids"] + [EOS] and plen == 2
    recs = [{"ids": torch.tensor(ids), "prompt_len": plen}, {"ids": torch.tensor([4, 5, 6]), "prompt_len": 1}]
    b = id_batch(recs, [0, 1], max_seq=64)
    assert b.answer.tolist() == [[False, False, True, True, True, True], [False, True, True, False, False, False]]
    assert b.attention.tolist() == [[1] * 6, [1, 1, 1, 0, 0, 0]]
    # EAGLE-3 weighs position j when x_{j+1} is an answer token
    w = torch.zeros(2, 6)
    w[:, :-1] = b.answer[:, 1:].float()
    assert w.tolist() == [[0, 1, 1, 1, 1, 0], [1, 1, 0, 0, 0, 0]]


def test_default_template_exchange(default_target):
    """The real chat template: the prompt part is exactly encode_prompt's, special-token text typed
    in the answer stays plain text, and the answer ends with <|im_end|>."""
    t = default_target
    end = end_of_turn_id(t)
    assert t.tokenizer.convert_ids_to_tokens(end) == "<|im_end|>"
    ids, plen = encode_exchange(t, "Say hi", "hi <|im_end|> there", end)
    assert ids[:plen] == t.encode_prompt("Say hi")
    assert ids[plen:].count(end) == 1 and ids[-1] == end
    assert t.tokenizer.decode(ids[plen:-1]) == "hi <|im_end|> there"


def test_fixed_answers_refuse_eval_overlap_and_skip_empty(dirs, tmp_path):
    train, ev = dirs
    target = tiny_target(eos=EOS)
    out = str(tmp_path / "fixed")
    m = build_reference_answers(target, train, ev, out, max_prompt_tokens=384, max_seq=1024)
    assert m["overlap_check"]["dropped_eval_overlap"] == 1
    assert m["excluded_by_licence"] == {"t0_summarization_en.jsonl": m["excluded_by_licence"]["t0_summarization_en.jsonl"]}
    s = m["sources"]["gsm8k_train.part1.jsonl"]
    assert s["sequences"] == 1 and s["skipped_empty"] == 1 and list(m["sources"]) == ["gsm8k_train.part1.jsonl"]
    (r,) = load_id_dataset(out, target)
    tok = target.tokenizer
    assert r["ids"].tolist() == tok("two plus two")["input_ids"] + tok("2+2 = 4\n#### 4")["input_ids"] + [EOS]
    assert r["line"] == 1 and r["prompt_len"] == len("two plus two")
    with pytest.raises(ValueError, match="eval"):
        build_reference_answers(target, ev, ev, out, 384, 1024)
    with pytest.raises(ValueError, match="overlap"):
        build_reference_answers(target, train, str(tmp_path / "missing"), out, 384, 1024)


def _gen_args(train, ev, out, **kw):
    a = dict(train_dir=train, eval_dir=ev, out=out, model=None, batch=3, part_size=4, max_new_tokens=5,
             max_prompt_tokens=384, temperature=0.8, sample_every=2, seed=0, limit=None, minutes=0, threads=1)
    return argparse.Namespace(**{**a, **kw})


def test_gen_resumes_and_skips_done_prompts(dirs, tmp_path, monkeypatch):
    train, ev = dirs
    target = tiny_target(eos=EOS)
    out = str(tmp_path / "gen")
    answered = []
    real = gen_ids.engine_generate
    monkeypatch.setattr(gen_ids, "engine_generate",
                        lambda t, enc, *a, **k: (answered.extend(map(tuple, enc)), real(t, enc, *a, **k))[1])
    m1 = gen_ids.run_ids_gen(_gen_args(train, ev, out, limit=5), target)
    assert sum(f["prompts"] for f in m1["files"]) == 5 and len(answered) == 5
    m2 = gen_ids.run_ids_gen(_gen_args(train, ev, out), target)
    # 9 redistributable prompts that are not in eval: the rerun answers only the 4 not yet done
    assert len(answered) == 9 and len(set(answered)) == 9
    assert sum(f["prompts"] for f in m2["files"]) == 9 and m2["batches"] == 5  # parts of 4 + 1, then 4 prompts; batches of <= 3
    recs = load_id_dataset(out, target)
    keys = [(r["source"], r["line"]) for r in recs]
    assert len(keys) == len(set(keys)) == 9 and "t0_summarization_en.jsonl" not in {k[0] for k in keys}
    assert {r["temperature"] for r in recs} == {0.0, 0.8}  # every 2nd batch sampled
    assert m2["totals"]["answer_tokens"] == sum(len(r["ids"]) - r["prompt_len"] for r in recs)
    gen_ids.run_ids_gen(_gen_args(train, ev, out), target)
    assert len(answered) == 9  # all done: nothing answered again
    with pytest.raises(SystemExit, match="settings"):
        gen_ids.run_ids_gen(_gen_args(train, ev, out, max_new_tokens=6), target)
    train_recs, hold = load_training_data([out], target, holdout_every=3)
    assert len(train_recs) + len(hold) == 9
    assert all(is_heldout(r["source"], r["line"], 3) for r in hold)


def test_gen_sources_answers_only_those_files_now_and_the_rest_later(dirs, tmp_path):
    """`ids-gen --sources`: one file's prompts first (the directory's settings and order unchanged),
    the others on a plain rerun; a name that is not a training file is refused, naming the known ones."""
    train, ev = dirs
    target = tiny_target(eos=EOS)
    out = str(tmp_path / "gen")
    m1 = gen_ids.run_ids_gen(_gen_args(train, ev, out, sources=["oasst_prompts_en"]), target)
    first = {r["source"] for r in load_id_dataset(out, target)}
    assert first == {"oasst_prompts_en.jsonl"} and sum(f["prompts"] for f in m1["files"]) == 7
    m2 = gen_ids.run_ids_gen(_gen_args(train, ev, out), target)
    recs = load_id_dataset(out, target)
    assert sum(f["prompts"] for f in m2["files"]) == 9 and len(recs) == len({(r["source"], r["line"]) for r in recs})
    assert {r["source"] for r in recs} == {"oasst_prompts_en.jsonl", "gsm8k_train.part1.jsonl"}
    with pytest.raises(SystemExit, match="no training prompts from 'oast'.*oasst_prompts_en.jsonl"):
        gen_ids.run_ids_gen(_gen_args(train, ev, str(tmp_path / "other"), sources=["oast"]), target)


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_engine_generator_equals_transformers_generate(kind):
    """ids-gen's own batched decoding (left padding, per-row positions, finished rows dropped from
    the batch and its cache) answers exactly as transformers' generate does, batched and alone."""
    target = tiny_target(kind, eos=EOS, seed=3)
    prompts = [[5, 9, 4], [7, 3, 8, 8, 2, 11, 6, 5, 14], [12], [4, 4, 10, 20, 3, 9], [6, 2]]
    free, _ = gen_ids.engine_generate(target, prompts, 12, 0.0, 0)
    # an EOS that ends some answers early and not others, so rows leave the batch at different steps
    target.eos_ids = (free[0][3],)
    ours, feats = gen_ids.engine_generate(target, prompts, 12, 0.0, 0)
    assert feats is None
    assert ours == generate_batch(target, prompts, 12, 0.0, 0)[0]
    assert ours == [gen_ids.engine_generate(target, [p], 12, 0.0, 0)[0][0] for p in prompts]
    lengths = {len(r) for r in ours}
    assert len(lengths) > 1 and 12 in lengths and ours[0][-1] == free[0][3]


def test_engine_generator_features_equal_teacher_forcing():
    """`ids-gen --features`: the features kept while decoding are those a teacher-forced forward of
    each finished sequence gives, for every token, the last included."""
    target = tiny_target(eos=EOS, seed=4)
    prompts = [[5, 9, 4, 3], [7, 3, 8], [12, 2, 2, 9, 10, 4]]
    free, _ = gen_ids.engine_generate(target, prompts, 10, 0.0, 0)
    target.eos_ids = (free[1][2],)
    resp, feats = gen_ids.engine_generate(target, prompts, 10, 0.0, 0, layers=(0, 1))
    assert len({len(r) for r in resp}) > 1
    for p, r, (final, captured) in zip(prompts, resp, feats):
        seq = torch.tensor([p + r])
        ref_final, ref_cap = target.forward_layers(seq, (0, 1))
        assert final.dtype == torch.float16 and final.shape == (len(p) + len(r), 64)
        torch.testing.assert_close(final.float(), ref_final[0], atol=2e-3, rtol=2e-3)
        torch.testing.assert_close(captured.float(), ref_cap[0], atol=2e-3, rtol=2e-3)
    # sampling: reproducible from the seed
    a, _ = gen_ids.engine_generate(target, prompts, 10, 0.8, 7)
    assert a == gen_ids.engine_generate(target, prompts, 10, 0.8, 7)[0]


def test_generator_sampling_follows_the_softmax():
    """The exponential race draws token i with probability softmax(logits / T)_i (chi-square-like
    bound on 40,000 draws over 5 tokens: 6 standard errors per token)."""
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, 0.5]]).repeat(40000, 1)
    gen = torch.Generator().manual_seed(0)
    draws = gen_ids.sample_rows(logits, 0.8, gen)
    freq = torch.bincount(draws, minlength=5).double() / len(draws)
    p = torch.softmax(logits[0].double() / 0.8, -1)
    assert (freq - p).abs().max() < 6 * (p * (1 - p) / len(draws)).sqrt().max()
    assert gen_ids.sample_rows(logits[:3], 0.0, gen).tolist() == [0, 0, 0]


def test_ids_gen_keeps_features_as_a_cache(dirs, tmp_path, monkeypatch):
    from eagle_core.train import featcache

    train, ev = dirs
    target = tiny_target(eos=EOS)
    monkeypatch.setattr(featcache, "default_layers", lambda t: (0, 1))
    out, feats = str(tmp_path / "gen"), str(tmp_path / "feats")
    gen_ids.run_ids_gen(_gen_args(train, ev, out, limit=5, features=feats), target)
    m = gen_ids.run_ids_gen(_gen_args(train, ev, out, features=feats), target)
    ids_recs = load_id_dataset(out, target)
    recs, fm = featcache.load_feature_cache(feats, target)
    assert len(recs) == len(ids_recs) == m["totals"]["sequences"] == fm["sequences"]
    assert len(fm["shards"]) == len(m["files"])
    by_key = {(r["source"], r["line"]): r for r in ids_recs}
    for r in recs:
        assert r["own"] and r["ids"].tolist() == by_key[(r["source"], r["line"])]["ids"].tolist()
        assert r["feats"].shape == (len(r["ids"]), 64) and r["layers"].shape == (len(r["ids"]), 128)
    train_recs, hold = load_training_data([feats], target, holdout_every=3)
    assert len(train_recs) + len(hold) == len(recs)


@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_batched_greedy_generation_equals_one_prompt_at_a_time(kind):
    target = tiny_target(kind, eos=EOS, seed=3)
    prompts = [[5, 9, 4], [7, 3, 8, 8, 2, 11, 6, 5, 14], [12], [4, 4, 10, 20, 3, 9]]
    batched, _ = generate_batch(target, prompts, 12, 0.0, 0)
    alone = [generate_batch(target, [p], 12, 0.0, 0)[0][0] for p in prompts]
    assert batched == alone
    assert any(len(r) == 12 for r in alone)


def test_batched_teacher_forcing_equals_each_sequence_alone():
    """The features both trainers recompute: a right-padded batch gives every real position the
    feature of its own sequence alone; EAGLE-2's collate and EAGLE-3's target_batch accept id records."""
    target = tiny_target(eos=EOS, seed=2)
    g = torch.Generator().manual_seed(0)
    recs = [{"ids": torch.randint(3, 24, (n,), generator=g, dtype=torch.int32), "prompt_len": 3} for n in (7, 12, 5)]
    final, _ = teacher_forced(target, id_batch(recs, [0, 1, 2], 64))
    for b, r in enumerate(recs):
        one, _ = teacher_forced(target, id_batch(recs, [b], 64))
        # (loose: the kernels pick a linear backend per machine by timing, and batch 1 runs another attention)
        torch.testing.assert_close(final[b, :len(r["ids"])], one[0], atol=1e-4, rtol=1e-4)
    ids_next, f_in, f_tgt, w = collate(recs, [0, 1, 2], 64, "cpu", target)
    assert f_in.shape == (3, 11, 64)
    torch.testing.assert_close(f_in[1, :11], final[1, :11])
    torch.testing.assert_close(f_tgt[0, :5], final[0, 1:6])
    assert w[0].tolist() == pytest.approx([0.3, 0.3, 1, 1, 1, 0, 0, 0, 0, 0, 0])
    from eagle_core.drafting.head3 import Eagle3Config, Eagle3Head
    from test_head3 import tiny_target8

    t8 = tiny_target8()
    head = Eagle3Head(Eagle3Config.for_target(t8.config))
    ids, captured, p, weight = target_batch(t8, head, head.config.layers_for(8), recs, [0, 2], 64)
    assert captured.shape == (2, 7, 3 * 64) and weight[1, :4].tolist() == [0, 0, 1, 1]


def test_train_and_train3_commands_run_on_a_token_id_dataset(tmp_path, monkeypatch):
    """`train --data DIR` and `train3 --data DIR` end to end on an id dataset (tiny targets stand
    in for the default model)."""
    from eagle_core import target as target_mod
    from eagle_core.train.__main__ import main
    from eagle_core.train.ids import FORMAT, tokenizer_fingerprint, write_manifest
    from test_head3 import tiny_target8

    t2, t8 = tiny_target(eos=EOS), tiny_target8()
    g = torch.Generator().manual_seed(0)
    seqs = [torch.randint(3, 24, (int(n),), generator=g).tolist() for n in torch.randint(8, 30, (24,), generator=g)]
    data = str(tmp_path / "ids")
    os.makedirs(data)
    entry = write_part(os.path.join(data, "p.npz"), seqs, [4] * len(seqs), ["oasst_prompts_en.jsonl"] * len(seqs),
                       list(range(1, len(seqs) + 1)), 24)
    write_manifest(data, {"format": FORMAT, "tokenizer": tokenizer_fingerprint(t2), "files": [entry]})
    monkeypatch.setattr(target_mod, "load_target", lambda *a, **k: t2)
    common = ["--data", data, "--epochs", "1", "--threads", "1", "--tokens-per-batch", "128", "--draft-vocab", "16",
              "--holdout-every", "4"]
    main(["train", *common, "--out", str(tmp_path / "run2")])
    log = [json.loads(l) for l in open(tmp_path / "run2" / "log.jsonl")]
    assert log[-1]["epoch_end"] == 1 and log[-1]["top1"] >= 0
    info = json.load(open(tmp_path / "run2" / "info.json"))
    assert info["sequences"] + info["holdout"] == 24 and info["holdout"] > 0
    # a warm start that keeps its vocabulary: the run drafts from the given one, not one counted on the data
    keep = [23, 5, 7] + list(range(8, 21))
    (tmp_path / "v.json").write_text(json.dumps({"token_ids": keep}))
    main(["train", *common, "--out", str(tmp_path / "run2v"), "--draft-vocab-from", str(tmp_path / "v.json")])
    assert json.load(open(tmp_path / "run2v" / "draft_vocab.json"))["token_ids"] == keep
    (tmp_path / "bad.json").write_text(json.dumps({"token_ids": [3, 3, 99]}))
    with pytest.raises(SystemExit, match=r"--draft-vocab-from .*distinct token ids in \[0, 24\)"):
        main(["train", *common, "--out", str(tmp_path / "run2b"), "--draft-vocab-from", str(tmp_path / "bad.json")])
    monkeypatch.setattr(target_mod, "load_target", lambda *a, **k: t8)
    main(["train3", *common, "--steps", "2", "--out", str(tmp_path / "run3"), "--eval-every", "1"])
    full = [r for r in map(json.loads, open(tmp_path / "run3" / "log3.jsonl")) if "top1" in r]
    n = full[-1]["step"]  # one held-out record per step, then one at the epoch's end
    assert n >= 3 and [r["step"] for r in full] == [*range(0, n + 1), n] and full[-1]["epoch_end"] == 1
    assert full[0]["epoch_end"] == 0 and 0 < full[1]["epoch_end"] < 1
    # a run stopped after its first step, exported, and carried on in a "later session" from the export
    main(["train3", *common, "--steps", "2", "--out", str(tmp_path / "a"), "--eval-every", "1", "--max-minutes", "1e-9"])
    meta = json.load(open(tmp_path / "a" / "head3" / "config.json"))["eagle_explainer"]
    assert meta["run_state"]["step"] == 1 and meta["run_state"]["batch"] == 1 and meta["run_state"]["cpu"] > 0
    main(["train3", *common, "--steps", "2", "--out", str(tmp_path / "b"), "--eval-every", "1",
          "--init", str(tmp_path / "a" / "head3"), "--continue"])
    rest = [r for r in map(json.loads, open(tmp_path / "b" / "log3.jsonl")) if "top1" in r]
    assert [r["step"] for r in rest] == [*range(2, n + 1), n]  # the batches the first part did not see, no more
    with pytest.raises(SystemExit, match="--continue needs --init"):
        main(["train3", *common, "--steps", "2", "--out", str(tmp_path / "c"), "--continue"])
    # --layers: the same head read from other target layers (a warm start keeps its weights)
    main(["train3", *common, "--steps", "2", "--out", str(tmp_path / "d"), "--init", str(tmp_path / "a" / "head3"),
          "--layers", "1", "3", "7", "--max-minutes", "1e-9"])
    cfg = json.load(open(tmp_path / "d" / "head3" / "config.json"))
    assert cfg["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 3, 7]
    with pytest.raises(ValueError, match="the target has 8 layers"):
        main(["train3", *common, "--steps", "2", "--out", str(tmp_path / "e"), "--layers", "1", "3", "8"])


def test_one_loop_resumes_both_heads_to_the_same_weights(tmp_path, monkeypatch):
    """train and train3 run through one loop (train/loop.py): stopped after a step and rerun, each
    ends with the head an uninterrupted run ends with, bit for bit (EAGLE-2's input noise too: the
    RNG state is in the checkpoint), also from an EAGLE-3 checkpoint written before the loop was
    shared (no RNG state, no config). Every --eval-every step gets a held-out record for both."""
    from eagle_core import target as target_mod
    from eagle_core.train.__main__ import main
    from eagle_core.train.ids import FORMAT, tokenizer_fingerprint, write_manifest
    from test_head3 import tiny_target8

    g = torch.Generator().manual_seed(1)
    seqs = [torch.randint(3, 24, (int(n),), generator=g).tolist() for n in torch.randint(8, 20, (10,), generator=g)]
    data = str(tmp_path / "ids")
    os.makedirs(data)
    entry = write_part(os.path.join(data, "p.npz"), seqs, [4] * len(seqs), ["oasst_prompts_en.jsonl"] * len(seqs),
                       list(range(1, len(seqs) + 1)), 24)
    write_manifest(data, {"format": FORMAT, "tokenizer": tokenizer_fingerprint(tiny_target(eos=EOS)), "files": [entry]})
    common = ["--data", data, "--epochs", "2", "--threads", "1", "--tokens-per-batch", "128", "--draft-vocab", "16",
              "--holdout-every", "4", "--eval-every", "1"]
    for cmd, target, extra, ckpt, log in (("train", tiny_target(eos=EOS), ["--noise", "0.2"], "ckpt.pt", "log.jsonl"),
                                          ("train3", tiny_target8(), ["--steps", "2"], "ckpt3.pt", "log3.jsonl")):
        monkeypatch.setattr(target_mod, "load_target", lambda *a, **k: target)
        straight, paused = str(tmp_path / f"{cmd}_straight"), str(tmp_path / f"{cmd}_paused")
        main([cmd, *common, *extra, "--out", straight])
        main([cmd, *common, *extra, "--out", paused, "--max-minutes", "1e-9"])  # stops after its first step
        c = torch.load(os.path.join(paused, ckpt), weights_only=False)
        assert c["state"]["step"] == 1
        if cmd == "train3":  # as the EAGLE-3 trainer wrote it before the loop was shared
            torch.save({k: c[k] for k in ("head", "opt", "sched", "state")}, os.path.join(paused, ckpt))
        main([cmd, *common, *extra, "--out", paused])
        a = torch.load(os.path.join(straight, ckpt), weights_only=False)
        b = torch.load(os.path.join(paused, ckpt), weights_only=False)
        assert a["state"]["step"] == b["state"]["step"] > 2
        for k, v in a["head"].items():
            assert torch.equal(v, b["head"][k]), (cmd, k)
        held = [r["step"] for r in map(json.loads, open(os.path.join(straight, log))) if "epoch_end" in r]
        n = a["state"]["step"]
        assert held == [0, *range(1, n // 2 + 1), n // 2, *range(n // 2 + 1, n + 1), n]


def test_heldout_only_generation_answers_exactly_the_prompts_every_trainer_holds_out(tmp_path):
    """`ids-gen --heldout-only`: a self-distilled accuracy set that no training data can leak into."""
    from eagle_core.train.loop import drop_excluded, holdout_sets

    train, ev = tmp_path / "train", tmp_path / "eval"
    train.mkdir(); ev.mkdir()
    _jsonl(train / "oasst_prompts_en.jsonl", [{"prompt": f"question number {i}"} for i in range(300)])
    _jsonl(ev / "bench.jsonl", [{"turns": ["unrelated"]}])
    want = {("oasst_prompts_en.jsonl", i + 1) for i in range(300) if is_heldout("oasst_prompts_en.jsonl", i + 1)}
    assert 0 < len(want) < 20
    target = tiny_target(eos=EOS)
    out = str(tmp_path / "held")
    m = gen_ids.run_ids_gen(_gen_args(str(train), str(ev), out, heldout_only=True, part_size=64), target)
    assert m["settings"]["heldout_only"] is True and m["kind"] == "self-distilled"
    recs = load_id_dataset(out, target)
    assert {(r["source"], r["line"]) for r in recs} == want and all(r["own"] for r in recs)
    tr, hold = load_training_data([out], target)
    assert tr == [] and len(hold) == len(want)
    # a warm start's own training prompts are dropped from scoring; both kinds are scored apart
    excl = tmp_path / "excl.json"
    first = sorted(want)[0]
    excl.write_text(json.dumps({"keys": [list(first)]}))
    kept, dropped = drop_excluded(hold, str(excl))
    assert dropped == 1 and first not in {(r["source"], r["line"]) for r in kept}
    fixed = [dict(r, own=False) for r in kept[:1]]
    sets = holdout_sets(kept + fixed)
    assert len(sets["all"]) == len(kept) + 1 and len(sets["self"]) == len(kept) and sets["fixed"] == fixed
    assert set(holdout_sets(kept)) == {"all"}  # all of them chat: no separate "chat" set
    other = [dict(r, source="gsm8k_train.part1.jsonl") for r in kept[:2]]
    sets = holdout_sets(kept + other)
    assert set(sets) == {"all", "chat"} and sets["chat"] == kept
