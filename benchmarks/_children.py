"""Helpers the benchmarks share for the processes they start."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess


def importable(python: str, module: str) -> bool:
    """Whether ``python`` (a path; empty or missing: no) finds ``module``
    (``find_spec``, not an import: importing TensorFlow takes seconds)."""
    if not python or not os.path.exists(python):
        return False
    r = subprocess.run([python, "-c", "import importlib.util, sys; sys.exit("
                        f"importlib.util.find_spec({module!r}) is None)"],
                       env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
                       capture_output=True, timeout=120, check=False)
    return r.returncode == 0


def free_port() -> int:
    """A port free on 127.0.0.1 now (bound, then released for a task to take)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_by_pid(proc: subprocess.Popen) -> None:
    """SIGTERM the child by its PID, SIGKILL it if it lingers, and reap it."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGKILL)
            proc.wait(10)


def print_table(head, rows) -> None:
    """``rows`` (lists of strings) under ``head``, in columns padded to fit."""
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    print(" | ".join(c.ljust(w) for c, w in zip(head, widths)))
    print("-+-".join("-" * w for w in widths))
    for r in rows:
        print(" | ".join(c.ljust(w) for c, w in zip(r, widths)))


def load_note(load0: float) -> str:
    """The machine's load average at the start and now, and its CPUs."""
    return (f"load average {load0:.1f} at the start, {os.getloadavg()[0]:.1f} at "
            f"the end, {os.cpu_count()} CPUs")
