"""The hardware lesson's figure, table and words: predicted speedup against tree size on this
machine (measured) next to a GPU illustration (the same taus; verification as cheap as one token,
a drafting step as cheap as reading the head's weights: eagle_core/machine/hardware.py), with each
curve's best tree marked. Every user-visible string is in TEXT, an (English, Chinese) pair each."""
from __future__ import annotations

import plotly.graph_objects as go

from .i18n import Strings
from .style import BLUE, GREY, INK, ORANGE, VERMILLION, base_layout, empty_figure

# Published in the Tencent AngelSlim README (github.com/Tencent/AngelSlim, commit 556ecfa): another model and
# head; total_token=60 in the official code verifies 60 tokens (59 drafts + the root).
PUBLISHED = {"nodes": 60, "speedup": 2.04, "tau": 2.85}

TEXT = Strings({
    "panel": ("Why tree size depends on the hardware", "为什么草稿树的大小取决于硬件"),
    "intro": ("A bigger draft tree gives a higher **τ** (tokens per cycle, the bonus token included), but the target must verify every node in "
              "one forward pass. Is that pass free? **Measure this machine** times the target on k = 1..64 new "
              "tokens and the head's drafting steps, here, on this machine (under a minute on the default model), "
              "then predicts the speedup of each tree from τ measured with the shipped head.",
              "草稿树越大，<b>τ</b>（每轮提交的词元数，含奖励词元）越高，但目标模型要在一次前向中验证树上的每个节点。这次前向是免费的吗？"
              "<b>测量本机</b>会在这台机器上计时：目标模型处理 k = 1..64 个新词元的前向时间，以及草稿头每一步起草的时间"
              "（默认模型不到一分钟），再用随附草稿头测得的 τ 预测每种树的加速比。"),
    "button": ("Measure this machine", "测量本机"),
    "measuring": ("Measuring", "正在测量"),
    "waiting": ("Waiting for the decoder: a run is in progress…", "正在等待解码器：有一次运行正在进行……"),
    "no_model": ("No model: {error}", "没有模型：{error}"),
    "failed": ("The measurement failed: {error}. Shown: the recorded one.", "测量失败：{error}。当前显示的是记录的结果。"),
    "zerogpu": ("Shown: the **recorded** measurement ({when}). On a ZeroGPU Space the GPU is lent "
                "per decode, so this machine is not measured here.",
                "当前显示的是<b>记录的</b>测量结果（{when}）。在 ZeroGPU Space 上，GPU 只在每次解码时借用，"
                "因此这里不测量本机。"),
    "done": ("Measured in {seconds:.1f} s on {device} ({threads} thread(s)): {target}.",
             "测量用时 {seconds:.1f} 秒，设备 {device}（{threads} 个线程）：{target}。"),
    "recorded": ("Shown: the **recorded** measurement ({when}). Press **Measure this machine** to "
                 "measure the machine the app runs on.",
                 "当前显示的是<b>记录的</b>测量结果（{when}）。点击<b>测量本机</b>以测量运行本应用的机器。"),
    "none_yet": ("Press **Measure this machine** to draw the figure.", "点击<b>测量本机</b>以绘制图表。"),
    "title": ("Predicted speedup vs tree size · best here: {best_here} · GPU illustration: {best_gpu}",
              "预测加速比与草稿树大小 · 本机最佳：{best_here} · GPU 示意：{best_gpu}"),
    "x": ("tree size (tokens the target verifies in one pass, log scale)", "树的大小（目标模型一次验证的词元数，对数刻度）"),
    "y": ("speedup over vanilla (×)", "相对普通解码的加速比（×）"),  # the title says "predicted"; a longer one ran into it
    "here": ("measured here: {device}, t(k) and head steps timed on this machine",
             "本机实测：{device}，t(k) 与草稿步均在本机计时"),
    "gpu": ("GPU (illustration, not measured): a forward of up to 64 tokens costs t(1), a head step {share:.3f} t(1)",
            "GPU（示意，非实测）：最多 64 个词元的前向耗时 t(1)，草稿头一步 {share:.3f} t(1)"),
    "best_here": ("best tree on this machine: {tree}, {speedup:.2f}×", "本机最佳树：{tree}，{speedup:.2f}×"),
    "best_gpu": ("best in the GPU illustration: {tree}, {speedup:.2f}×", "GPU 示意中的最佳树：{tree}，{speedup:.2f}×"),
    "published": ("published (another model): Qwen3-1.7B + EAGLE-3, 60-node tree, 2.04× on an H20 GPU (AngelSlim README)",
                  "已发表（另一个模型）：Qwen3-1.7B + EAGLE-3，60 节点树，H20 GPU 上 2.04×（AngelSlim README）"),
    "vanilla": ("vanilla = 1×", "普通解码 = 1×"),
    "hover": ("tree %{customdata[0]}<br>τ %{customdata[1]:.2f}<br>verify %{customdata[2]:.2f} + draft "
              "%{customdata[3]:.2f} = c %{customdata[4]:.2f} steps<br>speedup %{y:.2f}×<extra></extra>",
              "树 %{customdata[0]}<br>τ %{customdata[1]:.2f}<br>验证 %{customdata[2]:.2f} + 起草 "
              "%{customdata[3]:.2f} = c %{customdata[4]:.2f} 步<br>加速比 %{y:.2f}×<extra></extra>"),
    "ratios_head": ("| k (new tokens) | {ks} |", "| k（新词元数） | {ks} |"),
    "ratios_row": ("| t(k)/t(1), measured | {vals} |", "| t(k)/t(1)，实测 | {vals} |"),
    "t1": ("t(1) = {t1:.1f} ms (one vanilla step). One head drafting step: {steps}.",
           "t(1) = {t1:.1f} 毫秒（一次普通解码步）。草稿头每步起草：{steps}。"),
    "pred_head": ("| tree d,k,t | τ (recorded) | verify (steps) | draft (steps) | c | speedup here | "
                  "GPU illustration (not measured) |",
                  "| 树 d,k,t | τ（记录值） | 验证（步） | 起草（步） | c | 本机加速比 | GPU 示意（非实测） |"),
    "tau_source": ("τ: {head}, {prompts}, greedy.", "τ：{head}，{prompts}，贪心解码。"),
    "tau_prompts": ("MT-bench first turns, {per} per category = {n} prompts, {tokens} new tokens",
                    "MT-bench 首轮问题，每类 {per} 个，共 {n} 个提示词，{tokens} 个新词元"),
    "gpu_note": ("GPU illustration, not measured: verification costs t(1) for any tree up to 64 tokens, and a drafting "
                 "step costs what reading its weights costs, {share:.3f} t(1): the head's layer, fc and draft LM head "
                 "are {head:.1f} M of the target's {target:.1f} M weights (one of its {layers} layers would be "
                 "{layer:.3f}). So c = 1 + depth × {share:.3f}.",
                 "GPU 示意，非实测：64 个词元以内的任何树，验证都只花 t(1)；起草一步的代价等于读取其权重的代价，即 "
                 "{share:.3f} t(1)：草稿头的一层、fc 和草稿 LM head 共 {head:.1f} M 个权重，目标模型共 {target:.1f} M"
                 "（它 {layers} 层中的一层是 {layer:.3f}）。所以 c = 1 + 深度 × {share:.3f}。"),
    "why": ("**Why the best tree here is small, and on a GPU large.** A cycle costs c vanilla steps: one verification "
            "of the whole tree plus the drafting steps. The speedup is τ / c. On this CPU a pass over a few tokens costs "
            "about one (the table's t(k)/t(1) for small k): every pass streams all the weights from memory once. Past "
            "that, the arithmetic of the extra rows takes over and t(k) grows with k (read the table's larger k), so a "
            "tree of dozens of tokens costs several vanilla steps, while τ grows only slowly with the tree (each extra "
            "node is less likely to be accepted). So c outgrows τ, and a small tree wins. A data-centre GPU at batch "
            "size 1 stays limited by reading the weights much longer: a few dozen tokens cost about as much as one, and "
            "a drafting step costs what reading the small head's weights costs, a few percent of a target step. So c "
            "stays near 1 plus a little per level of depth, and every extra accepted token is profit. That is why "
            "EAGLE's published trees are large and the CPU preset here is small. The dashed curve is that reasoning put "
            "into numbers (an illustration, not a GPU measurement; per-step kernel-launch overheads are left out); "
            "the published point is another, larger model.",
            "<b>为什么本机最佳的树很小，而 GPU 上很大。</b> 每一轮花费 c 个普通解码步：一次验证整棵树，加上起草的各步。"
            "加速比等于 τ / c。在这台 CPU 上，对少数几个词元的一次前向，代价与一个词元差不多（见表中较小 k 的 t(k)/t(1)）："
            "每次前向都要把全部权重从内存中读一遍。再往上，多出来的行的算术运算成为主导，t(k) 随 k 增长（见表中较大的 k），"
            "所以几十个词元的树要花好几个普通步，而 τ 随树增大只缓慢增长（越往后的节点越不容易被接受）。于是 c 比 τ 涨得快，"
            "小树胜出。数据中心 GPU 在批大小为 1 时，受限于读取权重的范围要大得多：几十个词元和 1 个词元的代价差不多，"
            "起草一步的代价也只是读取小小草稿头权重的代价，只占目标模型一步的百分之几。所以 c 始终接近 1，每加深一层只多一点，"
            "多接受的每个词元都是收益。所以 EAGLE 发表的树很大，而这里的 CPU 预设很小。"
            "虚线就是把这个推理变成数字（示意，不是 GPU 实测；每步的内核启动等开销未计入）；已发表的点来自另一个更大的模型。"),
    # the lesson's step 1: the forward's cost against the tokens it reads (forward_figure)
    "fwd_title": ("One pass over k tokens: measured time t(k)", "对 k 个词元的一次前向：实测耗时 t(k)"),
    "fwd_x": ("k: tokens the target reads in one pass", "k：目标模型一次前向读取的词元数"),
    "fwd_y": ("time of one pass (ms)", "一次前向的耗时（毫秒）"),
    "fwd_measured": ("measured: {machine}, {date}", "实测：{machine}，{date}"),
    "fwd_naive": ("if each token cost a pass: k × t(1)", "若每个词元都要一次前向：k × t(1)"),
    "fwd_tree": ("the page's tree: {k} rows", "页面默认的树：{k} 行"),
    "fwd_hover": ("k = %{x}<br>%{y:.1f} ms<extra></extra>", "k = %{x}<br>%{y:.1f} 毫秒<extra></extra>"),
    # the lesson's step 8 with its precision switch: both weight formats (precision_figure)
    "fmt.float32": ("float32", "float32"),
    "fmt.gguf": ("GGUF Q4_1 blocks", "GGUF Q4_1 权重块"),
    "prec_title": ("t(k) and the best tree per weight format", "各权重格式的 t(k) 与最佳树"),
    "prec_tk": ("t(k): one pass over k tokens (ms)", "t(k)：k 个词元的一次前向（毫秒）"),
    "prec_speed": ("predicted speedup (×) vs tokens verified", "预测加速比（×）与验证的词元数"),
    "prec_curve": ("{name}, recorded", "{name}，记录值"),
    "prec_curve_here": ("{name}, measured here", "{name}，本机实测"),
    "prec_best": ("best in {name}: {tree}, {speedup:.2f}×", "{name} 中的最佳树：{tree}，{speedup:.2f}×"),
    "prec_missing": ("{name}: not recorded yet", "{name}：尚未记录"),
    "prec_unavailable": ("{name}: not available on the recording machine", "{name}：录制的机器上无法运行"),
    "prec_tree_hover": ("%{customdata[0]} · %{x} tokens<br>%{y:.2f}×<extra></extra>",
                        "%{customdata[0]} · %{x} 个词元<br>%{y:.2f}×<extra></extra>"),
})

