"""Issue 45: one source for every measured figure (the recording, read by the Learn tab, the hardware
panel and, through a test, the README); the Learn tab one idea a paragraph; Chinese all the way
(emphasis that renders, no English word in a figure's own words). No model, no browser."""
from __future__ import annotations

import json
import os
import re

import plotly.graph_objects as go
import pytest

from eagle_core.bench import hardware as cli
from eagle_core.machine import hardware as hw
from tests.app_fixtures import illustration, sampled_cycle
from viz import figures, learn, learn_zh

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HAN = re.compile(r"[\u4e00-\u9fff]")
CJK = re.compile(r"[\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")
LIMIT = 120


# ------------------------------------------------------------------ one source for every figure
def test_the_readme_carries_the_recordings_row():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    assert cli.readme_row(hw.quoted()) in readme.split("\n"), \
        "README's row of the recording differs from the file: run `python -m eagle_core.bench.hardware --record`"


def test_the_files_name_machine_date_and_command():
    m = hw.load_recorded()
    assert m["hardware"] and re.fullmatch(r"\d{4}-\d\d-\d\d", m["date"]) and m["command"].startswith("python -m ")
    assert hw.load_tau_table()["source"].startswith("python -m ")


def test_every_preset_is_recorded():
    """The page's default tree and the shipped cpu and gpu presets, as config has them now."""
    q = hw.quoted()
    missing = [q[f"{p}_tree"] for p in hw.RECORD_PRESETS if q[f"{p}_tau"] == "—"]
    assert not missing, f"trees {missing} are not in tau_by_tree.json: run `{hw.RECORD_COMMAND}`"
    assert {hw.parse_preset(p) for p in hw.RECORD_PRESETS} <= {t.text for t in cli.record_trees()}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_learn_tab_and_the_panel_quote_the_same_file(lang):
    from eagle_app.hardware import recorded_views

    q = hw.quoted()
    glossary = learn.learn_blocks(lang)["glossary"]
    for key in ("machine", "date", "t8", "t16", "t64", "cpu_tree", "cpu_c", "explain_tree", "gpu_tree", "gpu_nodes"):
        assert q[key] in glossary, key
    _, table, status = recorded_views(lang)
    assert q["machine"] in status and q["date"] in status
    ratios = hw.lesson(hw.load_recorded(), hw.load_tau_table())["ratios"]
    assert f"{ratios[8]:.2f}" == q["t8"] and f"| {q['t8']} |" in table.replace(f" {q['t8']} ", f"| {q['t8']} |")
    assert f"{ratios[64]:.2f}" == q["t64"] and q["t16"] in table


def test_no_learn_figure_is_typed_twice():
    """The recording's and the language table's figures are {fields} in the text, filled from the files."""
    values = figures.figures()
    fake = {k: f"<{k}>" for k in values}
    for src in (learn, learn_zh):
        text = "\n".join(getattr(src, n) for n in learn.BLOCKS + ("GLOSSARY",))
        filled = figures.fill(text, fake)
        for key in ("t8", "t16", "t64", "cpu_tau", "cpu_speedup", "machine", "mt_zh", "huma_zh", "stem_en", "draft_rows"):
            assert f"<{key}>" in filled, (src.__name__, key)
        assert "{" + "t8" + "}" not in figures.fill(text)  # every field has its value
    with open(hw.TAU_TABLE, encoding="utf-8") as f:
        taus = json.load(f)["tau"]
    for block in (learn.GLOSSARY, learn_zh.GLOSSARY):
        assert not any(f"{t:.2f}" in block for t in taus.values())


def test_a_missing_recording_leaves_dashes_not_a_broken_page(monkeypatch):
    monkeypatch.setattr(figures, "quoted", lambda: (_ for _ in ()).throw(OSError("no file")))
    figures.figures.cache_clear()
    try:
        text = learn.learn_blocks("en")["glossary"]
        assert "{t8}" not in text and "— single-token" in text and "x_{t+1}" in learn.learn_blocks("en")["text"]
    finally:
        figures.figures.cache_clear()


def test_the_gpu_preset_verifies_the_official_60_tokens():
    from eagle_core.config import PRESETS
    from viz.hardware import PUBLISHED

    assert PRESETS["gpu"]["total_tokens"] + 1 == 60 == PUBLISHED["nodes"]


