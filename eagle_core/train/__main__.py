"""python -m eagle_core.train {ids-fixed,ids-gen,gen,train,train3,export,export-serving,eval,plot,curves} ... (see docs/training.md)."""
from __future__ import annotations

import argparse
import os

from ..bench.prompts import MT_BENCH
from ..config import add_tree_argument
from ..environment import runs_root



def _run(name: str) -> str:
    """A run's default directory: outside the repository, so its checkpoints are committed only on purpose."""
    return os.path.join(runs_root(), name)

PROMPT_DIRS_NEEDED = (
    "the training prompts are not shipped with the repository: pass --train-dir DIR (JSONL prompt files, one "
    "`prompt` or `turns` per line; the sets this project used and their public sources: docs/training.md, "
    "\"The prompt sets and their sources\") and --eval-dir DIR (the evaluation prompts no training prompt may "
    "match, e.g. assets/prompts)")


def _add_prompt_dirs(p) -> None:
    p.add_argument("--train-dir", default=None, help="directory of JSONL training prompts (required)")
    p.add_argument("--eval-dir", default=None,
                   help="directory of JSONL eval prompts, excluded from training (exact match after normalising; required)")


def _check_prompt_dirs(ap, args) -> None:
    """gen, ids-fixed, ids-gen: both prompt directories given and present, else a clear error (exit 2)."""
    missing = [f"--{n.replace('_', '-')}" for n in ("train_dir", "eval_dir") if not getattr(args, n, None)]
    if missing:
        ap.error(f"{args.cmd} needs {' and '.join(missing)}: {PROMPT_DIRS_NEEDED}")
    for n in ("train_dir", "eval_dir"):
        if not os.path.isdir(getattr(args, n)):
            ap.error(f"--{n.replace('_', '-')} {getattr(args, n)}: no such directory; {PROMPT_DIRS_NEEDED}")


def _data_parsers(sub) -> None:
    """gen, ids-fixed, ids-gen: the training data."""
    g = sub.add_parser("gen", help="self-distillation data: the target answers training prompts")
    _add_prompt_dirs(g)
    g.add_argument("--out", default="data/gen")
    g.add_argument("--model", default=None)
    g.add_argument("--device", default=None)
    g.add_argument("--max-prompts", type=int, default=100000)
    g.add_argument("--shard-size", type=int, default=32, help="prompts per shard (= one generate batch)")
    g.add_argument("--max-new-tokens", type=int, default=256)
    g.add_argument("--max-prompt-tokens", type=int, default=384)
    g.add_argument("--temperature", type=float, default=0.8)
    g.add_argument("--sample-every", type=int, default=3, help="every N-th shard is sampled, the rest greedy")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--threads", type=int, default=2)

    fx = sub.add_parser("ids-fixed", help="token-id dataset of the training files' own reference answers (no generation)")
    _add_prompt_dirs(fx)
    fx.add_argument("--out", default="train_data/fixed")
    fx.add_argument("--model", default=None, help="the target whose tokenizer and chat template render the data")
    fx.add_argument("--max-prompt-tokens", type=int, default=384, help="longer prompts are skipped")
    fx.add_argument("--max-seq", type=int, default=1024, help="longer sequences are cut (answer tail dropped)")

    ig = sub.add_parser("ids-gen", help="token-id dataset of the target's own answers, batched generation (resumable)")
    _add_prompt_dirs(ig)
    ig.add_argument("--out", default="train_data/gen")
    ig.add_argument("--model", default=None)
    ig.add_argument("--batch", type=int, default=48, help="prompts per left-padded batch")
    ig.add_argument("--part-size", type=int, default=384, help="prompts per part file (the unit of resuming)")
    ig.add_argument("--max-new-tokens", type=int, default=256)
    ig.add_argument("--max-prompt-tokens", type=int, default=384, help="longer prompts are skipped")
    ig.add_argument("--temperature", type=float, default=0.8)
    ig.add_argument("--sample-every", type=int, default=3, help="every N-th batch is sampled, the rest greedy")
    ig.add_argument("--seed", type=int, default=0)
    ig.add_argument("--limit", type=int, default=None, help="answer at most N more prompts in this session")
    ig.add_argument("--minutes", type=float, default=0, help="stop after the part in progress once this long; 0 = no limit")
    ig.add_argument("--threads", type=int, default=2)
    ig.add_argument("--generator", choices=("engine", "stock"), default="engine",
                    help="engine: the target's own forward step by step (fast on a CPU); stock: transformers generate")
    ig.add_argument("--features", default=None,
                    help="also keep the features computed while generating, as a feature cache in this directory")
    ig.add_argument("--sources", nargs="+", default=None, metavar="FILE",
                    help="answer only the prompts of these training files now (e.g. oasst_prompts_en); the rest stay "
                         "to do, so the directory's settings and order are unchanged")
    ig.add_argument("--heldout-only", action="store_true",
                    help="answer only the prompts every trainer holds out: a self-distilled accuracy set")


