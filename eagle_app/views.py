"""What the app's callbacks return: the named outputs (OUT) and their renderers, the status
lines, and the scrubber's callbacks. Pure functions of a tab's state dict; nothing here holds
global state or builds a widget (layout.py maps the names in OUT to its components).
"""
from __future__ import annotations

import math
import time

import gradio as gr

import viz
from viz.style import md_text

VIEW = ("text", "tree", "mask", "probs", "caption", "slider")
SUMMARY = ("comparison", "replay", "acclen", "depth", "timing")
OUT = VIEW + SUMMARY + ("state", "status", "download", "examples", "model", "upload")
TRACE_NOTE = "Timings as recorded in the trace (measured when it was made, on the machine that made it)."
REASONS = {"max_new_tokens": "reached max new tokens", "eos": "the model ended its answer",
           "context_full": "the model's context is full", "stopped": "stopped early"}


def outputs(**named) -> tuple:
    """Values for OUT in order; outputs not named are left as they are (gr.skip)."""
    unknown = set(named) - set(OUT)
    assert not unknown, f"unknown outputs {unknown}"
    return tuple(named.get(name, gr.skip()) for name in OUT)


def named(values) -> dict:
    """The inverse of `outputs`, for tests: {name: value} of the outputs that were set."""
    return {name: v for name, v in zip(OUT, values) if not (isinstance(v, dict) and v == gr.skip())}


def new_state(eagle=None, vanilla=None, title="", source=None) -> dict:
    main = eagle or vanilla
    return {"eagle": eagle, "vanilla": vanilla, "title": title, "cycles": list(main.cycles) if main else [],
            "stepper": None, "step_key": None, "source": source, "note": TRACE_NOTE if main else ""}


# ---------------------------------------------------------------------------------- renderers
def cycle_views(state: dict, k: int | None) -> dict:
    """{text, tree, mask, probs, caption, slider} for cycle k (1-based; None = the last)."""
    cycles = state["cycles"]
    if not cycles:
        blank = viz.empty_figure("Press Generate (or Step) to draw the draft tree.")
        return dict(text=viz.colored_text_html([]), tree=blank, mask=viz.empty_figure("Tree-attention mask", 260),
                    probs=blank, caption="", slider=gr.Slider(minimum=1, maximum=2, value=1, label="Cycle"))
    n = len(cycles)
    asked = cycle_number(k)
    i = min(max(n if asked is None else asked, 1), n) - 1
    c = cycles[i]
    return dict(text=viz.colored_text_html(cycles, selected=c.step), tree=viz.tree_figure(c), mask=viz.mask_figure(c),
                probs=viz.probs_figure(c), caption=viz.cycle_caption(c, n),
                slider=gr.Slider(minimum=1, maximum=max(n, 2), value=i + 1, step=1, label=f"Cycle (of {n})"))


def summary_views(state: dict) -> dict:
    e, v = state["eagle"], state["vanilla"]
    cycles = state["cycles"]
    return dict(comparison=viz.comparison_html(e, v, note=state.get("note", ""), parting=state.get("parting")),
                replay=viz.replay_html(e, v, nonce=int(time.time() * 1000)),
                acclen=viz.accepted_length_figure(cycles), depth=viz.acceptance_by_depth_figure(cycles),
                timing=viz.timing_figure(e, v))


def cleared_views(what: str) -> dict:
    """Placeholders for every view while a new run is on its way (nothing from the last run stays)."""
    wait = viz.empty_figure(f"Drawn {what}.", height=200)
    msg = f"Decoding… the text, the draft tree and every chart are drawn {what}."
    return dict(text=viz.colored_text_html([], placeholder=msg), tree=wait, mask=wait, probs=wait, caption="",
                slider=gr.Slider(minimum=1, maximum=2, value=1, label="Cycle"),
                comparison=viz.comparison_html(None, None, placeholder=f"The comparison appears {what}."),
                replay=viz.replay_html(None, None, placeholder=f"The paced replay appears {what}."),
                acclen=wait, depth=wait, timing=wait)


def showcase_cycle(cycles) -> int | None:
    """1-based index of the cycle to show when a run ends: the one that accepted the most drafts
    (the earliest of equals), so the page opens on a real tree rather than on a final cycle
    that had no room left to draft."""
    drafted = [c for c in cycles if c.n_draft > 0]
    if not drafted:
        return None
    best = max(drafted, key=lambda c: (c.accepted_drafts, -c.step))
    return cycles.index(best) + 1


