"""Progress bars (``tqdm.auto``): ``ProgressBarHook`` and ``LocalCluster``
start-up print nothing in a non-interactive run, draw a text bar on a terminal,
and in a kernel ``MonitoredTrainingSession`` + ``StopAtStepHook`` shows a
progress widget of the global step by itself."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import textwrap
import time

import pytest
from helpers import ROOT
from test_notebooks import KERNEL_NAME, kernel_env  # noqa: F401 - a fixture

import nbdist as nd

TRAIN = textwrap.dedent(
    """
    import nbdist as nd
    gs = nd.train.get_or_create_global_step()
    train_op = nd.assign_add(gs, 1)
    hooks = [nd.train.StopAtStepHook(last_step=12),
             nd.train.ProgressBarHook(last_step=12, desc="train")]
    with nd.train.MonitoredTrainingSession(hooks=hooks, log_step_count_steps=None) as s:
        while not s.should_stop():
            s.run(train_op)
    """
)
CLUSTER = "with nd.LocalCluster(ps=0, workers=1, start_timeout=60): pass\n"


def _run(script: str, stderr) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
    )


def _global_step_after(hooks) -> int:
    with nd.Graph().as_default():
        gs = nd.train.get_or_create_global_step()
        train_op = nd.assign_add(gs, 1)
        with nd.train.MonitoredTrainingSession(
            hooks=hooks, log_step_count_steps=None
        ) as sess:
            step = 0
            for _ in range(100):  # bounded: the stop hook ends it at 7
                if sess.should_stop():
                    break
                step = int(sess.run(train_op))
            return step


def test_progress_bar_hook_counts_the_global_step():
    hook = nd.train.ProgressBarHook(last_step=7, every_n_steps=2)
    assert _global_step_after([nd.train.StopAtStepHook(last_step=7), hook]) == 7
    assert (hook._step, hook._bar.total) == (7, 7)  # oracle: the stop hook's step
    assert hook._bar.disable  # pytest's stderr is no terminal: nothing printed


def test_progress_bar_hook_rejects_bad_arguments():
    with pytest.raises(ValueError, match="every_n_steps must be an int >= 1"):
        nd.train.ProgressBarHook(every_n_steps=0)
    with pytest.raises(ValueError, match="last_step or num_steps"):
        nd.train.ProgressBarHook(last_step=3, num_steps=3)


@pytest.mark.slow
def test_non_interactive_run_prints_no_progress():
    p = _run(TRAIN + CLUSTER, subprocess.PIPE)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0, err.decode()
    assert out == b"" and err == b"", (out, err)


@pytest.mark.slow
def test_terminal_shows_text_bars():
    main, sub = os.openpty()
    # A fresh pty is 0 columns wide, and tqdm fits its bar into that.
    fcntl.ioctl(sub, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    try:
        p = _run(TRAIN + CLUSTER, sub)
        os.close(sub)
        seen = b""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            ready, _, _ = select.select([main], [], [], 1.0)
            if not ready:
                if p.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(main, 65536)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            seen += chunk
        assert p.wait(timeout=60) == 0
        p.stdout.close()
    finally:
        os.close(main)
    text = seen.decode(errors="replace")
    assert "train: 100%" in text and "12/12" in text, text
    assert "LocalCluster" in text and "1/1" in text, text


@pytest.mark.slow
def test_kernel_shows_a_progress_widget_then_leaves_its_text(kernel_env):  # noqa: F811
    import nbformat
    from nbclient import NotebookClient

    code = TRAIN.replace('nd.train.ProgressBarHook(last_step=12, desc="train")', "")
    assert "ProgressBarHook" not in code
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    env = dict(kernel_env)
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = env["JUPYTER_PATH"]
    try:
        NotebookClient(nb, timeout=120, kernel_name=KERNEL_NAME).execute()
    finally:
        if old is None:
            del os.environ["JUPYTER_PATH"]
        else:
            os.environ["JUPYTER_PATH"] = old
    outputs = nb.cells[0].outputs
    # The widget was shown under a display id and replaced, at the end, by its
    # last line as text: the saved notebook needs no widget state.
    widgets = [
        o
        for o in outputs
        if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
    ]
    assert not widgets, outputs
    bars = [
        o
        for o in outputs
        if "".join(o.get("data", {}).get("text/plain", "")).startswith("training:")
    ]
    assert len(bars) == 1, outputs
    assert "100%" in bars[0]["data"]["text/plain"]
    assert "12/12" in bars[0]["data"]["text/plain"]
    assert not [o for o in outputs if o.get("name") == "stderr"], outputs


@pytest.mark.slow
def test_a_bar_ended_by_an_error_also_leaves_its_text(kernel_env):  # noqa: F811
    """Training that raises at step 5: the bar's widget is replaced by its text
    all the same (5 of 12), next to the error."""
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    code = TRAIN.replace('nd.train.ProgressBarHook(last_step=12, desc="train")', "")
    code = code.replace(
        "s.run(train_op)", "if s.run(train_op) == 5: raise ValueError('stop here')"
    )
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)])
    old = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = kernel_env["JUPYTER_PATH"]
    try:
        with pytest.raises(CellExecutionError, match="stop here"):
            NotebookClient(nb, timeout=120, kernel_name=KERNEL_NAME).execute()
    finally:
        if old is None:
            del os.environ["JUPYTER_PATH"]
        else:
            os.environ["JUPYTER_PATH"] = old
    outputs = nb.cells[0].outputs
    assert not [
        o for o in outputs
        if "application/vnd.jupyter.widget-view+json" in o.get("data", {})
    ], outputs
    bars = [
        "".join(o["data"]["text/plain"])
        for o in outputs
        if "".join(o.get("data", {}).get("text/plain", "")).startswith("training:")
    ]
    assert len(bars) == 1 and "5/12" in bars[0], outputs
