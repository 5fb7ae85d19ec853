"""The Lesson tab's cards (eagle_app/lesson.py): each step's fields read from its records at render time (the
hardware panel's recording and tau per tree, tau per language, the lesson's traces and manifest, the EAGLE-3
head's config.json), filled into its texts (eagle_app/lesson_text.py), and step 2's live inputs: the draft
head's inputs computed by one target forward over the step's prompt on the engine thread. No gradio here."""
from __future__ import annotations

import functools
import json
import os
import threading

from eagle_core.trace import ACCEPTED, REJECTED
from viz.examples import load_trace_file
from viz.i18n import lang_of
from viz.style import cycle_texts, md_text, token_label

from .lesson_plan import BY_KEY, LESSON_DIR, PRESET, STEPS, TREE, is_byte_token, load_manifest, load_meta, residual_nodes
from .lesson_text import TEXT

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HEAD3_CONFIG = os.path.join(ROOT, "assets", "head3-smollm2-135m", "config.json")
SMALLER = 3  # step 1's "try it": total draft tokens set to this (4 rows), a tree a quarter the cpu tree's drafts
ENGLISH_GREAT_WALL = "Introduce the Great Wall in three sentences."  # step 7's "try it": the prompt in English

# ------------------------------------------------------------------------------------- records
def _f2(x) -> str:
    return f"{x:.2f}"


def _f1(x) -> str:
    return f"{x:.1f}"


def plan_keys() -> list[str]:
    return [s.key for s in STEPS]


def recorded_steps() -> dict[str, dict]:
    """{key: manifest entry} of the recorded steps whose trace matches the plan (lesson_plan.load_manifest)."""
    return {s["key"]: s for s in load_manifest()}


@functools.lru_cache(maxsize=16)
def trace(file: str):
    """(eagle, vanilla) of a lesson trace, read once."""
    return load_trace_file(os.path.join(LESSON_DIR, file))


def _recorded():
    """(measurement, tau table) of the hardware panel's recording, or (None, None)."""
    from eagle_core.machine import load_recorded, load_tau_table

    try:
        return load_recorded(), load_tau_table()
    except (OSError, ValueError, KeyError, TypeError):
        return None, None


def _t(fwd: dict, k: int) -> float:
    from eagle_core.machine.hardware import interp

    return fwd[k] if k in fwd else interp(fwd, k)


def _control(name: str, lang: str) -> str:
    """The Decode tab's label of a control, as the page shows it in `lang`."""
    from . import settings
    from .i18n import CHINESE

    label = {"prompt": "Prompt", "preset": "Preset"}.get(name) or settings.BY_NAME[name].label
    return CHINESE.get(label, label) if lang == "zh" else label


def _bytes_per_weight(m: dict) -> int:
    target = str(m.get("target", ""))
    return 2 if ("bfloat16" in target or "float16" in target) else 4


def cost_facts(lang: str) -> dict:
    """Step 1: t(1) and t(rows of the cpu tree) from the recording, the bytes a pass reads."""
    m, _ = _recorded()
    rows = TREE["total_tokens"] + 1
    k2 = SMALLER + 1
    if not m:
        return {}
    fwd = m["forward_ms"]
    return dict(mb=f"{m['weights']['target'] * _bytes_per_weight(m) / 1e6:,.0f}", machine=md_text(m.get("hardware", "")),
                date=m.get("date", ""), t1=_f1(fwd[1]), rows=rows, tk=_f1(_t(fwd, rows)), r=_f2(_t(fwd, rows) / fwd[1]),
                n=TREE["total_tokens"], n2=SMALLER, k2=k2, tk2=_f1(_t(fwd, k2)))


def hardware_facts(lang: str) -> dict:
    """Step 8: the best tree, the cpu and gpu presets' predictions from the recording."""
    from eagle_core.machine import lesson as predicted, quoted

    m, table = _recorded()
    if not m:
        return {}
    res = predicted(m, table)
    q = quoted(m, table)
    best = res["best_here"]
    return dict(machine=md_text(q["machine"]), date=q["date"], best=best["tree"], best_speedup=_f2(best["speedup"]),
                cpu_tree=q["cpu_tree"], cpu_speedup=q["cpu_speedup"], gpu_tree=q["gpu_tree"], gpu_speedup=q["gpu_speedup"],
                gpu_rows=q["gpu_nodes"], gpu_c=q["gpu_c"], gpu_tau=q["gpu_tau"])


RECORD_FORMATS = "python scripts/record_traces.py --records"  # the recorder of every weight format's curve


