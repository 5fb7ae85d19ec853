"""The decode loop: one generator that yields a CycleRecord per draft/verify cycle.

EAGLE and vanilla decoding are the same loop; vanilla simply drafts nothing, so each cycle
verifies the root alone and commits the target's own token. Per cycle (names from the papers:
speculative decoding, Leviathan et al. 2023 and Chen et al. 2023; EAGLE, arXiv:2401.15077;
EAGLE-2's dynamic tree, arXiv:2406.16858):

  1. draft   the head catches up on the tokens committed last cycle, then drafts a tree
  2. verify  ONE ordinary forward of the target over root + tree, with a 4D tree-attention mask
             and position ids = context length + depth
  3. accept  walk the tree with the greedy / point-mass / ratio rule; the bonus token follows
  4. update  keep only the accepted path in the target's KV cache (compacted to contiguous
             positions); the bonus becomes the next root
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import torch

from .clock import clock
from .config import DecodeSettings
from .drafting.drafter import Drafter
from .drafting.eagle3 import Eagle3Drafter
from .trace import ACCEPTED, CycleRecord, DraftNode, RawCycle, Run, RunSummary, tau
from .tree import DraftTree, tree_attention_mask, tree_positions
from .verify import Verdict, accept, logits_to_probs, sample

HEAD_SCRATCH = 1024  # head-cache room for one cycle's tree nodes beyond the committed context


@torch.inference_mode()
def compact_cache(cache, context_len: int, keep: list[int], move_rows=None) -> None:
    """Keep tree entries `keep` (offsets from context_len, ascending) and drop the rest. `move_rows`:
    the target's FastPath.move_rows (on a CPU one C call for every layer, kernels/compact.c); None or
    False from it: torch's moves, per layer."""
    moved = keep == list(range(len(keep))) or (move_rows is not None and move_rows(cache.layers, context_len, keep))
    idx = None if moved else torch.tensor(keep, dtype=torch.long)
    for layer in cache.layers:
        if not moved:
            i = idx.to(layer.keys.device) + context_len
            layer.keys[..., context_len:context_len + len(keep), :] = layer.keys.index_select(-2, i)
            layer.values[..., context_len:context_len + len(keep), :] = layer.values.index_select(-2, i)
        layer.keys = layer.keys[..., :context_len + len(keep), :]
        layer.values = layer.values[..., :context_len + len(keep), :]


@dataclass(frozen=True)
class UnseenPairs:
    """The committed pairs (f_t, x_{t+1}) the head has not seen yet, for t = start, start + 1, ...:
    after the prefill the whole prompt, after a cycle the accepted path (its target features,
    each paired with the token committed after it)."""

    feats: torch.Tensor  # (m, H) target features f_t
    next_tokens: torch.Tensor  # (m,) the token x_{t+1} after each
    start: int  # head position of the first pair


def cut_at_stop(new: list[int], n_out: int, eos: set[int], max_new_tokens: int) -> tuple[list[int], str | None]:
    """The tokens of `new` to commit after `n_out` already committed, and why decoding stops
    (None: it goes on). EOS is never committed; at most `max_new_tokens` are, in total."""
    committed = []
    for t in new:
        if t in eos:
            return committed, "eos"
        committed.append(t)
        if n_out + len(committed) >= max_new_tokens:
            return committed, "max_new_tokens"
    return committed, None


