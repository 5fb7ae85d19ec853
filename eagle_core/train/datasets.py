"""Every kind of training data behind one call: token-id datasets (ids.py), feature caches
(featcache.py) and the old `gen` shard directories (data.py), with one held-out rule."""
from __future__ import annotations

import glob
import os

from .data import load_shards
from .featcache import is_feature_cache, load_feature_cache
from .ids import HOLDOUT_EVERY, MANIFEST, is_heldout, is_id_dataset, load_id_dataset


def load_training_data(paths, target=None, holdout_shards: int = 2, max_shards: int | None = None,
                       holdout_every: int = HOLDOUT_EVERY) -> tuple[list[dict], list[dict]]:
    """(train records, held-out records) from any mix of token-id datasets, feature caches
    (train/featcache.py) and old `gen` shard directories. Id datasets and caches: held out by hash
    of (source, line). Shard directories (records with
    fp16 features): the first `holdout_shards` shards are held out, at most `max_shards` trained on."""
    train, hold = [], []
    for p in [paths] if isinstance(paths, str) else paths:
        if is_feature_cache(p):
            for r in load_feature_cache(p, target)[0]:
                (hold if is_heldout(r["source"], r["line"], holdout_every) else train).append(r)
        elif is_id_dataset(p):
            for r in load_id_dataset(p, target):
                (hold if is_heldout(r["source"], r["line"], holdout_every) else train).append(r)
        elif glob.glob(os.path.join(p, "shard_*.pt")):
            hold.extend(dict(r, own=True) for r in load_shards(p, limit=holdout_shards))
            train.extend(dict(r, own=True) for r in load_shards(p, skip=holdout_shards, limit=max_shards))
        else:
            raise SystemExit(f"{p}: not a token-id dataset ({MANIFEST}), a feature cache or `gen` shards (shard_*.pt)")
    return train, hold
