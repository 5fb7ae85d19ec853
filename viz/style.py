"""Shared look of every figure: one colour-blind-safe palette (Okabe-Ito), shapes and dash
styles that carry the same meaning as the colours (so nothing is told by colour alone), and
font sizes large enough for a projector."""
from __future__ import annotations

import plotly.graph_objects as go

from eagle_core.trace import ACCEPTED, NOT_REACHED, REJECTED

# Okabe-Ito colours: distinguishable with the common colour-vision deficiencies.
BLUE, SKY, GREEN, ORANGE, VERMILLION, GREY, INK = "#0072B2", "#56B4E9", "#009E73", "#E69F00", "#D55E00", "#9A9A9A", "#1f2430"
BONUS = ORANGE

# decision -> (colour, marker symbol, edge dash, edge width, legend name)
DECISION_STYLE = {
    ACCEPTED: (GREEN, "circle", "solid", 5, "accepted (draft matched the target)"),
    REJECTED: (VERMILLION, "x", "dash", 2, "rejected (tested, refused)"),
    NOT_REACHED: (GREY, "circle-open", "dot", 1.5, "never reached (parent rejected)"),
}
ROOT_NAME = "root (last committed token)"
BONUS_NAME = "bonus (the target's own token)"

FONT = dict(family="system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif", size=16, color=INK)


def token_label(text: str, limit: int = 12) -> str:
    """A token's text made visible: spaces, newlines and tabs get a visible glyph."""
    if text is None:
        return "?"
    s = text.replace("\n", "↵").replace("\t", "⇥").replace("\r", "")
    if s.startswith(" "):
        s = "␣" + s[1:]
    if not s.replace("␣", "").strip():
        s = s.replace(" ", "␣")
    return s if len(s) <= limit else s[: limit - 1] + "…"


def base_layout(fig: go.Figure, title: str, height: int = 420, **kw) -> go.Figure:
    """Apply the common layout: white background, large fonts, legend on top."""
    fig.update_layout(
        title=dict(text=title, x=0.01, xanchor="left", y=1, yref="container", yanchor="top", pad=dict(t=12),
                   font=dict(size=19)),
        font=FONT, height=height, plot_bgcolor="white", paper_bgcolor="white",
        margin=dict(l=20, r=20, t=110 if title else 30, b=30),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0.0, xanchor="left", font=dict(size=14)),
        hoverlabel=dict(font=dict(size=15, family=FONT["family"])),
        **kw,
    )
    return fig


def empty_figure(message: str, height: int = 300) -> go.Figure:
    """A blank figure carrying a message (shown before any run exists)."""
    fig = go.Figure()
    fig.add_annotation(text=message, x=0.5, y=0.5, xref="paper", yref="paper", showarrow=False,
                       font=dict(size=17, color="#666"))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return base_layout(fig, "", height=height)


def fmt_p(x: float | None) -> str:
    return "—" if x is None else (f"{x:.3f}" if x >= 0.001 else f"{x:.1e}")
