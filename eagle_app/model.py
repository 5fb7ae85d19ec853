"""The shared read-only model: loaded once, on the engine thread, and shared by every user.
`MODEL` is the app's one holder (nothing loads until `MODEL.start()`)."""
from __future__ import annotations

import gc
import html
import os
import re
import threading
import time
from concurrent.futures import Future

import torch

from eagle_core import Engine, load_engine
from eagle_core.cpu import PathStatus, path_status
from eagle_core.cpu.status import DOC
from eagle_core.environment import value
from eagle_core.drafting.shipped import DEFAULT_HEAD3_DIR, DEFAULT_HEAD_DIR
from eagle_core.target.gpu_presence import cached_mismatch
from eagle_core.target import DEFAULT_HUB_ID, DEFAULT_MODEL

from . import zerogpu
from .i18n import APP_TEXT, FALLBACK_ZH
from .engine_thread import ENGINE_THREAD
from .tree_advice import choice_note, page_choice


class ModelHolder:
    """The read-only engine, loaded once in a background thread and shared by every user."""

    def __init__(self, model: str | None = None, head: str | None = None):
        self.model, self.head = model, head
        self.engine: Engine | None = None
        self.error: str | None = None
        self.ready = threading.Event()  # set when loaded OR failed
        self._job: Future | None = None  # the loading job on ENGINE_THREAD
        self._lock = threading.Lock()
        self.t0 = self.load_s = 0.0
        self.choice: dict | None = None  # head3, head3_layer_ids, methods of a pair picked in the page
        self.tree = None  # the TreeChoice the page opens with (tree_advice.page_choice), once loaded

    def start(self) -> "ModelHolder":
        """Start loading on the engine thread; on ZeroGPU load here and now (zerogpu.py: at start-up)."""
        with self._lock:
            if self._job is None and not self.ready.is_set():
                self.t0 = time.perf_counter()
                if zerogpu.ZERO:
                    self._job = Future()
                    self._load()
                    self._job.set_result(None)
                else:
                    self._job = ENGINE_THREAD.submit(self._load)
        return self

    def switch(self, model: str | None, head: str | None = None, head3: str | None = None, layer_ids: str = "inputs",
               methods: tuple[str, ...] | None = None, rope_theta: float | None = None) -> "ModelHolder":
        """Load another target and heads in place of these (the model picker, eagle_app/picker.py, which holds
        the decode slot meanwhile). The old engine is let go first, so that both never share the GPU."""
        with self._lock:
            if self._job is not None and not self.ready.is_set():
                raise RuntimeError("the model is still loading")
            self.model, self.head = model, head
            self.choice = dict(head3=head3, head3_layer_ids=layer_ids, methods=methods, head3_rope_theta=rope_theta)
            self.engine = self.error = self.tree = None
            self._job = None
            self.ready.clear()
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        return self.start()

    def set_engine(self, engine: Engine) -> None:
        """Install an already-built engine (tests)."""
        self.engine, self.error = engine, None
        self.ready.set()

    def _load(self) -> None:
        try:
            if value("EAGLE_APP_THREADS"):  # torch CPU threads, as the CLI's --threads
                torch.set_num_threads(value("EAGLE_APP_THREADS"))
            choice = self.choice or dict(head3=value("EAGLE_APP_HEAD3"),
                                         head3_layer_ids=value("EAGLE_APP_HEAD3_LAYER_IDS") or "inputs",
                                         head3_rope_theta=value("EAGLE_APP_HEAD3_ROPE_THETA"))  # docs/gpu.md
            self.engine = load_engine(self.model, self.head, dtype=value("EAGLE_APP_DTYPE"),
                                      warm=not zerogpu.ZERO, **choice)
            # the tree for this machine and format, on this thread (decodes run here, with its threads);
            # not on ZeroGPU, whose GPU is lent to one decorated call at a time (zerogpu.py)
            self.tree = None if zerogpu.ZERO else page_choice(self.engine)
        except Exception as e:  # reported in the page; the app still replays traces
            self.error = f"{type(e).__name__}: {e}"
        self.load_s = time.perf_counter() - self.t0
        self.ready.set()

    def status(self, lang: str = "en") -> str:
        if self.engine is not None:
            note = choice_note(self.tree, lang)
            return model_line(self.engine, self.load_s, lang) + (f"\n\n{note}" if note else "")
        if self.error:
            return APP_TEXT("model.failed", lang, err=self.error)
        if self._job is None:
            return APP_TEXT("model.loading", lang, since="")
        return APP_TEXT("model.loading", lang, since=APP_TEXT("model.since", lang, s=time.perf_counter() - self.t0))

    def status_plain(self, lang: str = "en") -> str:
        """The status line as plain text (a console, a progress bar): no Markdown bold, no hover element."""
        return re.sub(r"\s*<[^>]*>[^<]*</[^>]*>|<[^>]*>", "", self.status(lang)).replace("**", "").strip()