def _format_name(fmt: str, lang: str) -> str:
    from viz.hardware import TEXT as HW

    return HW(f"fmt.{fmt}", lang)


def precision_text(chosen: str = "float32", lang: str = "en", measured: dict | None = None,
                   table: dict | None = None) -> str:
    """Step 8's precision switch in words, every figure from the hardware record: the chosen format's t(1),
    t(k) and best tree, then how the GGUF's blocks differ from float32 (the curve's rise, where the best tree
    moves, the same prompt's tokens/s) or why they are not shown (not recorded yet / not runnable there)."""
    from eagle_core.machine.hardware import FORMATS, format_lessons

    if measured is None:
        measured, table = _recorded()
    if not measured:
        return ""
    fl = format_lessons(measured, table)
    chosen = chosen if chosen in FORMATS else "float32"
    name = {fmt: _format_name(fmt, lang) for fmt in FORMATS}
    f, g = fl["float32"], fl["gguf"]
    common = sorted(set(f.get("curve", {})) & set(g.get("curve", {})) or f.get("curve", {}))
    k = common[-1] if common else 1

    def shown(fmt):
        x = fl[fmt]
        c = x["curve"]
        return TEXT("prec.shown", lang, name=name[fmt], t1=_f1(c[1]), k=k, tk=_f1(_t(c, k)), r=_f2(_t(c, k) / c[1]),
                    best=x["best"]["tree"], speedup=_f2(x["best"]["speedup"]))

    if g["state"] != "recorded":
        why = TEXT("prec.missing", lang, name=name["gguf"], f_name=name["float32"], command=RECORD_FORMATS) \
            if g["state"] == "missing" else TEXT("prec.unavailable", lang, name=name["gguf"], why=md_text(g["why"]))
        return "\n\n".join(([shown("float32")] if f["state"] == "recorded" else []) + [why])
    if f["state"] != "recorded":
        return shown("gguf")
    r = {fmt: _t(fl[fmt]["curve"], k) / fl[fmt]["curve"][1] for fmt in FORMATS}
    rise = TEXT("prec.steeper" if r["gguf"] > r["float32"] else "prec.flatter", lang, k=k, g_r=_f2(r["gguf"]),
                g_name=name["gguf"], f_name=name["float32"], f_r=_f2(r["float32"]))
    nf, ng = f["best"]["nodes"], g["best"]["nodes"]
    move = TEXT("prec.smaller" if ng < nf else "prec.larger" if ng > nf else "prec.same", lang, f_best=f["best"]["tree"],
                f_name=name["float32"], g_best=g["best"]["tree"], g_name=name["gguf"], g_speedup=_f2(g["best"]["speedup"]))
    parts = [shown(chosen), rise + ("" if lang == "zh" else " ") + move]
    dec = decode_sentence(f.get("decode"), g.get("decode"), name, lang)
    return "\n\n".join(parts + ([dec] if dec else []))


def decode_sentence(fd: dict | None, gd: dict | None, name: dict, lang: str) -> str:
    """The same prompt's tokens/s in both formats (the record's decode_rates), or "" when either lacks it."""
    try:
        fv, fe = fd["vanilla"], fd[fd["method"]]
        gv, ge = gd["vanilla"], gd[gd["method"]]
    except (TypeError, KeyError):
        return ""
    same = next((i for i, (a, b) in enumerate(zip(fv["token_ids"], gv["token_ids"])) if a != b),
                min(len(fv["token_ids"]), len(gv["token_ids"])))
    return TEXT("prec.decode", lang, prompt=md_text(fd.get("prompt", "")), n=fv.get("new_tokens", "—"),
                f_name=name["float32"], f_van=_f1(fv["tokens_per_s"]), f_eagle=_f1(fe["tokens_per_s"]), f_tau=_f2(fe["tau"]),
                g_name=name["gguf"], g_van=_f1(gv["tokens_per_s"]), g_eagle=_f1(ge["tokens_per_s"]), g_tau=_f2(ge["tau"]),
                same=same)


def head3_layers(lang: str = "en") -> str:
    try:
        with open(HEAD3_CONFIG, encoding="utf-8") as f:
            layers = json.load(f)["eagle_explainer"]["layers"]
        return ("、" if lang == "zh" else ", ").join(str(i) for i in layers)
    except (OSError, ValueError, KeyError, TypeError):
        return "—"


def language_facts() -> dict:
    from viz.languages import load_language_rows

    rows = load_language_rows()
    return dict(n_prompts=rows[0]["prompts"]) if rows else {}


