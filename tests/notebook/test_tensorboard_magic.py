"""``%tensorboard`` of ``%load_ext nbdist`` works in a kernel whose PATH lacks
the venv's ``bin`` (JupyterLab started as ``.venv/bin/jupyter lab``): it runs
TensorBoard with the kernel's own interpreter, on 127.0.0.1, serving the
logdir; the same flags again show the same TensorBoard; a TensorBoard that
cannot start is an error the cell shows; and TensorBoard ends with its kernel.
"""

from __future__ import annotations

import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
from helpers import ROOT, pid_alive, wait_gone
from test_training_view import LOSSES, _write_runs

pytestmark = pytest.mark.slow

STRIPPED_PATH = "/usr/bin:/bin"

# An IPython shell (as in a kernel, without the kernel): the magic's display
# prints its text/plain. It waits for a line on stdin before exiting.
SHELL = """\
import sys
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

ip = InteractiveShell.instance()
ip.run_line_magic("load_ext", "nbdist")
logdir = sys.argv[1]
try:
    ip.run_line_magic("tensorboard", f"--logdir {logdir} --port not-a-port")
except UsageError as e:
    print("FAILED:", e, flush=True)
for _ in range(2):
    ip.run_line_magic("tensorboard", f"--logdir {logdir} --load_fast false")
print("READY", flush=True)
sys.stdin.readline()
"""


class Shell:
    """The IPython shell above in a subprocess with PATH stripped; its lines."""

    def __init__(self, logdir):
        env = dict(os.environ, PATH=STRIPPED_PATH)
        env["PYTHONPATH"] = os.pathsep.join(
            [str(ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
        )
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SHELL, str(logdir)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, env=env, cwd=str(logdir),
        )
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def until(self, marker: str, timeout: float = 150.0) -> list[str]:
        seen, deadline = [], time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"no {marker!r} in:\n{''.join(seen)}"
            line = self.lines.get(timeout=left)
            assert line is not None, f"the shell exited:\n{''.join(seen)}"
            seen.append(line)
            if line.startswith(marker):
                return seen

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        self.proc.stdin.close()
        self.proc.stdout.close()


def _non_loopback_address() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET: nothing is sent
            address = s.getsockname()[0]
        except OSError:
            return None
    return None if address.startswith("127.") else address


def test_tensorboard_starts_without_the_venv_on_path_and_stops_with_its_kernel(
    tmp_path,
):
    assert shutil.which("tensorboard", path=STRIPPED_PATH) is None
    logdir = tmp_path / "logs"
    logdir.mkdir()
    _write_runs(logdir)
    shell = Shell(logdir)
    pids: list[int] = []
    try:
        seen = "".join(shell.until("READY"))
        # A TensorBoard that cannot start: the cell says why.
        failed = r"FAILED: TensorBoard exited with \d+: .*not-a-port"
        assert re.search(failed, seen), seen
        shown = re.findall(
            r"TensorBoard at http://127\.0\.0\.1:(\d+)/ \(pid (\d+)\), logdir (\S+)",
            seen,
        )
        assert len(shown) == 2, seen
        assert shown[0] == shown[1], "the same flags again: the same TensorBoard"
        port, pid = int(shown[0][0]), int(shown[0][1])
        pids.append(pid)
        assert shown[0][2] == str(logdir)
        # Started through the kernel's own interpreter, as its child.
        with open(f"/proc/{pid}/cmdline") as f:
            argv = f.read().split("\0")
        assert argv[0] == sys.executable, argv
        with open(f"/proc/{pid}/stat") as f:
            assert int(f.read().rsplit(")", 1)[1].split()[1]) == shell.proc.pid
        # It answers on its port, with the runs of the logdir.
        with urllib.request.urlopen(
            f"http://127.0.0.1:{port}/data/runs", timeout=30
        ) as r:
            runs = json.load(r)
        deadline = time.monotonic() + 60
        while sorted(runs) != sorted(LOSSES):
            assert time.monotonic() < deadline, runs
            time.sleep(0.2)  # TensorBoard loads runs in the background
            with urllib.request.urlopen(
                f"http://127.0.0.1:{port}/data/runs", timeout=30
            ) as r:
                runs = json.load(r)
        # Bound to 127.0.0.1 only.
        other = _non_loopback_address()
        if other is not None:
            with pytest.raises(OSError):
                socket.create_connection((other, port), timeout=5).close()
        # The kernel goes (killed, no clean-up of its own): TensorBoard follows.
        shell.proc.kill()
        assert not wait_gone([pid]), "TensorBoard outlived its kernel"
    finally:
        shell.close()
        for pid in pids:
            if pid_alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_tensorboard_is_stopped_by_its_pid_and_by_percent_tensorboard_stop(
    tmp_path,
):
    from IPython import get_ipython
    from IPython.testing.globalipapp import start_ipython

    from nbdist.notebook import tensorboard_magic

    logdir = tmp_path / "logs"
    logdir.mkdir()
    board = tensorboard_magic.start_tensorboard(
        ["--logdir", str(logdir), "--load_fast", "false"]
    )
    try:
        with urllib.request.urlopen(board.url, timeout=30) as r:
            assert r.status == 200
        assert board.host == "127.0.0.1"
        # Stopped from outside by its pid: the next %tensorboard starts anew.
        os.kill(board.pid, signal.SIGTERM)
        assert not wait_gone([board.pid])
        again = tensorboard_magic.start_tensorboard(
            ["--logdir", str(logdir), "--load_fast", "false"]
        )
        assert again.pid != board.pid and again.running()
        start_ipython()  # IPython's one test shell per process, shared with
        ip = get_ipython()  # the magics' tests (a second instance is an error)
        tensorboard_magic.register(ip)
        ip.run_line_magic("tensorboard", "stop")
        assert not again.running()
    finally:
        tensorboard_magic.stop_all()
