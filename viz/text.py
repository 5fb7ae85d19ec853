"""HTML for the generated text (tokens coloured by origin, cycle boundaries drawn), the
one-paragraph caption of a cycle, the side-by-side numbers and the paced replay.

Everything is self-contained HTML (its own <style>), escaped, and keeps whitespace as typed
(`white-space: pre-wrap`), so code and newlines survive.
"""
from __future__ import annotations

import html
import re

from eagle_core.trace import ACCEPTED, REJECTED, CycleRecord, Run

from .i18n import FIGURE_TEXT
from .style import cycle_texts, feed_bytes, md_text, token_label
from .verdict import verdict_html

BROKEN_RE = re.compile(r"‹[0-9A-F]{2}(?: [0-9A-F]{2})*›")  # the bytes of a character the model never finished

CSS = """<style>
.eg-text{white-space:pre-wrap;font-family:ui-monospace,'SFMono-Regular',Menlo,Consolas,monospace;font-size:18px;
 line-height:2.0;color:#1f2430;background:#fff;padding:14px 16px;border:1px solid #d9dce3;border-radius:10px;
 max-height:460px;overflow-y:auto;word-break:break-word}
.eg-cyc{border-left:2px solid #7a7f8c;padding-left:1px;margin-left:1px}
.eg-cyc.eg-sel{outline:3px solid #1f2430;outline-offset:1px;border-radius:3px}
.eg-prefill{background:#e8eaef;border-bottom:3px solid #7a7f8c}
.eg-draft{background:#d3f1e6;border-bottom:3px solid #009E73}
.eg-bonus{background:#fde8c6;border-bottom:3px dotted #b36b00}
.eg-mixed{background:#eef3d6;border-bottom:3px double #6b7d00}
.eg-legend{font-family:system-ui,sans-serif;font-size:15px;margin:4px 0 8px;display:flex;gap:16px;flex-wrap:wrap;color:#1f2430}
.eg-legend span span{padding:0 4px}
.eg-empty{color:#667;font-family:system-ui,sans-serif;font-size:17px}
.eg-cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:10px;font-family:system-ui,sans-serif}
.eg-card{border:1px solid #d9dce3;border-radius:10px;padding:10px 12px;background:#fafbfc;color:#1f2430}
.eg-card b{display:block;font-size:23px}
.eg-card small{font-size:14px;color:#555}
.eg-note{font-family:system-ui,sans-serif;font-size:15px;color:#444;margin:8px 2px 0}
.eg-lost{border-left:4px solid #D55E00;padding-left:8px;color:#1f2430}
.eg-replay{display:grid;grid-template-columns:repeat(auto-fit,minmax(300px,1fr));gap:14px}
.eg-replay .eg-text{word-break:normal;overflow-wrap:anywhere}
.eg-replay h4{margin:0 0 6px;font-family:system-ui,sans-serif;font-size:17px;color:#1f2430}
.eg-bar{height:8px;background:#e8eaef;border-radius:4px;overflow:hidden;margin-bottom:6px}
.eg-bar div{height:100%;width:0;background:#0072B2;animation-name:eg-grow;animation-timing-function:linear;animation-fill-mode:forwards}
.eg-chunk{opacity:0;animation-name:eg-appear;animation-duration:.05s;animation-fill-mode:forwards}
@keyframes eg-appear{to{opacity:1}}
@keyframes eg-grow{to{width:100%}}
</style>"""



def legend(lang: str = "en") -> str:
    t = lambda key: html.escape(FIGURE_TEXT(key, lang), quote=False)  # noqa: E731
    return ("<div class='eg-legend' aria-label='legend'>"
            f"<span><span class='eg-draft'>{t('legend.draft')}</span> {t('legend.draft_what')}</span>"
            f"<span><span class='eg-bonus'>{t('legend.bonus')}</span> {t('legend.bonus_what')}</span>"
            f"<span><span class='eg-prefill'>{t('legend.first')}</span> {t('legend.first_what')}</span>"
            f"<span>{t('legend.cycle')}</span></div>")


LEGEND = legend()


def token_pieces(cycle: CycleRecord, pending: bytes = b"") -> list[tuple[str, str]]:
    """[(text, kind)] for what this cycle added; kind is prefill / draft / bonus / mixed."""
    return _pieces(cycle, pending)[0]


def _pieces(cycle: CycleRecord, pending: bytes) -> tuple[list[tuple[str, str]], bytes]:
    """token_pieces plus the bytes of a split character left for the next cycle. Split
    characters recorded as bytes ("<0xE4>") are merged into the token that completes them;
    falls back to one piece when per-token texts do not add up to the committed text (a
    character split across tokens in a trace that kept no bytes)."""
    texts = [(cycle.nodes[i].text, "draft") for i in cycle.accepted[1:]] + [(cycle.bonus_text, "bonus")]
    texts = texts[:len(cycle.committed_ids)]
    if cycle.step == 0 and cycle.nodes:
        texts = [(cycle.nodes[0].text, "prefill")] + texts
    shown = []
    for t, k in texts:
        t, pending = feed_bytes(pending, t, show_pending=False)
        shown.append((t, k))
    if BROKEN_RE.sub("\ufffd", "".join(t for t, _ in shown)) == cycle.committed_text:  # a broken character: its bytes
        return [(t, k) for t, k in shown if t], pending
    if not cycle.committed_text:
        return [], b""
    return [(cycle.committed_text, "bonus" if cycle.accepted_drafts == 0 else "mixed")], b""


