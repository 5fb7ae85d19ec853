"""Shared look of every figure: one colour-blind-safe palette (Okabe-Ito), shapes and dash
styles that carry the same meaning as the colours (so nothing is told by colour alone), and
font sizes large enough for a projector."""
from __future__ import annotations

import codecs
import html
import re

import plotly.graph_objects as go

from eagle_core.trace import ACCEPTED, NOT_REACHED, REJECTED

from .i18n import FIGURE_TEXT

# Okabe-Ito colours: distinguishable with the common colour-vision deficiencies.
BLUE, SKY, GREEN, ORANGE, VERMILLION, GREY, INK = "#0072B2", "#56B4E9", "#009E73", "#E69F00", "#D55E00", "#9A9A9A", "#1f2430"
BONUS = ORANGE

# decision -> (colour, marker symbol, edge dash, edge width, legend name)
DECISION_STYLE = {
    ACCEPTED: (GREEN, "circle", "solid", 5, FIGURE_TEXT("fig.accepted")),
    REJECTED: (VERMILLION, "x", "dash", 2, FIGURE_TEXT("fig.rejected")),
    NOT_REACHED: (GREY, "circle-open", "dot", 1.5, FIGURE_TEXT("fig.not_reached")),
}  # the legend's names in English; tree_figure(lang="zh") takes them from viz/i18n.py
ROOT_NAME = FIGURE_TEXT("fig.root")
BONUS_NAME = FIGURE_TEXT("fig.bonus")

FONT = dict(family="system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif", size=16, color=INK)


BYTES_RE = re.compile(r"((?:<0x[0-9A-Fa-f]{2}>)+)")  # bytes of a split UTF-8 character, as the app records them


def feed_bytes(pending: bytes, text: str, show_pending: bool = True) -> tuple[str, bytes]:
    """The display text of one token that follows `pending` undecoded bytes, and the bytes still
    pending after it. Byte-level vocabularies split a Chinese character (3 UTF-8 bytes) over
    several tokens; the app records such bytes as "<0xE4>", and here they are merged back: the
    token that completes a character shows the character, a token whose bytes still wait for
    the rest of theirs shows them as ‹E4 BD›."""
    out, own = [], b""
    for i, seg in enumerate(BYTES_RE.split(text)):
        if not seg:
            continue
        if i % 2 == 0:  # plain text: a character still waiting for bytes is broken; show its bytes
            if pending:  # (the model wrote an invalid sequence: its decoded text holds U+FFFD there)
                out.append(_hex(pending))
            pending, own = b"", b""
            out.append(seg)
            continue
        new = bytes(int(h, 16) for h in re.findall(r"<0x([0-9A-Fa-f]{2})>", seg))
        dec = codecs.getincrementaldecoder("utf-8")()
        try:
            out.append(dec.decode(pending + new))
            pending = dec.getstate()[0]
        except UnicodeDecodeError:  # not UTF-8 after all: show the bytes
            out.append(_hex(new))
            pending = b""
        own = pending[-len(new):] if pending else b""
    if own and show_pending:
        out.append(_hex(own))
    return "".join(out), pending


def _hex(b: bytes) -> str:
    return "‹" + " ".join(f"{x:02X}" for x in b) + "›"


def cycle_texts(cycle) -> tuple[dict[int, str], str]:
    """({node index: display text}, bonus display text) with split characters merged along each
    node's path from the root (see `feed_bytes`). A node that holds only part of a character
    shows that character with its share of the bytes, e.g. ‹饭 1/3›, when a node below it (or the
    bonus token) completes the character; otherwise its bytes, marked unfinished: ‹E9 A5…›."""
    shown, pending = {}, {}
    for n in cycle.nodes:  # parents come before children
        shown[n.index], pending[n.index] = feed_bytes(pending.get(n.parent, b""), n.text)
    last = cycle.accepted[-1] if cycle.accepted else 0
    bonus, _ = feed_bytes(pending.get(last, b""), cycle.bonus_text)
    children: dict[int, list[int]] = {}
    for n in cycle.nodes:
        children.setdefault(n.parent, []).append(n.index)
    on_path = set(cycle.accepted or ())
    for n in cycle.nodes:
        waiting = pending[n.index]
        if not waiting or not shown[n.index].endswith("›"):
            continue
        char = _completed_char(cycle, n.index, waiting, children, on_path, last)
        marker = shown[n.index][shown[n.index].rindex("‹"):]
        label = f"‹{char} {len(waiting)}/{len(char.encode())}›" if char else marker[:-1] + "…›"
        shown[n.index] = shown[n.index][: -len(marker)] + label
    return shown, bonus


