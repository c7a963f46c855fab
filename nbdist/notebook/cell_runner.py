"""Running one cell as the ``worker_fn`` of several tasks (``%%cluster``).

Each selected task gets a thread with its own default graph and its worker
context (``nd.distribute.get_current_worker_context()``: task, target,
``is_chief``, ``wait_for_other_workers``), and its own copy of the user's
namespace. What a task prints goes to that task's output (stdout and stderr
are routed by thread while the cell runs). The value of the cell's last
expression is the task's result; an exception is the task's error, with the
traceback from the cell's own frames. No IPython here: the magic draws it.
"""

from __future__ import annotations

import ast
import ctypes
import itertools
import linecache
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field

__all__ = ["TaskRun", "run_cell_on_tasks", "select_tasks"]

_cell_numbers = itertools.count(1)


@dataclass
class TaskRun:
    """One task's run of the cell."""

    job: str
    index: int
    target: str = ""
    status: str = "pending"  # pending, running, done, error, timed out
    result: object = None
    error: BaseException | None = None
    traceback: str = ""
    output: list = field(default_factory=list)  # (stream name, text)
    seconds: float = 0.0
    timed_out: bool = False

    @property
    def name(self) -> str:
        return f"{self.job}:{self.index}"

    @property
    def text(self) -> str:
        return "".join(t for _, t in self.output)


def select_tasks(cluster_spec, tasks=None) -> list[tuple[str, int]]:
    """The tasks a ``%%cluster`` cell runs on: ``tasks`` is a list of jobs
    (``worker``) and tasks (``worker:1``); by default the chief and workers (as
    ``run_distribute_coordinator``), or every task if there are none."""
    from nbdist.notebook.control import ClusterCommandError, parse_task

    jobs = cluster_spec.jobs
    if not tasks:
        chosen = [j for j in ("chief", "worker") if j in jobs] or list(jobs)
        return [(j, i) for j in chosen for i in cluster_spec.task_indices(j)]
    out = []
    for item in tasks:
        for part in str(item).replace(",", " ").split():
            if ":" in part or part.startswith("/job:"):
                key = parse_task(part, cluster_spec)
                if key not in out:
                    out.append(key)
            elif part in jobs:
                for i in cluster_spec.task_indices(part):
                    if (part, i) not in out:
                        out.append((part, i))
            else:
                raise ClusterCommandError(
                    f"the cluster has no job '{part}' (jobs: {', '.join(jobs)})"
                )
    return out


class _ThreadRouter:
    """A ``sys.stdout``/``sys.stderr`` stand-in sending each task thread's
    writes to that task and everything else to the real stream."""

    def __init__(self, real, name: str, routes: dict):
        self._real = real
        self._name = name
        self._routes = routes

    def write(self, text):
        fn = self._routes.get(threading.get_ident())
        if fn is None:
            return self._real.write(text)
        fn(self._name, text)
        return len(text)

    def flush(self):
        if threading.get_ident() not in self._routes:
            self._real.flush()

    def isatty(self):
        return False

    def __getattr__(self, name):
        return getattr(self._real, name)


def _compile(source: str, filename: str):
    """(statements code, last-expression code or None)."""
    tree = ast.parse(source, filename, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
        last = compile(last, filename, "eval")
    return compile(tree, filename, "exec"), last


def _cell_traceback(exc: BaseException, filename: str) -> str:
    """The traceback from the first frame of the cell on."""
    frames = traceback.extract_tb(exc.__traceback__)
    start = next((i for i, f in enumerate(frames) if f.filename == filename), 0)
    lines = ["Traceback (most recent call last):\n"]
    lines += traceback.format_list(frames[start:])
    lines += traceback.format_exception_only(type(exc), exc)
    return "".join(lines)


def _interrupt(thread: threading.Thread, exc_type=TimeoutError):
    """Raises ``exc_type`` in ``thread`` at its next Python instruction."""
    if thread.ident is not None and thread.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(thread.ident), ctypes.py_object(exc_type)
        )


def run_cell_on_tasks(
    source: str,
    cluster_spec,
    targets: dict,
    namespace: dict,
    *,
    tasks=None,
    timeout: float | None = None,
    on_change=None,
    barrier_factory=None,
) -> list[TaskRun]:
    """Runs ``source`` once per task, each in its own thread, and returns the
    ``TaskRun``s (in task order) when all have finished or ``timeout`` passed.

    ``targets`` maps ``(job, index)`` to a session target. ``on_change(run)`` is
    called (from the task's thread) when a run's status or output changes.
    ``barrier_factory(participants, cluster_spec, base_id)`` makes the barrier
    behind ``wait_for_other_workers`` (default: one of the coordination
    service, see ``worker_context``).
    """
    from nbdist.framework.ops import Graph
    from nbdist.notebook.worker_context import make_barrier, make_context

    selected = select_tasks(cluster_spec, tasks)
    number = next(_cell_numbers)
    filename = f"<%%cluster cell {number}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    code, last = _compile(source, filename)
    runs = [TaskRun(job, i, targets.get((job, i), "")) for job, i in selected]
    names = [f"/job:{r.job}/replica:0/task:{r.index}" for r in runs]
    barrier = (barrier_factory or make_barrier)(
        names, cluster_spec, f"%%cluster/{number}"
    )
    routes: dict = {}
    notify = on_change or (lambda run: None)

    def body(run: TaskRun):
        def out(name, text):
            run.output.append((name, text))
            notify(run)

        routes[threading.get_ident()] = out
        run.status = "running"
        notify(run)
        start = time.monotonic()
        ns = dict(namespace)
        ctx = make_context(cluster_spec, run.job, run.index, barrier)
        try:
            with Graph().as_default(), ctx:
                exec(code, ns)  # noqa: S102 - the user's own cell
                if last is not None:
                    run.result = eval(last, ns)
            run.status = "done"
        except BaseException as e:  # noqa: BLE001 - reported in the task's tab
            run.error = e
            run.traceback = _cell_traceback(e, filename)
            run.status = "timed out" if run.timed_out else "error"
            barrier.abort()
        finally:
            run.seconds = time.monotonic() - start
            run.namespace = ns
            routes.pop(threading.get_ident(), None)
            notify(run)

    real_out, real_err = sys.stdout, sys.stderr
    sys.stdout = _ThreadRouter(real_out, "stdout", routes)
    sys.stderr = _ThreadRouter(real_err, "stderr", routes)
    threads = [
        threading.Thread(
            target=body, args=(r,), daemon=True, name=f"nbdist-cell-{r.name}"
        )
        for r in runs
    ]
    try:
        for t in threads:
            t.start()
        end = None if timeout is None else time.monotonic() + timeout
        try:
            for t in threads:
                while t.is_alive():
                    left = None if end is None else end - time.monotonic()
                    if left is not None and left <= 0:
                        break
                    # Short joins: a blocking join() is not interruptible (the
                    # kernel's KeyboardInterrupt) on every platform.
                    t.join(0.05 if left is None else min(0.05, left))
        except KeyboardInterrupt:
            for t in threads:
                _interrupt(t, KeyboardInterrupt)
            for t in threads:
                t.join(2.0)
            raise
        for t, r in zip(threads, runs):
            if t.is_alive():
                r.timed_out = True
                r.status = "timed out"
                notify(r)
                _interrupt(t, TimeoutError)
        for t in threads:
            if t.is_alive():
                t.join(1.0)
    finally:
        if isinstance(sys.stdout, _ThreadRouter):
            sys.stdout = real_out
        if isinstance(sys.stderr, _ThreadRouter):
            sys.stderr = real_err
        barrier.close()
    return runs
