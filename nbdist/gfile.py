"""``nd.gfile``: TF1's ``tf.gfile`` on the local file system, with TF's errors.

>>> import os, tempfile
>>> import nbdist as nd
>>> path = os.path.join(tempfile.mkdtemp(), "notes.txt")
>>> with nd.gfile.GFile(path, "w") as f:
...     _ = f.write("line 1\\nline 2\\n")
>>> nd.gfile.GFile(path).readlines()
['line 1\\n', 'line 2\\n']
>>> nd.gfile.Stat(path).length
14

A missing file is ``nd.errors.NotFoundError``, copying or renaming onto an
existing file without ``overwrite=True`` is ``AlreadyExistsError``, reading a
file opened for writing (or the reverse) is ``PermissionDeniedError``. Text modes
(``"r"``, ``"w"``, ``"a"``) read ``str``, binary ones (``"rb"`` ...) ``bytes``;
``write`` takes either. Files open on first use, as TF's. TF2's lower-case names
are ``nd.io.gfile``. Paths are local; other schemes (``gs://``) are not supported.
"""

from __future__ import annotations

import errno
import glob as _glob
import os
import shutil

from nbdist import errors

__all__ = ["Copy", "DeleteRecursively", "Exists", "FastGFile", "GFile", "Glob",
           "IsDirectory", "ListDirectory", "MakeDirs", "MkDir", "Open", "Remove",
           "Rename", "Stat", "Walk"]

_ERRNO_TO_ERROR = {
    errno.ENOENT: errors.NotFoundError,
    errno.EEXIST: errors.AlreadyExistsError,
    errno.EACCES: errors.PermissionDeniedError,
    errno.EPERM: errors.PermissionDeniedError,
    errno.ENOTDIR: errors.FailedPreconditionError,
    errno.EISDIR: errors.FailedPreconditionError,
    errno.ENOTEMPTY: errors.FailedPreconditionError,
    errno.ENOSPC: errors.ResourceExhaustedError,
}


def _op_error(e: OSError, path) -> errors.OpError:
    """TF's error class for an OS error, with TF's "<path>; <reason>" message."""
    cls = _ERRNO_TO_ERROR.get(e.errno, errors.UnknownError)
    return cls(None, None, f"{os.fspath(path)}; {e.strerror or e}")


_MODES = ("r", "w", "a", "r+", "w+", "a+")


class GFile:
    """A file: ``GFile(name, mode="r")``, TF1's ``tf.gfile.GFile`` (``Open``).

    ``read(n=-1)``, ``readline()``, ``readlines()``, iteration over lines,
    ``write``, ``seek(offset, whence=0)``, ``tell``, ``size``, ``flush``,
    ``close``, and use as a context manager.
    """

    def __init__(self, name, mode="r"):
        self._file = None
        self._binary = "b" in mode
        base = mode.replace("b", "")
        if base not in _MODES:
            raise errors.InvalidArgumentError(
                None, None, "mode is not 'r' or 'w' or 'a' or 'r+' or 'w+' or 'a+'")
        self._path = os.fspath(name)
        self._mode = mode
        self._readable = base.startswith("r") or "+" in base
        self._writable = not base == "r"
        self._base_mode = base

    name = property(lambda self: self._path)
    mode = property(lambda self: self._mode)

    def _opened(self):
        if self._file is None:
            try:
                self._file = open(self._path, self._base_mode + "b")  # noqa: SIM115
            except OSError as e:
                raise _op_error(e, self._path) from None
        return self._file

    def _out(self, data: bytes):
        return data if self._binary else data.decode("utf-8")

    def _check_readable(self):
        if not self._readable:
            raise errors.PermissionDeniedError(None, None,
                                               "File isn't open for reading")

    def read(self, n=-1):
        """Reads ``n`` bytes (all when ``n`` is -1): ``str`` in text modes."""
        self._check_readable()
        return self._out(self._opened().read(-1 if n is None else n))

    def readline(self):
        self._check_readable()
        return self._out(self._opened().readline())

    def readlines(self):
        self._check_readable()
        return [self._out(line) for line in self._opened().readlines()]

    def __iter__(self):
        return self

    def __next__(self):
        line = self.readline()
        if not line:
            raise StopIteration
        return line

    next = __next__  # TF1's Python 2 name

    def write(self, file_content):
        """Writes ``str`` (as UTF-8) or ``bytes``."""
        if not self._writable:
            raise errors.PermissionDeniedError(None, None,
                                               "File isn't open for writing")
        data = (file_content.encode("utf-8") if isinstance(file_content, str)
                else bytes(file_content))
        self._opened().write(data)

    def seek(self, offset=None, whence=0, position=None):
        """Moves to ``offset`` (TF1 also calls it ``position``) from ``whence``."""
        offset = position if offset is None else offset
        self._opened().seek(offset, whence)

    def tell(self):
        return self._opened().tell()

    def size(self):
        return Stat(self._path).length

    def flush(self):
        if self._file is not None:
            self._file.flush()

    def close(self):
        if self._file is not None:
            self._file.close()
            self._file = None

    def seekable(self):
        return True

    def readable(self):
        return self._readable

    def writable(self):
        return self._writable

    def __del__(self):
        # `GFile(path).read()` without close is common TF1 code: close quietly.
        self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"<nd.gfile.GFile name={self._path!r} mode={self._mode!r}>"


