"""Shared helpers for the app and viz tests: hand-made traces (no model needed), the default
engine, the launched app, driving the callbacks as Gradio does, and the browser's settings."""
from __future__ import annotations

import threading
import time
from dataclasses import replace
from types import SimpleNamespace

import pytest

from eagle_core.trace import ACCEPTED, NOT_REACHED, REJECTED, CycleRecord, DraftNode, Run
from tests.illustration import illustration_runs


def illustration() -> tuple[Run, Run]:
    return illustration_runs()


def sampled_cycle() -> CycleRecord:
    """Cycle 0 of the illustration, re-labelled as a sampled (point-mass) verification."""
    c = illustration_runs()[0].cycles[0]
    nodes = [replace(n, u=0.3 if n.decision == ACCEPTED else 0.9, p_test=n.p) if n.p is not None and n.index else n
             for n in c.nodes]
    return replace(c, nodes=tuple(nodes), rule="point_mass")


def vanilla_cycle(step: int = 3, text: str = " x") -> CycleRecord:
    root = DraftNode(0, 1, "a", -1, 0, 1.0, 0.0, None, ACCEPTED)
    return CycleRecord(step, 10, (root,), (0,), 2, text, (2,), text, 0.0, 30.0, "greedy", 0.5)


def chain_cycle(decisions=(ACCEPTED, ACCEPTED, REJECTED, NOT_REACHED)) -> CycleRecord:
    """A chain root -> 1 -> 2 -> 3 -> 4 with the given decisions."""
    nodes = [DraftNode(0, 10, "def", -1, 0, 1.0, 0.0, None, ACCEPTED)]
    texts = [" f", "(", "x", "):"]
    for i, d in enumerate(decisions, start=1):
        nodes.append(DraftNode(i, 10 + i, texts[i - 1], i - 1, i, 0.5, -0.7 * i, None if d == NOT_REACHED else 0.4, d))
    acc = tuple([0] + [n.index for n in nodes[1:] if n.decision == ACCEPTED])
    committed = "".join(nodes[i].text for i in acc[1:]) + "\n"
    return CycleRecord(1, 20, tuple(nodes), acc, 99, "\n", tuple(range(len(acc))), committed, 5.0, 40.0, "greedy", 0.9)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


_ENGINE = None


def default_engine():
    """The default target + head, loaded once per test session (~6 s when the weights are cached)."""
    global _ENGINE
    if _ENGINE is None:
        from eagle_core import load_engine

        _ENGINE = load_engine()
    return _ENGINE


class launched_app:
    """Context manager: the real app on 127.0.0.1:port with the default model installed."""

    def __init__(self, port: int):
        self.port = port

    def __enter__(self) -> str:
        import app

        app.MODEL.set_engine(default_engine())
        app.demo.launch(server_name="127.0.0.1", server_port=self.port, prevent_thread_lock=True, quiet=True,
                        **app.LAUNCH)
        self.demo = app.demo
        return f"http://127.0.0.1:{self.port}/"

    def __exit__(self, *exc):
        self.demo.close()


# ---------------------------------------------------------------------- driving the callbacks (no server)
@pytest.fixture(scope="module")
def engine():
    """The default engine installed as the app's model (import it into a test module, with autouse below)."""
    from eagle_app.callbacks import decoding as cb

    e = default_engine()
    cb.MODEL.set_engine(e)
    return e


@pytest.fixture(scope="module", autouse=True)
def _app_model(engine):
    return engine


def req(name: str):
    """What Gradio passes as the request: only the session (the tab) matters to the callbacks."""
    return SimpleNamespace(session_hash=name)


def start_generate(prompt: str, session: str, settings: dict, compare: bool = True):
    """The Generate click as the page sends it: arm (the tab's new run id), then the generate callback."""
    from eagle_app import views as av
    from eagle_app.callbacks import decoding as cb

    run_id = cb.arm(req(session))
    return cb.generate(prompt, *settings.values(), compare, av.new_state(), run_id, request=req(session))


def in_thread(gen):
    """Drive a generate callback in a thread, as Gradio does; -> (thread, its named outputs so far)."""
    from eagle_app import views as av

    outs = []
    t = threading.Thread(target=lambda: outs.extend(av.named(o) for o in gen), daemon=True)
    t.start()
    return t, outs


def wait_for(pred, timeout=60.0) -> bool:
    end = time.perf_counter() + timeout
    while time.perf_counter() < end:
        if pred():
            return True
        time.sleep(0.05)
    return False


def statuses(outs) -> list[str]:
    return [o["status"] for o in list(outs) if "status" in o]


# ---------------------------------------------------------------------- a real browser
CHROMIUM = "/usr/bin/chromium"  # Debian's (apt-get install -y chromium fonts-noto-cjk); never `playwright install`
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
