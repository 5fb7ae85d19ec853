"""Does the page tell the truth? tokens/s as the page reports them, with Chromium rendering the
page on the same machine, against the CLI on the same prompt and settings right after; plus
start-up as a browser sees it. Prints markdown tables for docs/app.md (not a test):

    python scripts/measure_app_vs_cli.py                       # 4 prompts, 32 new tokens, tree 4/4/12
    python scripts/measure_app_vs_cli.py --prompts 2 --max-new 16 --depth 2 --top-k 2 --total 4
    python scripts/measure_app_vs_cli.py --threads 1             # torch threads for both app and CLI

It starts `python app.py` on a free port, drives Debian's chromium with Playwright (never a
downloaded browser; fresh profile), presses Generate for each prompt, reads EAGLE's and
vanilla's tokens/s from the comparison cards, then runs `python -m eagle_core generate --json
--weights float32` (the page's format) for both methods with the same settings while the page sits on
about:blank. Before each Generate the script reads the prompt and the tree (depth, top-k, total
tokens, new tokens) back from the page and checks them, and float32, against the settings the CLI
reports it ran (column "same setup"). The bar (issue 54): page tok/s within 5% of the CLI's for each
method; the last lines give each method's median page/CLI ratio over the prompts.
Chromium's CPU time while each method decoded is printed too, when the status line shows the
phases (only with EAGLE_APP_PROGRESS_S > 0; by default the page stays still while timed and the
column is nan). `--repeat N` runs page + CLI N times per prompt and prints medians.

`--client` drives the same Generate event through gradio_client instead of a browser (no page on
the machine): it separates what the server's event path costs from what the browser costs.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_model() -> str:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown CPU"


def cpu_seconds(match: str) -> float:
    """utime + stime of every process whose command line contains `match`."""
    total = 0.0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if match.encode() not in f.read():
                    continue
            with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / TICKS
        except OSError:
            continue
    return total


def example_prompts(n: int) -> list[str]:
    with open(os.path.join(ROOT, "assets", "examples.json"), encoding="utf-8") as f:
        return [e["prompt"] for e in json.load(f)["prompts"]][:n]


def cli(prompt: str, method: str, a) -> dict:
    cmd = [sys.executable, "-m", "eagle_core", "generate", "--json", "--prompt", prompt, "--method", method,
           "--max-new-tokens", str(a.max_new), "--tree", f"{a.depth},{a.top_k},{a.total}",
           "--weights", "float32"] + (["--threads", str(a.threads)] if a.threads else [])  # the page's format
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def wait_for_http(url: str) -> None:
    """Retry until the server answers."""
    while True:
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            time.sleep(0.1)


TREE_KEYS = ("depth", "tree_top_k", "total_tokens", "max_new_tokens")


def add_cli(run: dict, prompt: str, a, shown: dict | None = None) -> dict:
    """The CLI's EAGLE and vanilla rates for the same prompt and settings, added to one app run. `shown`:
    the prompt and tree the page had when Generate was pressed (None: passed to the API by this script);
    `setup` says whether the CLI ran that same prompt and tree."""
    e_cli, v_cli = cli(prompt, "eagle", a), cli(prompt, "vanilla", a)
    want = {"prompt": prompt, **dict(zip(TREE_KEYS, (a.depth, a.top_k, a.total, a.max_new)))}
    if shown is None:
        shown = want
    ran = [{"prompt": prompt, **{k: r["settings"][k] for k in TREE_KEYS}} for r in (e_cli, v_cli)]
    run.update(e_cli=e_cli["tokens_per_s"], v_cli=v_cli["tokens_per_s"], same=e_cli["token_ids"] == v_cli["token_ids"],
               setup=all(r == shown for r in ran) and e_cli["method"] == "eagle2" and v_cli["method"] == "vanilla"
               and all(r.get("weights", "float32") == "float32" for r in (e_cli, v_cli)))
    return run


def median_row(prompt: str, runs: list[dict]) -> dict:
    flags = ("same", "setup")
    return {"prompt": prompt, **{k: statistics.median(r[k] for r in runs) for k in runs[0] if k not in flags},
            **{k: all(r[k] for r in runs) for k in flags}}


def ratio_lines(rows: list[dict], where: str) -> str:
    """Each method's median page/CLI ratio over the prompts, against the bar (within 5%)."""
    out = []
    for name, page, cli_ in (("EAGLE", "e_page", "e_cli"), ("vanilla", "v_page", "v_cli")):
        ratios = [r[page] / r[cli_] for r in rows]
        m = statistics.median(ratios)
        out.append(f"{name}: {where}/CLI median {m:.3f} (per prompt {min(ratios):.3f}-{max(ratios):.3f}); "
                   f"{'within' if abs(m - 1) <= 0.05 else 'NOT within'} 5%")
    setup = sum(r["setup"] for r in rows)
    out.append(f"same prompt and tree on the {where} and the CLI: {setup} of {len(rows)} prompts")
    return "\n".join(out)


