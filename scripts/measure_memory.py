"""Memory and temporary files of the real app server over many runs (issue 28: "memory flat over
100 runs, temporary files bounded"). Not a test; run it by hand, it takes minutes:

    python scripts/measure_memory.py --runs 100 --max-new 32 --runs-per-session 5 --json-out FILE

Starts `python app.py` (the embedded default model) on a free port with its own temporary folder
(TMPDIR and GRADIO_TEMP_DIR inside a fresh directory, so every file the server writes is counted
there), then drives Generate through gradio_client, EAGLE and vanilla each time, a new client
(a new session, as a new student) every --runs-per-session runs, the prompts in turn. After each
run it reads the server's resident memory (VmRSS, /proc) and counts the files in its temporary
folder. Prints one line per run and the least-squares slope of RSS per run, over all runs and
over the runs after the first --warm-up (allocator pools, caches and lazily built kernels grow
at first). The client downloads no files (download_files=False), so every counted file is the
server's.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROMPTS = ("Name three colours.", "Write a haiku about the sea.", "What is 17 times 3?", "请用一句话介绍长城。")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS")) / 1024


def count_files(root: str) -> int:
    return sum(len(files) for _, _, files in os.walk(root))


def slope(ys: list[float]) -> float:
    """Least-squares slope of ys against 0, 1, 2, ... (per step)."""
    n = len(ys)
    if n < 2:
        return 0.0
    mx, my = (n - 1) / 2, sum(ys) / n
    return sum((x - mx) * (y - my) for x, y in enumerate(ys)) / sum((x - mx) ** 2 for x in range(n))


def cpu_info() -> str:
    """lscpu's model name, family and model (the docs name machines by these)."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout
        fields = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
        get = lambda k: fields.get(k, "?").strip()  # noqa: E731
        return f"{get('Model name')}, family {get('CPU family')}, model {get('Model')}, {os.cpu_count()} CPUs"
    except (OSError, subprocess.CalledProcessError):
        return platform.processor() or platform.machine()


def start_server(port: int, tmp: str, threads: int | None) -> subprocess.Popen:
    env = dict(os.environ, GRADIO_SERVER_PORT=str(port), GRADIO_ANALYTICS_ENABLED="False", TMPDIR=tmp,
               GRADIO_TEMP_DIR=os.path.join(tmp, "gradio"))
    if threads:
        env["EAGLE_APP_THREADS"] = str(threads)
    log = open(os.path.join(tmp, "server.log"), "w", encoding="utf-8")  # noqa: SIM115 (closed with the process)
    proc = subprocess.Popen([sys.executable, "app.py"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited ({proc.returncode}); see {log.name}")
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return proc
        except OSError:
            time.sleep(0.2)


def one_run(client, prompt: str, a) -> str:
    """One Generate (EAGLE, then vanilla) with the given tree; -> its final status line."""
    result = client.predict(prompt, "eagle2", a.depth, a.top_k, a.total, 4, 0.0, 1.0, 0, a.max_new, 0, True,
                            api_name="/generate")
    return next((r for r in result if isinstance(r, str) and ("Done." in r or "⚠" in r)), "")


def measure(a) -> dict:
    from gradio_client import Client

    tmp = tempfile.mkdtemp(prefix="eagle-memory-")
    port = free_port()
    proc = start_server(port, tmp, a.threads)
    url = f"http://127.0.0.1:{port}/"
    rows, client = [], None
    try:
        start_rss, start_files = rss_mb(proc.pid), count_files(tmp)
        print(f"server pid {proc.pid}, RSS at start {start_rss:.1f} MB, {start_files} files in {tmp}", flush=True)
        for i in range(a.runs):
            if i % a.runs_per_session == 0:
                client = Client(url, verbose=False, download_files=False)
            t0 = time.perf_counter()
            status = one_run(client, PROMPTS[i % len(PROMPTS)], a)
            row = {"run": i + 1, "seconds": time.perf_counter() - t0, "rss_mb": rss_mb(proc.pid),
                   "files": count_files(tmp), "done": "Done." in status}
            rows.append(row)
            print(f"run {row['run']:3d}  {row['seconds']:5.1f} s  RSS {row['rss_mb']:7.1f} MB  files {row['files']:3d}"
                  f"{'' if row['done'] else '  (not done: ' + status[:80] + ')'}", flush=True)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
    left = count_files(tmp) - 1  # after the server exited; the log is not the server's temporary file
    rss = [r["rss_mb"] for r in rows]
    after = rss[a.warm_up:]
    out = {"command": " ".join([os.path.basename(sys.executable), "scripts/measure_memory.py"] + sys.argv[1:]),
           "cpu": cpu_info(), "loadavg_at_end": os.getloadavg(), "runs": len(rows), "rss_start_mb": start_rss,
           "rss_mb": rss, "slope_mb_per_run": slope(rss), "warm_up": a.warm_up,
           "slope_after_warm_up_mb_per_run": slope(after), "rss_min_after_warm_up": min(after, default=0.0),
           "rss_max_after_warm_up": max(after, default=0.0), "files": [r["files"] for r in rows],
           "files_at_start": start_files, "files_left_after_exit": left, "all_done": all(r["done"] for r in rows)}
    print(f"\n{out['cpu']}; load average at the end {out['loadavg_at_end'][0]:.2f}")
    print(f"RSS {start_rss:.1f} MB at start, {rss[0]:.1f} after run 1, {rss[-1]:.1f} after run {len(rss)}; "
          f"slope {out['slope_mb_per_run']:+.3f} MB/run over all runs, "
          f"{out['slope_after_warm_up_mb_per_run']:+.3f} MB/run after run {a.warm_up} "
          f"(range {out['rss_min_after_warm_up']:.1f}-{out['rss_max_after_warm_up']:.1f} MB)")
    print(f"files in the server's temporary folder: {start_files} at start, max {max(out['files'])}, "
          f"{out['files'][-1]} after the last run, {left} after the server exited")
    if a.json_out:
        with open(a.json_out, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=1)
    if not a.keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--max-new", type=int, default=32, help="new tokens per run (each method)")
    ap.add_argument("--tree", default="2,2,3", help="depth,top_k,total (the cpu preset until 2026-12-07)")
    ap.add_argument("--runs-per-session", type=int, default=5, help="a new gradio_client session every N runs")
    ap.add_argument("--warm-up", type=int, default=20, help="runs left out of the second slope")
    ap.add_argument("--threads", type=int, default=None, help="EAGLE_APP_THREADS for the server")
    ap.add_argument("--json-out", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the server's temporary folder (and its log)")
    a = ap.parse_args(argv)
    a.depth, a.top_k, a.total = map(int, a.tree.split(","))
    return measure(a)


if __name__ == "__main__":
    main()
