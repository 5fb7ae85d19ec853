"""The local feature cache (train/featcache.py): the same features as a teacher-forced forward,
resumable shard by shard, read by both trainers."""
import argparse
import json
import os

import pytest
import torch

from eagle_core.drafting.head3 import Eagle3Config, Eagle3Head
from eagle_core.train import featcache
from eagle_core.train.features import id_batch, teacher_forced
from eagle_core.train.datasets import load_training_data
from eagle_core.train.ids import FORMAT, tokenizer_fingerprint, write_manifest, write_part
from eagle_core.train.eagle2 import collate
from eagle_core.train.eagle3 import target_batch
from test_head3 import tiny_target8


def _dataset(path, target, n=11, seed=0, parts=1):
    """A token-id dataset of n random sequences (lines 1..n), split evenly over `parts` part files."""
    g = torch.Generator().manual_seed(seed)
    seqs = [torch.randint(3, 24, (int(L),), generator=g).tolist() for L in torch.randint(6, 40, (n,), generator=g)]
    os.makedirs(path)
    per = n // parts
    entries = [write_part(os.path.join(path, f"p{k}.npz"), seqs[k * per:(k + 1) * per], [3] * per,
                          ["oasst_prompts_en.jsonl"] * per, list(range(k * per + 1, (k + 1) * per + 1)), 24)
               for k in range(parts)]
    write_manifest(path, {"format": FORMAT, "tokenizer": tokenizer_fingerprint(target), "files": entries})
    return seqs


def _args(data, out, **kw):
    a = dict(data=[data], out=out, model=None, layers=None, max_seq=32, shard_seqs=4, tokens_per_batch=96,
             seed=0, minutes=0, start_shard=0, parts=None, threads=1)
    a.update(kw)
    return argparse.Namespace(**a)


def test_cache_holds_each_sequences_own_features_and_resumes(tmp_path, monkeypatch):
    target = tiny_target8()
    data, out = str(tmp_path / "ids"), str(tmp_path / "feats")
    seqs = _dataset(data, target)
    # a budget that ends after the first shard, then a rerun: the same shards as one whole run
    clock = iter([0.0, 0.0] + [1e6] * 100)
    monkeypatch.setattr(featcache.time, "time", lambda: next(clock))
    m = featcache.run_features(_args(data, out, minutes=1), target)
    assert len(m["shards"]) == 1
    monkeypatch.undo()
    m = featcache.run_features(_args(data, out), target)
    assert len(m["shards"]) == 3 and m["sequences"] == 11
    recs, _ = featcache.load_feature_cache(out, target)
    whole = featcache.run_features(_args(data, str(tmp_path / "whole")), target)
    recs2, _ = featcache.load_feature_cache(str(tmp_path / "whole"), target)
    assert whole["tokens"] == m["tokens"] == sum(min(len(s), 32) for s in seqs)
    for a, b in zip(recs, recs2):
        assert torch.equal(a["ids"], b["ids"]) and torch.equal(a["feats"], b["feats"])
    # a later slice alone (another session): shard 2 of the same order, nothing before it
    part = featcache.run_features(_args(data, str(tmp_path / "slice"), start_shard=2), target)
    assert part["shards"] == ["fshard_00002.pt"]
    recs3, _ = featcache.load_feature_cache(str(tmp_path / "slice"), target)
    assert [r["ids"].tolist() for r in recs3] == [r["ids"].tolist() for r in recs2[8:]]
    # every cached sequence: its ids cut to max_seq, and the features of a forward of it alone
    layers = featcache.default_layers(target)
    by_ids = {tuple(s[:32]): s for s in seqs}
    assert sorted(tuple(r["ids"].tolist()) for r in recs) == sorted(by_ids)
    for r in recs:
        one = [{"ids": r["ids"], "prompt_len": 3}]
        final, captured = teacher_forced(target, id_batch(one, [0], 32), layers)
        torch.testing.assert_close(r["feats"].float(), final[0], atol=2e-3, rtol=2e-3)
        torch.testing.assert_close(r["layers"].float(), captured[0], atol=2e-3, rtol=2e-3)


