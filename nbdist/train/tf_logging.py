"""``nd.compat.v1.logging``: TF1's ``tf.compat.v1.logging`` on Python's logging.

It lives in the training layer because the hooks, sessions and savers log
through it (as TF's do through ``tf_logging``): patching ``info`` or
``warning`` here, or adding a handler to ``get_logger()``, sees their lines.
``nbdist.compat.tf_logging`` is this same module.

It drives the ``nbdist`` logger, so ``set_verbosity(INFO)`` also shows
nbdist's own messages (``Waiting for model to be ready`` ...), as TF's does
for TensorFlow's. When nothing configured logging, the first call adds a
stderr handler, as TF does.

>>> import nbdist as nd
>>> log = nd.compat.v1.logging
>>> log.set_verbosity(log.INFO)
>>> log.get_verbosity() == log.INFO
True
"""

from __future__ import annotations

import logging as _logging
import sys
import threading

DEBUG = _logging.DEBUG
INFO = _logging.INFO
WARN = _logging.WARNING
WARNING = _logging.WARNING
ERROR = _logging.ERROR
FATAL = _logging.FATAL

_lock = threading.Lock()
_counts: dict = {}


def get_logger() -> _logging.Logger:
    """The ``nbdist`` logger (with a stderr handler if nothing else logs)."""
    logger = _logging.getLogger("nbdist")
    with _lock:
        if not logger.handlers and not _logging.getLogger().handlers:
            handler = _logging.StreamHandler(sys.stderr)
            handler.setFormatter(_logging.Formatter("%(levelname)s:%(name)s:%(message)s"))
            logger.addHandler(handler)
    return logger


def set_verbosity(v):
    """Logs messages of level ``v`` (``DEBUG``, ``INFO``, ``WARN``...) and above."""
    get_logger().setLevel(v)


def get_verbosity() -> int:
    return get_logger().getEffectiveLevel()


def log(level, msg, *args, **kwargs):
    get_logger().log(level, msg, *args, **kwargs)


def debug(msg, *args, **kwargs):
    log(DEBUG, msg, *args, **kwargs)


def info(msg, *args, **kwargs):
    log(INFO, msg, *args, **kwargs)


def warning(msg, *args, **kwargs):
    log(WARNING, msg, *args, **kwargs)


warn = warning


def error(msg, *args, **kwargs):
    log(ERROR, msg, *args, **kwargs)


def fatal(msg, *args, **kwargs):
    log(FATAL, msg, *args, **kwargs)


def vlog(level, msg, *args, **kwargs):
    log(level, msg, *args, **kwargs)


def log_if(level, msg, condition, *args):
    if condition:
        log(level, msg, *args)


def _count(key) -> int:
    with _lock:
        _counts[key] = n = _counts.get(key, 0) + 1
    return n


def log_every_n(level, msg, n, *args):
    """Logs on the 1st, (n+1)th, (2n+1)th... call from the same line."""
    caller = sys._getframe(1)
    count = _count((caller.f_code.co_filename, caller.f_lineno))
    log_if(level, msg, (count - 1) % n == 0, *args)


def log_first_n(level, msg, n, *args):
    """Logs the first ``n`` calls from the same line."""
    caller = sys._getframe(1)
    count = _count((caller.f_code.co_filename, caller.f_lineno))
    log_if(level, msg, count <= n, *args)


__all__ = [
    "DEBUG",
    "ERROR",
    "FATAL",
    "INFO",
    "WARN",
    "WARNING",
    "debug",
    "error",
    "fatal",
    "get_logger",
    "get_verbosity",
    "info",
    "log",
    "log_every_n",
    "log_first_n",
    "log_if",
    "set_verbosity",
    "vlog",
    "warn",
    "warning",
]