def vocab_facts(lang: str) -> dict:
    v = load_meta().get("vocab") or {}
    out = {}
    if "size" in v:
        out.update(vocab=f"{v['size']:,}", whole=v.get("whole_chinese", "—"))
    if v.get("per_char"):
        out.update(chars=f"{v['chars']:,}" if "chars" in v else "—", per_char=TEXT("list_sep", lang).strip("”“").join(
            TEXT("per_char", lang, n=n, k=k) for k, n in v["per_char"].items()))
    return out


# ------------------------------------------------------------------------------------- cycles
def _quote(texts, lang: str) -> str:
    return TEXT("list_sep", lang).join(md_text(token_label(t, 16)) for t in texts)


def per_depth(cycles, lang: str) -> str:
    """Acceptance per depth over a run: of the cycles whose accepted path reached depth d - 1 (and drafted at d),
    how many accepted a draft at depth d."""
    parts = []
    for d in range(1, TREE["depth"] + 1):
        reached = [c for c in cycles if c.n_draft and len(c.accepted) >= d and any(n.depth == d for n in c.nodes)]
        if not reached:
            break
        took = sum(1 for c in reached if len(c.accepted) > d)
        parts.append(TEXT("depth_of", lang, d=d, a=took, b=len(reached)))
    return "; ".join(parts) if lang == "en" else "；".join(parts)


def cycle_facts(key: str, eagle, c, lang: str) -> dict:
    """The fields of step `key`'s caption and question, read from its run `eagle` and its cycle `c`."""
    shown, bonus = cycle_texts(c)
    acc = [c.nodes[i] for i in c.accepted[1:]]
    label = lambda n: md_text(token_label(shown[n.index], 16))  # noqa: E731
    if key == "tree":
        return dict(root=label(c.nodes[0]), kids=sum(1 for n in c.nodes if n.parent == 0),
                    depth=max(n.depth for n in c.nodes), n=c.n_draft, rows=c.n_draft + 1)
    if key == "mask":
        return dict(rows=c.n_draft + 1, k=len(acc), m=len(acc) + 1, token=label(acc[-1]))
    if key == "greedy":
        return dict(k=len(acc), quoted=_quote((shown[n.index] for n in acc), lang), bonus=md_text(token_label(bonus, 16)),
                    m=len(acc) + 1, per_depth=per_depth(eagle.cycles, lang))
    if key == "sampling":
        won = next(n for n in residual_nodes(c) if n.decision == ACCEPTED)
        lost = [s for s in c.nodes if s.parent == won.parent and s.index < won.index and s.decision == REJECTED][-1]
        return dict(t=f"{eagle.summary.settings.get('temperature', 0.0):g}", rej=label(lost), u1=_f2(lost.u),
                    p1=_f2(lost.p_test), acc=label(won), p2=_f2(won.p), t2=_f2(won.p_test), u2=_f2(won.u))
    if key == "languages":
        return dict(k=sum(1 for n in acc if is_byte_token(n.text)), quoted=_quote((shown[n.index] for n in acc), lang))
    raise KeyError(key)


# ------------------------------------------------------------------------------------- the card
class _Blank(dict):
    """format_map's mapping: a field no record filled shows as "—" (the card still reads)."""

    def __missing__(self, key):
        return "—"


def _fill(key: str, lang: str, fields: dict) -> str:
    text = TEXT.entries[key][1 if lang_of(lang) == "zh" else 0]
    return text.format_map(_Blank(fields))


def facts(key: str, lang: str, live: dict | None = None) -> dict:
    """Every field of step `key`'s texts, from its records (and its cycle when recorded)."""
    step = BY_KEY[key]
    f = dict(control=_control(step.control, lang), preset=PRESET, width=TREE["tree_top_k"],
             tree=f"{TREE['depth']},{TREE['tree_top_k']},{TREE['total_tokens']}", english=ENGLISH_GREAT_WALL)
    if key == "cost":
        f.update(cost_facts(lang))
    elif key == "head":
        f.update(layers=head3_layers(lang), live=TEXT("live_model" if live else "no_model", lang))
    elif key == "hardware":
        f.update(hardware_facts(lang))
    elif key == "languages":
        f.update(language_facts(), **vocab_facts(lang))
    s = recorded_steps().get(key)
    if step.file and s:
        eagle, _ = trace(step.file)
        f.update(cycle_facts(key, eagle, eagle.cycles[s["cycle"] - 1], lang))
    return f