# per weight format: its colour and marker; the format the switch picked is drawn bold, the other thin
FORMAT_STYLE = {"float32": (BLUE, "circle"), "gguf": (VERMILLION, "square")}


def _curve(fig, rows, name, color, symbol, dash, hover):
    fig.add_trace(go.Scatter(
        x=[r["nodes"] for r in rows], y=[r["speedup"] for r in rows], name=name, mode="lines+markers",
        line=dict(color=color, width=3, dash=dash), marker=dict(symbol=symbol, size=10, color=color),
        customdata=[[r["tree"], r["tau"], r["verify"], r["draft"], r["c"]] for r in rows], hovertemplate=hover))


def _best(fig, row, name, color, where):
    fig.add_trace(go.Scatter(x=[row["nodes"]], y=[row["speedup"]], name=name, mode="markers+text",
                             marker=dict(symbol="star", size=22, color=color, line=dict(color=INK, width=1.5)),
                             text=[row["tree"]], textposition=where, hoverinfo="skip", cliponaxis=False))


def hardware_figure(result: dict | None, device: str = "cpu", lang: str = "en") -> go.Figure:
    """result: eagle_core.machine.lesson(...). Both curves, each best tree starred, the
    published point and the vanilla line; None gives a blank figure with a hint."""
    T = TEXT.table(lang)
    if not result:
        return empty_figure(T["none_yet"].replace("**", ""), height=420)
    fig = go.Figure()
    here, gpu = result["here"], result["gpu"]
    _curve(fig, here, T["here"].format(device=device), BLUE, "circle", "solid", T["hover"])
    _curve(fig, gpu, T["gpu"].format(share=result["gpu_share"]), ORANGE, "square", "dash", T["hover"])
    _best(fig, result["best_here"], T["best_here"].format(tree=result["best_here"]["tree"],
                                                           speedup=result["best_here"]["speedup"]), BLUE,
          "bottom center")
    _best(fig, result["best_gpu"], T["best_gpu"].format(tree=result["best_gpu"]["tree"],
                                                         speedup=result["best_gpu"]["speedup"]), ORANGE,
          "top center")
    fig.add_trace(go.Scatter(x=[PUBLISHED["nodes"]], y=[PUBLISHED["speedup"]], name=T["published"], mode="markers",
                             marker=dict(symbol="diamond-open", size=14, color=VERMILLION, line=dict(width=3)),
                             hovertemplate=T["published"] + "<extra></extra>"))
    xs = [r["nodes"] for r in here]
    fig.add_trace(go.Scatter(x=[min(xs), max(xs)], y=[1, 1], name=T["vanilla"], mode="lines",
                             line=dict(color=GREY, width=2, dash="dot"), hoverinfo="skip"))
    base_layout(fig, T["title"].format(best_here=result["best_here"]["tree"], best_gpu=result["best_gpu"]["tree"]),
                height=540)
    top = max(r["speedup"] for r in here + gpu + [PUBLISHED])
    fig.update_xaxes(title=T["x"], type="log", tickvals=xs, gridcolor="#eee")
    fig.update_yaxes(title=T["y"], gridcolor="#eee", range=[0, top * 1.15])  # headroom for the top star's label
    return fig


