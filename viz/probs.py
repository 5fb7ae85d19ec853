"""Target probability p beside draft probability q for every token the target tested in one
cycle, with the acceptance rule drawn on top:

  greedy      a child is accepted iff it is the target's argmax at its parent
  point_mass  sampled tree of top-k drafts: accept child c if u < p(c) / (mass left after the
              siblings already rejected), i.e. the residual distribution after each rejection
  ratio       classic speculative sampling: accept if u < min(1, p/q)
"""
from __future__ import annotations

import plotly.graph_objects as go

from eagle_core.trace import ACCEPTED, CycleRecord

from .i18n import FIGURE_TEXT
from .style import (BLUE, BONUS, GREEN, INK, LEGEND_ROOM, SKY, VERMILLION, base_layout, cycle_texts, empty_figure, fmt_p, plot_text,
                    token_label)

PROBS_FEW = 6  # up to this many bars, two-line ticks ("after …" under the token)
PROBS_MANY_LABEL = 8  # characters of a tick with more bars
PROBS_MAX_TICKS = 16  # labelled ticks at most: turned 90 degrees, 16 fit a 400 px screen's chart
RULES = ("greedy", "point_mass", "ratio")  # their titles: viz/i18n.py, fig.rule.*


def tested_nodes(cycle: CycleRecord):
    """Draft nodes the target actually checked, in verification order."""
    return [n for n in cycle.nodes[1:] if n.p is not None]


def probs_figure(cycle: CycleRecord, lang: str = "en", vanilla: bool = False) -> go.Figure:
    nodes = tested_nodes(cycle)
    if vanilla and not nodes:  # a vanilla run: no p/q to compare, only the target's one token
        return empty_figure(FIGURE_TEXT("fig.vanilla_none", lang))
    if not nodes and cycle.bonus_p is None:
        return empty_figure(FIGURE_TEXT("fig.no_drafts", lang))
    shown, bonus_shown = cycle_texts(cycle)
    marks = [FIGURE_TEXT("fig.accepted_mark" if n.decision == ACCEPTED else "fig.rejected_mark", lang) for n in nodes]
    # One category per drafted node, labelled by tick text: two drafts with the same label (the
    # same token after the same parent text) shared one category, so one bar hid the other.
    xs = [f"node {n.index}" for n in nodes]
    many = len(nodes) + (cycle.bonus_p is not None) > PROBS_FEW
    # many drafts: one short line a tick (the parent is in the tree and the hover), so they can turn
    limit = PROBS_MANY_LABEL if many else 10
    labels = [f"{m[0]} {plot_text(token_label(shown[n.index], limit))}" + ("" if many else "<br><sup>"
              f"{FIGURE_TEXT('fig.after', lang, t=plot_text(token_label(shown[n.parent], 8)))}</sup>") for n, m in zip(nodes, marks)]
    fig = go.Figure()
    # value labels over the bars only while there is room for them (a few nodes); with more, they
    # ran into each other, and the hover still gives every value
    values = (lambda vals: [fmt_p(v) for v in vals]) if len(nodes) <= 6 else (lambda vals: None)
    if nodes:
        fig.add_trace(go.Bar(x=xs, y=[n.p for n in nodes], name=FIGURE_TEXT("fig.p", lang), marker=dict(color=BLUE),
                             text=values([n.p for n in nodes]), textposition="outside", cliponaxis=False,
                             hovertext=[FIGURE_TEXT("fig.hover_p", lang, t=plot_text(repr(shown[n.index])), p=fmt_p(n.p), mark=m)
                                        for n, m in zip(nodes, marks)],
                             hoverinfo="text"))
        fig.add_trace(go.Bar(x=xs, y=[n.q for n in nodes], name=FIGURE_TEXT("fig.q", lang),
                             marker=dict(color=SKY, pattern=dict(shape="/", fgcolor="white", size=8)),
                             text=values([n.q for n in nodes]), textposition="outside", cliponaxis=False,
                             hovertext=[FIGURE_TEXT("fig.hover_q", lang, t=plot_text(repr(shown[n.index])), q=fmt_p(n.q)) for n in nodes],
                             hoverinfo="text"))
    if cycle.bonus_p is not None:
        bx = "bonus"
        xs, labels = xs + [bx], labels + [f"★ {plot_text(token_label(bonus_shown, limit))}"
                                          + ("" if many else f"<br><sup>{FIGURE_TEXT('fig.bonus_tick', lang)}</sup>")]
        fig.add_trace(go.Bar(x=[bx], y=[cycle.bonus_p], name=FIGURE_TEXT("fig.p_bonus", lang), text=[fmt_p(cycle.bonus_p)],
                             textposition="outside", cliponaxis=False,
                             marker=dict(color=BONUS, pattern=dict(shape=".", fgcolor="white", size=6)),
                             hovertext=[FIGURE_TEXT("fig.hover_bonus", lang, t=plot_text(repr(bonus_shown)), p=fmt_p(cycle.bonus_p))],
                             hoverinfo="text"))
    sampled = [n for n in nodes if n.u is not None]
    if sampled:
        fig.add_trace(go.Scatter(
            x=[xs[nodes.index(n)] for n in sampled], y=[n.p_test for n in sampled], mode="markers",
            name=FIGURE_TEXT("fig.threshold_point_mass" if cycle.rule == "point_mass" else "fig.threshold_ratio", lang),
            marker=dict(symbol="line-ew", size=44, line=dict(width=4, color=INK)),
            hovertext=[FIGURE_TEXT("fig.hover_test", lang, p=fmt_p(n.p_test)) for n in sampled], hoverinfo="text"))
        fig.add_trace(go.Scatter(
            x=[xs[nodes.index(n)] for n in sampled], y=[n.u for n in sampled], mode="markers", name=FIGURE_TEXT("fig.draw_u", lang),
            marker=dict(symbol="diamond", size=15, color=[GREEN if n.decision == ACCEPTED else VERMILLION for n in sampled],
                        line=dict(width=1.5, color=INK)),
            hovertext=[f"u = {n.u:.3f} {'<' if n.decision == ACCEPTED else '≥'} {fmt_p(n.p_test)} → "
                       f"{FIGURE_TEXT('fig.accepted_mark' if n.decision == ACCEPTED else 'fig.rejected_mark', lang)}" for n in sampled],
            hoverinfo="text"))
    rule = FIGURE_TEXT(f"fig.rule.{cycle.rule}", lang) if cycle.rule in RULES else cycle.rule
    base_layout(fig, FIGURE_TEXT("fig.probs", lang, n=cycle.step + 1, rule=rule), height=430,
                barmode="group", bargap=0.25)
    fig.update_yaxes(range=[0, 1.12], title=FIGURE_TEXT("fig.probability", lang), gridcolor="#eee", tickformat=".1f")
    step = -(-len(xs) // PROBS_MAX_TICKS)  # past PROBS_MAX_TICKS bars, every step-th is labelled (the hover names all)
    keep = {i for i in range(0, len(xs), step) if len(xs) - 1 - i >= step} | {len(xs) - 1}  # the bonus always
    fig.update_xaxes(type="category", tickfont=dict(size=12 if many else 14), tickmode="array",
                     tickvals=[x for i, x in enumerate(xs) if i in keep], ticktext=[t for i, t in enumerate(labels) if i in keep],
                     autotickangles=[0, 90], automargin=True)  # turn only when they would overlap
    fig.update_layout(margin_l=60, margin_b=60 + LEGEND_ROOM, uniformtext=dict(minsize=11, mode="hide"))
    return fig