def _completed_char(cycle, index, waiting: bytes, children, on_path, last) -> str | None:
    """The character that the `waiting` bytes after node `index` become further down the tree (the
    accepted path first, then the drafts in order) or in the bonus token after the accepted path."""
    texts = {n.index: n.text for n in cycle.nodes}
    stack = [(index, waiting)]
    while stack:
        i, pend = stack.pop()
        nexts = [(c, texts[c]) for c in children.get(i, [])] + ([(None, cycle.bonus_text)] if i == last else [])
        nexts.sort(key=lambda x: (x[0] is None, x[0] not in on_path))  # drafts on the accepted path first
        deeper = []
        for c, text in nexts:
            if not text.startswith("<0x"):  # plain text here: the character was never finished this way
                continue
            out, still = feed_bytes(pend, text, show_pending=False)
            if out and out[0] != "‹":
                return out[0]  # the first character decoded holds the waiting bytes
            if still and c is not None:
                deeper.append((c, still))
        stack.extend(reversed(deeper))
    return None


def plot_text(s: str) -> str:
    """Text for a plotly label or hover: plotly reads <b>, <a href> etc. as markup, so a token
    (or a hand-edited trace) that looks like a tag is escaped."""
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def md_text(s: str) -> str:
    """Text for a Markdown component, shown literally: no HTML, no emphasis, no links."""
    s = html.escape(str(s), quote=False)
    return re.sub(r"([\\`*_\[\]{}()#+!|~>-])", r"\\\1", s)


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


TITLE_CHARS = 32  # a title line longer than this is wrapped: it must fit a 400 px page (a ~336 px figure) at 19 px


def wrap_title(title: str, width: int = TITLE_CHARS) -> str:
    """Break a long title into <br>-separated lines at spaces (plotly never wraps a title)."""
    out = []
    for part in title.split("<br>"):
        line, lines = "", -(-len(part) // width)
        even = min(width, -(-len(part) // max(lines, 1)) + 4)  # balanced lines, not one long and one word
        for word in part.split(" "):
            if line and len(line) + 1 + len(word) > even and not line.startswith("<sup>"):
                out.append(line)
                line = word
            else:
                line = f"{line} {word}" if line else word
        out.append(line)
    return "<br>".join(out)


LEGEND_ROOM = 100  # px under the plot for a legend: up to four rows when a narrow screen wraps it


def title_room(title: str) -> int:
    """px above the plot for a wrapped title: a third line ran into the plot (and its axis title)."""
    return max(90, 42 + 24 * wrap_title(title).count("<br>") + 24) if title else 30


def base_layout(fig: go.Figure, title: str, height: int = 420, **kw) -> go.Figure:
    """Apply the common layout: white background, large fonts, the title (wrapped) on top and the
    legend at the bottom. (A legend on top grew upwards into the title when it wrapped.) Call it
    after adding the traces: the figure grows by LEGEND_ROOM only if it has a legend."""
    has_legend = sum(t.showlegend is not False for t in fig.data) > 1 or any(t.showlegend for t in fig.data)
    room = LEGEND_ROOM if has_legend else 0
    fig.update_layout(
        title=dict(text=wrap_title(title), x=0.01, xanchor="left", y=1, yref="container", yanchor="top", pad=dict(t=30),
                   font=dict(size=19)),  # pad: with less, plotly puts a two-line title partly above the figure
        font=FONT, height=height + room, plot_bgcolor="white", paper_bgcolor="white",
        margin=dict(l=20, r=20, t=title_room(title), b=30 + room),
        legend=dict(orientation="h", yref="container", y=0.0, yanchor="bottom", x=0.0, xanchor="left",
                    font=dict(size=14)),
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
