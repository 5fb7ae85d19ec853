"""This process's folder for downloadable trace files (removed at exit), and the clean-up of
folders that earlier, no longer running processes left behind."""
from __future__ import annotations

import atexit
import os
import shutil
import tempfile

TRACE_PREFIX = "eagle-traces-"


def trace_dir(root: str | None = None) -> str:
    """A fresh folder for this process's downloadable trace files, removed at exit; folders left
    by earlier processes that are no longer running (a crash, a killed server) are removed too."""
    root = root or tempfile.gettempdir()
    for name in os.listdir(root):
        pid = name[len(TRACE_PREFIX):].split("-", 1)[0]
        if name.startswith(TRACE_PREFIX) and (not pid.isdigit() or not _alive(int(pid))):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
    path = tempfile.mkdtemp(prefix=f"{TRACE_PREFIX}{os.getpid()}-", dir=root)
    atexit.register(shutil.rmtree, path, True)
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True
