"""Is this machine quiet enough to time on? Its load per core, the share of the CPUs other processes use
while we only wait, and a calibrated one-row forward against this CPU's own: the checks a recorder of shipped
measurements (scripts/record_traces.py) applies before it writes."""
from __future__ import annotations

import json
import os
import time

MAX_LOAD = 0.5  # 1-minute load per core at start
MAX_OTHERS = 0.25  # share of all CPUs other processes use while the recorder waits
MAX_SLOWDOWN = 1.5  # calibrated t(1) over this CPU's own
T1_BYTES_PER_S = 10e9  # no record of this CPU: t(1) may take what reading the weights at this rate takes

def load_per_core() -> float | None:
    try:
        return round(os.getloadavg()[0] / (os.cpu_count() or 1), 2)
    except (AttributeError, OSError):
        return None


def cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies of all CPUs from /proc/stat (steal counts as busy: a neighbour took it)."""
    try:
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = v[3] + (v[4] if len(v) > 4 else 0)
    return sum(v) - idle, sum(v)


def others_cpu(seconds: float = 1.0) -> float | None:
    """Share of all CPUs in use while this process only sleeps (after a pause for its threads to settle)."""
    time.sleep(0.3)
    a = cpu_times()
    time.sleep(seconds)
    b = cpu_times()
    if a is None or b is None or b[1] <= a[1]:
        return None
    return round((b[0] - a[0]) / (b[1] - a[1]), 2)


def busy_reasons(load: float | None, others: float | None, calib_ms: float, ref_ms: float,
                 max_load: float = MAX_LOAD, check_load: bool = True) -> list[str]:
    """Why the machine is too busy to time on ([] if quiet)."""
    out = []
    if check_load and load is not None and load > max_load:
        out.append(f"load {load:.2f} per core (at most {max_load:g})")
    if others is not None and others > MAX_OTHERS:
        out.append(f"other processes use {others:.0%} of the CPUs (at most {MAX_OTHERS:.0%})")
    if calib_ms > MAX_SLOWDOWN * ref_ms:
        out.append(f"t(1) calibrates at {calib_ms:.1f} ms, over {MAX_SLOWDOWN:g}x this CPU's own {ref_ms:.1f} ms")
    return out


def reference_t1(target, cpu: str, recorded_path: str, root: str = ".") -> tuple[float, str]:
    """This CPU's own t(1): the hardware record's if it names this CPU model and was recorded quiet, else
    the time reading the target's weights at T1_BYTES_PER_S takes."""
    try:
        with open(recorded_path, encoding="utf-8") as f:
            m = json.load(f)
        load = (m.get("machine") or {}).get("loadavg_1m")
        cores = (m.get("machine") or {}).get("cpu_count") or 1
        if m.get("hardware") == cpu and (load is None or load / cores <= MAX_LOAD):
            return round(m["forward_ms"]["1"], 2), f"{os.path.relpath(recorded_path, root)} ({m.get('date')})"
    except (OSError, ValueError, KeyError, TypeError):
        pass
    size = sum(p.numel() * p.element_size() for p in target.model.parameters())
    return round(1e3 * size / T1_BYTES_PER_S, 2), f"the weights ({size / 1e6:.0f} MB) read at {T1_BYTES_PER_S / 1e9:g} GB/s"