def hardware_markdown(measured: dict, result: dict, table: dict, lang: str = "en") -> str:
    """The t(k)/t(1) row, the head's step times and the predicted speedup per tree, as Markdown."""
    T = TEXT.table(lang)
    ratios = result["ratios"]
    steps = ", ".join(f"m={k} {v:.1f} ms" for k, v in sorted((int(k), v) for k, v in measured["step_ms"].items()))
    t1 = {int(k): v for k, v in measured["forward_ms"].items()}[1]
    lines = [T["ratios_head"].format(ks=" | ".join(str(k) for k in ratios)), "|---" * (len(ratios) + 1) + "|",
             T["ratios_row"].format(vals=" | ".join(f"{v:.2f}" for v in ratios.values())), "",
             T["t1"].format(t1=t1, steps=steps), "", T["pred_head"], "|---" * 7 + "|"]
    for h, g in zip(result["here"], result["gpu"]):
        star = " ★" if h is result["best_here"] else ""
        lines.append(f"| {h['tree']}{star} | {h['tau']:.2f} | {h['verify']:.2f} | {h['draft']:.2f} | {h['c']:.2f} | "
                     f"**{h['speedup']:.2f}×** | {g['speedup']:.2f}× |")
    w = measured["weights"]
    prompts = (T["tau_prompts"].format(per=table["per_category"], n=table["n_prompts"], tokens=table["max_new_tokens"])
               if "n_prompts" in table else table.get("prompts", "?"))
    lines += ["", T["tau_source"].format(head=table.get("head", "?"), prompts=prompts), "",
              T["gpu_note"].format(share=result["gpu_share"], head=w["head_step"] / 1e6, target=w["target"] / 1e6,
                                   layers=w["layers"], layer=1 / w["layers"])]
    return "\n".join(lines)


