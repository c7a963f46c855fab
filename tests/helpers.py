"""What the tests share (``import helpers`` from any test file; tests/ is on
``sys.path`` once the root ``conftest.py`` is loaded).

* Places: ``ROOT`` (the repository), ``TESTS_DIR``, ``FIXTURES`` (files written
  by TensorFlow), and ``put_test_dirs_on_path()``: tests live in one directory
  per layer (``tests/<layer>/test_*.py``, basenames unique across ``tests/``),
  and a test module may import another's helpers by basename
  (``from test_gradients import check_gradient``) whichever directory holds it.
* Waiting: ``wait_for(predicate, timeout, what)``, the one polling loop;
  ``pid_alive`` and ``wait_gone`` for processes; ``free_port``.
* Servers: the ``NbdistTestSleep`` test op (``register_test_ops``,
  ``sleep_op``), cluster dicts on free ports (``local_cluster``), an
  ``nbdist-server`` in its own process (``ServerProcess``), raw RPCs.
* Blocks several tests repeat: a Jupyter kernel spec for this interpreter
  (``write_kernel_spec``), the counter and ``@nd.function`` step scheduled on a
  ``ClusterCoordinator`` (``counting_step``), and the single-process oracle of
  synchronous training on averaged gradients (``averaged_gradient_descent``).

Nothing here is a fixture: fixtures live in ``conftest.py``.
"""

from __future__ import annotations

import gc
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent
ROOT = TESTS_DIR.parent
FIXTURES = TESTS_DIR / "fixtures" / "tf"
START_TIMEOUT_S = 60.0

_SERVER_WITH_TEST_OPS = (
    "import sys; sys.path.insert(0, {tests!r}); import helpers; "
    "helpers.register_test_ops(); from nbdist.server import main; "
    "sys.exit(main(sys.argv[1:]))"
)


# -- where tests live ----------------------------------------------------------------
def layer_dirs() -> list[Path]:
    """tests/ and each of its directories that holds test files."""
    return [TESTS_DIR] + sorted(
        d for d in TESTS_DIR.iterdir() if d.is_dir() and any(d.glob("test_*.py")))


def put_test_dirs_on_path() -> None:
    """Makes every test module importable by its basename, as pytest imports it
    (rootdir-relative "prepend" mode): the same module object either way."""
    for d in reversed(layer_dirs()):
        if str(d) not in sys.path:
            sys.path.insert(0, str(d))


# -- waiting -------------------------------------------------------------------------
def in_threads(n: int, fn, bound_s: float = 120.0) -> list:
    """``fn(i)`` for i < n, each in its own thread (one per task, as members of
    a collective run); their results, or the first one's error."""
    out, errs = [None] * n, []

    def run(i):
        try:
            out[i] = fn(i)
        except Exception as e:  # noqa: BLE001 - re-raised below
            errs.append(e)

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(bound_s)
    assert not any(t.is_alive() for t in threads), "a task never finished"
    if errs:
        raise errs[0]
    return out


