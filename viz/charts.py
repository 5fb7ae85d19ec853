"""Whole-run charts: accepted length per cycle, acceptance by depth, and where the time went."""
from __future__ import annotations

import plotly.graph_objects as go

from eagle_core.trace import CycleRecord, Run, acceptance_by_depth, tau

from .i18n import FIGURE_TEXT
from .style import BLUE, BONUS, GREEN, GREY, SKY, base_layout, empty_figure


def accepted_length_figure(cycles: list[CycleRecord] | tuple, selected: int | None = None, lang: str = "en") -> go.Figure:
    """Stacked bars per cycle: accepted drafts + the bonus token; the dashed line is tau so far."""
    if not cycles:
        return empty_figure(FIGURE_TEXT("fig.acclen_empty", lang), height=320)
    steps = [c.step + 1 for c in cycles]
    acc = [c.accepted_drafts for c in cycles]
    fig = go.Figure()
    fig.add_trace(go.Bar(x=steps, y=acc, name=FIGURE_TEXT("fig.acc_drafts", lang), marker=dict(color=GREEN),
                         hovertemplate=FIGURE_TEXT("fig.hover_acc", lang) + "<extra></extra>"))
    fig.add_trace(go.Bar(x=steps, y=[1] * len(steps), name=FIGURE_TEXT("fig.bonus_token", lang),
                         marker=dict(color=BONUS, pattern=dict(shape=".", fgcolor="white", size=5)),
                         hovertemplate=FIGURE_TEXT("fig.hover_plus_bonus", lang) + "<extra></extra>"))
    running, total = [], 0
    for i, c in enumerate(cycles, 1):
        total += len(c.accepted)  # accepted drafts + bonus, what eagle_core.trace.tau averages
        running.append(total / i)
    fig.add_trace(go.Scatter(x=steps, y=running, name=FIGURE_TEXT("fig.tau_so_far", lang), mode="lines",
                             line=dict(color="#1f2430", width=3, dash="dash")))
    if selected is not None and 0 <= selected < len(cycles):
        fig.add_vline(x=cycles[selected].step + 1, line=dict(color="#444", width=2, dash="dot"))
    base_layout(fig, FIGURE_TEXT("fig.acclen", lang, tau=tau(cycles)), height=330, barmode="stack", bargap=0.15)
    fig.update_xaxes(title=FIGURE_TEXT("fig.acclen_x", lang), title_font=dict(size=15))
    fig.update_yaxes(title=FIGURE_TEXT("fig.tokens", lang), gridcolor="#eee", rangemode="tozero", dtick=1 if max(acc) < 8 else None)
    return fig


def acceptance_by_depth_figure(cycles, lang: str = "en") -> go.Figure:
    """Bars per draft depth: the acceptance rate there (eagle_core.trace.acceptance_by_depth, the
    same numbers as the training report), labelled accepted / reached. A depth that was drafted
    but never reached has no rate and no bar, as in the report."""
    rows = [r for r in acceptance_by_depth(cycles) if r.reached]
    if not rows:
        return empty_figure(FIGURE_TEXT("fig.depth_empty", lang), height=320)
    fig = go.Figure(go.Bar(
        x=[FIGURE_TEXT("fig.depth_bar", lang, d=r.depth) for r in rows], y=[r.rate for r in rows], marker=dict(color=GREEN),
        text=[f"{r.accepted}/{r.reached}" for r in rows], textposition="outside", cliponaxis=False,
        hovertemplate=FIGURE_TEXT("fig.hover_depth", lang) + "<extra></extra>"))
    base_layout(fig, FIGURE_TEXT("fig.depth", lang), height=330)
    fig.update_yaxes(range=[0, 1.15], tickformat=".0%", title=FIGURE_TEXT("fig.depth_y", lang), gridcolor="#eee")
    return fig


def timing_figure(eagle: Run | None, vanilla: Run | None, lang: str = "en") -> go.Figure:
    """Horizontal stacked bars: prefill, drafting, verification, other, per method."""
    runs = [(label, r) for label, r in ((FIGURE_TEXT("replay.vanilla", lang), vanilla), ("EAGLE", eagle)) if r is not None]
    if not runs:
        return empty_figure(FIGURE_TEXT("fig.timing_empty", lang), height=260)
    parts = [("prefill", GREY, ""), ("drafting (EAGLE head)", SKY, "/"), ("verification (target)", BLUE, ""),
             ("other", "#d0d0d0", "x")]
    shown = dict(zip([p[0] for p in parts], (FIGURE_TEXT(k, lang) for k in ("fig.prefill", "fig.drafting", "fig.verification",
                                                                   "fig.other"))))
    fig = go.Figure()
    # each bar's total time and rate go in its axis label, under its name: an annotation right of the
    # bar was cut off by a narrow (400 px) figure
    rows = [f"{label}<br>{r.summary.wall_s:.2f} {FIGURE_TEXT('fig.s', lang)} · {r.summary.tokens_per_s:.1f} {FIGURE_TEXT('fig.tok_s', lang)}  "
            for label, r in runs]
    for name, colour, pattern in parts:
        vals = []
        for _, r in runs:
            s = r.summary
            pre = s.prefill_ms / 1e3
            vals.append({"prefill": pre, "drafting (EAGLE head)": s.draft_s, "verification (target)": s.verify_s,
                         "other": max(0.0, s.wall_s - pre - s.draft_s - s.verify_s)}[name])
        fig.add_trace(go.Bar(y=rows, x=vals, orientation="h", name=shown[name],
                             marker=dict(color=colour, pattern=dict(shape=pattern, fgcolor="white")),
                             hovertemplate=shown[name] + ": %{x:.2f} " + FIGURE_TEXT("fig.s", lang) + "<extra></extra>"))
    longest = max(r.summary.wall_s for _, r in runs)
    base_layout(fig, FIGURE_TEXT("fig.timing", lang), height=260, barmode="stack")
    fig.update_xaxes(title=FIGURE_TEXT("fig.seconds", lang), range=[0, longest * 1.05 + 1e-6], gridcolor="#eee")
    fig.update_yaxes(automargin=True)
    return fig