def _train_parser(sub) -> None:
    t = sub.add_parser("train", help="train the head on token-id datasets or generated shards (resumable)")
    t.add_argument("--data", nargs="+", default=["data/gen"],
                   help="token-id dataset directories (ids-fixed, ids-gen) and/or `gen` shard directories")
    t.add_argument("--out", default=_run("head"), help="the run: checkpoint, log and export (default %(default)s)")
    t.add_argument("--model", default=None, help="the target (default: the embedded SmolLM2-135M-Instruct)")
    t.add_argument("--epochs", type=int, default=4)
    t.add_argument("--lr", type=float, default=1e-3)
    t.add_argument("--tokens-per-batch", type=int, default=4096)
    t.add_argument("--max-seq", type=int, default=640)
    t.add_argument("--noise", type=float, default=0.1, help="uniform noise on input features (+-)")
    t.add_argument("--ce-weight", type=float, default=0.1)
    t.add_argument("--topk-loss", type=int, default=0, metavar="K",
                   help="add the cross-entropy over the target's K most likely tokens (HASS's top-K distillation)")
    t.add_argument("--topk-weight", type=float, default=1.0, help="weight of --topk-loss")
    t.add_argument("--draft-vocab", type=int, default=8192, help="0 = full vocabulary")
    t.add_argument("--draft-vocab-from", default=None, metavar="DIR",
                   help="draft from this head's (or run's) vocabulary instead of counting one on the data: "
                        "for a warm start trained on data of another kind")
    t.add_argument("--holdout-shards", type=int, default=2, help="the first N shards are held out (accuracy)")
    t.add_argument("--holdout-every", type=int, default=50,
                   help="token-id datasets: 1 prompt in N (by hash of source and line) is held out")
    t.add_argument("--unroll", type=int, default=1,
                   help="K > 1: the training-time test, K draft steps reading the head's own predictions (weights 0.8^k)")
    t.add_argument("--max-shards", type=int, default=None, help="train on at most N shards")
    t.add_argument("--max-records", type=int, default=None, help="train on the first N sequences only")
    t.add_argument("--init", default=None, help="warm start: a ckpt.pt of an earlier run or a head directory")
    t.add_argument("--layers", type=int, default=None,
                   help="decoder layers of the head (default: the warm start's, else 1); more than the warm start "
                        "has grows it: the new layers start as the identity")
    t.add_argument("--init-lr-scale", type=float, default=1.0,
                   help="learning rate of the warm start's own weights, as a fraction of --lr (new layers get --lr)")
    t.add_argument("--holdout-exclude", default=None,
                   help="JSON {\"keys\": [[source, line], ...]}: held-out prompts not to score (a warm start trained on them)")
    t.add_argument("--eval-every", type=int, default=0,
                   help="held-out accuracy every N steps (0: at epoch ends, and at the start of a warm start)")
    t.add_argument("--ckpt-minutes", type=float, default=3.0)
    t.add_argument("--max-minutes", type=float, default=0, help="stop (resumably) after this long; 0 = no limit")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--threads", type=int, default=2)


