"""Helpers for benchmarks that train between-graph on one process per task
(bench_training.py, bench_conv.py): a child process spoken to line by line, the
timed window its workers step in, and the chief's variable initialisation.

Imports only the standard library, so TensorFlow's interpreter can load it too.

The window protocol: each worker child steps in a loop (``step_in_window``) and
prints ``warm <monotonic time>`` once warmed up; the parent (``time_window``)
waits for every worker's ``warm``, lets ``seconds`` pass, then writes
``"t0 t1"`` to each worker's stdin; each worker stops and counts the steps it
finished inside [t0, t1] (time stamps on the system-wide monotonic clock) and
prints ``steps <n> ...``.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time

from _children import stop_by_pid


class Task:
    """One child process (``cmd``); its stdout lines are read by a thread so that
    waiting on a silent child is bounded; stopped by PID (SIGTERM, SIGKILL)."""

    def __init__(self, name: str, cmd: list[str], env: dict, cwd=None):
        self.name = name
        self.err = tempfile.TemporaryFile("w+")  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(
            cmd,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.err,
            text=True,
        )
        self.pid = self.proc.pid
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        with contextlib.suppress(ValueError, OSError):
            for line in self.proc.stdout:
                self.lines.put(line)
        self.lines.put("")

    def expect(self, word: str, deadline: float) -> list[str]:
        """The fields after ``word`` of the child's next line starting with it."""
        with contextlib.suppress(queue.Empty):
            while (left := deadline - time.monotonic()) > 0:
                line = self.lines.get(timeout=left)
                if not line:
                    break
                if line.startswith(word + " ") or line.strip() == word:
                    return line.split()[1:]
        stop_by_pid(self.proc)
        self.err.seek(0)
        tail = self.err.read()[-2000:]
        self.stop()
        raise RuntimeError(f"{self.name} did not report {word!r}; stderr:\n{tail}")

    def stop(self):
        stop_by_pid(self.proc)
        for f in (self.proc.stdin, self.proc.stdout, self.err):
            with contextlib.suppress(Exception):
                f.close()


def cpu_seconds(pid: int) -> float:
    """user + system CPU seconds of a process (Linux)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_for_chief(sess, init, uninitialized, index: int, timeout: float) -> None:
    """Worker 0 (the chief) runs ``init``; the others poll
    ``report_uninitialized_variables`` until it is empty, as TF1 programs do."""
    if index == 0:
        sess.run(init)
        return
    deadline = time.monotonic() + timeout
    while len(sess.run(uninitialized)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"worker {index}: variables never initialised")
        time.sleep(0.05)


def step_in_window(run_step, warmup: float, min_warm_steps: int = 10) -> int:
    """Call ``run_step(step)`` until the parent sends the window (or closes
    stdin); the number of steps that finished inside the window."""
    stop = threading.Event()
    window: list[float] = []

    def read_window():
        line = sys.stdin.readline()  # "t0 t1" from the parent, or EOF
        window.extend(float(t) for t in line.split())
        stop.set()

    threading.Thread(target=read_window, daemon=True).start()
    stamps: list[float] = []
    step = 0
    t_warm = time.monotonic() + warmup
    while not stop.is_set():
        run_step(step)
        step += 1
        now = time.monotonic()
        stamps.append(now)
        if t_warm is not None and now >= t_warm and step >= min_warm_steps:
            print(f"warm {now}", flush=True)
            t_warm = None
    return bisect.bisect(stamps, window[1]) - bisect.bisect(stamps, window[0])


def time_window(workers: list[Task], pids: dict[str, int], seconds: float,
                deadline: float) -> tuple[list[list[str]], dict[str, float]]:
    """Run the window over ``workers`` (each warm by ``deadline``): the fields
    after ``steps`` each worker reported, and the CPU seconds each process of
    ``pids`` spent in the window."""
    t0 = max(float(w.expect("warm", deadline)[0]) for w in workers)
    t0 = max(t0, time.monotonic())
    cpu0 = {k: cpu_seconds(p) for k, p in pids.items()}
    time.sleep(seconds)  # the window: the workers time-stamp their steps
    cpu1 = {k: cpu_seconds(p) for k, p in pids.items()}
    t1 = t0 + seconds
    for w in workers:
        w.proc.stdin.write(f"{t0} {t1}\n")
        w.proc.stdin.flush()
    reports = [w.expect("steps", time.monotonic() + 60) for w in workers]
    return reports, {k: cpu1[k] - cpu0[k] for k in pids}


def answer_window_while_stepping(run_step, warmup: float,
                                 min_warm_steps: int = 10) -> None:
    """As ``step_in_window``, but the window is answered (``steps <n>``) by the
    thread reading it while ``run_step(step)`` keeps being called, until the
    parent stops the process. For programs whose workers wait on each other
    (synchronous replicas): a worker that stopped stepping could leave the
    others blocked in a step, never to report."""
    stamps: list[float] = []

    def answer():
        line = sys.stdin.readline()  # "t0 t1" from the parent, or EOF
        if not line.split():
            return
        t0, t1 = (float(t) for t in line.split())
        done = list(stamps)
        print(f"steps {bisect.bisect(done, t1) - bisect.bisect(done, t0)}", flush=True)

    threading.Thread(target=answer, daemon=True).start()
    step = 0
    t_warm: float | None = time.monotonic() + warmup
    while True:
        run_step(step)
        step += 1
        now = time.monotonic()
        stamps.append(now)
        if t_warm is not None and now >= t_warm and step >= min_warm_steps:
            print(f"warm {now}", flush=True)
            t_warm = None
