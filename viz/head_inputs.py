"""What EAGLE's draft head reads (the lesson's step 2): for the last positions of a prompt, the target's
top feature f_t (the vector its LM head reads) beside the token one step ahead, x_{t+1}, the pair the
EAGLE-1/2 head's fc layer takes; with an EAGLE-3 head loaded, also the three layers it fuses instead.
The numbers come from eagle_app/lesson.py's `head_inputs` (one target forward over the prompt); this
module only draws them. A plain sketch stands in when no model is loaded."""
from __future__ import annotations

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from .i18n import Strings
from .style import INK, base_layout, token_label

DIMS = 24  # feature dimensions drawn: enough to see the pattern change from row to row, few enough to read

TEXT = Strings({
    "title": ("What the head reads: f(t) with the token one step ahead", "草稿头读取的内容：f(t) 加上后一位的词元"),
    "top": ("top feature f(t), first {d} of {h} values", "顶层特征 f(t)，{h} 个值中的前 {d} 个"),
    "layer": ("layer {i} input (EAGLE-3)", "第 {i} 层的输入（EAGLE-3）"),
    "row": ("f(“{a}”) + “{b}”", "f(“{a}”) + “{b}”"),
    "next": ("the target's next token", "目标模型的下一个词元"),
    "hover": ("position %{y}<br>value %{z:.2f}<extra></extra>", "位置 %{y}<br>数值 %{z:.2f}<extra></extra>"),
})


def _label(text: str) -> str:
    return token_label(text, 10)


def head_inputs_figure(data: dict | None, lang: str = "en") -> go.Figure:
    """data: {"tokens": [x_t texts of the rows], "next": [x_{t+1} texts], "top": rows x H values,
    "layers": {layer id: rows x H values} (EAGLE-3's, may be empty), "hidden": H}. None: the sketch."""
    T = TEXT.table(lang)
    if not data:
        return sketch_figure(lang)
    rows = [T["row"].format(a=_label(a), b=_label(b)) for a, b in zip(data["tokens"], data["next"])]
    panels = [(T["layer"].format(i=i), v) for i, v in data.get("layers", {}).items()]
    panels.append((T["top"].format(d=DIMS, h=data["hidden"]), data["top"]))
    fig = make_subplots(rows=1, cols=len(panels), shared_yaxes=True, horizontal_spacing=0.02,
                        subplot_titles=[p[0] for p in panels])
    for col, (_, values) in enumerate(panels, start=1):
        z = [list(r[:DIMS]) for r in values]
        top = max((abs(x) for r in z for x in r), default=1.0) or 1.0
        fig.add_trace(go.Heatmap(z=z, y=rows, colorscale="RdBu", zmin=-top, zmax=top, showscale=False,
                                 hovertemplate=T["hover"]), row=1, col=col)
        fig.update_xaxes(showticklabels=False, row=1, col=col)
    base_layout(fig, T["title"], height=max(300, 46 * len(rows) + 170))
    fig.update_yaxes(autorange="reversed", tickfont=dict(size=14))
    for a in fig.layout.annotations:
        a.font = dict(size=13, color=INK)
    return fig


def sketch_figure(lang: str = "en") -> go.Figure:
    """Without a model: the pairing drawn as boxes, f(t) over each position and x(t+1) shifted by one."""
    T = TEXT.table(lang)
    fig = go.Figure()
    n = 4
    for t in range(n):
        fig.add_shape(type="rect", x0=t, x1=t + 0.8, y0=1, y1=1.6, fillcolor="#cfe3f5", line=dict(color=INK))
        fig.add_annotation(x=t + 0.4, y=1.3, text=f"f({t + 1})", showarrow=False)
        fig.add_shape(type="rect", x0=t, x1=t + 0.8, y0=0, y1=0.6, fillcolor="#fde2c4", line=dict(color=INK))
        fig.add_annotation(x=t + 0.4, y=0.3, text=f"x({t + 2})", showarrow=False)
    fig.update_xaxes(visible=False, range=[-0.2, n])
    fig.update_yaxes(visible=False, range=[-0.2, 1.8])
    return base_layout(fig, T["title"], height=300)
