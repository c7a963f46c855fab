"""``%tensorboard``: TensorBoard served from this kernel, shown in a frame.

Registered by ``%load_ext nbdist``. Unlike TensorBoard's own magic (which looks
for a ``tensorboard`` program on PATH, absent when JupyterLab was started as
``.venv/bin/jupyter lab`` without activating the venv), TensorBoard runs with
the kernel's own interpreter, bound to 127.0.0.1 and on a free port unless the
arguments say otherwise. It stops with the kernel (or ``%tensorboard stop``)::

    %load_ext nbdist
    %tensorboard --logdir $logdir
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
import time

from nbdist.notebook.live_view import STYLE, esc, inline_styles

__all__ = ["TensorBoardProcess", "card_html", "register", "start_tensorboard",
           "stop_all"]

START_TIMEOUT_S = 60.0

# Runs TensorBoard's own main in the child; a thread reads a pipe whose only
# write end the kernel holds, and ends the process when the kernel is gone
# (however it went: shutdown, restart, kill).
_LAUNCHER = """\
import os, signal, sys, threading
fd = int(sys.argv[1])
def watch():
    while os.read(fd, 1):
        pass
    os.kill(os.getpid(), signal.SIGTERM)  # TensorBoard's own clean exit
threading.Thread(target=watch, daemon=True).start()
sys.argv = ["tensorboard"] + sys.argv[2:]
from tensorboard.main import run_main
run_main()
"""

_running: dict[tuple, TensorBoardProcess] = {}  # by arguments


class TensorBoardProcess:
    """A TensorBoard started by ``%tensorboard``: its ``pid``, ``port``,
    ``url`` and ``logdir``; ``stop()`` ends it."""

    def __init__(
        self,
        proc: subprocess.Popen,
        keepalive_fd: int,
        port: int,
        logdir: str,
        host: str,
    ):
        self.proc, self.port, self.logdir, self.host = proc, port, logdir, host
        self._keepalive_fd = keepalive_fd  # closing it ends TensorBoard too
        self.pid = proc.pid
        self.url = f"http://{host}:{port}/"

    def running(self) -> bool:
        if self.proc.poll() is not None:
            return False
        # poll() answers None while another thread waits on the process, so a
        # TensorBoard killed from outside is checked in /proc where there is one.
        try:
            with open(f"/proc/{self.pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
        except FileNotFoundError:
            return not os.path.isdir("/proc/self")

    def stop(self, timeout: float = 10.0):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout)
        if self._keepalive_fd is not None:
            os.close(self._keepalive_fd)
            self._keepalive_fd = None

    def _frame_url(self) -> str:
        # TensorBoard's own convention for a proxied server (e.g. Binder).
        proxy = os.environ.get("TENSORBOARD_PROXY_URL")
        return proxy.replace("%PORT%", str(self.port)) if proxy else self.url

    def _text(self) -> str:
        return f"TensorBoard at {self.url} (pid {self.pid}), logdir {self.logdir}"

    def _repr_pretty_(self, p, cycle):
        p.text(self._text())

    def _repr_html_(self, height: int = 600) -> str:
        # The frame lies over a card of what TensorBoard served: while it runs
        # its page covers the card; once it is gone, or where frames are not
        # drawn (a static copy, GitHub), the card shows, not a blank box.
        url = esc(self._frame_url())
        return STYLE + inline_styles(
            f"<div class='nbdist nbdist-tensorboard'>TensorBoard at "
            f"<a href='{url}' target='_blank'>{esc(self.url)}</a> "
            f"<span class='muted'>(pid {self.pid}), logdir "
            f"<code>{esc(self.logdir)}</code></span>"
            f"<div style='position:relative;height:{height}px'>"
            f"{card_html(self.logdir)}"
            f"<iframe class='nbdist-tensorboard' src='{url}' frameborder='0' "
            "style='position:absolute;left:0;top:0;width:100%;height:100%;"
            "border:0;background:transparent'></iframe></div></div>"
        )


def card_html(logdir: str, tag: str = "loss") -> str:
    """What TensorBoard served from ``logdir``, for readers of a static copy:
    its runs and a picture of their ``tag`` curves as they were when it was
    shown (``TrainingView``'s figure)."""
    import base64

    from nbdist.notebook.widget_training import TrainingView

    view = TrainingView(logdir=logdir, tag=tag, live=False)
    runs = sorted(run for run, points in view.losses.items() if points)
    what = (f"{len(runs)} run{'s' if len(runs) != 1 else ''} "
            f"({', '.join(runs)}), their <code>{esc(tag)}</code> curves below"
            if runs else f"no <code>{esc(tag)}</code> curve yet")
    picture = ""
    if runs:
        png = base64.b64encode(view.png()).decode()
        picture = (f"<img class='nbdist-tensorboard-curves' alt='{esc(tag)} curves' "
                   f"style='max-width:100%' src='data:image/png;base64,{png}'/>")
    return ("<div class='nbdist-tensorboard-card' style='position:absolute;left:0;"
            "top:0;right:0;padding:8px;border:1px dashed #d0d7de;border-radius:6px'>"
            f"<b>TensorBoard ran here</b> <span class='muted'>· its frame shows "
            f"while it runs; it served {what}</span><br/>{picture}</div>")


def _option(args: list[str], name: str) -> str | None:
    """The value of ``--name value`` or ``--name=value`` in ``args``."""
    for i, a in enumerate(args):
        if a == f"--{name}" and i + 1 < len(args):
            return args[i + 1]
        if a.startswith(f"--{name}="):
            return a.split("=", 1)[1]
    return None


def _info_of(pid: int):
    from tensorboard import manager

    for info in manager.get_all():
        if info.pid == pid:
            return info
    return None


def start_tensorboard(args: list[str], timeout: float = START_TIMEOUT_S):
    """Starts TensorBoard with ``args`` (its command-line flags) through this
    interpreter, or returns the one this kernel already runs with them.
    Raises RuntimeError with TensorBoard's own message when it does not start."""
    args = list(args)
    if _option(args, "logdir") is None and _option(args, "logdir_spec") is None:
        raise ValueError("%tensorboard needs --logdir DIR")
    if _option(args, "host") is None and "--bind_all" not in args:
        args += ["--host", "127.0.0.1"]
    if _option(args, "port") is None:
        args += ["--port", "0"]  # a free port
    key = tuple(args)
    known = _running.pop(key, None)
    if known is not None:
        if known.running():
            _running[key] = known
            return known
        known.stop()
    read_fd, keepalive_fd = os.pipe()
    err_fd, err_path = tempfile.mkstemp(prefix=".nbdist-tensorboard-")
    try:
        proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER, str(read_fd), *args],
            pass_fds=(read_fd,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err_fd,
            start_new_session=True,  # an interrupted cell leaves it running
        )
    finally:
        os.close(read_fd)
        os.close(err_fd)
    board = TensorBoardProcess(
        proc,
        keepalive_fd,
        0,
        _option(args, "logdir") or "",
        _option(args, "host") or "127.0.0.1",
    )
    deadline = time.monotonic() + timeout
    info = None
    while info is None and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)  # TensorBoard writes its info file once it serves
        info = _info_of(proc.pid)
    try:
        if info is None:
            board.stop()
            with open(err_path, errors="replace") as f:
                lines = [line.strip() for line in f.read().strip().splitlines()]
            # Its own error line (an argparse usage ends with it), else its end.
            errors = [line for line in lines if "error" in line.lower()]
            tail = errors[-1:] or lines[-3:]
            why = (
                f"exited with {proc.returncode}"
                if proc.returncode and proc.returncode > 0
                else f"did not answer within {timeout:g} s"
            )
            raise RuntimeError(
                f"TensorBoard {why}" + (": " + " / ".join(tail) if tail else "")
            )
    finally:
        os.unlink(err_path)
    board.port = info.port
    board.url = f"http://{board.host}:{info.port}/"
    _running[key] = board
    return board


def stop_all() -> int:
    """Stops every TensorBoard this kernel started; returns how many."""
    boards = [b for b in _running.values() if b.running()]
    for b in _running.values():
        b.stop()
    _running.clear()
    return len(boards)


def tensorboard(line: str):
    """``%tensorboard --logdir DIR [TensorBoard flags]``: starts TensorBoard
    with this kernel's interpreter (on 127.0.0.1 and a free port unless
    ``--host``/``--port`` say otherwise) and shows it in a frame; run again
    with the same flags, it shows the running one. ``%tensorboard stop`` stops
    what this kernel started (it also stops with the kernel)."""
    from IPython.core.error import UsageError
    from IPython.display import display

    args = shlex.split(line, comments=True)
    if args == ["stop"]:
        n = stop_all()
        print(f"stopped {n} TensorBoard{'s' if n != 1 else ''}")
        return
    try:
        board = start_tensorboard(args)
    except (RuntimeError, ValueError) as e:
        raise UsageError(str(e)) from None
    display({"text/plain": board._text(), "text/html": board._repr_html_()}, raw=True)
    return


def register(ipython):
    """Registers ``%tensorboard`` (by ``%load_ext nbdist``)."""
    ipython.register_magic_function(tensorboard, magic_kind="line")
