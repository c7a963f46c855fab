"""TF1's small training-loop helpers: ``basic_train_loop`` (steps until a
``Supervisor`` says stop) and ``checkpoints_iterator`` (each new checkpoint of
a directory, as an evaluator waits for them).

>>> import nbdist as nd, tempfile
>>> list(nd.train.checkpoints_iterator(tempfile.mkdtemp(), timeout=0))
[]
"""

from __future__ import annotations

import time

from nbdist.train.checkpoint_management import latest_checkpoint


def basic_train_loop(supervisor, train_step_fn, args=None, kwargs=None, master=""):
    """Runs ``train_step_fn(sess, *args, **kwargs)`` in a session of
    ``supervisor.managed_session(master)`` until ``supervisor.should_stop()``."""
    with supervisor.managed_session(master) as sess:
        while not supervisor.should_stop():
            train_step_fn(sess, *(args or ()), **(kwargs or {}))


def _wait_for_new_checkpoint(checkpoint_dir, last, seconds_to_sleep, timeout):
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        path = latest_checkpoint(checkpoint_dir)
        if path is not None and path != last:
            return path
        if deadline is not None and time.monotonic() + seconds_to_sleep > deadline:
            return None
        # A directory another process writes has no event to wait on: poll it.
        time.sleep(seconds_to_sleep)


def checkpoints_iterator(checkpoint_dir, min_interval_secs=0, timeout=None,
                         timeout_fn=None):
    """Yields the path of each new checkpoint in ``checkpoint_dir`` (at most one
    every ``min_interval_secs``); stops after ``timeout`` seconds without a new
    one, unless ``timeout_fn()`` returns False (then it waits again)."""
    last = None
    while True:
        path = _wait_for_new_checkpoint(checkpoint_dir, last, 1.0 if timeout is None
                                        else min(1.0, max(timeout, 0.0)), timeout)
        if path is None:
            if timeout_fn is None or timeout_fn():
                return
            continue
        start = time.monotonic()
        last = path
        yield path
        remaining = min_interval_secs - (time.monotonic() - start)
        if remaining > 0:
            time.sleep(remaining)
