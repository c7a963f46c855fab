"""``arg_scope``: default keyword arguments for the functions decorated with
``add_arg_scope`` (TF1's ``tf.contrib.framework.arg_scope``, slim's).

>>> import nbdist as nd
>>> from nbdist.contrib.framework import add_arg_scope, arg_scope
>>> @add_arg_scope
... def layer(x, size=1, act="relu"):
...     return (x, size, act)
>>> with arg_scope([layer], size=3):
...     layer(0), layer(0, size=5)
((0, 3, 'relu'), (0, 5, 'relu'))
"""

from __future__ import annotations

import contextlib
import functools
import threading

_state = threading.local()


def _stack() -> list:
    stack = getattr(_state, "stack", None)
    if stack is None:
        stack = _state.stack = [{}]
    return stack


def current_arg_scope() -> dict:
    """The innermost scope: {op key: {argument: default}}."""
    return _stack()[-1]


def _key_op(op):
    return getattr(op, "_key_op", str(op))


def _name_op(op):
    return (op.__module__, op.__name__)


@contextlib.contextmanager
def arg_scope(list_ops_or_scope, **kwargs):
    """Within the block, each function in ``list_ops_or_scope`` (decorated with
    ``add_arg_scope``) takes ``kwargs`` as defaults (an explicit argument wins;
    inner scopes override outer ones). A scope dict yielded by an earlier
    ``arg_scope`` may be given instead, to re-enter it."""
    if isinstance(list_ops_or_scope, dict):
        if kwargs:
            raise ValueError("When attempting to re-use a scope by suppling a "
                             "dictionary, kwargs must be empty.")
        _stack().append(list_ops_or_scope)
        try:
            yield list_ops_or_scope
        finally:
            _stack().pop()
        return
    if not isinstance(list_ops_or_scope, (list, tuple)):
        raise TypeError("list_ops_or_scope must either be a list/tuple or reused "
                        "scope (i.e. dict)")
    current = {k: dict(v) for k, v in current_arg_scope().items()}
    for op in list_ops_or_scope:
        key = _key_op(op)
        if not has_arg_scope(op):
            raise ValueError(f"{_name_op(op)} is not decorated with @add_arg_scope")
        current.setdefault(key, {}).update(kwargs)
    _stack().append(current)
    try:
        yield current
    finally:
        _stack().pop()


def add_arg_scope(func):
    """Lets ``arg_scope`` supply defaults to ``func``'s keyword arguments."""

    @functools.wraps(func)
    def func_with_args(*args, **kwargs):
        scoped = current_arg_scope().get(_key_op(func), {})
        merged = dict(scoped)
        merged.update(kwargs)
        return func(*args, **merged)

    func_with_args._key_op = _key_op(func)
    _DECORATED.add(func_with_args._key_op)
    return func_with_args


_DECORATED: set = set()


def has_arg_scope(func) -> bool:
    """Whether ``func`` was decorated with ``add_arg_scope``."""
    return _key_op(func) in _DECORATED


def arg_scoped_arguments(func):
    """The names of the arguments ``arg_scope`` may set on ``func``."""
    import inspect

    target = getattr(func, "__wrapped__", func)
    return [p.name for p in inspect.signature(target).parameters.values()
            if p.default is not inspect.Parameter.empty]
