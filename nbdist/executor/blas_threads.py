"""How many threads the BLAS under NumPy's ``matmul`` uses, set after NumPy is
loaded (its ``OPENBLAS_NUM_THREADS`` is only read when the library loads).

A cluster task's kernels run on one host beside the other tasks: an OpenBLAS
pool of one thread per core in each of them spins for a core after every
small ``matmul`` and, on a host with fewer cores than busy threads, makes a
step several times dearer in CPU (a 784x10 MLP step: 0.4 ms with one thread,
7 ms with two on a loaded 2-core machine).

>>> from nbdist.executor import blas_threads
>>> before = blas_threads.get_threads()
>>> n = blas_threads.set_threads(1)
>>> blas_threads.get_threads() == [1] * len(before)
True
>>> _ = [blas_threads.set_threads(k) for k in before[:1]]
"""

from __future__ import annotations

import contextlib
import ctypes
import sys

# The functions of the OpenBLAS builds NumPy and SciPy wheels ship (64-bit and
# 32-bit integer builds, scipy-openblas prefixes) and of MKL.
_PREFIXES = ("scipy_openblas_", "openblas_")
_SUFFIXES = ("64_", "")


def _function(lib, verb: str):
    """``lib``'s ``<verb>_num_threads`` (``set`` or ``get``), or None."""
    for prefix in _PREFIXES:
        for suffix in _SUFFIXES:
            f = getattr(lib, f"{prefix}{verb}_num_threads{suffix}", None)
            if f is not None:
                return f
    return getattr(lib, f"MKL_{verb.capitalize()}_Max_Threads" if verb == "get"
                   else "MKL_Set_Num_Threads", None)


def _loaded_blas_libraries() -> list[str]:
    """Paths of the BLAS libraries loaded in this process (Linux; [] elsewhere)."""
    if not sys.platform.startswith("linux"):
        return []
    paths = set()
    with contextlib.suppress(OSError), open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            name = path.rsplit("/", 1)[-1].lower()
            if path.startswith("/") and ("openblas" in name or "mkl_rt" in name):
                paths.add(path)
    return sorted(paths)


def _libraries():
    for path in _loaded_blas_libraries():
        with contextlib.suppress(OSError):
            yield ctypes.CDLL(path)


def set_threads(n: int) -> int:
    """Sets every loaded BLAS library's thread count to ``n``; returns how many
    libraries it set."""
    count = 0
    for lib in _libraries():
        if (setter := _function(lib, "set")) is not None:
            setter(ctypes.c_int(n))
            count += 1
    return count


def get_threads() -> list[int]:
    """The thread count of every loaded BLAS library that tells it."""
    return [int(getter()) for lib in _libraries()
            if (getter := _function(lib, "get")) is not None]