def forward_figure(measured: dict | None, rows: int, lang: str = "en", kmax: int = 32) -> go.Figure:
    """The recorded t(k) for k up to `kmax` against k x t(1) (what k separate passes would cost), the page's
    tree's `rows` marked. measured: eagle_core.machine.load_recorded(); None gives a blank figure."""
    T = TEXT.table(lang)
    if not measured:
        return empty_figure(T["none_yet"].replace("**", ""), height=420)
    fwd = {int(k): v for k, v in measured["forward_ms"].items() if int(k) <= kmax}
    ks = sorted(fwd)
    t1 = fwd[1]
    fig = go.Figure()
    fig.add_trace(go.Scatter(x=ks, y=[k * t1 for k in ks], name=T["fwd_naive"], mode="lines",
                             line=dict(color=GREY, width=2, dash="dot"), hovertemplate=T["fwd_hover"]))
    name = T["fwd_measured"].format(machine=measured.get("hardware", measured.get("device", "")),
                                    date=measured.get("date", ""))
    fig.add_trace(go.Scatter(x=ks, y=[fwd[k] for k in ks], name=name, mode="lines+markers",
                             line=dict(color=BLUE, width=3), marker=dict(size=8), hovertemplate=T["fwd_hover"]))
    if rows in fwd:
        fig.add_trace(go.Scatter(x=[rows], y=[fwd[rows]], name=T["fwd_tree"].format(k=rows), mode="markers",
                                 marker=dict(symbol="star", size=20, color=ORANGE, line=dict(color=INK, width=1.5)),
                                 hovertemplate=T["fwd_hover"]))
    base_layout(fig, T["fwd_title"], height=460)
    fig.update_xaxes(title=T["fwd_x"], gridcolor="#eee")
    fig.update_yaxes(title=T["fwd_y"], gridcolor="#eee", rangemode="tozero", range=[0, max(fwd.values()) * 2.2])
    return fig