def _train3_parser(sub) -> None:
    t3 = sub.add_parser("train3", help="train an EAGLE-3 head with the training-time test on the same data (resumable)")
    t3.add_argument("--data", nargs="+", default=["data/gen"],
                    help="token-id dataset directories (ids-fixed, ids-gen) and/or `gen` shard directories")
    t3.add_argument("--out", default=_run("head3"), help="the run: checkpoint, log and export (default %(default)s)")
    t3.add_argument("--model", default=None, help="the target (default: the embedded SmolLM2-135M-Instruct)")
    t3.add_argument("--epochs", type=int, default=4)
    t3.add_argument("--lr", type=float, default=5e-4)
    t3.add_argument("--steps", type=int, default=7, help="unrolled draft steps (the official trainer: 7, weights 0.8^k)")
    t3.add_argument("--tokens-per-batch", type=int, default=2048)
    t3.add_argument("--max-seq", type=int, default=640)
    t3.add_argument("--draft-vocab", type=int, default=8192, help="0 = full vocabulary")
    t3.add_argument("--holdout-shards", type=int, default=2, help="the first N shards are never trained on")
    t3.add_argument("--holdout-every", type=int, default=50,
                    help="token-id datasets: 1 prompt in N (by hash of source and line) is never trained on")
    t3.add_argument("--max-shards", type=int, default=None)
    t3.add_argument("--max-records", type=int, default=None, help="train on the first N sequences only")
    t3.add_argument("--init", default=None, help="warm start: an EAGLE-3 head directory (its draft vocabulary kept)")
    t3.add_argument("--layers", type=int, nargs=3, default=None, metavar="L",
                    help="the three target layers whose inputs the head reads (default: the --init head's, else "
                         "2, N//2, N-3); with --init, its fc's three blocks are moved to these layers as they are")
    t3.add_argument("--random-init", action="store_true",
                    help="start fc, norm and lm_head at random (the official trainer) instead of from the target's "
                         "LM head, final norm and highest captured layer")
    t3.add_argument("--continue", dest="continue_run", action="store_true",
                    help="with --init <out>/head3 of an earlier run: carry on where it stopped (same data and seed)")
    t3.add_argument("--eval-every", type=int, default=0,
                    help="held-out accuracy every N steps (0: at epoch ends, and at the start of a warm start)")
    t3.add_argument("--ckpt-minutes", type=float, default=3.0)
    t3.add_argument("--max-minutes", type=float, default=0, help="stop (resumably) after this long; 0 = no limit")
    t3.add_argument("--seed", type=int, default=0)
    t3.add_argument("--threads", type=int, default=2)


def _features_parser(sub) -> None:
    fc = sub.add_parser("features", help="cache the target's features of token-id datasets locally (resumable)")
    fc.add_argument("--data", nargs="+", default=["train_data/fixed"], help="token-id dataset directories")
    fc.add_argument("--out", default="data/feats")
    fc.add_argument("--model", default=None)
    fc.add_argument("--layers", type=int, nargs="+", default=None,
                    help="captured layer inputs (default: the EAGLE-3 head's, e.g. 2 15 27 for 30 layers)")
    fc.add_argument("--max-seq", type=int, default=640, help="longer sequences are cut")
    fc.add_argument("--shard-seqs", type=int, default=256, help="sequences per shard (the unit of resuming)")
    fc.add_argument("--tokens-per-batch", type=int, default=4096)
    fc.add_argument("--seed", type=int, default=0, help="the order in which sequences are cached")
    fc.add_argument("--minutes", type=float, default=0, help="stop after the shard in progress once this long")
    fc.add_argument("--start-shard", type=int, default=0, help="begin at this shard of the order (a later slice)")
    fc.add_argument("--parts", default=None,
                    help="FIRST-LAST: only the parts at these positions of each dataset's manifest (e.g. 17-22)")
    fc.add_argument("--threads", type=int, default=2)
    fc.add_argument("--precision", choices=("fp32", "bf16"), default="fp32",
                    help="bf16: the target's matrix products under bfloat16 autocast (1.9x faster on a CPU "
                         "with AMX; features within ~1%% of fp32, same argmax 99.3%%)")


def _export_parsers(sub) -> None:
    e = sub.add_parser("export", help="write the trained head in the EAGLE layout (+ draft vocabulary)")
    e.add_argument("--run", default=_run("head"))
    e.add_argument("--out", default="assets/head-smollm2-135m")


