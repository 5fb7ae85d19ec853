"""The draft tree of one cycle, and its tree-attention mask.

`tree_graph` turns a CycleRecord into a networkx DiGraph (tests count its nodes and edges);
`tree_figure` draws that graph left to right like text: depth on the x axis, siblings stacked
in draft-rank order. The accepted path is a thick solid line, rejected branches are dashed,
branches the target never reached are dotted and grey, and the bonus token (the target's own
token after the accepted path) is a star.
"""
from __future__ import annotations

import networkx as nx
import plotly.graph_objects as go

from eagle_core.trace import ACCEPTED, NOT_REACHED, REJECTED, CycleRecord
from eagle_core.tree import ancestor_mask

from .i18n import FIGURE_TEXT
from .style import (BLUE, BONUS, DECISION_STYLE, LEGEND_ROOM, base_layout, cycle_texts, empty_figure, fmt_p, plot_text,
                    token_label)

TREE_DENSE_ROWS = 16  # more leaf rows than this: the dense style below
TREE_DENSE_ROW_PX = 32  # px a leaf row in a dense tree: a 12 px label over an 11 px marker, and a gap
TREE_DENSE_LABEL = 7  # characters of a label in a dense tree (the hover has the whole token)
TREE_TOP_ROOM = 1.0  # rows above the top node: room for its label and a star marker
TREE_MAX_HEIGHT = 2400  # px; a 60-node tree has at most 60 leaf rows: 32 px each fit
BONUS_KEY = "bonus"  # the graph key of the bonus node (draft nodes are keyed by their index)


def tree_graph(cycle: CycleRecord, show_bonus: bool = True) -> nx.DiGraph:
    """Draft nodes (keyed by index) plus the bonus node, edges parent -> child.

    Node attributes: label, text, depth, kind ("root" / "draft" / "bonus"), decision, q, p,
    score, u, p_test, on_path (True on the accepted path and for the bonus).
    """
    g = nx.DiGraph()
    on_path = set(cycle.accepted)
    shown, bonus_shown = cycle_texts(cycle)
    for n in cycle.nodes:
        g.add_node(n.index, label=token_label(shown[n.index]), text=n.text, token_id=n.token_id, depth=n.depth,
                   kind="root" if n.parent < 0 else "draft", decision=n.decision, q=n.q, p=n.p, score=n.score,
                   u=n.u, p_test=n.p_test, on_path=n.index in on_path)
        if n.parent >= 0:
            g.add_edge(n.parent, n.index, decision=n.decision, on_path=n.index in on_path)
    if not show_bonus:
        return g
    last = cycle.accepted[-1] if cycle.accepted else 0
    depth = cycle.nodes[last].depth + 1 if cycle.nodes else 1
    g.add_node(BONUS_KEY, label=token_label(bonus_shown), text=cycle.bonus_text, token_id=cycle.bonus_token_id,
               depth=depth, kind="bonus", decision=ACCEPTED, q=None, p=cycle.bonus_p, score=None, u=None,
               p_test=None, on_path=True)
    if last in g:
        g.add_edge(last, BONUS_KEY, decision="bonus", on_path=True)
    return g


def tree_layout(g: nx.DiGraph) -> dict:
    """(x, y) per node: x = depth, leaves stacked top to bottom in child order, parents centred."""
    pos, next_row = {}, [0]

    def place(node):
        kids = sorted(g.successors(node), key=lambda k: (k == BONUS_KEY, k if k != BONUS_KEY else 0))
        if not kids:
            y = -next_row[0]
            next_row[0] += 1
        else:
            ys = [place(k) for k in kids]
            y = (min(ys) + max(ys)) / 2
        pos[node] = (g.nodes[node]["depth"], y)
        return y

    roots = [n for n in g.nodes if g.in_degree(n) == 0]
    for r in roots:
        place(r)
    return pos


def _hover(a: dict, lang: str = "en") -> str:
    tok = plot_text(repr(a["text"]))
    if a["kind"] == "bonus":
        return FIGURE_TEXT("hover.bonus", lang, tok=tok, id=a["token_id"], p=fmt_p(a["p"]))
    if a["kind"] == "root":
        return FIGURE_TEXT("hover.root", lang, tok=tok, id=a["token_id"])
    lines = [FIGURE_TEXT("hover.node", lang, tok=tok, id=a["token_id"], d=a["depth"]),
             FIGURE_TEXT("hover.decision", lang, what=FIGURE_TEXT(f"dec.{a['decision']}", lang)),  # the legend's words
             FIGURE_TEXT("hover.q", lang, q=fmt_p(a["q"])), FIGURE_TEXT("hover.p", lang, p=fmt_p(a["p"])),
             FIGURE_TEXT("hover.score", lang, s=f"{a['score']:.2f}")]
    if a["u"] is not None:
        lines.append(FIGURE_TEXT("hover.u", lang, u=f"{a['u']:.3f}", p=fmt_p(a["p_test"])))
    return "<br>".join(lines)