Open = GFile
FastGFile = GFile


class FileStatistics:
    """What ``Stat`` returns: ``length`` (bytes), ``mtime_nsec``, ``is_directory``."""

    def __init__(self, length, mtime_nsec, is_directory):
        self.length = length
        self.mtime_nsec = mtime_nsec
        self.is_directory = is_directory

    def __repr__(self):
        return (f"FileStatistics(length={self.length}, mtime_nsec={self.mtime_nsec}, "
                f"is_directory={self.is_directory})")


def Exists(filename) -> bool:  # noqa: N802 - TF's names
    """True if the file or directory exists."""
    return os.path.exists(filename)


def IsDirectory(dirname) -> bool:  # noqa: N802
    return os.path.isdir(dirname)


def Stat(filename) -> FileStatistics:  # noqa: N802
    """``length``, ``mtime_nsec``, ``is_directory`` of a file; NotFoundError if none."""
    try:
        st = os.stat(filename)
    except OSError as e:
        raise _op_error(e, filename) from None
    return FileStatistics(st.st_size, st.st_mtime_ns, os.path.isdir(filename))


def MakeDirs(dirname):  # noqa: N802
    """Creates ``dirname`` and its missing parents; fine if it exists."""
    try:
        os.makedirs(dirname, exist_ok=True)
    except OSError as e:
        raise _op_error(e, dirname) from None


def MkDir(dirname):  # noqa: N802
    """Creates one directory: AlreadyExistsError if it exists (TF 1.15),
    NotFoundError if its parent does not."""
    try:
        os.mkdir(dirname)
    except OSError as e:
        raise _op_error(e, dirname) from None


def Glob(filename) -> list:  # noqa: N802
    """The paths matching a pattern (or any of a list of patterns)."""
    patterns = [filename] if isinstance(filename, (str, bytes, os.PathLike)) else (
        list(filename))
    return sorted({m for p in patterns for m in _glob.glob(os.fspath(p))})


def ListDirectory(dirname) -> list:  # noqa: N802
    """The names in a directory; NotFoundError if it does not exist."""
    if not os.path.isdir(dirname):
        raise errors.NotFoundError(None, None,
                                   f"Could not find directory {os.fspath(dirname)}")
    return sorted(os.listdir(dirname))


def Walk(top, in_order=True):  # noqa: N802
    """Yields ``(dirname, subdirs, files)`` under ``top``, parents first when
    ``in_order``; nothing if ``top`` does not exist."""
    top = os.fspath(top)
    if not os.path.isdir(top):
        return
    names = sorted(os.listdir(top))
    subdirs = [n for n in names if os.path.isdir(os.path.join(top, n))]
    files = [n for n in names if n not in subdirs]
    if in_order:
        yield top, subdirs, files
    for sub in subdirs:
        yield from Walk(os.path.join(top, sub), in_order)
    if not in_order:
        yield top, subdirs, files


def _refuse_existing(newpath, overwrite):
    if not overwrite and os.path.exists(newpath):
        raise errors.AlreadyExistsError(None, None,
                                        f"{os.fspath(newpath)}; file already exists")


def Copy(oldpath, newpath, overwrite=False):  # noqa: N802
    """Copies a file; AlreadyExistsError if ``newpath`` exists and not ``overwrite``."""
    if not os.path.exists(oldpath):
        raise errors.NotFoundError(None, None,
                                   f"{os.fspath(oldpath)}; No such file or directory")
    _refuse_existing(newpath, overwrite)
    try:
        shutil.copyfile(oldpath, newpath)
    except OSError as e:
        raise _op_error(e, newpath) from None


def Rename(oldname, newname, overwrite=False):  # noqa: N802
    """Renames a file or directory; AlreadyExistsError if ``newname`` exists and
    not ``overwrite``."""
    if not os.path.exists(oldname):
        raise errors.NotFoundError(None, None,
                                   f"{os.fspath(oldname)}; No such file or directory")
    _refuse_existing(newname, overwrite)
    try:
        os.replace(oldname, newname)
    except OSError as e:
        raise _op_error(e, newname) from None


def Remove(filename):  # noqa: N802
    """Deletes a file; NotFoundError if it does not exist."""
    try:
        os.remove(filename)
    except OSError as e:
        raise _op_error(e, filename) from None


def DeleteRecursively(dirname):  # noqa: N802
    """Deletes a directory and everything in it (or a file); NotFoundError if
    it does not exist."""
    if not os.path.exists(dirname):
        raise errors.NotFoundError(None, None, f"{os.fspath(dirname)} not found")
    try:
        if os.path.isdir(dirname) and not os.path.islink(dirname):
            shutil.rmtree(dirname)
        else:
            os.remove(dirname)
    except OSError as e:
        raise _op_error(e, dirname) from None