def wait_for(predicate, timeout: float, what: str, interval: float = 0.01):
    """``predicate()``'s first true value, polled every ``interval`` s; an
    AssertionError naming ``what`` after ``timeout`` s. For changes that send no
    event a test could wait on (another process, a daemon, a poll thread)."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)
    return value


def pid_alive(pid: int) -> bool:
    """True while process ``pid`` runs (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("State:"):
                    return "Z" not in line.split()[1]
    except FileNotFoundError:
        return False
    return True


def wait_gone(pids, timeout: float = 30.0, interval: float = 0.05) -> list[int]:
    """The processes of ``pids`` still alive once all exited or ``timeout`` s
    passed (a process's end sends no event here: polled)."""
    deadline = time.monotonic() + timeout
    while (alive := [p for p in pids if pid_alive(p)]) and \
            time.monotonic() < deadline:
        time.sleep(interval)
    return alive


# -- repeated blocks -----------------------------------------------------------------
def write_kernel_spec(jupyter_dir, name: str = "nbdist-test", python: str | None = None,
                      display_name: str = "nbdist tests") -> str:
    """A Jupyter kernel spec ``name`` running ipykernel on ``python`` (this
    interpreter by default), under ``jupyter_dir``/kernels (a JUPYTER_PATH
    entry); returns ``name``."""
    spec = Path(jupyter_dir) / "kernels" / name
    spec.mkdir(parents=True)
    argv = [python or sys.executable, "-m", "ipykernel_launcher", "-f",
            "{connection_file}"]
    (spec / "kernel.json").write_text(json.dumps(
        {"argv": argv, "display_name": display_name, "language": "python"}))
    return name


def counting_step(strategy, double: bool = True):
    """``(counter, step)``: a variable ``counter`` (0) made in
    ``strategy.scope()`` and an ``@nd.function`` ``step(x)`` that adds 1 to it
    and returns ``x * 2`` (``x`` with ``double=False``), for scheduling many
    closures on a ``ClusterCoordinator``."""
    import nbdist as nd

    with strategy.scope():
        counter = nd.Variable(0, name="counter")

    if double:
        @nd.function
        def step(x):
            counter.assign_add(1)
            return x * 2
    else:
        @nd.function
        def step(x):
            counter.assign_add(1)
            return x

    return counter, step


def averaged_gradient_descent(batches, w0, b0, lr: float, steps: int):
    """[w, b] after ``steps`` steps of gradient descent, in one process, on the
    average of the gradients of the linear model ``x @ w + b`` (mean squared
    error) over ``batches`` ((x, y) pairs): what synchronous replicas, one
    batch each, must reach."""
    import nbdist as nd

    with nd.Graph().as_default():
        w = nd.Variable(w0, name="w")
        b = nd.Variable(b0, name="b")
        opt = nd.train.GradientDescentOptimizer(lr)
        grads = []
        for x, y in batches:
            loss = nd.reduce_mean(nd.square(nd.matmul(nd.constant(x), w) + b -
                                            nd.constant(y)))
            grads.append([g for g, _ in opt.compute_gradients(loss, [w, b])])
        avg = [(ga + gb) / 2.0 for ga, gb in zip(*grads)]
        train = opt.apply_gradients(list(zip(avg, [w, b])))
        with nd.Session() as s:
            s.run(nd.global_variables_initializer())
            for _ in range(steps):
                s.run(train)
            return s.run([w, b])


# -- a test op -----------------------------------------------------------------------
def register_test_ops():
    """Registers ``NbdistTestSleep`` in this process (idempotent)."""
    from nbdist.executor.kernel import get_kernel_factory, register_kernel
    from nbdist.framework.op_def_registry import get_op_def, register_op

    if get_op_def("NbdistTestSleep") is not None:
        return
    get_kernel_factory("NoOp")  # load the built-in kernels first
    register_op(
        "NbdistTestSleep",
        lambda c: [(c.dtype(0), c.shape(0))],
        attrs={"seconds": ("float", 1.0), "T": ("type", None),
               "ignore_cancel": ("bool", False)},
        num_inputs=1,
        stateful=True,
    )

    @register_kernel("NbdistTestSleep")
    def _sleep_kernel(node):
        seconds = float(node.attrs["seconds"])

        def compute(step, x):
            if node.attrs.get("ignore_cancel"):  # a kernel deaf to its step
                time.sleep(seconds)
                return x
            end = time.monotonic() + seconds
            step.wait(lambda: time.monotonic() >= end, "NbdistTestSleep", time.sleep)
            return x

        return compute


def sleep_op(x, seconds: float, name: str = "sleep", ignore_cancel: bool = False):
    """``x`` after ``seconds`` (a graph op; see ``register_test_ops``); with
    ``ignore_cancel``, a kernel that sleeps on when its step is cancelled."""
    import nbdist as nd

    register_test_ops()
    t = nd.convert_to_tensor(x)
    return t.graph.create_op(
        "NbdistTestSleep",
        [t],
        {"seconds": float(seconds), "T": t.dtype.base_dtype,
         "ignore_cancel": bool(ignore_cancel)},
        name=name,
    ).outputs[0]


# -- /proc of a process ---------------------------------------------------------------
def proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) of process ``pid``, in bytes."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    return out


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid``."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load_factor() -> float:
    """Runnable processes per core, at least 1: on a busy machine (CI's 2 cores,
    scripts/run_under_load.py) wall times stretch by about this much."""
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


# -- ports -------------------------------------------------------------------------
def free_port() -> int:
    """A port of 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nbdist_memfds(pid: int) -> int:
    """nbdist's tensor segments that ``pid`` maps or holds a descriptor of."""
    inodes = set()
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            if "memfd:nbdist-tensor" in line:
                inodes.add(int(line.split()[4]))
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if "memfd:nbdist-tensor" in os.readlink(f"/proc/{pid}/fd/{fd}"):
                inodes.add(os.stat(f"/proc/{pid}/fd/{fd}").st_ino)
        except OSError:
            pass  # closed meanwhile
    return len(inodes)


def local_cluster(**jobs: int) -> dict[str, list[str]]:
    """{"ps": 2, "worker": 1} -> a cluster dict on free ports of 127.0.0.1."""
    return {
        job: [f"localhost:{free_port()}" for _ in range(n)] for job, n in jobs.items()
    }


def cluster_string(cluster: dict) -> str:
    return ",".join(f"{job}|{';'.join(addrs)}" for job, addrs in cluster.items())


