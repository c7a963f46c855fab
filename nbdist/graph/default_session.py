"""The per-thread stack of default sessions, kept in the graph layer as TF keeps it
in ``framework/ops.py``: the runtime pushes its sessions here (``as_default``), and
``Tensor.eval()`` / ``Operation.run()`` use the top one, so the graph never imports
the runtime.
"""

from __future__ import annotations

import contextlib
import threading


class _DefaultSessionStack(threading.local):
    def __init__(self):
        super().__init__()
        self.stack: list = []


_default_sessions = _DefaultSessionStack()


def get_default_session():
    """The innermost session of ``with sess.as_default():`` in this thread, or None."""
    return _default_sessions.stack[-1] if _default_sessions.stack else None


@contextlib.contextmanager
def default_session(session):
    """Makes ``session`` the default of this thread inside the ``with`` block."""
    _default_sessions.stack.append(session)
    try:
        yield session
    finally:
        if _default_sessions.stack and _default_sessions.stack[-1] is session:
            _default_sessions.stack.pop()
        elif session in _default_sessions.stack:
            _default_sessions.stack.remove(session)


def run_with_default_session(fetch, feed_dict=None, session=None):
    """``session.run(fetch)`` with the default session when ``session`` is None."""
    if session is None:
        session = get_default_session()
        if session is None:
            raise ValueError("Cannot evaluate tensor using `eval()`: No default "
                             "session is registered. Use `with sess.as_default()` "
                             "or pass an explicit session to `eval(session=sess)`")
    if fetch.graph is not session.graph:
        raise ValueError("Cannot use the given session to evaluate tensor: the "
                         "tensor's graph is different from the session's graph.")
    return session.run(fetch, feed_dict)
