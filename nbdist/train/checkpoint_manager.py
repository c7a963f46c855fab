"""``CheckpointManager`` (TF's ``tf.train.CheckpointManager``): numbered saves
of a ``Checkpoint`` into one directory, keeping the newest ``max_to_keep``
(and one every ``keep_checkpoint_every_n_hours``), listed in the directory's
``checkpoint`` state file so ``latest_checkpoint`` finds them. In graph mode
the saves and restores run in the default session.

>>> import nbdist as nd, tempfile
>>> d = tempfile.mkdtemp()
>>> with nd.Graph().as_default():
...     w = nd.Variable(1.0)
...     manager = nd.train.CheckpointManager(nd.train.Checkpoint(w=w), d,
...                                          max_to_keep=2)
...     with nd.Session() as s, s.as_default():
...         s.run(w.initializer)
...         paths = [manager.save() for _ in range(3)]
>>> [p.rsplit("/", 1)[1] for p in manager.checkpoints]
['ckpt-2', 'ckpt-3']
"""

from __future__ import annotations

import os
import time

from nbdist.framework.default_session import get_default_session
from nbdist.train.checkpoint_management import (
    get_checkpoint_state,
    remove_checkpoint,
    update_checkpoint_state,
)
from nbdist.train.file_io import local_path


class CheckpointManager:
    """Saves a ``Checkpoint`` as ``<directory>/<checkpoint_name>-<n>`` and
    deletes all but the newest ``max_to_keep`` (None keeps every one)."""

    def __init__(self, checkpoint, directory, max_to_keep,
                 keep_checkpoint_every_n_hours=None, checkpoint_name="ckpt",
                 step_counter=None, checkpoint_interval=None, init_fn=None,
                 last_checkpoint_step=None):
        if max_to_keep is not None and max_to_keep <= 0:
            raise ValueError(f"Expected a positive integer or `None` for "
                             f"`max_to_keep`, got {max_to_keep}.")
        if checkpoint_interval is not None and step_counter is None:
            raise ValueError("`step_counter` should be passed if "
                             "`checkpoint_interval` is not None.")
        self._checkpoint = checkpoint
        self._directory = local_path(os.fspath(directory))
        self._max_to_keep = max_to_keep
        self._keep_every_s = (None if keep_checkpoint_every_n_hours is None
                              else keep_checkpoint_every_n_hours * 3600.0)
        self._prefix = os.path.join(self._directory, checkpoint_name)
        self._step_counter = step_counter
        self._checkpoint_interval = checkpoint_interval
        self._last_checkpoint_step = last_checkpoint_step
        self._init_fn = init_fn
        # (path, timestamp), oldest first, as the state file lists them.
        self._kept: list[tuple[str, float]] = []
        self._last_preserved = time.time()
        state = get_checkpoint_state(self._directory)
        if state is not None:
            paths = [p if os.path.isabs(p) else os.path.join(self._directory, p)
                     for p in state.all_model_checkpoint_paths]
            times = list(state.all_model_checkpoint_timestamps)
            times = times if len(times) == len(paths) else [time.time()] * len(paths)
            self._kept = list(zip(paths, times))
            self._last_preserved = state.last_preserved_timestamp or time.time()
        self._latest = self._kept[-1][0] if self._kept else None

    @property
    def checkpoint(self):
        """The ``Checkpoint`` this manager saves."""
        return self._checkpoint

    @property
    def directory(self) -> str:
        return self._directory

    @property
    def checkpoint_interval(self):
        return self._checkpoint_interval

    @property
    def latest_checkpoint(self):
        """The newest checkpoint's prefix, or None."""
        return self._latest

    @property
    def checkpoints(self) -> list[str]:
        """The managed checkpoints, oldest first."""
        return [p for p, _ in self._kept]

    def _session(self):
        session = get_default_session()
        if session is None:
            raise ValueError("CheckpointManager: in graph mode, save and restore "
                             "inside a default session (`with sess.as_default():`)")
        return session

    def _value(self, v):
        return v if isinstance(v, (int, float)) else self._session().run(v)

    def save(self, checkpoint_number=None, check_interval=True, options=None):
        """Saves a new checkpoint (numbered ``checkpoint_number``, else by the
        checkpoint's ``save_counter``); returns its prefix, or None when
        ``checkpoint_interval`` steps have not passed yet."""
        session = self._session()
        if self._checkpoint_interval is not None and check_interval:
            step = int(self._value(self._step_counter))
            last = self._last_checkpoint_step
            if last is not None and step < last + self._checkpoint_interval:
                return None
            self._last_checkpoint_step = step
        ckpt = self._checkpoint
        ckpt._initialize_counter(session)
        counter = int(session.run(ckpt._counter_ops()[1]))
        number = counter if checkpoint_number is None else int(
            self._value(checkpoint_number))
        path = ckpt.write(f"{self._prefix}-{number}", session, options)
        now = time.time()
        self._kept = [(p, t) for p, t in self._kept if p != path] + [(path, now)]
        self._latest = path
        self._drop_old()
        update_checkpoint_state(
            self._directory, path, all_model_checkpoint_paths=self.checkpoints,
            all_model_checkpoint_timestamps=[t for _, t in self._kept],
            last_preserved_timestamp=self._last_preserved, save_relative_paths=True)
        return path

    def _drop_old(self):
        if self._max_to_keep is None:
            return
        while len(self._kept) > self._max_to_keep:
            path, stamp = self._kept.pop(0)
            if (self._keep_every_s is not None
                    and stamp - self._last_preserved >= self._keep_every_s):
                self._last_preserved = stamp  # kept on disk, no longer managed
                continue
            remove_checkpoint(path)

    def restore_or_initialize(self):
        """Restores the latest checkpoint in the default session and returns
        its path; without one, runs ``init_fn`` (if given) and returns None."""
        if self._latest is not None:
            self._checkpoint.restore(self._latest).run_restore_ops(self._session())
            return self._latest
        if self._init_fn is not None:
            self._init_fn()
        return None

    def sync(self):
        """Waits for pending saves: nbdist saves synchronously, so none."""


__all__ = ["CheckpointManager"]