def precision_figure(formats: dict, gpu: dict | None, chosen: str = "float32", lang: str = "en",
                     here: bool = False) -> go.Figure:
    """The lesson's step 8 with its precision switch. Left: each weight format's recorded t(k) (k up to 32);
    right: each format's predicted speedup per tree (its best starred) beside the GPU illustration.
    formats: eagle_core.machine.hardware.format_lessons(); gpu: lesson()'s {"gpu": rows, "best_gpu", "gpu_share"}
    or None; here: measured on this machine, not the record (the legend says which). A format not recorded (or
    not runnable where the record was made) is named in a note, not drawn."""
    from plotly.subplots import make_subplots

    T = TEXT.table(lang)
    if not formats or all(f["state"] != "recorded" for f in formats.values()):
        return empty_figure(T["none_yet"].replace("**", ""), height=420)
    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.09, subplot_titles=(T["prec_tk"], T["prec_speed"]))
    notes, nodes = [], set()
    if formats.get(chosen, {}).get("state") != "recorded":  # the picked format is not drawn: the others are bold
        chosen = next(fmt for fmt, f in formats.items() if f["state"] == "recorded")
    for fmt, f in formats.items():
        name = T[f"fmt.{fmt}"]
        if f["state"] != "recorded":
            notes.append(T["prec_missing" if f["state"] == "missing" else "prec_unavailable"].format(name=name))
            continue
        color, symbol = FORMAT_STYLE.get(fmt, (GREY, "circle"))
        bold = fmt == chosen
        line = dict(color=color, width=4 if bold else 1.5)
        marker = dict(symbol=symbol, size=8 if bold else 5, color=color)
        ks = list(f["curve"])
        fig.add_trace(go.Scatter(x=ks, y=[f["curve"][k] for k in ks], name=T["prec_curve_here" if here else "prec_curve"].format(name=name),
                                 mode="lines+markers", line=line, marker=marker, opacity=1.0 if bold else 0.55,
                                 legendgroup=fmt, hovertemplate=T["fwd_hover"]), row=1, col=1)
        rows = f["rows"]
        nodes |= {r["nodes"] for r in rows}
        fig.add_trace(go.Scatter(x=[r["nodes"] for r in rows], y=[r["speedup"] for r in rows], name=name, mode="lines+markers",
                                 line=line, marker=marker, opacity=1.0 if bold else 0.55, legendgroup=fmt,
                                 showlegend=False, customdata=[[r["tree"]] for r in rows],
                                 hovertemplate=T["prec_tree_hover"]), row=1, col=2)
        b = f["best"]
        where = "top center" if fmt == "float32" else "bottom center"  # two bests on one tree: both labels read
        fig.add_trace(go.Scatter(x=[b["nodes"]], y=[b["speedup"]], mode="markers+text", text=[b["tree"]],
                                 textposition=where, cliponaxis=False, hoverinfo="skip", legendgroup=fmt,
                                 name=T["prec_best"].format(name=name, tree=b["tree"], speedup=b["speedup"]),
                                 marker=dict(symbol="star", size=20 if bold else 14, color=color,
                                             line=dict(color=INK, width=1.5))), row=1, col=2)
    if gpu:
        g = gpu["gpu"]
        fig.add_trace(go.Scatter(x=[r["nodes"] for r in g], y=[r["speedup"] for r in g], mode="lines",
                                 name=T["gpu"].format(share=gpu["gpu_share"]), line=dict(color=ORANGE, width=2, dash="dash"),
                                 customdata=[[r["tree"]] for r in g], hovertemplate=T["prec_tree_hover"]), row=1, col=2)
    base_layout(fig, T["prec_title"], height=560)
    for i, note in enumerate(notes):
        fig.add_annotation(text=note, xref="x domain", yref="y domain", x=0.02, y=0.98 - 0.08 * i, showarrow=False,
                           xanchor="left", font=dict(color=VERMILLION, size=13))
    fig.update_xaxes(title=T["fwd_x"], gridcolor="#eee", row=1, col=1)
    fig.update_yaxes(rangemode="tozero", gridcolor="#eee", row=1, col=1)
    fig.update_xaxes(title=T["x"], type="log", tickvals=sorted(nodes), gridcolor="#eee", row=1, col=2)
    fig.update_yaxes(rangemode="tozero", gridcolor="#eee", row=1, col=2)
    return fig