def test_recording_on_a_tiny_model_writes_both_files(tmp_path, monkeypatch):
    """The one command's work, on a tiny random model, two prompts and a few tokens."""
    from eagle_core import Engine
    from conftest import tiny_head, tiny_target

    target = tiny_target()
    engine = Engine(target, tiny_head(target))
    prompts = tmp_path / "p.jsonl"
    prompts.write_text("\n".join(json.dumps({"category": c, "turns": [f"say {c}"]}) for c in ("writing", "math")))
    monkeypatch.setattr(cli, "SWEEP", ("1,1,1",))
    monkeypatch.setattr(cli, "measure", lambda *a, **k: {"forward_ms": {1: 1.0, 2: 1.5}, "step_ms": {1: 0.1},
                                                         "weights": {"target": 10, "head_step": 1, "layers": 2}})
    table, m = cli.record(engine, str(prompts), per_category=1, max_new_tokens=4, tau_path=str(tmp_path / "t.json"),
                         recorded_path=str(tmp_path / "r.json"), log=lambda _: None)
    written = json.loads((tmp_path / "t.json").read_text())
    assert set(written["tau"]) == {t.text for t in cli.record_trees()} and all(v >= 1 for v in written["tau"].values())
    assert written["source"] == hw.RECORD_COMMAND and written["date"]
    assert json.loads((tmp_path / "r.json").read_text())["command"] == hw.RECORD_COMMAND


# ------------------------------------------------------------------ one idea a paragraph
def pieces(markdown: str) -> list[str]:
    """Paragraphs, list items and table rows of a Markdown text (headings left out)."""
    out = []
    for block in re.split(r"\n\s*\n", markdown):
        cur: list[str] = []
        for line in block.splitlines():
            if not line.strip() or line.startswith("#") or line.startswith("|---"):
                continue
            if line.startswith(("- ", "| ")) or not cur:
                cur.append(line)
            else:
                cur[-1] += " " + line
        out += cur
    return out


def words(text: str) -> float:
    """English words by whitespace; Chinese at two characters a word (a common reading-length rule)."""
    return len(HAN.findall(text)) / 2 + len(CJK.sub(" ", text).split())


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_learn_paragraph_or_item_runs_over_120_words(lang):
    blocks = learn.learn_blocks(lang)
    found = pieces(blocks["text"] + "\n\n" + blocks["glossary"])
    assert len(found) > 20
    long = [(round(words(p)), p[:60]) for p in found if words(p) > LIMIT]
    assert not long, long


def test_the_word_count_counts():
    assert words("one two three") == 3 and words("四个汉字") == 2 and words("EAGLE 的头") == 2
    assert len(pieces("a\nb\n\n- c\n- d\n  e\n\n| x | y |\n|---|---|\n| 1 | 2 |")) == 5


# ------------------------------------------------------------------ Chinese all the way
def rendered_text(markdown: str) -> str:
    """What a reader sees of a Markdown text (CommonMark, as the page renders it), tags removed."""
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    return re.sub(r"<[^>]+>", "", html)


def chinese_markdown() -> dict[str, str]:
    from eagle_app import i18n
    from viz.hardware import TEXT
    from viz.i18n import FIGURE_TEXT

    out = {f"learn.{k}": v for k, v in learn.learn_blocks("zh").items()}
    out.update({f"CHINESE.{en[:30]}": zh for en, zh in i18n.CHINESE.items()})
    sample = dict(n=3, total=9, k=2, s=1.5, fair=20, budget=60, ahead=1, wait=12, what="EAGLE", each="", guess=4,
                  done="x", label="EAGLE", rate=3.1, tau=2.0, why="x", model="SmolLM2", where="x", loaded="", head="x",
                  title="x", more="x", err="x", since="", method="x", target="x", hint="x", pair="x", threads=2,
                  name="x", device="x", before="", max_new=8, cycles=3, dt=2, r=1.0, msg="x", max=6000, v="1",
                  when="x", seconds=1.0, error="x", heads="x", d=1, a=1, depth=2, draft=1, verify=1, quoted="x",
                  bonus="x", more_=0, ms=1, were="", tok="x", id=1, p="0.5", q="0.5", u="0.3", t="x", b=1, c=1,
                  share=0.1, best_here="x", best_gpu="x", tree="x", speedup=1.0, ks="1", vals="1", t1=1.0, steps="x",
                  prompts="x", layers=30, layer=0.03, e="x", margin="1", scale="1", dtype="x", tol="1", mark="x",
                  tokens=4, per=2)
    for strings, name in ((i18n.APP_TEXT, "APP_TEXT"), (FIGURE_TEXT, "FIGURE_TEXT"), (TEXT, "HW")):
        for key in strings.entries:
            try:
                out[f"{name}.{key}"] = strings(key, "zh", **sample)
            except (KeyError, ValueError, IndexError):
                out[f"{name}.{key}"] = strings(key, "zh")
    return out


def test_chinese_emphasis_renders():
    """CommonMark does not close ** next to full-width punctuation: no raw ** may reach the reader."""
    raw = {k: v for k, v in chinese_markdown().items() if "**" in rendered_text(v)}
    assert not raw, raw
    assert "**" in rendered_text("**模型已就绪：**SmolLM2")  # the rule this test guards against


