"""Files written whole or not at all: checkpoints, their state file and meta
graphs survive a crash mid-write (TF's ``file_io.atomic_write_string_to_file``).
"""

from __future__ import annotations

import os
import tempfile

__all__ = ["atomic_write"]


def _fsync_dir(directory):
    """Makes a rename in ``directory`` durable (best effort: not every OS can)."""
    try:
        fd = os.open(directory or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path, write_fn):
    """Calls ``write_fn(fileobj)`` on a temp file, fsyncs it, moves it to ``path``.

    On any failure the temp file is removed and ``path`` is untouched.
    """
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp",
                               dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            write_fn(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(directory)