def shown_setup(page, prompt_box) -> dict:
    """The prompt and tree the page holds now, read back from its inputs (the tree's accordion opened if
    its inputs are hidden)."""
    boxes = dict(zip(TREE_KEYS, ("eg-set-depth", "eg-set-topk", "eg-set-total", "eg-maxnew")))
    if not page.locator("#eg-set-depth input[type=number]").is_visible():
        page.get_by_text("Tree settings").click()
    values = {k: int(float(page.locator(f"#{b} input[type=number]").input_value())) for k, b in boxes.items()}
    return {"prompt": prompt_box.input_value(), **values}


def set_slider(page, elem_id: str, value) -> None:
    box = page.locator(f"#{elem_id} input[type=number]")
    box.fill(str(value))
    box.press("Enter")
    box.blur()


def set_tree(page, a) -> None:
    """Open the tree settings and set the run's depth, top-k, total tokens and new tokens (with
    --page-defaults only the new tokens: the tree stays the one the page opens with)."""
    if a.page_defaults:
        set_slider(page, "eg-maxnew", a.max_new)
        return
    page.get_by_text("Tree settings").click()
    for elem_id, value in (("eg-set-depth", a.depth), ("eg-set-topk", a.top_k), ("eg-set-total", a.total),
                           ("eg-maxnew", a.max_new)):
        set_slider(page, elem_id, value)


def cards(page) -> dict[str, str]:
    return page.evaluate("""() => Object.fromEntries([...document.querySelectorAll('#eg-comparison .eg-card')]
        .map(c => [c.querySelector('small').innerText.trim(), c.querySelector('b').innerText.trim()]))""")


def share(cpu_s: float, wall_s: float) -> float:
    """Percent of one core; nan for a phase the status line never showed."""
    return 100 * cpu_s / wall_s if wall_s > 0.2 else float("nan")


def page_run(page, prompt: str, profile: str, a) -> dict:
    """One Generate on the page: both tok/s from the cards, and Chromium's CPU (percent of one core)
    5 s before the click (idle), while EAGLE decoded and while vanilla decoded. The phases are read
    from the status line ("EAGLE decoding", "vanilla decoding", "Done.") by the page's own observer (no
    polling: wait_status); the drawing after both runs is outside both windows."""
    box = page.locator("#eg-prompt textarea")
    box.fill(prompt)
    shown = shown_setup(page, box)
    c0 = cpu_seconds(profile)
    page.wait_for_timeout(5000)
    idle = (cpu_seconds(profile) - c0) / 5.0
    marks = []
    page.locator("#eg-generate").click()
    # a short phase may be missed; with EAGLE_APP_PROGRESS_S large the page shows only "Done." (no phases)
    for text in ("EAGLE decoding|vanilla decoding|Done\\.", "vanilla decoding|Done\\.", "Done\\."):
        wait_status(page, text, a.timeout)
        marks.append((time.perf_counter(), cpu_seconds(profile)))
    (t1, c1), (t2, c2), (t3, c3) = marks
    cards_ = cards(page)
    return dict(e_page=float(cards_["EAGLE tokens/s"]), v_page=float(cards_["vanilla tokens/s"]), idle=100 * idle,
                shown=shown,
                browser_e=share(c2 - c1, t2 - t1), browser_v=share(c3 - c2, t3 - t2),
                note=page.locator("#eg-comparison .eg-note").last.inner_text(),
                why=page.locator("#eg-comparison .eg-verdict").inner_text() if page.locator(
                    "#eg-comparison .eg-verdict").count() else "")


# Resolves in the page when the status line matches: the page's own MutationObserver wakes on its changes
# alone, where Playwright's expect() would ask the browser over and over (up to 10 times a second, each a
# wake-up of Chromium beside the decode; a user's browser is never polled)
WAIT_STATUS_JS = """([pattern, ms]) => new Promise((resolve, reject) => {
    const re = new RegExp(pattern), el = () => document.querySelector('#eg-status');
    const hit = () => re.test((el() || {}).innerText || '');
    if (hit()) return resolve(true);
    const ob = new MutationObserver(() => { if (hit()) { ob.disconnect(); resolve(true); } });
    ob.observe(document.body, {subtree: true, childList: true, characterData: true});
    setTimeout(() => { ob.disconnect(); reject(new Error('status never matched ' + pattern)); }, ms);
})"""


