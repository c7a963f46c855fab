"""Where user code built an op: one ``(filename, line, function)`` per op, taken
when the op is created, shown with the errors that name it (TF's "Original stack
trace for op", cut down to the frame that matters).

The notebook layer names IPython cells ("Cell In[3], line 2") through
``set_file_labeler``; without it a site reads ``File "x.py", line 2``.
"""

from __future__ import annotations

import linecache
import os
import sys

TRACE_HEADING = "Original stack trace for"

# Frames whose code lives in the nbdist package are library frames.
_PACKAGE_DIR = os.path.dirname(os.path.dirname(__file__)) + os.sep
_file_labeler = None


def creation_site(_getframe=sys._getframe) -> tuple[str, int, str] | None:
    """The innermost frame outside nbdist of the stack that is building an op,
    from ``Operation.__init__`` (None if every frame is nbdist's)."""
    f = _getframe(2)  # 0: here, 1: Operation.__init__
    prefix = _PACKAGE_DIR
    while f is not None:
        code = f.f_code
        if not code.co_filename.startswith(prefix):
            return code.co_filename, f.f_lineno, code.co_name
        f = f.f_back
    return None


def as_traceback(site) -> list[tuple[str, int, str, str]]:
    """TF's ``Operation.traceback`` form: ``[(filename, lineno, name, line)]``."""
    if site is None:
        return []
    filename, lineno, name = site
    return [(filename, lineno, name, linecache.getline(filename, lineno).strip())]


def set_file_labeler(labeler) -> None:
    """``labeler(filename)`` returns a label such as "Cell In[3]" (or None) for
    the file an op was built in; None removes it."""
    global _file_labeler
    _file_labeler = labeler


def describe(site) -> str:
    """``Cell In[3], line 2`` (or ``File "x.py", line 2``), then the source line
    indented below it when it is known."""
    filename, lineno, _ = site
    label = _file_labeler(filename) if _file_labeler is not None else None
    where = f"{label}, line {lineno}" if label else f'File "{filename}", line {lineno}'
    line = linecache.getline(filename, lineno).strip()
    return f"{where}\n    {line}" if line else where


def with_creation_site(message: str, op) -> str:
    """``message`` followed by where ``op`` was built, as TF words it."""
    if op._site is None or TRACE_HEADING in message:
        return message
    return f"{message}\n\n{TRACE_HEADING} '{op.name}':\n  {describe(op._site)}"