def colored_text_html(cycles, selected: int | None = None, placeholder: str = "", lang: str = "en") -> str:
    if not cycles:
        return CSS + f"<div class='eg-empty'>{html.escape(placeholder or FIGURE_TEXT('text.empty', lang))}</div>"
    out = [CSS, legend(lang), "<div class='eg-text' role='log' aria-live='polite'>"]
    pending = b""
    for c in cycles:
        sel = " eg-sel" if selected is not None and c.step == selected else ""
        title = FIGURE_TEXT("text.cycle_title", lang, n=c.step + 1, k=c.accepted_drafts)
        out.append(f"<span class='eg-cyc{sel}' title='{html.escape(title)}' aria-label='{html.escape(title)}'>")
        pieces, pending = _pieces(c, pending)
        for text, kind in pieces:
            out.append(f"<span class='eg-{kind}'>{html.escape(text)}</span>")
        out.append("</span>")
    out.append("</div>")
    return "".join(out)


def _quote(texts, lang: str = "en") -> str:
    return ("、" if lang == "zh" else ", ").join(FIGURE_TEXT("cap.quote", lang, t=md_text(token_label(t, 16))) for t in texts)


def cycle_caption(cycle: CycleRecord, total: int | None = None, lang: str = "en", vanilla: bool = False) -> str:
    """One paragraph (Markdown) of what happened in this cycle, in `lang` ("en" or "zh"); `vanilla`: the
    run's method is vanilla (a cycle alone cannot tell it from an EAGLE cycle with one token left)."""
    head = FIGURE_TEXT("cap.head_of", lang, n=cycle.step + 1, total=total) if total else FIGURE_TEXT("cap.head", lang, n=cycle.step + 1)
    n_draft = len(cycle.nodes) - 1
    shown, bonus_shown = cycle_texts(cycle)
    bonus = _quote([bonus_shown], lang)
    if vanilla and n_draft == 0:
        return FIGURE_TEXT("cap.vanilla", lang, head=head, ms=cycle.verify_ms, bonus=bonus)
    if n_draft == 0:
        why = FIGURE_TEXT("cap.why_vanilla" if cycle.draft_ms == 0 else "cap.why_last", lang)
        return FIGURE_TEXT("cap.no_drafts", lang, head=head, why=why, ms=cycle.verify_ms, bonus=bonus)
    depth = max(n.depth for n in cycle.nodes)
    acc = [cycle.nodes[i] for i in cycle.accepted[1:]]
    rej = [n for n in cycle.nodes if n.decision == REJECTED]
    unreached = sum(1 for n in cycle.nodes[1:] if n.decision not in (ACCEPTED, REJECTED))
    s = FIGURE_TEXT("cap.drafted", lang, head=head, n=n_draft, s="s" if n_draft > 1 else "", depth=depth,
          draft=cycle.draft_ms, verify=cycle.verify_ms)
    one = "1" if len(acc) == 1 else ""  # "it matched" for one accepted draft, "each matched" for more
    why = FIGURE_TEXT(f"cap.rule{one}.{cycle.rule}", lang) if cycle.rule in ("greedy", "point_mass", "ratio") else ""
    if acc:
        s += FIGURE_TEXT("cap.accepted", lang, quoted=_quote((shown[n.index] for n in acc), lang), why=why)
    elif cycle.rule == "greedy":
        s += FIGURE_TEXT("cap.none_greedy", lang)
    else:  # sampling: a likely draft can lose its draw
        s += FIGURE_TEXT("cap.none_sampled", lang)
    if rej:
        s += FIGURE_TEXT("cap.rejected", lang, quoted=_quote((shown[n.index] for n in rej[:4]), lang),
               more=FIGURE_TEXT("cap.and_more", lang) if len(rej) > 4 else "")
        s += (FIGURE_TEXT("cap.untested", lang, k=unreached, were="s were" if unreached != 1 else " was") if unreached
              else FIGURE_TEXT("cap.period", lang))
    s += FIGURE_TEXT("cap.bonus", lang, bonus=bonus, k=len(acc) + 1, s="s" if acc else "")
    s += FIGURE_TEXT("cap.gain" if acc else "cap.no_gain", lang)
    return s


def _card(value: str, label: str) -> str:
    return f"<div class='eg-card'><b>{html.escape(value)}</b><small>{html.escape(label)}</small></div>"


