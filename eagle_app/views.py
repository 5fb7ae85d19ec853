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

from .i18n import APP_TEXT, text

VIEW = ("text", "tree", "mask", "probs", "caption", "slider")
SUMMARY = ("comparison", "replay", "acclen", "depth", "timing")
OUT = VIEW + SUMMARY + ("state", "status", "download", "examples", "model", "upload")
TRACE_NOTE = ("note.trace", {})  # the cards' note, an eagle_app.i18n APP_TEXT key and its fields (drawn in the tab's language)
REASONS = ("max_new_tokens", "eos", "context_full", "stopped")


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
            "stepper": None, "step_key": None, "source": source, "note": TRACE_NOTE if main else None}


def note_text(note, lang: str = "en") -> str:
    """The cards' note: (APP_TEXT key, fields), the fields' own keys ("how") translated too, and a field that is
    itself an (APP_TEXT key, fields) pair ("device")."""
    if not note:
        return ""
    key, fields = note
    tr = lambda k, v: APP_TEXT(v, lang) if k == "how" else APP_TEXT(v[0], lang, **v[1]) if isinstance(v, tuple) else v  # noqa: E731
    return APP_TEXT(key, lang, **{k: tr(k, v) for k, v in fields.items()})


# ---------------------------------------------------------------------------------- renderers
def run_method(state: dict) -> str | None:
    """The method of the tab's run: its finished runs', else the Step run's settings (step_key)."""
    main = state.get("eagle") or state.get("vanilla")
    if main is not None:
        return main.summary.method
    key = state.get("step_key")
    return getattr(key[1], "method", None) if key else None


def cycle_views(state: dict, k: int | None, lang: str = "en") -> dict:
    """{text, tree, mask, probs, caption, slider} for cycle k (1-based; None = the last), in `lang`."""
    cycles = state["cycles"]
    if not cycles:
        blank = viz.empty_figure(APP_TEXT("blank.tree", lang))
        return dict(text=viz.colored_text_html([], lang=lang), tree=blank,
                    mask=viz.empty_figure(APP_TEXT("blank.mask", lang), 260), probs=blank, caption="",
                    slider=gr.Slider(minimum=1, maximum=2, value=1, label=text("Cycle", lang)))
    n = len(cycles)
    asked = cycle_number(k)
    i = min(max(n if asked is None else asked, 1), n) - 1
    c = cycles[i]
    vanilla = run_method(state) == "vanilla"  # its mask and p/q chart say it drafts nothing
    return dict(text=viz.colored_text_html(cycles, selected=c.step, lang=lang), tree=viz.tree_figure(c, lang=lang),
                mask=viz.mask_figure(c, lang, vanilla), probs=viz.probs_figure(c, lang, vanilla),
                caption=viz.cycle_caption(c, n, lang=lang, vanilla=vanilla),
                slider=gr.Slider(minimum=1, maximum=max(n, 2), value=i + 1, step=1, label=APP_TEXT("slider.of", lang, n=n)))


def summary_views(state: dict, lang: str = "en") -> dict:
    e, v = state["eagle"], state["vanilla"]
    cycles = state["cycles"]
    return dict(comparison=viz.comparison_html(e, v, note=note_text(state.get("note"), lang), lang=lang,
                                               parting=state.get("parting")),
                replay=viz.replay_html(e, v, nonce=int(time.time() * 1000), lang=lang),
                acclen=viz.accepted_length_figure(cycles, lang=lang), depth=viz.acceptance_by_depth_figure(cycles, lang),
                timing=viz.timing_figure(e, v, lang))


