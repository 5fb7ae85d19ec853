"""Benchmark harness: vanilla, transformers generate, prompt lookup and EAGLE, side by side.

    python -m eagle_core.bench --max-new-tokens 128 --methods vanilla,hf,hf-pld,eagle --json-out bench.json
    python -m eagle_core.bench --weights gguf --methods vanilla,eagle,llama.cpp     (the GGUF's own blocks)

--weights auto (the default) runs the fastest format here (eagle_core/cpu/auto_format.py); the report's
first line and its JSON's config name the format. Pass --weights float32 to repeat a float32 record.

The prompts default to the shipped MT-bench (assets/prompts/mt_bench_question.jsonl); --prompts FILE
takes another JSONL set.

Methods (all decode the SAME prompt ids — the engine's chat-template encoding — and stop on the
same condition: the target's EOS ids or `max_new_tokens`, EOS itself not counted):

  vanilla  the engine's own loop with no drafter (tau = 1 by construction)
  hf       transformers `model.generate`, greedy or sampled
  hf-pld   transformers prompt-lookup decoding (`prompt_lookup_num_tokens`)
  eagle    the engine with an EAGLE head and the tree given (--tree D,K,T or a preset)
  eagle3   the engine with the EAGLE-3 head, the same tree
  llama.cpp  llama.cpp on the default model's GGUF file, greedy, same threads (llamacpp.py; optional)

Fairness: after a warm-up, the methods run interleaved per prompt (A B C A B C ...), so a drift
in machine speed hits all of them alike. Each run is timed here, around the whole call, with the
same clock for every method; on CUDA the harness synchronises before reading the clock (the
engine itself never does). Aggregation, tables and charts live in `report.py`, the resumable record in `journal.py`.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from ..config import (DecodeSettings, add_tree_argument, add_weights_argument, default_tree, fast_from_args,
                      weights_from_args)
from ..clock import sync
from ..machine.info import machine_info
from .journal import Journal, Sample, sample_to_dict
from .prompts import MT_BENCH, Prompt, load_prompts
from .report import eagle_by_tau, eagle_by_vanilla_step, render_markdown, render_png, replace_block, summarize

METHOD_NAMES = ("vanilla", "hf", "hf-pld", "eagle", "eagle3", "llama.cpp")  # eagle3: EAGLE-3 head, EAGLE-2 tree


def _strip_eos(ids: list[int], eos: set[int]) -> tuple[int, ...]:
    for i, t in enumerate(ids):
        if t in eos:
            return tuple(ids[:i])
    return tuple(ids)


class Runner:
    """Runs one method on one prompt and returns a Sample. Holds the model, shared by all methods."""

    def __init__(self, target, engine, settings: DecodeSettings, eagle_method: str = "eagle2", pld_tokens: int = 10,
                 pld_ngram: int = 2):
        self.target, self.engine, self.settings = target, engine, settings
        self.eagle_method, self.pld_tokens, self.pld_ngram = eagle_method, pld_tokens, pld_ngram
        self.eos = list(target.eos_ids)
        self._forwards = 0
        self._llama = None  # llamacpp.LlamaCpp, made on first use

    def _count(self, *_):
        self._forwards += 1

    def run(self, method: str, prompt: Prompt, ids: list[int], repeat: int, seed: int,
            max_new_tokens: int | None = None) -> Sample:
        n = max_new_tokens or self.settings.max_new_tokens
        if method in ("vanilla", "eagle", "eagle3"):
            return self._engine(method, prompt, repeat, seed, n)
        if method in ("hf", "hf-pld"):
            return self._hf(method, prompt, ids, repeat, seed, n)
        if method == "llama.cpp":
            return self._llama_cpp(prompt, ids, repeat, n)
        raise ValueError(f"unknown method {method!r}; choose from {', '.join(METHOD_NAMES)}")

    def _engine(self, method, prompt, repeat, seed, n) -> Sample:
        s = self.settings.with_(method={"vanilla": "vanilla", "eagle3": "eagle3"}.get(method, self.eagle_method),
                                max_new_tokens=n, seed=seed)
        dev = self.target.device
        sync(dev)
        t0 = time.perf_counter()
        run = self.engine.run(prompt.text, s)
        sync(dev)
        wall = time.perf_counter() - t0
        r = run.summary
        return Sample(method, prompt.index, repeat, prompt.category, tuple(r.token_ids), wall, r.cycles, r.tau,
                      r.draft_s, r.verify_s, r.prefill_ms / 1e3, r.stop_reason)

    def _hf(self, method, prompt, ids, repeat, seed, n) -> Sample:
        s, dev = self.settings, self.target.device
        kw = dict(max_new_tokens=n, eos_token_id=self.eos, pad_token_id=self.eos[0], do_sample=not s.greedy)
        if not s.greedy:  # the same logits processing as the engine; top_k=0 turns off HF's default of 50
            kw.update(temperature=s.temperature, top_p=s.top_p, top_k=s.top_k)
        if method == "hf-pld":
            kw.update(prompt_lookup_num_tokens=self.pld_tokens, max_matching_ngram_size=self.pld_ngram)
        x = torch.tensor([ids], device=dev)
        torch.manual_seed(seed)
        self._forwards = 0
        hook = self.target.model.register_forward_hook(self._count)  # counts target forwards for tau
        try:
            sync(dev)
            t0 = time.perf_counter()
            # stock transformers: the model's own nn.Linear modules, not the engine's kernels
            with torch.inference_mode(), self.target.stock_kernels():
                out = self.target.model.generate(input_ids=x, attention_mask=torch.ones_like(x), **kw)
            sync(dev)
            wall = time.perf_counter() - t0
        finally:
            hook.remove()
        gen = out[0, len(ids):].tolist()
        toks = _strip_eos(gen, set(self.eos))
        cycles = max(self._forwards - 1, 0)
        tau = (len(gen) - 1) / cycles if cycles else None  # tokens per forward after the prefill's first
        stop = "eos" if len(toks) < len(gen) else "max_new_tokens"
        return Sample(method, prompt.index, repeat, prompt.category, toks, wall, cycles, tau, stop_reason=stop)


    def _llama_cpp(self, prompt, ids, repeat, n) -> Sample:
        if not self.settings.greedy:
            raise ValueError("the llama.cpp method runs greedy only (temperature 0)")
        if self._llama is None:
            from .llamacpp import LlamaCpp

            self._llama = LlamaCpp()
        toks, wall, stop = self._llama.generate(ids, n, set(self.eos))
        return Sample("llama.cpp", prompt.index, repeat, prompt.category, tuple(toks), wall, len(toks), None,
                      stop_reason=stop)


def run_benchmark(runner: Runner, prompts: list[Prompt], methods: list[str], repeats: int = 1,
                  warmup: int = 1, seed: int = 0, log=None, journal: Journal | None = None) -> list[Sample]:
    """Warm up, then run every method on every prompt, interleaved: for each repeat, for each
    prompt, all methods in turn. The seed depends on (prompt, repeat) only, never the method.
    With a journal, prompts it already holds are taken from it and new ones are added to it."""
    encode = runner.target.encode_prompt
    earlier = journal.select(prompts, repeats, methods) if journal is not None else {}
    todo = [p for r in range(repeats) for p in prompts if (r, p.index) not in earlier]
    if journal is not None:
        journal.start_segment(machine_info(runner.target.device), len(todo))
        if log and earlier:
            log(f"journal {journal.path}: {len(earlier)} prompt runs done earlier, {len(todo)} to go")
    ids = {p.index: encode(p.text, runner.settings.chat_template) for p in todo}
    for p in todo[:warmup]:
        for m in methods:
            runner.run(m, p, ids[p.index], -1, seed, max_new_tokens=min(16, runner.settings.max_new_tokens))
    samples = []
    for r in range(repeats):
        for p in prompts:
            if (r, p.index) in earlier:
                samples += earlier[(r, p.index)]
                continue
            line, mine = [], []
            for m in methods:
                smp = runner.run(m, p, ids[p.index], r, seed + 1000 * r + p.index)
                mine.append(smp)
                line.append(f"{m} {smp.new_tokens / smp.wall_s:6.1f} tok/s")
            samples += mine
            if journal is not None:
                journal.record(p, r, mine)
            if log:
                log(f"[{r + 1}/{repeats}] prompt {p.index + 1}/{len(prompts)} ({p.category}): " + ", ".join(line))
    return samples


# ---------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m eagle_core.bench", description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    ap.add_argument("--prompts", default=MT_BENCH, help="JSONL: 'prompt' or 'turns' (first turn used), optional "
                    "'category' (default: the shipped MT-bench, assets/prompts/mt_bench_question.jsonl)")
    ap.add_argument("--limit", type=int, default=None, help="use the first N prompts")
    ap.add_argument("--per-category", type=int, default=None, help="use the first N prompts of each category")
    ap.add_argument("--categories", default=None,
                    help="comma list: use only these categories ('mt_bench' = MT-bench's eight)")
    ap.add_argument("--merge-mt-bench", action="store_true",
                    help="report MT-bench's eight categories as one 'mt_bench' category (Spec-Bench style)")
    ap.add_argument("--methods", default="vanilla,hf,hf-pld,eagle", help=f"comma list of {','.join(METHOD_NAMES)}")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    ap.add_argument("--top-p", type=float, default=1.0)
    ap.add_argument("--top-k", type=int, default=0, help="0 = off")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=1, help="prompts run (16 tokens, every method) before timing")
    ap.add_argument("--seed", type=int, default=0)
    g = ap.add_argument_group("eagle")
    g.add_argument("--head", default=None, help="head directory (default: the shipped head, else a random one)")
    g.add_argument("--head3", default=None, help="EAGLE-3 head directory for eagle3 (default: shipped, else random)")
    g.add_argument("--eagle-method", default="eagle2", choices=("eagle2", "eagle1", "chain"))
    add_tree_argument(g)
    g.add_argument("--chain-length", type=int, default=DecodeSettings.chain_length)
    g = ap.add_argument_group("prompt lookup")
    g.add_argument("--pld-tokens", type=int, default=10, help="prompt_lookup_num_tokens")
    g.add_argument("--pld-ngram", type=int, default=2, help="max_matching_ngram_size")
    g = ap.add_argument_group("machine and output")
    g.add_argument("--model", default=None, help="target model (default: the embedded SmolLM2-135M-Instruct)")
    g.add_argument("--device", default=None)
    g.add_argument("--dtype", default=None, choices=("auto", "float32", "bfloat16", "float16"),
                   help="the target's precision (default auto: see python -m eagle_core generate --help)")
    add_weights_argument(g)  # hf / hf-pld run transformers' forward over the same products (blocks too)
    g.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    g.add_argument("--journal", default=None, metavar="JSONL",
                   help="append every finished prompt to this file and skip the prompts it already holds: "
                        "rerun the same command to resume an interrupted run")
    g.add_argument("--report-only", action="store_true",
                   help="load no model and run nothing: report the prompts selected from --journal")
    g.add_argument("--json-out", default=None)
    g.add_argument("--md-out", default=None)
    g.add_argument("--png-out", default=None)
    g.add_argument("--update-doc", default=None, metavar="MD",
                   help="also write the table into MD between <!-- BLOCK:begin/end --> markers")
    g.add_argument("--doc-block", default="bench", metavar="BLOCK", help="marker name for --update-doc")
    g.add_argument("--save-tokens", action="store_true", help="keep every run's token ids in the JSON")
    g.add_argument("--agree-with", default=None, metavar="JSON",
                   help="another run's --json-out made with --save-tokens (e.g. the other --weights): report how many "
                        "prompts' vanilla outputs are identical to it, and the tokens before the first difference")
    g.add_argument("--quiet", action="store_true")
    return ap


def main(argv=None) -> dict:
    args = build_parser().parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    bad = [m for m in methods if m not in METHOD_NAMES]
    if bad or not methods or len(set(methods)) != len(methods):
        sys.exit(f"--methods: use distinct names from {', '.join(METHOD_NAMES)} (got {args.methods!r})")
    if args.report_only and not args.journal:
        sys.exit("--report-only needs --journal FILE")
    if "llama.cpp" in methods and not args.report_only:
        from .llamacpp import available

        ok, why = available()
        if not ok or args.temperature != 0:
            sys.exit(f"--methods llama.cpp: {why or 'greedy only (--temperature 0)'}")
    log = (lambda msg: None) if args.quiet else (lambda msg: print(msg, file=sys.stderr, flush=True))
    cats = [c.strip() for c in args.categories.split(",") if c.strip()] if args.categories else None
    prompts = load_prompts(args.prompts, args.limit, args.merge_mt_bench, args.per_category, cats)

    if args.report_only:
        samples, key, segments = _from_journal(args.journal, prompts, args.repeats, log)
        methods = list(key["methods"])
    else:
        samples, key, segments = _run(args, methods, prompts, log)
    result = summarize(samples, methods, greedy=key["temperature"] == 0)
    n_done = len({s.prompt_index for s in samples})
    result["config"] = {
        "prompts": args.prompts, "n_prompts": n_done, "n_selected": len(prompts), "repeats": args.repeats,
        "methods": methods, "max_new_tokens": key["max_new_tokens"], "temperature": key["temperature"],
        "top_p": key["top_p"], "top_k": key["top_k"], "eagle": key["eagle"], "pld": key["pld"],
        "model": key["model"], "machine": segments[0] if segments else {}, "segments": segments,
        "journal": args.journal, "categories": cats, "weights": key.get("weights", "float32"),
    }
    choice = getattr(args, "weights_choice", None)  # None from a journal: its key says the format
    if choice is not None and choice.auto:
        result["config"]["weights_why"] = f"chosen by --weights auto: {choice.reason}"
    result["samples"] = [sample_to_dict(s, tokens=args.save_tokens) for s in samples]
    if args.agree_with:
        with open(args.agree_with, encoding="utf-8") as f:
            other = json.load(f).get("samples", [])
        result["agreement"] = token_agreement([sample_to_dict(s) for s in samples], other)
        a = result["agreement"]
        log(f"agreement with {args.agree_with} ({a['method']}): {a['identical']} of {a['prompts']} prompts identical; "
            f"{a['same_prefix_tokens']} of {a['tokens']} tokens before the first difference")
    result["eagle_by_tau"] = eagle_by_tau(result["samples"])
    result["eagle_by_vanilla_step"] = eagle_by_vanilla_step(result["samples"])
    md = render_markdown(result)
    print(md)
    if args.md_out:
        with open(args.md_out, "w", encoding="utf-8") as f:
            f.write(md + "\n")
    if args.json_out:
        with open(args.json_out, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    if args.png_out:
        render_png(result, args.png_out)
    if args.update_doc:
        replace_block(args.update_doc, args.doc_block, md)
    return result


def _run(args, methods, prompts, log):
    """Load the model and run the benchmark; returns (samples, run key, journal segments)."""
    from ..engine_loading import load_engine
    from ..target import pick_device

    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        from transformers.utils import logging as hf_logging
        hf_logging.set_verbosity_error()  # generate() warns about generation flags on every call
    except ImportError:
        pass
    # the engine methods: bench "eagle" runs --eagle-method with the EAGLE-1/2 head, "eagle3" the EAGLE-3 head
    engine_methods = [args.eagle_method if m == "eagle" else m for m in methods if m in ("eagle", "eagle3")]
    try:
        device = pick_device(args.device)
        args.weights_choice = weights = weights_from_args(args, device)  # auto resolved: what runs, said in the report
        engine = load_engine(args.model, args.head if "eagle" in methods else None,
                             args.head3 if "eagle3" in methods else None, device, methods=engine_methods,
                             dtype=args.dtype, fast=fast_from_args(args, weights))
    except ValueError as e:  # e.g. --weights gguf for a model without a GGUF file: one line, no traceback
        sys.exit(f"error: {e}")
    target, head_name, vocab, head3_name = engine.target, engine.head_name, engine.draft_vocab, engine.head3_name
    tree = args.tree or default_tree(target.device)
    settings = DecodeSettings(max_new_tokens=args.max_new_tokens, temperature=args.temperature, top_p=args.top_p,
                              top_k=args.top_k, **tree.fields(), chain_length=args.chain_length,
                              seed=args.seed).validate()
    key = {
        "methods": methods, "max_new_tokens": args.max_new_tokens, "temperature": args.temperature,
        "top_p": args.top_p, "top_k": args.top_k, "seed": args.seed, "threads": torch.get_num_threads(),
        "eagle": {"method": args.eagle_method, **tree.fields(), "head": head_name,
                  "draft_vocab": len(vocab) if vocab else None},
        "pld": {"prompt_lookup_num_tokens": args.pld_tokens, "max_matching_ngram_size": args.pld_ngram},
        "model": target.describe(),
    }
    if target.weight_format != "float32":  # only then, so journals of earlier runs keep their key
        key["weights"] = target.weight_format
    if engine.drafter3 is not None:  # only then, so journals of earlier runs keep their key
        key["eagle3"] = {"head": head3_name, "draft_vocab": engine.drafter3.head.config.draft_vocab_size}
    try:
        journal = Journal(args.journal, key) if args.journal else None
    except ValueError as e:
        sys.exit(str(e))
    log(f"weights {target.weight_format}{weights.clause()}")
    log(f"target {target.describe()}; head {head_name or '-'}; head3 {head3_name or '-'}; {len(prompts)} prompts x {args.repeats} repeats; "
        f"methods {', '.join(methods)}")
    runner = Runner(target, engine, settings, args.eagle_method, args.pld_tokens, args.pld_ngram)
    samples = run_benchmark(runner, prompts, methods, args.repeats, args.warmup, args.seed, log, journal)
    segments = journal.segments if journal else [machine_info(target.device)]
    return samples, key, segments


def token_agreement(samples: list[dict], other: list[dict], method: str = "vanilla") -> dict:
    """How far one run's `method` outputs agree with another run's (another weight format), over the
    prompts and repeats both ran: outputs identical, and tokens before each prompt's first difference."""
    def by_key(ss):
        return {(d["prompt"], d["repeat"]): d["token_ids"] for d in ss if d["method"] == method and "token_ids" in d}
    mine, theirs = by_key(samples), by_key(other)
    common = sorted(set(mine) & set(theirs))
    prefix = 0
    for k in common:
        a, b = mine[k], theirs[k]
        prefix += next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return {"method": method, "prompts": len(common), "identical": sum(mine[k] == theirs[k] for k in common),
            "same_prefix_tokens": prefix, "tokens": sum(len(mine[k]) for k in common)}


def _from_journal(path, prompts, repeats, log):
    """The selected prompts' samples from a journal (prompts not in it yet are left out)."""
    try:
        journal = Journal(path)
    except ValueError as e:
        sys.exit(str(e))
    found = journal.select(prompts, repeats, journal.key["methods"])
    if not found:
        sys.exit(f"{path}: none of the {len(prompts)} selected prompts has been run yet")
    missing = repeats * len(prompts) - len(found)
    if missing:
        log(f"{path}: {missing} of {repeats * len(prompts)} selected prompt runs are not in the journal yet; "
            "reporting the rest")
    return [s for key in sorted(found) for s in found[key]], journal.key, journal.segments


if __name__ == "__main__":
    main()
