"""Files written whole or not at all: checkpoints, their state file and meta
graphs survive a crash mid-write (TF's ``file_io.atomic_write_string_to_file``).
"""

from __future__ import annotations

import os
import re
import tempfile

__all__ = ["atomic_write", "local_path", "remove_temp_files"]

_TEMP_SUFFIX = ".tmp"


def local_path(path) -> str:
    """``path`` (a str or path-like) as a local file name: a ``file://`` URL
    is accepted, as TF's file system layer accepts it."""
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = path.decode()
    path = path.removeprefix("file://")
    return path


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
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".",
                               suffix=_TEMP_SUFFIX, dir=directory)
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


def remove_temp_files(directory, final_name_pattern: str, older_than: float) -> list:
    """Removes the temp files ``atomic_write`` left in ``directory`` (a crash
    mid-write) for final names matching the regex ``final_name_pattern``,
    last modified before ``older_than`` (a time.time()); returns their names.
    """
    temp = re.compile(
        rf"(?:{final_name_pattern})\.[A-Za-z0-9_]+{re.escape(_TEMP_SUFFIX)}")
    removed = []
    try:
        names = os.listdir(directory or ".")
    except OSError:
        return removed
    for name in names:
        if not temp.fullmatch(name):
            continue
        path = os.path.join(directory, name)
        try:
            if os.stat(path).st_mtime < older_than:
                os.remove(path)
                removed.append(name)
        except OSError:  # gone meanwhile, or not ours to remove
            continue
    return removed