def comparison_html(eagle: Run | None, vanilla: Run | None, note: str = "", placeholder: str = "",
                    lang: str = "en", parting: dict | None = None) -> str:
    """Cards: tokens/s, wall time, speedup, tau, draft vs verify, identical outputs; `note` says
    how the numbers were measured; `parting` (eagle_core.divergence, as a dict) says where greedy
    outputs that differ part, and whether that is a near-tie."""
    t = lambda key, **kw: FIGURE_TEXT(key, lang, **kw)  # noqa: E731
    if eagle is None and vanilla is None:
        text = placeholder or t("cards.empty")
        return CSS + f"<div class='eg-empty'>{html.escape(text)}</div>"
    cards = []
    e, v = (eagle.summary if eagle else None), (vanilla.summary if vanilla else None)
    if e:
        cards += [_card(f"{e.tokens_per_s:.1f}", t("cards.eagle_rate")), _card(f"{e.wall_s:.2f} s", t("cards.eagle_wall")),
                  _card(f"{e.tau:.2f}", t("cards.tau")),
                  _card(f"{e.draft_s * 1e3:.0f} / {e.verify_s * 1e3:.0f} ms", t("cards.eagle_dv"))]
    if v:
        cards += [_card(f"{v.tokens_per_s:.1f}", t("cards.vanilla_rate")),
                  _card(f"{v.wall_s:.2f} s", t("cards.vanilla_wall"))]
    if e and v and v.tokens_per_s > 0:
        cards.append(_card(f"{e.tokens_per_s / v.tokens_per_s:.2f}×", t("cards.speedup")))
        n = min(len(e.token_ids), len(v.token_ids))
        same = tuple(e.token_ids[:n]) == tuple(v.token_ids[:n])
        greedy = float((e.settings or {}).get("temperature", 0.0) or 0.0) == 0.0
        if same and len(e.token_ids) == len(v.token_ids):
            cards.append(_card(t("cards.identical"), t("cards.identical_all")))
        elif same:
            cards.append(_card(t("cards.identical"), t("cards.identical_part", n=n)))
        elif greedy and parting:
            cards.append(_card(t("cards.differ"), t("cards.differ_from", n=parting["position"] + 1)))
        elif greedy:
            cards.append(_card(t("cards.differ"), t("cards.differ_greedy")))
        else:
            cards.append(_card(t("cards.differ_sampled"), t("cards.differ_sampled_what")))
    how = f"<p class='eg-note'>{html.escape(note)}</p>" if note else ""
    why = verdict_html(eagle, vanilla, lang)  # the cycle's arithmetic; when EAGLE lost, why
    return CSS + "<div class='eg-cards'>" + "".join(cards) + "</div>" + why + parting_html(parting, lang) + how


def parting_html(p: dict | None, lang: str = "en") -> str:
    """Why two greedy outputs part: the position, both candidates, their logit margin."""
    if not p:
        return ""
    v, e = html.escape(repr(p.get("vanilla_text", p["vanilla_token"]))), html.escape(repr(p.get("eagle_text", p["eagle_token"])))
    head = FIGURE_TEXT("part.head", lang, n=p["position"] + 1, v=v, e=e, margin=f"{abs(p['margin']):.4g}", scale=f"{p['scale']:.3g}")
    why = (FIGURE_TEXT("part.tie", lang, dtype=p["dtype"], tol=f"{p['tolerance']:.3g}") if p["near_tie"] else FIGURE_TEXT("part.bug", lang))
    return f"<p class='eg-note'>{head}{why}</p>"


def _timed_chunks(run: Run) -> list[tuple[float, str]]:
    t = run.summary.prefill_ms / 1e3
    out = []
    for c in run.cycles:
        t += (c.draft_ms + c.verify_ms) / 1e3
        out.append((t, c.committed_text))
    return out


def replay_html(eagle: Run | None, vanilla: Run | None, nonce: int = 0, speed: float = 1.0, placeholder: str = "",
                lang: str = "en") -> str:
    """Both texts appearing at their measured pace (CSS animations; `nonce` restarts them)."""
    panels = []
    for label, run in (("EAGLE", eagle), (FIGURE_TEXT("replay.vanilla", lang), vanilla)):
        if run is None:
            continue
        chunks = _timed_chunks(run)
        total = chunks[-1][0] if chunks else 0.0
        body = "".join(f"<span class='eg-chunk' style='animation-delay:{t / speed:.3f}s'>{html.escape(text)}</span>"
                       for t, text in chunks)
        panels.append(f"<div><h4>{label} · {total:.2f} {FIGURE_TEXT('fig.s', lang)}</h4><div class='eg-bar'><div style='animation-duration:"
                      f"{max(total / speed, 0.01):.3f}s'></div></div><div class='eg-text' style='max-height:300px'>"
                      f"{body}</div></div>")
    if not panels:
        return CSS + f"<div class='eg-empty'>{html.escape(placeholder or FIGURE_TEXT('replay.empty', lang))}</div>"
    return CSS + f"<div class='eg-replay' data-nonce='{nonce}'>" + "".join(panels) + "</div>"