def test_chinese_uses_one_word_for_token():
    texts = chinese_markdown()
    texts = {k: re.sub(r"`[^`]*`", "", v) for k, v in texts.items()}  # code (`total tokens`) stays code
    with_token = [k for k, v in texts.items() if re.search(r"\btokens?\b", v) and HAN.search(v)]
    # the one gloss (INTRO: 词元（token）) and the glossary's "bonus token" gloss
    assert with_token == ["learn.text", "learn.glossary"], with_token  # 词元（token）; 奖励词元（bonus token）
    assert len(re.findall(r"\btokens?\b", texts["learn.text"])) == 1


# names (EAGLE, SmolLM2, MT-bench, the CPU's and the published point's), and Medusa's quoted nonsense path "I am begin"
ALLOWED = {"EAGLE", "SmolLM", "GPU", "CPU", "bench", "MGSM", "Medusa", "Qwen", "AngelSlim", "README", "AMD", "EPYC",
           "family", "model", "begin"}


def figure_words(fig: go.Figure) -> list[str]:
    """The figure's own words: titles, axis titles, legend names, annotations and tick texts (a tick's token
    text is data, so only its <sup> part counts); token labels on nodes and bars are data and left out."""
    lay = fig.layout
    texts = [lay.title.text or ""]
    for ax in (lay.xaxis, lay.yaxis):
        texts.append(ax.title.text or "")
        for t in ax.ticktext or ():
            sups = re.findall(r"<sup>(.*?)</sup>", str(t))
            texts += sups
    texts += [a.text or "" for a in lay.annotations or ()]
    texts += [tr.name or "" for tr in fig.data if tr.showlegend is not False]
    texts += [str(y) for tr in fig.data if tr.type == "bar" and tr.orientation == "h" for y in tr.y]
    if not lay.xaxis.ticktext:  # category names shown as they are
        texts += [str(x) for tr in fig.data if tr.type == "bar" and tr.orientation != "h" and tr.x is not None
                  for x in tr.x if isinstance(x, str)]
    return [w for t in texts for w in re.findall(r"[A-Za-z]{3,}", re.sub(r"<[^>]+>", " ", t))]


def token_words(runs) -> set[str]:
    """Words of the decoded tokens themselves: data, not the figure's words."""
    texts = [n.text for r in runs for c in r.cycles for n in c.nodes] + [c.bonus_text for r in runs for c in r.cycles]
    return {w for t in texts for w in re.findall(r"[A-Za-z]{3,}", t)}


def chinese_figures() -> dict[str, go.Figure]:
    import viz
    from eagle_app import views

    eagle, vanilla = illustration()
    state = views.new_state(eagle, vanilla)
    figs = {k: v for k, v in views.all_views(state, "zh").items() if isinstance(v, go.Figure)}
    figs["probs_sampled"] = viz.probs_figure(sampled_cycle(), "zh")
    from viz.examples import medusa_figure
    from viz.languages import language_figure, load_language_rows
    from eagle_app.hardware import recorded_views

    figs["medusa"] = medusa_figure("zh")
    figs["languages"] = language_figure(load_language_rows(), "zh")
    figs["hardware"] = recorded_views("zh")[0]
    return figs


def machine_words() -> set[str]:
    """Words of the CPU model the hardware record names (eagle_core.machine: "Intel(R) Xeon(R) Processor ...")."""
    from eagle_core.machine import RECORDED

    with open(RECORDED, encoding="utf-8") as f:
        name = json.load(f).get("hardware") or ""
    return set(re.findall(r"[A-Za-z]{3,}", name))


def test_no_english_word_in_a_chinese_figure():
    figs = chinese_figures()
    assert {"probs_sampled", "hardware"} <= set(figs) and len(figs) >= 6
    data = token_words(illustration()) | token_words([type("R", (), {"cycles": [sampled_cycle()]})()])
    data |= {"am", "will", "always", "going", "begin", "try"}  # the Medusa figure's tokens
    data |= machine_words()  # the recording machine's name (a CPU model is a name, not a word to translate)
    english = {name: sorted(set(figure_words(f)) - ALLOWED - data) for name, f in figs.items()}
    assert not any(english.values()), english
    assert figure_words(chinese_figures_en()["timing"])  # the check sees English where there is some


def chinese_figures_en() -> dict[str, go.Figure]:
    from eagle_app import views

    eagle, vanilla = illustration()
    return {k: v for k, v in views.all_views(views.new_state(eagle, vanilla), "en").items() if isinstance(v, go.Figure)}


def test_the_docs_figures_tree_labels_go_above_where_the_points_crowd():
    from eagle_core.bench.hardware_png import label_offsets

    # 7, 8 and 9 rows sit within 1.2x of each other on the log axis: the middle label goes above
    assert label_offsets([2, 5, 7, 8, 9, 13, 17]) == [-16, -16, -16, 10, -16, -16, -16]
    assert label_offsets([7, 8]) == [-16, 10] and label_offsets([]) == []
