"""Building the C kernels (smallgemm.c, attention.c and attention512.c, layer.c, rows.c, compact.c,
gemv8.c) once per machine with the system C compiler.

The shared library is cached under the engine's cache directory, named by a hash of the sources
and flags, so an edit rebuilds it and machines never share a stale one. It links the process's
OpenMP runtime (libgomp, the one torch loads), so its threads are torch's threads.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import subprocess

import torch

from ...environment import cache_root, flag, value

HERE = os.path.dirname(__file__)
SOURCES = [os.path.join(HERE, name)
           for name in ("smallgemm.c", "attention.c", "attention512.c", "layer.c", "rows.c", "compact.c", "gemv8.c")]
HEADERS = [os.path.join(HERE, "vecmath.h")]  # in the build's hash too
# -ffp-contract=off: no silent a*b+c -> fma fusion, so the C expressions round the same everywhere
CFLAGS = ["-O3", "-mavx2", "-mfma", "-mf16c", "-ffp-contract=off", "-fopenmp", "-shared", "-fPIC"]


def cache_dir() -> str:
    return os.path.join(cache_root(), "kernels")


def cpu_model() -> str:
    """The CPU's name, with its family and model numbers on x86 ("AMD EPYC (family 25, model 17)"): a
    virtual machine may name its CPU no better than "AMD EPYC", and machines of one name differ in speed."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                fields.setdefault(key.strip(), value.strip())
                if not line.strip():
                    break  # the first processor's block is enough
    except OSError:
        pass
    name = fields.get("model name") or platform.processor() or platform.machine()
    if fields.get("cpu family") and fields.get("model"):
        name += f" (family {fields['cpu family']}, model {fields['model']})"
    return name


def _has_avx2_fma() -> bool:
    if platform.machine() not in ("x86_64", "AMD64"):
        return False
    return torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")  # AVX2 implies FMA and F16C on x86 CPUs torch supports


_LIB: list = []  # [ctypes library or None, reason]


PORTABLE_ENV = "EAGLE_PORTABLE"  # "1": no C kernel at all, the portable path (cpu/options.py)


def portable_forced() -> bool:
    """Is EAGLE_PORTABLE on (1 / true / yes / on)? Any value outside eagle_core.environment's yes/no
    values is a SettingError naming it."""
    return flag(PORTABLE_ENV)


def compile_kernels(path: str, defines: tuple[str, ...] = ()):
    """Compile every kernel source into the shared library `path` (written under a temporary name,
    then moved, so a reader never sees half a file), with extra -D `defines` (a measurement's
    variant), and load it with each function's argument types declared."""
    tmp = f"{path}.{os.getpid()}.tmp"
    cc = value("CC") or "cc"
    subprocess.run([cc, *CFLAGS, *(f"-D{d}" for d in defines), "-o", tmp, *SOURCES, "-lm"], check=True,
                   capture_output=True, timeout=120)
    os.replace(tmp, path)
    return _declared(ctypes.CDLL(path))