def wait_status(page, pattern: str, timeout_s: float) -> None:
    page.evaluate(WAIT_STATUS_JS, [pattern, int(timeout_s * 1000)])


CARD = re.compile(r"<b>([^<]*)</b><small>([^<]*)</small>")


def client_run(client, prompt: str, a) -> dict:
    """One Generate through gradio_client (the API the page's button calls); tok/s from the cards' HTML."""
    result = client.submit(prompt, "eagle2", a.depth, a.top_k, a.total, 3, 0.0, 1.0, 0, a.max_new, 0, True,
                           api_name="/generate").result(timeout=a.timeout)
    html = next(x for x in result if isinstance(x, str) and "EAGLE tokens/s" in x)
    shown = {label.strip(): value.strip() for value, label in CARD.findall(html)}
    return dict(e_page=float(shown["EAGLE tokens/s"]), v_page=float(shown["vanilla tokens/s"]))


def main_client(a, url: str) -> list[dict]:
    from gradio_client import Client

    client, rows = Client(url, verbose=False), []
    for prompt in example_prompts(a.prompts):
        runs = []
        for rep in range(a.repeat):
            r = add_cli(client_run(client, prompt, a), prompt, a)
            runs.append(r)
            print(f"… {prompt[:40]!r} #{rep + 1}: app {r['e_page']} / {r['v_page']}, CLI "
                  f"{r['e_cli']:.1f} / {r['v_cli']:.1f} tok/s", file=sys.stderr, flush=True)
        rows.append(median_row(prompt, runs))
    return rows