# -- server processes ----------------------------------------------------------------
class ServerProcess:
    """An ``nbdist-server`` in its own OS process."""

    def __init__(
        self,
        args: list[str],
        env: dict | None = None,
        test_ops: bool = False,
        wait: bool = True,
    ):
        if test_ops:
            cmd = [
                sys.executable,
                "-c",
                _SERVER_WITH_TEST_OPS.format(tests=str(TESTS_DIR)),
            ] + args
        else:
            cmd = [sys.executable, "-m", "nbdist.server"] + args
        full_env = dict(os.environ, PYTHONUNBUFFERED="1")
        full_env.update(env or {})
        self.args = args
        self.proc = subprocess.Popen(
            cmd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=full_env,
            cwd=ROOT,
            text=True,
        )
        self.pid = self.proc.pid
        self.lines: queue.Queue = queue.Queue()
        self.stderr: list[str] = []
        self._pumps = [
            threading.Thread(
                target=self._pump, args=(self.proc.stdout, self.lines), daemon=True
            ),
            threading.Thread(target=self._pump_err, daemon=True),
        ]
        for t in self._pumps:
            t.start()
        self.banner = None
        if wait:
            self.wait_ready()

    @staticmethod
    def _pump(stream, q):
        for line in stream:
            q.put(line.rstrip("\n"))
        q.put(None)

    def _pump_err(self):
        for line in self.proc.stderr:
            self.stderr.append(line.rstrip("\n"))

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.1)
            except queue.Empty:
                continue
            if line is None:
                self.proc.wait(5)
                raise RuntimeError(
                    f"server exited with {self.proc.returncode}: "
                    + "\n".join(self.stderr[-20:])
                )
            if "listening on" in line:
                self.banner = line
                return line
        raise RuntimeError(
            f"server {self.args} did not start within {timeout} s: "
            + "\n".join(self.stderr[-20:])
        )

    def wait_exit(self, timeout: float) -> int:
        """Its exit code, once it exited and all its output was read."""
        code = self.proc.wait(timeout)
        for t in self._pumps:
            t.join(timeout)
        return code

    def kill(self):
        """SIGKILL, then reap (bounded)."""
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            pass
        self._close_pipes()

    def _close_pipes(self):
        for t in self._pumps:
            t.join(5)
        for stream in (self.proc.stdout, self.proc.stderr):
            try:
                stream.close()
            except Exception:  # noqa: BLE001, S110 - a pump may still hold it
                pass

    def terminate(self, timeout: float = 15.0) -> int | None:
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None



def current_frames() -> dict:
    """``sys._current_frames()`` with the garbage collector held off: CPython
    3.11 may collect inside it while holding the interpreter's thread-list
    lock, and a finalizer that then waits for a lock another thread holds
    deadlocks the process (seen once in a full run: every thread in futex)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return sys._current_frames()
    finally:
        if enabled:
            gc.enable()


def blocked_threads(
    names=("recv_tensor", "recv_blocking", "run_graph", "wait"),
) -> list[str]:
    """Threads of this process whose stack is inside a blocking runtime call."""
    out = []
    frames = current_frames()
    for t in threading.enumerate():
        f = frames.get(t.ident)
        while f is not None:
            code = f.f_code
            if code.co_name in names and "nbdist" in code.co_filename:
                out.append(f"{t.name}: {code.co_name} ({code.co_filename})")
                break
            f = f.f_back
    return out


# -- raw RPCs ----------------------------------------------------------------------
def rpc_methods(with_coordination: bool = True):
    """(service, method, kind, input_type) of every RPC, from the proto
    descriptors; kind is "uu", "us" (server stream) or "su" (client stream)."""
    from nbdist.proto import (
        coordination_service_pb2,
        master_service_pb2,
        worker_service_pb2,
    )

    files = [(master_service_pb2, "MasterService"),
             (worker_service_pb2, "WorkerService")]
    if with_coordination:
        files.append((coordination_service_pb2, "CoordinationService"))
    out = []
    for mod, service in files:
        for m in mod.DESCRIPTOR.services_by_name[service].methods:
            kind = "su" if m.client_streaming else "us" if m.server_streaming else "uu"
            out.append((service, m.name, kind, m.input_type))
    # Reset closes every session: last, so that the others meet live handles.
    out.sort(key=lambda x: x[1] == "Reset")
    return out


def call_raw(channel, service: str, method: str, kind: str, payload: bytes,
             timeout: float = 5.0, metadata=()):
    """Sends raw bytes to a method; returns the response bytes (or list of them)."""
    path = f"/nbdist.{service}/{method}"
    if kind == "us":
        return list(channel.unary_stream(path)(payload, timeout=timeout,
                                               metadata=metadata))
    if kind == "su":
        return channel.stream_unary(path)(iter([payload]), timeout=timeout,
                                          metadata=metadata)
    return channel.unary_unary(path)(payload, timeout=timeout, metadata=metadata)


def tcp_calls(server) -> dict:
    """The calls ``server`` made over the TCP peer path, by (peer, op)."""
    for path, peers in zip(server._paths, server._router.path_peers):
        if path.name == "tcp":
            return dict(peers.calls)
    return {}


def drain(sess, fetch, max_steps: int = 1000) -> list:
    """Runs ``fetch`` until the input ends (``OutOfRangeError``); at most
    ``max_steps`` runs (every drain loop is bounded)."""
    from nbdist import errors

    out = []
    for _ in range(max_steps):
        try:
            out.append(sess.run(fetch))
        except errors.OutOfRangeError:
            return out
    raise AssertionError(f"the input did not end within {max_steps} runs")