class Engine:
    """A target model plus the heads already loaded for it: an EAGLE-1/2 head (methods eagle2,
    eagle1, chain; `draft_vocab` its reduced draft vocabulary or None for the full one) and an
    EAGLE-3 head (method eagle3); either may be None. Read-only: safe to share between users;
    every generation keeps its own caches and random generator. To load a model and its heads by
    name, use engine_loading.load_engine."""

    def __init__(self, target, head=None, draft_vocab: list[int] | None = None, head_name: str = "",
                 head3=None, head3_name: str = ""):
        self.target = target
        self.drafter = Drafter(head, target, draft_vocab) if head is not None else None
        self.head_name = head_name if head is not None else ""
        self.draft_vocab = draft_vocab if head is not None else None
        self.drafter3 = Eagle3Drafter(head3, target) if head3 is not None else None
        self.head3_name = head3_name if head3 is not None else ""

    def drafter_for(self, method: str) -> Drafter | None:
        """The drafter a method uses (None for vanilla, or if its head is not loaded)."""
        if method == "vanilla":
            return None
        return self.drafter3 if method == "eagle3" else self.drafter

    def head_name_for(self, method: str) -> str:
        return "" if method == "vanilla" else self.head3_name if method == "eagle3" else self.head_name

    def check(self, prompt: str, settings: DecodeSettings) -> list[int]:
        """Validate a request; returns the prompt's token ids. Raises ValueError with a clear message."""
        settings.validate(self.target.context_limit)
        if not isinstance(prompt, str) or not prompt.strip():
            raise ValueError("the prompt is empty: type something for the model to answer")
        if settings.method != "vanilla" and self.drafter_for(settings.method) is None:
            kind = "an EAGLE-3" if settings.method == "eagle3" else "an EAGLE-1/2"
            raise ValueError(f"method {settings.method!r} needs {kind} head, and none is loaded")
        ids = self.target.encode_prompt(prompt, settings.chat_template)
        limit = self.target.context_limit
        if len(ids) >= limit:
            raise ValueError(f"the prompt is {len(ids)} tokens long; the model's context holds {limit} tokens, "
                             f"so at most {limit - 1} prompt tokens leave room to generate")
        return ids

    def generate(self, prompt: str, settings: DecodeSettings, stop: threading.Event | None = None,
                 prompt_ids: list[int] | None = None) -> "Generation":
        """A generation to iterate over. `prompt_ids`: what `check(prompt, settings)` returned, so a
        caller that checked the request already does not tokenize the prompt again; None: checked here."""
        ids = self.check(prompt, settings) if prompt_ids is None else list(prompt_ids)
        return Generation(self, prompt, ids, settings, stop)

    def run(self, prompt: str, settings: DecodeSettings, stop: threading.Event | None = None) -> Run:
        g = self.generate(prompt, settings, stop)
        for _ in g:
            pass
        return g.run


