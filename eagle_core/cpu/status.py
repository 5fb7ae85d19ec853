"""Which path the engine's products run on, why, and about how much slower than the engine's own
kernels: ONE answer, which the CLI prints on stderr, the page's model line and the hardware panel show.

A fallback is never silent: no C compiler, no AVX2, EAGLE_PORTABLE=1, FastPath(kernels="stock"), a
backend forced by name, or the engine's kernel rejected by the batch-invariance check on some weight
shapes. And identity with vanilla is promised only where every product is batch invariant, checked at
calibration or by construction (kernels/calibration.py); a path nobody checked says greedy EAGLE may
part from vanilla at near-ties. Without the library the attention keeps its row invariance through
kernels/attention.py's torch twin of attention.c (`attend_rows`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .kernels import build, calibration
from .kernels.backends import RowWise

# About how many times slower a decode runs without the engine's C kernels (torch's products and the
# transformers forward) than with them: docs/performance.md, "When the engine's kernels cannot run",
# where the measurement and its command are. A rounded figure to set expectations, not a promise.
SLOWER_WITHOUT_KERNELS = 2.0
DOC = 'docs/performance.md, "When the engine\'s kernels cannot run"'


@dataclass(frozen=True)
class PathStatus:
    path: str  # what runs, in words
    reason: str  # why it is not the engine's kernels ("" where it is, or on a GPU: nothing to explain)
    slower: float | None  # about how many times slower than the engine's kernels (None: not known / not slower)
    identical: bool  # greedy EAGLE equals vanilla by construction: products and attention row invariant, checked
    # the same facts as keys and values, for a page that says them in another language (eagle_app/i18n.py,
    # FALLBACK_ZH): kind names the case (portable_env, stock, dtype, forced, no_library, rejected)
    kind: str = ""
    args: dict = field(default_factory=dict)

    @property
    def fallback(self) -> bool:
        return bool(self.reason)

    def line(self) -> str | None:
        """One line for a user: which path runs, why, about how much slower; None on the fast path (and
        on a GPU, whose path is the portable one by design)."""
        if not self.fallback:
            return None
        cost = f"; about {self.slower:g}x slower than the engine's own kernels ({DOC})" if self.slower else ""
        same = ("greedy EAGLE still equals vanilla token for token (products and attention row invariant)"
                if self.identical else
                "greedy EAGLE may part from vanilla at near-ties (torch's products and attention are not row invariant)")
        return f"CPU path: {self.path}, because {self.reason}{cost}; {same}."


def path_status(target) -> PathStatus:
    """The path `target` (eagle_core.target.Target) runs its products on, from what was decided at load."""
    fast, inst, device = target.fast, target.kernels, torch.device(target.device).type
    if device != "cpu":
        return PathStatus(f"the portable path on {device} (torch's kernels)", "", None, False)
    if not fast.calls_library:
        forced = build.portable_forced()
        why = f"{build.PORTABLE_ENV}=1" if forced else "FastPath(kernels=\"stock\") was asked for"
        return PathStatus("the portable path (stock torch modules, no C kernels)", why, SLOWER_WITHOUT_KERNELS, False,
                          "portable_env" if forced else "stock", {"env": build.PORTABLE_ENV})
    if getattr(target, "weight_format", "float32") == "gguf" and inst is not None and not inst.swaps:
        # every product on the blocks (qblocks.c, row invariant by construction), attention the engine's
        return PathStatus("the engine's kernels", "", None, True)
    if inst is None or not inst.swaps:
        dtype = str(target.dtype).replace("torch.", "")
        return PathStatus("torch's kernels", f"the engine's kernels run float32 weights only (this target is {dtype})",
                          None, False, "dtype", {"dtype": dtype})
    names = sorted(set(inst.choice.values()))
    if inst.policy != "auto":  # forced by name: checked by nobody unless invariant by construction
        if inst.policy == "smallgemm":
            return PathStatus("the engine's kernels", "", None, True)
        return PathStatus(f"the {inst.policy} backend", f"FastPath(kernels={inst.policy!r}) was asked for",
                          SLOWER_WITHOUT_KERNELS, inst.policy == RowWise.name, "forced", {"policy": inst.policy})
    if fast.library() is None:
        error = build.library_error()
        return PathStatus(f"torch's kernels ({', '.join(names)})", error, SLOWER_WITHOUT_KERNELS, True,
                          "no_library", {"names": ", ".join(names), "error": error})
    rejected = [s for s in inst.choice if "smallgemm" in calibration.REJECTED.get(s, ())]
    if rejected:
        return PathStatus(f"{', '.join(names)} (the engine's kernel on {len(inst.choice) - len(rejected)} of "
                          f"{len(inst.choice)} weight shapes)",
                          f"smallgemm failed the batch-invariance check here for {len(rejected)} weight shape(s)",
                          SLOWER_WITHOUT_KERNELS, True, "rejected",
                          {"names": ", ".join(names), "ok": len(inst.choice) - len(rejected), "n": len(inst.choice),
                           "bad": len(rejected)})
    return PathStatus("the engine's kernels", "", None, True)


def weights_line(target, choice=None) -> str:
    """One line saying which weight format the target's products run (FastPath.weights), and in the gguf
    format which decoder pass runs: what the CLI prints on stderr at start. `choice`: the --weights answer
    (cpu/auto_format.WeightsChoice); where auto chose, the line says so and why (when it matches the target)."""
    fmt = getattr(target, "weight_format", "float32")
    said = choice.clause() if choice is not None and choice.weights == fmt else ""
    if fmt != "gguf":  # the weights as loaded: float32 on a CPU, a GPU target's dtype there
        return f"Weights: {str(getattr(target, 'dtype', fmt)).replace('torch.', '')}{said}, as loaded."
    note = getattr(target, "forward_note", "")
    path = "the CPU decoder" if getattr(target, "forward_path", "") == "cpu" else "the transformers forward"
    return (f"Weights: gguf{said}, the file's own Q4_1 / Q8_0 blocks (kernels/qblocks.c); {path}"
            f"{f' ({note})' if note else ''}; greedy EAGLE equals greedy vanilla in this format.")


def path_line(target) -> str | None:
    """path_status(target).line(): what the CLI prints on stderr and the page shows."""
    return path_status(target).line()
