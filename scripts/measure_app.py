"""Measure the app's numbers for docs/app.md (not a test; run it by hand). With a browser on the
machine, see scripts/measure_app_vs_cli.py.

    python scripts/measure_app.py startup        # `python app.py` -> page served, and -> model ready (warm cache)
    python scripts/measure_app.py startup-cold   # same with an empty weight cache (GGUF conversion)
    python scripts/measure_app.py ui             # tokens/s with and without the app's callback (no browser)
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from types import SimpleNamespace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run as a file from anywhere: the app's packages
PROMPT = "Write a Python function that checks whether a string is a palindrome."


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def startup(cold: bool) -> None:
    port = free_port()
    env = dict(os.environ, GRADIO_SERVER_PORT=str(port), GRADIO_ANALYTICS_ENABLED="False")
    if cold:
        env["EAGLE_EXPLAINER_CACHE"] = tempfile.mkdtemp(prefix="eagle-cold-")
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    page_s = None
    try:
        while page_s is None:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1).read()
                page_s = time.perf_counter() - t0
            except OSError:
                time.sleep(0.1)
        for line in proc.stdout:
            if "Model ready" in line or "failed" in line:
                print(line.strip())
                break
        print(f"{'cold' if cold else 'warm'}: page served {page_s:.1f} s, model ready {time.perf_counter() - t0:.1f} s "
              "after `python app.py`")
    finally:
        proc.terminate()
        proc.wait(10)


def ui(rounds: int = 3, max_new: int = 24) -> None:
    """tokens/s of the bare engine vs the app's Generate callback (no browser), alternating."""
    from eagle_app import views
    from eagle_app.callbacks import decoding as cb
    from eagle_app.model import MODEL
    from eagle_app.worker import ENGINE_THREAD
    from eagle_core import DecodeSettings

    MODEL.start().ready.wait()  # the default target and head, loaded as the app loads them
    if MODEL.engine is None:
        raise SystemExit(MODEL.error)
    engine = MODEL.engine
    args = ("eagle2", 5, 8, 24, 4, 0.0, 1.0, 0, max_new, 0)
    settings = DecodeSettings(method="eagle2", depth=5, tree_top_k=8, total_tokens=24, max_new_tokens=max_new)
    ENGINE_THREAD.submit(engine.run, "warm up", settings.with_(max_new_tokens=4)).result()
    bare, with_ui = [], []
    for _ in range(rounds):  # alternate, so slow phases of a shared machine hit both sides
        # the bare engine runs on the app's own engine thread, like the app's decodes: the thread
        # that calls torch matters on 2 cores (see eagle_app/worker.py, ENGINE_THREAD)
        bare.append(ENGINE_THREAD.submit(engine.run, PROMPT, settings).result().summary.tokens_per_s)
        req = SimpleNamespace(session_hash="measure")
        run_id = cb.arm(req)
        outs = list(cb.generate(PROMPT, *args, False, views.new_state(), run_id, request=req))
        with_ui.append(views.named(outs[-1])["state"]["eagle"].summary.tokens_per_s)
    b, u = statistics.median(bare), statistics.median(with_ui)
    print(f"tokens/s engine alone {b:.2f} {bare}; inside the app {u:.2f} {with_ui}; UI overhead {100 * (1 - u / b):+.1f}%")


MEASURES = {"startup": lambda: startup(False), "startup-cold": lambda: startup(True), "ui": ui}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "),
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n\n", 1)[1])
    ap.add_argument("what", nargs="?", default="ui", choices=list(MEASURES), help="what to measure (default: ui)")
    MEASURES[ap.parse_args(argv).what]()


if __name__ == "__main__":
    main()
