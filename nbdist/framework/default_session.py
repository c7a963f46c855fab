"""The per-thread stack of default sessions, kept in the graph layer as TF keeps it
in ``framework/ops.py``: the runtime pushes its sessions here (``as_default``), and
``Tensor.eval()`` / ``Operation.run()`` use the top one, so the graph never imports
the runtime.
"""

from __future__ import annotations

from nbdist.framework.default_stack import DefaultStack

_default_session_stack = DefaultStack()
_default_sessions = _default_session_stack  # the name this module used before


def get_default_session():
    """The innermost session of ``with sess.as_default():`` in this thread, or None.

    Each thread has its own stack: a new thread starts with no default session.
    """
    return _default_session_stack.get_default()


def default_session(session, enforce_nesting: bool = True):
    """Makes ``session`` the default of this thread inside the ``with`` block.

    Blocks exit in reverse order (``AssertionError`` otherwise), unless
    ``enforce_nesting`` is False (``InteractiveSession``).
    """
    return _default_session_stack.get_controller(session, enforce_nesting)


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