def test_parts_caches_only_those_parts(tmp_path):
    target = tiny_target8()
    data = str(tmp_path / "ids")
    seqs = _dataset(data, target, n=9, seed=1, parts=3)  # parts of 3 sequences each
    out = str(tmp_path / "feats")
    m = featcache.run_features(_args(data, out, parts="1-2"), target)
    assert m["sequences"] == 6 and m["settings"]["parts"] == [1, 2]
    recs, _ = featcache.load_feature_cache(out, target)
    assert sorted(r["ids"].tolist() for r in recs) == sorted(s[:32] for s in seqs[3:])
    with pytest.raises(SystemExit, match="made with"):  # resuming with other parts is refused
        featcache.run_features(_args(data, out, parts="0-2"), target)
    for bad in ("2-1", "x", "1-3"):  # a message naming the parts, not a traceback
        with pytest.raises(SystemExit, match="parts"):
            featcache.run_features(_args(data, str(tmp_path / f"bad{bad}"), parts=bad), target)


def test_rerun_with_other_settings_is_refused(tmp_path):
    target = tiny_target8()
    data, out = str(tmp_path / "ids"), str(tmp_path / "feats")
    _dataset(data, target, n=3)
    featcache.run_features(_args(data, out), target)
    with pytest.raises(SystemExit, match="made with"):
        featcache.run_features(_args(data, out, max_seq=16), target)


def test_trainers_read_the_cache(tmp_path, monkeypatch):
    """EAGLE-2's collate and EAGLE-3's target_batch give the same batch from the cache as from a
    teacher-forced forward; a cache for other layers is refused; both commands train on a cache."""
    target = tiny_target8()
    data, out = str(tmp_path / "ids"), str(tmp_path / "feats")
    _dataset(data, target, n=8)
    featcache.run_features(_args(data, out), target)
    train, hold = load_training_data([out], target, holdout_every=4)
    assert len(train) + len(hold) == 8 and hold and all("feats" in r for r in train)
    plain = [{k: r[k] for k in ("ids", "prompt_len")} for r in train]
    idx = [0, 1, 2]
    for a, b in zip(collate(train, idx, 32, "cpu"), collate(plain, idx, 32, "cpu", target)):
        torch.testing.assert_close(a, b, atol=2e-3, rtol=2e-3)
    head = Eagle3Head(Eagle3Config.for_target(target.config))
    layers = head.config.layers_for(8)
    real = id_batch(plain, idx, 32).attention.bool()  # padded positions hold zeros in one, garbage in the other
    for a, b in zip(target_batch(target, head, layers, train, idx, 32), target_batch(target, head, layers, plain, idx, 32)):
        torch.testing.assert_close(a[real], b[real], atol=2e-3, rtol=2e-3)
    with pytest.raises(ValueError, match="holds layers"):
        target_batch(target, head, (1, 2, 3), train, idx, 32)

    from eagle_core import target as target_mod
    from eagle_core.train.__main__ import main

    monkeypatch.setattr(target_mod, "load_target", lambda *a, **k: target)
    common = ["--data", out, "--epochs", "1", "--threads", "1", "--tokens-per-batch", "96", "--draft-vocab", "16",
              "--holdout-every", "4"]
    main(["train", *common, "--out", str(tmp_path / "run2")])
    log = [json.loads(l) for l in open(tmp_path / "run2" / "log.jsonl")]
    assert log[-1]["epoch_end"] == 1
    main(["train3", *common, "--steps", "2", "--out", str(tmp_path / "run3")])
    assert os.path.exists(tmp_path / "run3" / "head3" / "config.json")


def test_bf16_precision_is_recorded_close_to_fp32_and_not_mixed(tmp_path):
    """--precision bf16 (autocast) caches features near the fp32 ones, says so in the manifest, and
    a cache made one way is not resumed the other way."""
    target = tiny_target8()
    data = str(tmp_path / "ids")
    _dataset(data, target, n=6)
    f32 = featcache.run_features(_args(data, str(tmp_path / "f32")), target)
    bf = featcache.run_features(_args(data, str(tmp_path / "bf"), precision="bf16"), target)
    assert "precision" not in f32["settings"] and bf["settings"]["precision"] == "bf16"
    a, _ = featcache.load_feature_cache(str(tmp_path / "f32"), target)
    b, _ = featcache.load_feature_cache(str(tmp_path / "bf"), target)
    for ra, rb in zip(a, b):
        assert torch.equal(ra["ids"], rb["ids"])
        for k in ("feats", "layers"):
            x, y = ra[k].float(), rb[k].float()
            assert not torch.equal(x, y)  # bf16 products really ran
            assert ((x - y).norm() / x.norm()).item() < 0.05
    with pytest.raises(SystemExit, match="made with"):
        featcache.run_features(_args(data, str(tmp_path / "bf")), target)
    with pytest.raises(SystemExit, match="made with"):
        featcache.run_features(_args(data, str(tmp_path / "f32"), precision="bf16"), target)
