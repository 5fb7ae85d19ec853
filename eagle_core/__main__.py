"""Command line: `python -m eagle_core generate --prompt "..." --method eagle|vanilla [...]`.

Prints the generated text and a run summary; with --json, one JSON object (text, new_tokens,
target_forwards, tau, tokens_per_s, stop_reason, ...) so scripts can rely on it; with
--trace FILE, the full per-cycle trace (the app can replay it).
"""
from __future__ import annotations

import argparse
import json
import sys

from .config import (METHODS, DecodeSettings, add_tree_argument, add_weights_argument, default_tree, fast_from_args,
                     weights_from_args)
from .environment import problems

METHOD_ALIASES = {"eagle": "eagle2", **{m: m for m in METHODS}}  # "eagle" is the default, EAGLE-2
TREE_METHODS = ("eagle2", "eagle3")  # the methods that draft the EAGLE-2 dynamic tree (--tree)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python -m eagle_core", description="EAGLE speculative decoding")
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("generate", help="decode one prompt")
    g.add_argument("--prompt", required=True)
    g.add_argument("--method", default="eagle",
                   help="eagle (= eagle2 dynamic tree), eagle3 (EAGLE-3 head, same tree), eagle1 (static tree), chain, vanilla")
    g.add_argument("--max-new-tokens", type=int, default=128)
    add_tree_argument(g)
    g.add_argument("--chain-length", type=int, default=DecodeSettings.chain_length)
    g.add_argument("--temperature", type=float, default=0.0)
    g.add_argument("--top-p", type=float, default=1.0)
    g.add_argument("--top-k", type=int, default=0)
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--no-chat-template", action="store_true", help="feed the prompt as raw text")
    g.add_argument("--model", default=None, help="hub id or directory (default: embedded SmolLM2-135M-Instruct)")
    g.add_argument("--head", default=None, help="EAGLE-1/2 head: a directory or a hub id (default: the shipped head); "
                   "with --method eagle3 and no --head3, the EAGLE-3 head")
    g.add_argument("--head3", default=None, help="EAGLE-3 head in the official layout: a directory or a hub id "
                   "(default: the shipped one, else random untrained)")
    g.add_argument("--head3-layer-ids", default="inputs", choices=("inputs", "outputs"),
                   help="what the EAGLE-3 head's eagle_aux_hidden_state_layer_ids count: inputs (official code, "
                        "vLLM) or outputs (heads trained with SGLang / SpecForge)")
    g.add_argument("--head3-rope-theta", type=float, default=None,
                   help="the RoPE base the EAGLE-3 head's trainer used, if not its config's rope_theta (10000 for "
                        "heads from the official and AngelSlim trainers: docs/gpu.md)")
    g.add_argument("--device", default=None, help="cpu, cuda, mps (default: auto)")
    g.add_argument("--dtype", default=None, choices=("auto", "float32", "bfloat16", "float16"),
                   help="the target's precision (default auto: float32 on a CPU, and on a GPU for targets under "
                        "1.5 B parameters; else bfloat16 where native, float16 elsewhere). Only float32 keeps "
                        "greedy EAGLE identical to vanilla token for token; half precision may part at near-ties")
    add_weights_argument(g)
    g.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    g.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    g.add_argument("--trace", default=None, help="write the full trace JSON to this file")
    return ap


def settings_from_args(a, device: str):
    method = METHOD_ALIASES.get(a.method)
    if method is None:
        raise ValueError(f"unknown method {a.method!r}; choose one of {', '.join(METHOD_ALIASES)}")
    tree = a.tree or default_tree(device)
    return DecodeSettings(method=method, **tree.fields(), chain_length=a.chain_length,
                          max_new_tokens=a.max_new_tokens, temperature=a.temperature, top_p=a.top_p, top_k=a.top_k,
                          seed=a.seed, chat_template=not a.no_chat_template)


def default_tree_here(engine):
    """The tree chosen for this machine and weight format (eagle_core.machine.tree_choice: cached, else a few
    seconds of measurement; the preset where no choice is possible), said in one stderr line."""
    from .machine import choose_tree

    choice = choose_tree(engine)
    print(choice.line(), file=sys.stderr)
    return choice


def main(argv=None) -> int:
    a = build_parser().parse_args(argv)
    bad = problems(used_by=("engine",))  # a bad environment variable: its one line, exit code 2, no traceback
    if bad:
        print("\n".join(f"error: {line}" for line in bad), file=sys.stderr)
        return 2
    import torch

    from .cpu import path_line, weights_line
    from .engine_loading import load_engine
    from .target import pick_device
    from .trace import run_to_json

    if a.threads:
        torch.set_num_threads(a.threads)
    try:
        device = pick_device(a.device)
        settings = settings_from_args(a, device)
        eagle3 = settings.method == "eagle3"  # --head names the head of the method asked for
        head3 = a.head3 or (a.head if eagle3 else None)
        weights = weights_from_args(a, device)  # auto resolved before the load: the tree choice sees what runs
        engine = load_engine(a.model, head=None if eagle3 else a.head, head3=head3, head3_layer_ids=a.head3_layer_ids,
                             head3_rope_theta=a.head3_rope_theta, device=device, methods=(settings.method,), dtype=a.dtype,
                             fast=fast_from_args(a, weights))
        target = engine.target
        print(weights_line(target, weights), file=sys.stderr)  # which weight format runs, always said
        fallback = path_line(target)
        if fallback:  # a slower path is never silent (no compiler, no AVX2, EAGLE_PORTABLE=1, ...)
            print(fallback, file=sys.stderr)
        if a.tree is None and settings.method in TREE_METHODS:  # no --tree: the one chosen for this machine
            settings = settings.with_(**default_tree_here(engine).tree.fields())
        gen = engine.generate(a.prompt, settings)
        for cycle in gen:
            if not a.json:
                sys.stdout.write(cycle.committed_text)
                sys.stdout.flush()
        run = gen.run
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    s = run.summary
    if a.trace:
        with open(a.trace, "w", encoding="utf-8") as f:
            f.write(run_to_json(run))
    if a.json:
        print(json.dumps({
            "text": s.text, "new_tokens": s.new_tokens, "target_forwards": s.target_forwards, "tau": round(s.tau, 4),
            "tokens_per_s": round(s.tokens_per_s, 3), "stop_reason": s.stop_reason, "method": s.method,
            "cycles": s.cycles, "wall_s": round(s.wall_s, 4), "draft_s": round(s.draft_s, 4),
            "verify_s": round(s.verify_s, 4), "prompt_tokens": s.prompt_tokens, "model": s.model, "head": s.head,
            "device": s.device, "dtype": str(target.dtype).replace("torch.", ""),
            "weights": getattr(target, "weight_format", "float32"), "weights_asked": weights.asked,
            "weights_why": weights.reason, "token_ids": list(s.token_ids), "settings": s.settings,
        }, ensure_ascii=False))
    else:
        if not run.cycles:
            print(s.text, end="")
        print()
        print(f"--- {s.method}: {s.new_tokens} new tokens in {s.wall_s:.2f} s = {s.tokens_per_s:.1f} tok/s | "
              f"target forwards {s.target_forwards} | tau {s.tau:.2f} | draft {s.draft_s:.2f} s, verify "
              f"{s.verify_s:.2f} s | stop: {s.stop_reason} | {target.describe()}, head: {s.head or 'none'}",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