def _declared(lib):
    i64, vp, f32 = ctypes.c_int64, ctypes.c_void_p, ctypes.c_float
    lib.pack_weight.argtypes = [vp, i64, i64, vp]
    lib.smallgemm.argtypes = [vp, i64, i64, vp, i64, i64, vp, vp, i64, ctypes.c_int]
    lib.pack_weight_f16.argtypes = [vp, i64, i64, vp]
    lib.smallgemm_f16.argtypes = [vp, i64, i64, vp, i64, i64, vp, vp, i64, ctypes.c_int]
    lib.stream_read.argtypes = [vp, i64, ctypes.c_int]
    lib.stream_read.restype = f32
    lib.attend.argtypes = [vp, vp, vp, vp, vp, i64, i64, i64, i64, i64, i64, f32, ctypes.c_int, ctypes.c_int]
    lib.decoder_layer.argtypes = [vp, i64, i64, i64, i64, i64, i64, vp, f32, vp, f32, vp, vp, vp, vp, vp, vp,
                                  vp, vp, vp, vp, vp, vp, i64, i64, vp, f32, ctypes.c_int, vp, i64,
                                  ctypes.c_int]
    lib.decoder_layer.restype = ctypes.c_int
    lib.decoder_layers.argtypes = [vp, i64, i64, i64, i64, i64, i64, vp, i64, vp, vp, i64, vp, ctypes.c_int]
    lib.decoder_layers.restype = ctypes.c_int
    lib.layer_set_qblocks.argtypes = [vp]  # qblocks.c's qb_matmul, for the gguf format's products
    lib.layer_has_qblocks.restype = ctypes.c_int
    lib.row_stats.argtypes = [vp, i64, i64, i64, vp, vp, vp, ctypes.c_int]
    lib.row_stats.restype = ctypes.c_int
    lib.row_topk.argtypes = [vp, i64, i64, i64, ctypes.c_int, vp, vp]
    lib.row_topk.restype = ctypes.c_int
    lib.move_rows.argtypes = [vp, vp, vp, vp, vp, i64, i64, vp, i64]
    lib.gemv8.argtypes = [vp, i64, i64, vp, vp, i64, i64, vp, i64, ctypes.c_int]
    lib.gemv8.restype = ctypes.c_int
    lib.gemv8_int16.argtypes = [i64]
    lib.gemv8_allow_int16.argtypes = [ctypes.c_int]
    lib.head_pass.argtypes = [vp, vp, vp, i64, ctypes.c_int, i64, i64, vp, vp, i64, vp, vp, i64, i64, vp, vp, i64,
                              ctypes.c_int, vp, vp, ctypes.c_int]
    lib.head_pass.restype = ctypes.c_int
    lib.lm_top.argtypes = [vp, vp, i64, ctypes.c_int, vp, vp, ctypes.c_int]
    lib.lm_top.restype = ctypes.c_int
    lib.gemv8_int16.restype = ctypes.c_int
    lib.smallgemm_set_blocking.argtypes = [ctypes.c_int, ctypes.c_int]
    lib.smallgemm_set_blocking.restype = ctypes.c_int
    lib.smallgemm_get_blocking.argtypes = [vp]
    lib.smallgemm_get_blocking.restype = ctypes.c_int
    lib.attention_wide.argtypes = [ctypes.c_int]
    lib.attention_wide.restype = ctypes.c_int
    return lib


def library():
    """The compiled smallgemm kernel (ctypes), or None with the reason in `library_error()`."""
    if _LIB:
        return _LIB[0]
    lib, why = None, ""
    if portable_forced():
        why = f"{PORTABLE_ENV}=1: the portable path, no C kernels"
    elif not _has_avx2_fma():
        why = f"needs an x86-64 CPU with AVX2 and FMA (this is {platform.machine()}, "
        why += f"{torch.backends.cpu.get_cpu_capability()})"
    else:
        digest = hashlib.sha256(source_bytes() + " ".join(CFLAGS).encode()).hexdigest()[:16]
        path = os.path.join(cache_dir(), f"cpu-kernels-{digest}.so")
        try:
            if os.path.exists(path):
                lib = _declared(ctypes.CDLL(path))
            else:
                os.makedirs(cache_dir(), exist_ok=True)
                lib = compile_kernels(path)
        except (OSError, subprocess.SubprocessError) as e:
            why, lib = build_failure(e), None
    _LIB[:] = [lib, why]
    return lib


def build_failure(e: Exception) -> str:
    """Why the kernels could not be built or loaded, in words a user can act on (the CLI's line and the
    page say it, eagle_core/cpu/status.py), the compiler's first error line kept."""
    cc = value("CC") or "cc"
    err = (getattr(e, "stderr", b"") or b"").decode(errors="replace").strip().splitlines()
    detail = f": {err[0][:160]}" if err else ""
    if isinstance(e, FileNotFoundError):
        return f"could not build the CPU kernels: no C compiler ({cc!r} not found)"
    if isinstance(e, subprocess.CalledProcessError):
        return f"could not build the CPU kernels: the C compiler {cc!r} failed (exit {e.returncode}){detail}"
    if isinstance(e, subprocess.TimeoutExpired):
        return f"could not build the CPU kernels: the C compiler {cc!r} took over {e.timeout:.0f} s"
    return f"could not build or load the CPU kernels: {e}{detail}"


def source_bytes() -> bytes:
    out = b""
    for path in SOURCES + HEADERS:
        with open(path, "rb") as f:
            out += f.read()
    return out


def library_error() -> str:
    library()
    return _LIB[1]