def all_views(state: dict) -> dict:
    return {**cycle_views(state, showcase_cycle(state["cycles"])), **summary_views(state)}


# ---------------------------------------------------------------------------------- status lines
def session_id(request: gr.Request | None) -> str:
    return getattr(request, "session_hash", None) or "local"


def reason_text(run, how: str = "") -> str:
    s = run.summary
    why = REASONS.get(s.stop_reason, md_text(s.stop_reason.replace("_", " ")))
    if how and s.stop_reason == "stopped":
        why = how
    if s.new_tokens == 0:
        return (f"produced no tokens ({why}) after reading a {s.prompt_tokens:,}-token prompt in "
                f"{s.prefill_ms / 1e3:.1f} s")
    return why


def done_status(state: dict, how: dict | None = None) -> str:
    parts = []
    for kind, label in (("eagle", "EAGLE"), ("vanilla", "vanilla")):
        r = state[kind]
        if r is not None:
            s = r.summary
            parts.append(f"**{label}**: {s.new_tokens} tokens, {s.tokens_per_s:.1f} tok/s, τ {s.tau:.2f} "
                         f"({reason_text(r, (how or {}).get(kind, ''))})")
    return "Done. " + " · ".join(parts) if parts else ""


def progress_line(kind: str, tokens: int, cycles: int, started: float, max_new: int, before: str = "") -> str:
    """The only thing sent to the page while a timed run decodes. No rate until it means something."""
    name = "EAGLE" if kind == "eagle" else "vanilla"
    dt = time.perf_counter() - started
    rate = f" · ≈ {tokens / dt:.1f} tok/s so far" if dt >= 2.0 and cycles >= 3 else ""
    return (f"{before}◔ **{name}** decoding (timed; figures drawn after both runs) · {min(tokens, max_new)}/{max_new} "
            f"tokens · {cycles} cycles · {dt:.0f} s{rate}")


def refuse(message: str) -> tuple:
    """A bad input: a warning toast and a line in the status; every figure stays as it was."""
    gr.Warning(message, title="Please check the input")
    return outputs(status=f"⚠ {md_text(message)}")


# ---------------------------------------------------------------------------------- scrubbing
def cycle_number(k) -> int | None:
    """A typed or dragged cycle number as a whole number, rounded half up as the slider rounds it
    (2.5 -> 3); None for nothing or for something that is not a number."""
    try:
        return math.floor(float(k) + 0.5) if k is not None and math.isfinite(float(k)) else None
    except (TypeError, ValueError):
        return None


def show(state, k):
    """A typed or dragged cycle number: draw that cycle. The slider itself is left alone when the
    number was a cycle that exists (so a drag is not fought), and set to the cycle drawn when it
    was not (0, 999, 2.5): slider and caption always agree."""
    views = cycle_views(state, k)
    n = len(state["cycles"])
    if n and cycle_number(k) == k and 1 <= k <= n:
        views["slider"] = gr.skip()
    return tuple(views[name] for name in VIEW)


class CycleSlider(gr.Slider):
    """The cycle scrubber. gr.Slider refuses a typed number outside its range with an error toast
    before any callback runs; this one hands it on (as a number) and `show` clamps it. Drawn by
    the ordinary slider component (a template of it)."""

    is_template = True

    def preprocess(self, payload):
        try:
            return float(payload) if payload is not None else None
        except (TypeError, ValueError):
            return None


def shift(state, k, delta):
    n = len(state["cycles"])
    views = cycle_views(state, min(max((cycle_number(k) or 1) + delta, 1), max(n, 1)))
    return tuple(views[name] for name in VIEW)


def play_tick(state, k):
    n = len(state["cycles"])
    nxt = (cycle_number(k) or 0) + 1
    if nxt > n:
        return (gr.skip(),) * len(VIEW) + (gr.Timer(active=False),)
    views = cycle_views(state, nxt)
    return tuple(views[name] for name in VIEW) + (gr.Timer(active=nxt < n),)


def learn_views(state, k):
    views = cycle_views(state, k)
    return views["tree"], views["mask"], views["probs"]
