"""What sampling adds to a verification: greedy against sampled verify of a k-row tree, and a greedy
against a sampled vanilla step, on the default model (issue 54, item 5).

    python -m eagle_core.bench.sampling_cost [--threads 2] [--rows 8 13] [--temperature 0.8 --top-p 0.95]

Each timed call is what a cycle does after drafting: one target forward over the tree's rows (tree
mask, depth positions), the LM head over every row, then verify.accept with the run's settings.
The tree sits after a prompt (chat template); it is a chain of the target's own greedy continuation
(so a sampled walk goes as deep as sampling lets it), the other rows random siblings; "rows made" is how many rows' distributions
the sampled walk processed (row_dists: only the accepted path's). Two more columns time the
processing alone over all k rows at once: `all rows` (logits_to_probs, the bounded nucleus) and
`full sort` (the definition the nucleus equals, sorting the whole vocabulary per row: what each row
cost before issue 54). Medians of --repeats calls, with the CPU model and threads; the numbers
belong in docs/performance.md ("Sampled verification"), measured on a quiet machine.
"""
from __future__ import annotations

import argparse
import statistics

import torch

from ..clock import sync
from ..config import DecodeSettings
from ..machine.timing import median_s
from ..tree import DraftTree, tree_attention_mask, tree_positions
from ..verify import accept, logits_to_probs


PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."


def full_sort_probs(logits: torch.Tensor, temperature: float, top_p: float = 1.0, top_k: int = 0) -> torch.Tensor:
    """The sampling distribution by its definition: temperature, top-k, softmax, then the top_p nucleus
    from a stable sort of the whole vocabulary (ties lower token id first). verify.logits_to_probs
    equals it bit for bit (tests/test_sampling_cost.py) without the sort."""
    logits = logits.float() / temperature
    if top_k and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if top_p < 1.0:
        sorted_p, idx = torch.sort(probs, dim=-1, descending=True, stable=True)
        drop = (sorted_p.cumsum(-1) - sorted_p) >= top_p  # the mass before a token reaches top_p
        sorted_p = sorted_p.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter(-1, idx, sorted_p)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def chain_tree(target, cache, context: int, root: int, rows: int, depth: int, gen: torch.Generator) -> DraftTree:
    """`rows` nodes: `root` and the target's greedy continuation of the cache below it to `depth`, the
    rest random children spread over the chain's nodes. The cache is left as it was."""
    dev = target.device
    chain, tok = [root], root
    for d in range(min(depth, rows - 1)):
        feats = target.forward(torch.tensor([[tok]], device=dev), cache, torch.tensor([[context + d]], device=dev))
        tok = int(target.logits(feats[0])[-1].argmax())
        chain.append(tok)
    if len(chain) > 1:
        cache.crop(-(len(chain) - 1))
    tokens, parents = list(chain), [-1] + list(range(len(chain) - 1))
    while len(tokens) < rows:
        parents.append(len(tokens) % len(chain))
        tokens.append(int(torch.randint(100, target.vocab_size, (1,), generator=gen)))
    n = len(tokens)
    return DraftTree(tuple(tokens), tuple(parents), (1.0,) * n, (0.0,) * n)


class Verifier:
    """A target with a prompt prefilled in its cache; `verify(tree, s)` is one cycle's verify on it,
    the tree's entries dropped again. `root`: the target's greedy token after the prompt."""

    @torch.inference_mode()
    def __init__(self, target, prompt: str, seed: int):
        self.target = target
        self.gen = torch.Generator().manual_seed(seed)
        self.cache = target.new_cache()
        ids = target.encode_prompt(prompt, True)
        self.context = len(ids)
        feats = target.forward(torch.tensor([ids], device=target.device), self.cache)
        self.root = int(target.logits(feats[0])[-1].argmax())
        self.made: list[int] = []

    @torch.inference_mode()
    def verify(self, tree: DraftTree, s: DecodeSettings):
        tgt, dev, n = self.target, self.target.device, len(tree)
        mask = tree_attention_mask(tree.parents, self.context, dtype=tgt.dtype, device=dev) if n > 1 else None
        pos = tree_positions(tree.parents, self.context).to(dev)[None]
        feats = tgt.forward(torch.tensor([tree.tokens], device=dev), self.cache, pos, mask)[0]
        verdict, _ = accept(tree, tgt.logits(feats), s, self.gen)
        sync(dev)
        self.cache.crop(-n)
        self.made.append(len(verdict.accepted))  # rows whose p the walk made (the sampled rules)
        return verdict