class Generation:
    """Iterate to get CycleRecords as they happen, or iterate `raw()` to get RawCycles (ids and numbers)
    and have the records built after the last cycle; `.run` holds the finished Run afterwards."""

    def __init__(self, engine: Engine, prompt: str, prompt_ids: list[int], s: DecodeSettings, stop):
        self.engine, self.prompt, self.prompt_ids, self.s, self.stop = engine, prompt, prompt_ids, s, stop
        self.cycles: list[CycleRecord] = []
        self.run: Run | None = None
        self.ending: str | None = None  # set before the last record is yielded: why the generation ends

    def __iter__(self):
        for raw in self._loop():
            rec = self._record(raw)  # labels and text, made while the engine's clock is stopped
            self.cycles.append(rec)
            yield rec
        self.run = self._finish(*self._end)

    def raw(self):
        """The cycles as RawCycles; the CycleRecords (token labels, each cycle's text) are built after the
        last one, with `.run`: for a consumer that shows the run only once it has finished (the page)."""
        raws = []
        for raw in self._loop():
            raws.append(raw)
            yield raw
        self.cycles = [self._record(r) for r in raws]
        self.run = self._finish(*self._end)

    # ------------------------------------------------------------------------------------------
    @torch.inference_mode()
    def _loop(self):
        eng, s, tgt = self.engine, self.s, self.engine.target
        drafter = eng.drafter_for(s.method)
        layers = getattr(drafter, "target_layers", ())  # EAGLE-3: the target layers the head reads
        dev, limit = tgt.device, tgt.context_limit
        gen = torch.Generator().manual_seed(s.seed)
        eos = set(tgt.eos_ids)
        # The clock (eagle_core.clock: device work finished first) runs over the whole decode, prefill
        # and every cycle (draft -> verify -> accept -> update, and the cycle's RawCycle: ids and
        # numbers), less the time the consumer holds each cycle: node labels and the cycle's text are
        # made there (__iter__) or after the last cycle (raw()), never inside the timed span.
        t_start = clock(dev)
        held = 0.0  # seconds the consumer held the cycles

        # 0. prefill: the prompt through the target; its last logits give the first new token
        cache = tgt.new_cache()
        feats, head_feats = self._forward(torch.tensor([self.prompt_ids], device=dev), cache, None, None, layers)
        first = self._pick(tgt.logits(feats[-1:])[0], gen)
        out_ids, stop_reason = cut_at_stop([first], 0, eos, s.max_new_tokens)
        L = len(self.prompt_ids)  # target cache length = position of the root
        unseen = UnseenPairs(head_feats, torch.tensor(self.prompt_ids[1:] + [first], device=dev), 0)
        head_cache = None if drafter is None else drafter.new_cache(min(limit, L + s.max_new_tokens) + HEAD_SCRATCH)
        timed = clock(dev) - t_start
        prefill_ms = timed * 1e3
        self._text, self._out = TextStream(tgt.decode), out_ids  # for _record, after each cycle or the run
        draft_s = verify_s = 0.0
        step = 0
        while stop_reason is None:
            if self.stop is not None and self.stop.is_set():
                stop_reason = "stopped"
                break
            if L >= limit:
                stop_reason = "context_full"
                break
            root = out_ids[-1]
            max_depth = min(s.max_new_tokens - len(out_ids) - 1, limit - 1 - L)  # room for drafts + bonus

            # 1. draft: the head catches up on last cycle's tokens, then drafts below the root
            t0 = clock(dev)
            if drafter is not None:
                root_feat = drafter.catch_up(head_cache, unseen.feats, unseen.next_tokens, unseen.start)
                tree = drafter.draft(s, head_cache, root, root_feat, L, max_depth, gen)
            else:
                tree = DraftTree.root_only(root)
            t1 = clock(dev)

            # 2. verify: one ordinary target forward over root + tree (tree mask, depth positions)
            mask = tree_attention_mask(tree.parents, L, dtype=tgt.dtype, device=dev) if len(tree) > 1 else None
            pos = tree_positions(tree.parents, L).to(dev)[None]
            feats, head_feats = self._forward(torch.tensor([tree.tokens], device=dev), cache, pos, mask, layers)
            # 3. accept: the longest path the target agrees with, then its bonus token
            verdict, rule = self._accept(tree, feats, gen)
            # 4. update: keep only the accepted path in the target's KV cache
            compact_cache(cache, L, list(verdict.accepted), tgt.fast.move_rows)
            new = [tree.tokens[i] for i in verdict.accepted[1:]] + [verdict.bonus_token]
            committed, stop_reason = cut_at_stop(new, len(out_ids), eos, s.max_new_tokens)
            out_ids.extend(committed)
            if drafter is not None and stop_reason is None:
                accepted = torch.tensor(verdict.accepted, device=dev)
                unseen = UnseenPairs(head_feats[accepted], torch.tensor(new, device=dev), L)
            t2 = clock(dev)
            draft_s += t1 - t0
            verify_s += t2 - t1
            kept = tree if tree.q_dists is None else DraftTree(tree.tokens, tree.parents, tree.q, tree.scores)
            raw = RawCycle(step, L, kept, verdict, tuple(committed), len(out_ids), (t1 - t0) * 1e3, (t2 - t1) * 1e3, rule)
            self.ending = stop_reason
            t3 = clock(dev)
            yield raw
            held += clock(dev) - t3
            L += len(verdict.accepted)
            step += 1
        timed = clock(dev) - t_start - held
        self._end = (out_ids, first, stop_reason, timed, prefill_ms, draft_s, verify_s)

    def _finish(self, out_ids, first, stop_reason, wall, prefill_ms, draft_s, verify_s) -> Run:
        """The finished Run: the summary of the whole generation plus every cycle."""
        eng, s, tgt = self.engine, self.s, self.engine.target
        summary = RunSummary(
            method=s.method, prompt=self.prompt, text=tgt.decode(out_ids), token_ids=tuple(out_ids),
            prompt_tokens=len(self.prompt_ids), new_tokens=len(out_ids), target_forwards=1 + len(self.cycles),
            cycles=len(self.cycles), tau=tau(self.cycles), wall_s=wall,
            tokens_per_s=len(out_ids) / wall if wall > 0 else 0.0, prefill_ms=prefill_ms,
            draft_s=draft_s, verify_s=verify_s, stop_reason=stop_reason, settings=s.to_dict(),
            model=tgt.name, head=eng.head_name_for(s.method), device=str(tgt.device),
            head_layers=tuple(getattr(eng.drafter_for(s.method), "target_layers", ())),
        )
        return Run(summary, tuple(self.cycles), first_token_id=first, first_token_text=tgt.token_text(first))

    def _forward(self, ids, cache, pos, mask, layers):
        """The target forward of a prefill or a verification: (features for the LM head (n, H),
        features for the head: the same, or for EAGLE-3 the captured layer inputs (n, 3H))."""
        tgt = self.engine.target
        if not layers:
            feats = tgt.forward(ids, cache, pos, mask)[0]
            return feats, feats
        feats, captured = tgt.forward_layers(ids, layers, cache, pos, mask)
        return feats[0], captured[0]

    def _pick(self, logits, gen) -> int:
        s = self.s
        if s.greedy:
            return int(logits.argmax())
        return sample(logits_to_probs(logits, s.temperature, s.top_p, s.top_k), gen)

    def _accept(self, tree: DraftTree, feats: torch.Tensor, gen) -> tuple[Verdict, str]:
        """3. accept: the target's LM head over every node, once per cycle (on a CPU it is bound by
        reading its weights, so one product over all nodes costs about one row), then verify.accept,
        where the rule is chosen and applied. -> (the verdict, its rule)."""
        tgt = self.engine.target
        return accept(tree, tgt.logits(feats), self.s, gen, tgt.fast.row_stats)

    def _record(self, r: RawCycle) -> CycleRecord:
        """A cycle's record from its RawCycle: every node's label and the text the cycle added (these
        calls come in cycle order, right after each cycle or all after the run: the text is the same)."""
        tt, tree, v = self.engine.target.token_text, r.tree, r.verdict
        depths = tree.depths
        nodes = tuple(
            DraftNode(index=i, token_id=int(tree.tokens[i]), text=tt(tree.tokens[i]), parent=int(tree.parents[i]),
                      depth=depths[i], q=float(tree.q[i]), score=float(tree.scores[i]), p=v.p[i],
                      decision=v.decisions[i] if i else ACCEPTED, u=v.u[i], p_test=v.p_test[i])
            for i in range(len(tree))
        )
        return CycleRecord(
            step=r.step, context_len=r.context_len, nodes=nodes, accepted=tuple(v.accepted),
            bonus_token_id=int(v.bonus_token), bonus_text=tt(v.bonus_token),
            committed_ids=tuple(int(t) for t in r.committed_ids), committed_text=self._text.push(self._out[:r.n_out]),
            draft_ms=r.draft_ms, verify_ms=r.verify_ms, rule=r.rule, bonus_p=v.bonus_p,
        )



class TextStream:
    """The text a growing list of token ids adds, detokenised incrementally: each call decodes
    only the window from the previous call's tokens on (linear in the output's length, where
    decoding the whole output every cycle was quadratic). Text ending in an incomplete UTF-8
    character is held back until the character is complete."""

    def __init__(self, decode):
        self.decode, self.start, self.read = decode, 0, 0

    def push(self, ids) -> str:
        before = self.decode(ids[self.start:self.read])
        after = self.decode(ids[self.start:])
        if after.endswith("\ufffd") or len(after) <= len(before):
            return ""
        self.start, self.read = self.read, len(ids)
        return after[len(before):]