SHIPPED = {os.path.relpath(d, os.path.dirname(os.path.dirname(DEFAULT_HEAD_DIR))) for d in (DEFAULT_HEAD_DIR, DEFAULT_HEAD3_DIR)}


def model_line(engine: Engine, load_s: float, lang: str = "en") -> str:
    """The model's line in plain words ("SmolLM2-135M-Instruct on this CPU, ready in 4 s · draft head:
    EAGLE-2, trained by this project"), the technical details (parameters, dtype, kernels, head
    paths) in a hover: the element's title, shown by the browser on hover, and read by screen readers."""
    t = engine.target
    name = DEFAULT_HUB_ID.split("/")[-1] if t.name == DEFAULT_MODEL else os.path.basename(str(t.name).rstrip("/"))
    device = str(t.device).split(":")[0]
    heads = [(label, n) for label, n in (("EAGLE-2", engine.head_name), ("EAGLE-3", engine.head3_name)) if n]
    if not heads:
        head = APP_TEXT("model.no_head", lang)
    elif any("random" in n for _, n in heads):
        head = " + ".join(label for label, _ in heads) + APP_TEXT("model.untrained", lang)
    else:
        who = APP_TEXT("model.ours" if all(n in SHIPPED for _, n in heads) else "model.yours", lang)
        head = APP_TEXT("model.and", lang).join(label for label, _ in heads) + who
    details = APP_TEXT("model.details", lang, target=t.describe(), heads="; ".join(f"{label}: {n}" for label, n in heads)
                  or APP_TEXT("model.no_head", lang))
    where = APP_TEXT(f"model.on_{device}" if device in ("cpu", "cuda", "mps") else "model.on_other", lang, device=device)
    loaded = APP_TEXT("model.loaded", lang, s=load_s) if load_s > 0 else ""  # 0: an engine installed ready-made (tests)
    line = APP_TEXT("model.ready", lang, model=name, where=where, loaded=loaded, head=head,
               title=html.escape(details, quote=True), more=APP_TEXT("model.more", lang))
    unused = cached_mismatch() if device == "cpu" else None  # a GPU torch cannot use: never silently the CPU
    line += "\n\n" + APP_TEXT("model.gpu_unused", lang, msg=html.escape(unused)) if unused else ""
    return line + path_note(t, lang)


def path_note(target, lang: str = "en") -> str:
    """The CPU path's fallback line (eagle_core.cpu.path_line: which path runs, why, about how much
    slower), as the model line and the hardware panel show it, in the page's language; "" on the engine's
    kernels or a GPU."""
    if not hasattr(target, "fast"):  # (test doubles carry no FastPath)
        return ""
    st = path_status(target)
    line = fallback_zh(st) if lang == "zh" and st.kind else st.line()
    return "\n\n⚠ " + html.escape(line, quote=False) if line else ""


# each fallback kind's path in Chinese (eagle_app/i18n.FALLBACK_ZH); the reason's key is the kind itself
_ZH_PATH = {"portable_env": "portable", "stock": "portable", "dtype": "torch", "forced": "backend",
            "no_library": "torch_named", "rejected": "partial"}


def fallback_zh(st: PathStatus) -> str | None:
    """PathStatus.line() in Chinese, from its kind and args (a compiler's own message stays as it came)."""
    if not st.fallback:
        return None
    z = FALLBACK_ZH
    cost = z["cost"].format(x=st.slower, doc=DOC) if st.slower else ""
    return z["line"].format(path=z[_ZH_PATH[st.kind]].format(**st.args), reason=z[st.kind].format(**st.args),
                            cost=cost, same=z["same" if st.identical else "may_part"])


def model_from_env() -> ModelHolder:
    """EAGLE_APP_MODEL / EAGLE_APP_HEAD / EAGLE_APP_HEAD3 override the default target and heads (a hub id
    or a directory); EAGLE_APP_HEAD3_LAYER_IDS=outputs for an EAGLE-3 head trained with SGLang or SpecForge."""
    return ModelHolder(value("EAGLE_APP_MODEL"), value("EAGLE_APP_HEAD"))


MODEL = model_from_env()