@torch.inference_mode()
def measure(target, rows=(8, 13), depth: int = 4, temperature: float = 0.8, top_p: float = 0.95, top_k: int = 0,
            prompt: str = "", repeats: int = 20, seed: int = 0) -> list[dict]:
    """One dict per tree size (and one for vanilla, rows 1): ms per verify greedy and sampled, the
    mean rows made by the sampled walk, and the processing of all rows (bounded / full sort)."""
    v = Verifier(target, prompt or PROMPT, seed)
    context = v.context
    greedy = DecodeSettings(method="eagle2", temperature=0.0)
    sampled = DecodeSettings(method="eagle2", temperature=temperature, top_p=top_p, top_k=top_k, seed=seed)
    out = []
    for k in (1, *rows):
        tree = chain_tree(target, v.cache, context, v.root, k, depth, v.gen)
        g_ms = 1e3 * median_s(lambda: v.verify(tree, greedy), repeats, warmup=2)
        v.made.clear()
        s_ms = 1e3 * median_s(lambda: v.verify(tree, sampled), repeats, warmup=2)
        made = statistics.mean(v.made)
        feats = target.forward(torch.tensor([tree.tokens], device=target.device), v.cache,
                               tree_positions(tree.parents, context).to(target.device)[None],
                               tree_attention_mask(tree.parents, context, dtype=target.dtype, device=target.device)
                               if k > 1 else None)[0]
        logits = target.logits(feats).float().cpu()
        v.cache.crop(-k)
        bounded = 1e3 * median_s(lambda: logits_to_probs(logits, temperature, top_p, top_k), repeats, warmup=1)
        full = 1e3 * median_s(lambda: full_sort_probs(logits, temperature, top_p, top_k), repeats, warmup=1)
        out.append({"what": "vanilla step" if k == 1 else f"verify, {k}-row tree", "rows": k, "greedy_ms": g_ms,
                    "sampled_ms": s_ms, "ratio": s_ms / g_ms, "rows_made": made, "all_rows_ms": bounded,
                    "full_sort_ms": full})
    return out


def table(results: list[dict], header: str) -> str:
    lines = [header, "", "| what | greedy ms | sampled ms | sampled/greedy | rows made (sampled walk) | "
             "p of all rows ms | full sort of all rows ms |", "|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['what']} | {r['greedy_ms']:.2f} | {r['sampled_ms']:.2f} | {r['ratio']:.3f}x | "
                     f"{r['rows_made']:.2f} | {r['all_rows_ms']:.2f} | {r['full_sort_ms']:.2f} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--rows", type=int, nargs="+", default=[8, 13], help="tree sizes to verify")
    ap.add_argument("--depth", type=int, default=4, help="depth of the greedy chain inside each tree")
    ap.add_argument("--temperature", type=float, default=0.8)
    ap.add_argument("--top-p", type=float, default=0.95)
    ap.add_argument("--top-k", type=int, default=0)
    ap.add_argument("--prompt", default=PROMPT, help="the context the trees are verified after (chat template)")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--model", default=None, help="hub id or directory (default: the embedded model)")
    a = ap.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    from ..cpu.kernels import cpu_model
    from ..target import load_target

    target = load_target(a.model)
    results = measure(target, a.rows, a.depth, a.temperature, a.top_p, a.top_k, a.prompt, a.repeats)
    print(table(results, f"CPU: {cpu_model()}, {torch.get_num_threads()} threads, torch {torch.__version__}; "
                         f"{target.name}; T={a.temperature}, top-p {a.top_p}, top-k {a.top_k}; "
                         f"medians of {a.repeats}."))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