def tree_figure(cycle: CycleRecord, title: str | None = None, show_bonus: bool = True, lang: str = "en") -> go.Figure:
    g = tree_graph(cycle, show_bonus)
    pos = tree_layout(g)
    fig = go.Figure()
    path_edges = [(u, v) for u, v, d in g.edges(data=True) if d["on_path"]]
    if path_edges:  # a soft halo under the accepted path, so it reads as one line
        xs, ys = _segments(pos, path_edges)
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color="rgba(0,158,115,0.18)", width=18),
                                 hoverinfo="skip", showlegend=False))
    for decision in (NOT_REACHED, REJECTED, ACCEPTED):
        colour, _, dash, width, _ = DECISION_STYLE[decision]
        edges = [(u, v) for u, v, d in g.edges(data=True) if d["decision"] == decision]
        if edges:
            xs, ys = _segments(pos, edges)
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color=colour, width=width, dash=dash),
                                     hoverinfo="skip", showlegend=False))
    bonus_edges = [(u, v) for u, v, d in g.edges(data=True) if d["decision"] == "bonus"]
    if bonus_edges:
        xs, ys = _segments(pos, bonus_edges)
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color=BONUS, width=4, dash="longdash"),
                                 hoverinfo="skip", showlegend=False))
    n_rows = 1 + max((-y for _, y in pos.values()), default=0)
    # a wide tree (the published 60-node one has ~35 leaves) gets smaller labels and markers, cut at
    # TREE_DENSE_LABEL characters, and keeps TREE_DENSE_ROW_PX a row so labels do not overlap
    dense = n_rows > TREE_DENSE_ROWS
    font, shrink, limit = (12, 4, TREE_DENSE_LABEL) if dense else (14, 0, 12)
    row_px = TREE_DENSE_ROW_PX if dense else 44
    groups = [("root", None, BLUE, "square", FIGURE_TEXT("fig.root", lang))]
    groups += [("draft", d, c, sym, FIGURE_TEXT(f"fig.{d}", lang)) for d, (c, sym, _, _, _) in DECISION_STYLE.items()]
    groups.append(("bonus", None, BONUS, "star", FIGURE_TEXT("fig.bonus", lang)))
    for kind, decision, colour, symbol, name in groups:
        nodes = [n for n, a in g.nodes(data=True) if a["kind"] == kind and (decision is None or a["decision"] == decision)]
        if not nodes:
            continue
        big = kind in ("root", "bonus")
        fig.add_trace(go.Scatter(
            x=[pos[n][0] for n in nodes], y=[pos[n][1] for n in nodes], mode="markers+text", name=name,
            text=[plot_text(token_label(g.nodes[n]["label"], limit)) for n in nodes], textposition="top center",
            textfont=dict(size=font + (2 if big or decision == ACCEPTED else 0),
                          color="#1f2430" if decision != NOT_REACHED else "#777"),
            cliponaxis=False,  # the top row's marker and label were cut at the plot's edge
            marker=dict(symbol=symbol, size=(22 if big else 15) - shrink, color=colour,
                        line=dict(width=2 if symbol != "x" else 0, color="white" if symbol != "circle-open" else colour)),
            hovertext=[_hover(g.nodes[n], lang) for n in nodes], hoverinfo="text",
        ))
    max_depth = max((x for x, _ in pos.values()), default=1)
    acc = len(cycle.accepted) - 1
    title = title or FIGURE_TEXT("fig.tree", lang, n=cycle.step + 1, d=len(cycle.nodes) - 1, a=acc, k=acc + 1,
                       s="s" if acc else "")
    base_layout(fig, title, height=int(min(TREE_MAX_HEIGHT, max(340, row_px * (n_rows + TREE_TOP_ROOM) + 160))))
    fig.update_layout(margin_r=30, margin_b=50 + LEGEND_ROOM)  # room for the axis title and the legend
    fig.update_xaxes(range=[-0.5, max_depth + 0.5], dtick=1, title=FIGURE_TEXT("fig.tree_x", lang),
                     showgrid=True, gridcolor="#eee", zeroline=False, title_font=dict(size=15))
    fig.update_yaxes(visible=False, range=[-(n_rows - 1) - 0.5, TREE_TOP_ROOM])
    return fig


def _segments(pos, edges):
    xs, ys = [], []
    for u, v in edges:
        xs += [pos[u][0], pos[v][0], None]
        ys += [pos[u][1], pos[v][1], None]
    return xs, ys


MASK_MARGIN_L = 20  # px, the least left margin (automargin widens it to fit the row labels)


def mask_figure(cycle: CycleRecord, lang: str = "en", vanilla: bool = False) -> go.Figure:
    """The (n x n) tree-attention mask of the verification forward, root included."""
    if vanilla and len(cycle.nodes) <= 1:  # a vanilla run: one square would say nothing
        return empty_figure(FIGURE_TEXT("fig.vanilla_none", lang), 260)
    parents = [n.parent for n in cycle.nodes]
    m = ancestor_mask(parents).int().tolist()
    on_path = set(cycle.accepted)
    shown, _ = cycle_texts(cycle)
    labels = [plot_text(f"{'✓ ' if n.index in on_path else ''}{n.index} {token_label(shown[n.index], 8)}")
              for n in cycle.nodes]
    hover = [[FIGURE_TEXT("hover.sees" if m[i][j] else "hover.blind", lang, a=labels[i], b=labels[j]) for j in range(len(m))]
             for i in range(len(m))]
    fig = go.Figure(go.Heatmap(z=m, x=labels, y=labels, colorscale=[[0, "#f1f1f1"], [1, BLUE]], zmin=0, zmax=1,
                               showscale=False, xgap=1, ygap=1, hovertext=hover, hoverinfo="text"))
    n = len(m)
    base_layout(fig, FIGURE_TEXT("fig.mask", lang, n=cycle.context_len),
                height=int(min(620, max(340, 16 * n + 200))))
    small = dict(size=max(9, min(14, int(260 / max(n, 1)))))
    # automargin widens the margins to fit the row / column labels; set here, not left to the
    # template (without it the 10 px margin that was here cut the row labels off on the left)
    fig.update_xaxes(tickangle=-60, tickfont=small, showgrid=False, type="category", automargin=True)
    fig.update_yaxes(autorange="reversed", tickfont=small, showgrid=False, type="category", automargin=True)
    fig.update_layout(margin=dict(l=MASK_MARGIN_L, r=10, t=120, b=10))
    fig.update_yaxes(scaleanchor="x", constrain="domain")
    return fig