def source_line(key: str, lang: str) -> str:
    step = BY_KEY[key]
    if step.file:
        s = recorded_steps().get(key)
        if not s:
            return TEXT("missing", lang)
        eagle, _ = trace(step.file)
        return TEXT("source", lang, prompt=md_text(step.prompt), k=s["cycle"], of=len(eagle.cycles),
                    rule=TEXT(f"rule.{key}", lang))
    if key == "head":
        return TEXT("source_live", lang, prompt=md_text(step.prompt))
    m, _ = _recorded()
    what = TEXT("recorded_hw", lang, machine=md_text(m.get("hardware", "")), date=m.get("date", ""),
                command=m.get("command", "")) if m else TEXT("none", lang)
    return TEXT("source_record", lang, what=what)


def card(i: int, lang: str, live: dict | None = None) -> str:
    """Step i's Markdown: its title, caption, question, try-it and where its figures come from."""
    key = STEPS[i - 1].key
    f = facts(key, lang, live)
    return "\n\n".join((TEXT("head", lang, i=i, n=len(STEPS), title=TEXT(f"title.{key}", lang)),
                        _fill(f"cap.{key}", lang, f), TEXT("ask", lang, q=_fill(f"q.{key}", lang, f)),
                        TEXT("try", lang, t=_fill(f"try.{key}", lang, f)),
                        "<small>" + source_line(key, lang) + "</small>"))


# ------------------------------------------------------------------------------------- step 2, live
_HEAD_CACHE: dict = {}
_HEAD_LOCK = threading.Lock()
SHOWN_ROWS = 6  # positions drawn: the prompt's last ones and the position the answer starts at


def head_inputs(engine, prompt: str, rows: int = SHOWN_ROWS) -> dict:
    """The draft head's inputs at the prompt's last `rows` positions, from one target forward over the prompt
    (the chat template as the Decode tab applies it): the top feature f(t) at each, the token x(t) there and the
    token one step ahead x(t+1) (for the last position: the target's own next token, greedy), and, with an
    EAGLE-3 head, the hidden states entering the layers it reads. Read-only: no cache kept, nothing decoded."""
    import torch

    from eagle_core import DecodeSettings

    target = engine.target
    ids = engine.check(prompt, DecodeSettings(**{k: v for k, v in BY_KEY["head"].settings.items()}))
    d3 = getattr(engine, "drafter3", None)
    layers = tuple(d3.target_layers) if d3 is not None else ()
    x = torch.tensor([ids], device=target.device)
    if layers:
        top, captured = target.forward_layers(x, layers)
    else:
        top, captured = target.forward_layers(x, (0,))[0], None
    nxt = int(target.logits(top[:, -1:, :])[0, -1].argmax())
    seq = list(ids) + [nxt]
    # the prompt's own last tokens (before the chat template's closing markup) and the last position, where
    # the first draft of the answer starts
    ends = [i for i, t in enumerate(ids) if t in set(target.eos_ids)]
    end = ends[-1] if ends else len(ids) - 1
    pos = sorted(set(range(max(end - rows + 1, 0), end)) | {len(ids) - 1})
    dec = lambda i: target.tokenizer.decode([i])  # noqa: E731
    h = top.shape[-1]
    out = {"tokens": [dec(seq[t]) for t in pos], "next": [dec(seq[t + 1]) for t in pos],
           "top": top[0, pos].float().tolist(), "hidden": h, "layers": {}}
    if captured is not None:
        for j, layer in enumerate(layers):
            out["layers"][layer] = captured[0, pos, j * h:(j + 1) * h].float().tolist()
    return out


def live_head_inputs(timeout: float = 20.0) -> dict | None:
    """Step 2's inputs from the page's loaded engine, computed once per engine on the engine thread (so it never
    runs beside a decode); None when no engine with a head is loaded or the engine thread stays busy."""
    from .engine_thread import ENGINE_THREAD
    from .model import MODEL

    engine = MODEL.engine
    if engine is None or getattr(engine, "drafter", None) is None:
        return None
    key = (id(engine), BY_KEY["head"].prompt)
    with _HEAD_LOCK:
        if key in _HEAD_CACHE:
            return _HEAD_CACHE[key]
    try:
        data = ENGINE_THREAD.submit(head_inputs, engine, BY_KEY["head"].prompt).result(timeout=timeout)
    except Exception:  # a busy engine thread or a model without the layers: the sketch, never a traceback
        return None
    with _HEAD_LOCK:
        _HEAD_CACHE[key] = data
    return data