def cleared_views(what: str, lang: str = "en") -> dict:
    """Placeholders for every view while a new run is on its way (nothing from the last run stays);
    `what` is an APP_TEXT key ("wait.after_runs": when they are drawn)."""
    what = APP_TEXT(what, lang)
    wait = viz.empty_figure(APP_TEXT("wait.figure", lang, what=what), height=200)
    msg = APP_TEXT("wait.text", lang, what=what)
    return dict(text=viz.colored_text_html([], placeholder=msg), tree=wait, mask=wait, probs=wait, caption="",
                slider=gr.Slider(minimum=1, maximum=2, value=1, label=text("Cycle", lang)),
                comparison=viz.comparison_html(None, None, placeholder=APP_TEXT("wait.cards", lang, what=what)),
                replay=viz.replay_html(None, None, placeholder=APP_TEXT("wait.replay", lang, what=what)),
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


def all_views(state: dict, lang: str = "en") -> dict:
    """Every view of a finished run or a loaded trace; the caption says why the cycle shown first was chosen."""
    k = showcase_cycle(state["cycles"])
    views = cycle_views(state, k, lang)
    if k is not None and len(state["cycles"]) > 1:
        views["caption"] += "\n\n" + APP_TEXT("view.showcase", lang, n=len(state["cycles"]))
    return {**views, **summary_views(state, lang)}


# ---------------------------------------------------------------------------------- status lines
def session_id(request: gr.Request | None) -> str:
    return getattr(request, "session_hash", None) or "local"


def reason_text(run, how: str = "", lang: str = "en") -> str:
    """Why a run ended; `how` an APP_TEXT key (or text) for a run that was stopped."""
    s = run.summary
    why = (APP_TEXT(f"reason.{s.stop_reason}", lang) if s.stop_reason in REASONS
           else md_text(s.stop_reason.replace("_", " ")))
    if how and s.stop_reason == "stopped":
        why = APP_TEXT(how[0], lang, **how[1]) if isinstance(how, tuple) else how
    if s.new_tokens == 0:
        return APP_TEXT("status.no_tokens", lang, why=why, n=s.prompt_tokens, s=s.prefill_ms / 1e3)
    return why


def done_status(state: dict, how: dict | None = None, lang: str = "en") -> str:
    """`how`: {kind: how a stopped run was stopped, an (APP_TEXT key, fields) pair or a text}."""
    parts = []
    for kind, label in (("eagle", "EAGLE"), ("vanilla", APP_TEXT("label.vanilla", lang))):
        r = state[kind]
        if r is not None:
            s = r.summary
            parts.append(APP_TEXT("status.run", lang, label=label, n=s.new_tokens, rate=s.tokens_per_s, tau=s.tau,
                             why=reason_text(r, (how or {}).get(kind, ""), lang)))
    return APP_TEXT("status.done", lang) + " · ".join(parts) if parts else ""


def progress_line(kind: str, tokens: int, cycles: int, started: float, max_new: int, before: str = "",
                  lang: str = "en") -> str:
    """The only thing sent to the page while a timed run decodes. No rate until it means something."""
    name = "EAGLE" if kind == "eagle" else APP_TEXT("label.vanilla", lang)
    dt = time.perf_counter() - started
    rate = APP_TEXT("status.rate", lang, r=tokens / dt) if dt >= 2.0 and cycles >= 3 else ""
    return APP_TEXT("status.progress", lang, before=before, name=name, k=min(tokens, max_new), max_new=max_new,
               cycles=cycles, dt=dt, rate=rate)


def refusal_text(error: Exception, lang: str = "en") -> str:
    """A refused input's message in `lang`: settings.Refusal carries its APP_TEXT key; any other error
    (eagle_core's checks) is English, prefixed in Chinese."""
    key, fields = getattr(error, "key", None), getattr(error, "fields", {})
    return APP_TEXT(key, lang, **fields) if key else APP_TEXT("refuse.other", lang, msg=str(error))


def refuse(error, lang: str = "en") -> tuple:
    """A bad input: a warning toast and a line in the status; every figure stays as it was."""
    message = refusal_text(error, lang) if isinstance(error, Exception) else str(error)
    gr.Warning(message, title=APP_TEXT("refuse.title", lang))
    return outputs(status=f"⚠ {md_text(message)}")


# ---------------------------------------------------------------------------------- scrubbing
def cycle_number(k) -> int | None:
    """A typed or dragged cycle number as a whole number, rounded half up as the slider rounds it
    (2.5 -> 3); None for nothing or for something that is not a number."""
    try:
        return math.floor(float(k) + 0.5) if k is not None and math.isfinite(float(k)) else None
    except (TypeError, ValueError):
        return None


def show(state, k, lang: str = "en"):
    """A typed or dragged cycle number: draw that cycle. The slider itself is left alone when the
    number was a cycle that exists (so a drag is not fought), and set to the cycle drawn when it
    was not (0, 999, 2.5): slider and caption always agree."""
    views = cycle_views(state, k, lang)
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


def shift(state, k, delta, lang: str = "en"):
    n = len(state["cycles"])
    views = cycle_views(state, min(max((cycle_number(k) or 1) + delta, 1), max(n, 1)), lang)
    return tuple(views[name] for name in VIEW)


def play_tick(state, k, lang: str = "en"):
    n = len(state["cycles"])
    nxt = (cycle_number(k) or 0) + 1
    if nxt > n:
        return (gr.skip(),) * len(VIEW) + (gr.Timer(active=False),)
    views = cycle_views(state, nxt, lang)
    return tuple(views[name] for name in VIEW) + (gr.Timer(active=nxt < n),)


def learn_views(state, k, lang: str = "en"):
    views = cycle_views(state, k, lang)
    return views["tree"], views["mask"], views["probs"]