def print_client_table(rows: list[dict], a) -> None:
    print("| prompt | EAGLE app | EAGLE CLI | app/CLI | vanilla app | vanilla CLI | app/CLI | speedup app | "
          "speedup CLI |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['prompt'][:32]}… | {r['e_page']:.1f} | {r['e_cli']:.1f} | {r['e_page'] / r['e_cli']:.0%} | "
              f"{r['v_page']:.1f} | {r['v_cli']:.1f} | {r['v_page'] / r['v_cli']:.0%} | "
              f"{r['e_page'] / r['v_page']:.2f}× | {r['e_cli'] / r['v_cli']:.2f}× |")
    print(f"\nThe app driven through gradio_client (no browser), medians of {a.repeat} run(s) per prompt, each "
          "followed by the CLI.")
    print(ratio_lines(rows, "app"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prompts", type=int, default=4, help="how many of assets/examples.json's prompts")
    ap.add_argument("--max-new", type=int, default=32)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--top-k", type=int, default=4)
    ap.add_argument("--total", type=int, default=12)
    ap.add_argument("--threads", type=int, default=None, help="torch threads for the app (EAGLE_APP_THREADS) and the CLI")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per page run")
    ap.add_argument("--repeat", type=int, default=1, help="page + CLI runs per prompt; the table shows medians")
    ap.add_argument("--client", action="store_true", help="gradio_client instead of a browser (no page rendering)")
    ap.add_argument("--page-defaults", action="store_true",
                    help="leave the tree as the page opens it (the CLI gets the same tree); set only --max-new")
    a = ap.parse_args(argv)
    if a.page_defaults:  # the page's opening preset; in a browser, the tree the page shows once its model is ready
        sys.path.insert(0, ROOT)
        from eagle_app.settings import OPENING

        a.depth, a.top_k, a.total = OPENING["depth"], OPENING["tree_top_k"], OPENING["total_tokens"]

    port, profile = free_port(), tempfile.mkdtemp(prefix="eagle-measure-chromium-")
    env = dict(os.environ, GRADIO_SERVER_PORT=str(port), GRADIO_ANALYTICS_ENABLED="False")
    if a.threads:
        env["EAGLE_APP_THREADS"] = str(a.threads)
    url = f"http://127.0.0.1:{port}/"
    t0 = time.perf_counter()
    server = subprocess.Popen([sys.executable, os.path.join(ROOT, "app.py")], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    startup, rows = {}, []
    try:
        if a.client:
            wait_for_http(url)
            rows = main_client(a, url)
        else:
            rows = main_browser(a, url, profile, t0, startup)
    finally:
        server.terminate()
        server.wait(20)
    threads = a.threads or subprocess.run([sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
                                          capture_output=True, text=True).stdout.strip()
    print(f"\n{cpu_model()} · {os.cpu_count()} logical CPUs · torch threads {threads} · greedy, tree "
          f"depth {a.depth} / top-k {a.top_k} / {a.total} tokens, {a.max_new} new tokens\n")
    if a.client:
        print_client_table(rows, a)
    else:
        print_browser_table(rows, startup, a)
    return 0


def main_browser(a, url: str, profile: str, t0: float, startup: dict) -> list[dict]:
    from playwright.sync_api import expect, sync_playwright

    rows = []
    with sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, args=ARGS,
                                                       viewport={"width": 1500, "height": 1000})
        page = browser.new_page()
        wait_for_http(url)  # a browser opened at once
        startup["server answers HTTP"] = time.perf_counter() - t0
        page.goto(url, wait_until="load")
        startup["page loaded (load event)"] = time.perf_counter() - t0
        expect(page.locator("#eg-generate")).to_be_visible(timeout=120_000)
        startup["Generate button visible"] = time.perf_counter() - t0
        expect(page.locator("#eg-model")).to_contain_text("Model ready", timeout=300_000)
        startup["“Model ready” shown"] = time.perf_counter() - t0
        set_tree(page, a)
        for prompt in example_prompts(a.prompts):
            runs = []
            for rep in range(a.repeat):  # page, then CLI right after, a.repeat times; medians reported
                r = page_run(page, prompt, profile, a)
                startup["note"], why, shown = r.pop("note"), r.pop("why"), r.pop("shown")
                if why:
                    startup.setdefault("why", []).append(why)
                page.goto("about:blank")  # the CLI runs with no page rendering
                if a.page_defaults:  # the tree the page opened with (chosen for this machine at start-up)
                    a.depth, a.top_k, a.total = shown["depth"], shown["tree_top_k"], shown["total_tokens"]
                runs.append(add_cli(r, prompt, a, shown))
                print(f"… {prompt[:40]!r} #{rep + 1}: page {r['e_page']} / {r['v_page']}, CLI "
                      f"{r['e_cli']:.1f} / {r['v_cli']:.1f} tok/s, Chromium "
                      f"{r['browser_e']:.0f}% / {r['browser_v']:.0f}% of a core", file=sys.stderr, flush=True)
                page.goto(url, wait_until="load")
                expect(page.locator("#eg-model")).to_contain_text("Model ready", timeout=60_000)
                set_tree(page, a)
                page.wait_for_timeout(2000)  # the reloaded page finishes drawing its example first
            rows.append(median_row(prompt, runs))
        browser.close()
    return rows


def print_browser_table(rows: list[dict], startup: dict, a) -> None:
    note = startup.pop("note", None)
    print("| prompt | EAGLE page | EAGLE CLI | page/CLI | vanilla page | vanilla CLI | page/CLI | speedup page | "
          "speedup CLI | Chromium CPU while EAGLE / vanilla decoded (idle before) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        sp_page, sp_cli = r["e_page"] / r["v_page"], r["e_cli"] / r["v_cli"]
        print(f"| {r['prompt'][:32]}… | {r['e_page']:.1f} | {r['e_cli']:.1f} | {r['e_page'] / r['e_cli']:.0%} | "
              f"{r['v_page']:.1f} | {r['v_cli']:.1f} | {r['v_page'] / r['v_cli']:.0%} | {sp_page:.2f}× | {sp_cli:.2f}× "
              f"| {r['browser_e']:.0f}% / {r['browser_v']:.0f}% ({r['idle']:.0f}%) |")
    print(f"\nMedians of {a.repeat} page run(s) and {a.repeat} CLI run(s) per prompt, each CLI run right after a page "
          "run. Chromium CPU: percent of one core while the status line said EAGLE, then vanilla, was decoding; "
          "idle: the 5 s before the click.")
    if note:
        print(f"The page said: “{note}”")
    speedups = [r["e_page"] / r["v_page"] for r in rows]
    print(f"\nMedian speedup on the page over the {len(rows)} prompts: {statistics.median(speedups):.2f}× "
          f"(CLI {statistics.median(r['e_cli'] / r['v_cli'] for r in rows):.2f}×); greedy outputs identical on "
          f"{sum(r['same'] for r in rows)} of {len(rows)} (CLI).")
    print(ratio_lines(rows, "page"))
    for why in startup.pop("why", []):
        print(f"The page's note: “{why}”")
    print("\n| start-up, as the browser saw it | seconds after `python app.py` |\n|---|---|")
    for what, s in startup.items():
        print(f"| {what} | {s:.1f} |")


if __name__ == "__main__":
    sys.exit(main())