def _eval_parser(sub) -> None:
    v = sub.add_parser("eval", help="tau and per-depth acceptance on eval prompt sets")
    v.add_argument("--head", default=None, help="head directory (default: the shipped head of --method)")
    v.add_argument("--method", default="eagle2", choices=("eagle2", "eagle3"),
                   help="eagle2: an EAGLE-1/2 head; eagle3: an EAGLE-3 head; both draft the same dynamic trees")
    v.add_argument("--prompts", nargs="+", default=[MT_BENCH],
                   help="JSONL prompt files (default: the shipped MT-bench, assets/prompts/mt_bench_question.jsonl)")
    v.add_argument("--limit", type=int, default=None, help="at most N prompts per file")
    v.add_argument("--per-category", type=int, default=None, help="at most N prompts per category")
    v.add_argument("--max-new-tokens", type=int, default=128)
    v.add_argument("--temperatures", type=float, nargs="+", default=[0.0])
    add_tree_argument(v, multiple=True)
    v.add_argument("--draft-vocab", default="head", help="head (the head's own) or full")
    v.add_argument("--threads", type=int, default=2)
    v.add_argument("--json-out", default=None)


def _serving_and_plot_parsers(sub) -> None:
    xs = sub.add_parser("export-serving", help="write a head in the layout vLLM or SGLang loads (EAGLE-1/2 or EAGLE-3)")
    xs.add_argument("--head", default="assets/head-smollm2-135m", help="an EAGLE-1/2 or EAGLE-3 head directory")
    xs.add_argument("--for", dest="engine", required=True, choices=("vllm", "sglang"))
    xs.add_argument("--out", required=True)
    xs.add_argument("--model-id", default="HuggingFaceTB/SmolLM2-135M-Instruct", help="the target, for the serve command")
    xs.add_argument("--target-layers", type=int, default=None,
                    help="the target's layer count (only for an EAGLE-3 head with explicit layer ids)")
    xs.add_argument("--drop-fc-bias", action="store_true", help="vLLM EAGLE-1/2: export a biased fc without its bias")

    pl = sub.add_parser("plot", help="loss and accuracy curves of a run as PNG")
    pl.add_argument("--run", default=_run("head"))
    pl.add_argument("--out", default="docs/img/training.png")

    cv = sub.add_parser("curves", help="held-out top-1 and tau of the EAGLE-2 and EAGLE-3 lineages against training hours")
    cv.add_argument("--data", default=os.path.join("docs", "data", "training_curves.json"),
                    help="the curated runs (logs, machines, held-out sets, tau with its source)")
    cv.add_argument("--root", default=".", help="the logs' paths in --data are relative to this directory")
    cv.add_argument("--out", default=os.path.join("docs", "img", "training_curves.png"))
    cv.add_argument("--extra-log3", nargs="+", default=[], metavar="PATH",
                    help="log3.jsonl of the EAGLE-3 run continuing the lineage (elapsed_s cumulative within that "
                         "run, across --continue sessions): its held-out top-1 after the listed EAGLE-3 runs")
    cv.add_argument("--refresh-data", action="store_true",
                    help="also rewrite --data with each run's numbers read from its log (the `derived` fields)")


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m eagle_core.train", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for add in (_data_parsers, _train_parser, _train3_parser, _features_parser, _export_parsers, _eval_parser,
                _serving_and_plot_parsers):
        add(sub)
    return ap


def main(argv=None):
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.cmd in ("ids-fixed", "ids-gen", "gen"):
        _check_prompt_dirs(ap, args)
    if args.cmd == "ids-fixed":
        from .reference_answers import run_ids_fixed
        run_ids_fixed(args)
    elif args.cmd == "ids-gen":
        from .gen_ids import run_ids_gen
        run_ids_gen(args)
    elif args.cmd == "gen":
        from .data import run_gen
        run_gen(args)
    elif args.cmd == "train":
        from .eagle2 import run_train
        run_train(args)
    elif args.cmd == "train3":
        from .eagle3 import run_train3
        run_train3(args)
    elif args.cmd == "features":
        from .featcache import run_features
        run_features(args)
    elif args.cmd == "export":
        from .eagle2 import run_export
        run_export(args)
    elif args.cmd == "export-serving":
        from .serving import run_export_serving
        run_export_serving(args)
    elif args.cmd == "plot":
        from .plot import run_plot
        run_plot(args)
    elif args.cmd == "curves":
        from .curves import run_curves
        run_curves(args)
    elif args.cmd == "eval":
        from .evaluate import run_eval
        run_eval(args)


if __name__ == "__main__":
    main()
