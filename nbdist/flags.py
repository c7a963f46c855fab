"""``nd.flags`` (also ``nd.app.flags``, ``nd.compat.v1.flags``): TF1's
``tf.flags``, absl-py's flags whose ``FLAGS`` parses ``sys.argv`` on first read.

TF1 programs define flags and read them at module level, before ``app.run``:

    import nbdist as nd

    nd.flags.DEFINE_string("job_name", "", "ps or worker")
    FLAGS = nd.flags.FLAGS
    print(FLAGS.job_name)      # parses sys.argv now (known flags only)

As TF's ``_FlagValuesWrapper``, the first read of a flag value before any parse
parses ``sys.argv`` with ``known_only=True``: flags nobody defined stay for a
later parse (``nd.app.run``) instead of failing. Every other name is absl's.

A program may define a flag that absl's own modules define (``log_dir``,
``v``, ``logtostderr`` ... from ``absl.logging``; ``pdb`` ... from
``absl.app``): the program's definition replaces absl's, as TF <= 1.13
accepted, instead of stopping on absl's ``DuplicateFlagError``. Two
definitions by the program itself are still that error.
"""

from __future__ import annotations

import functools
import sys

from absl import app as _absl_app  # noqa: F401 - defines absl's flags first
from absl import flags as _absl_flags
from absl import logging as _absl_logging  # noqa: F401 - defines absl's flags first
from absl.flags import *  # noqa: F401,F403 - TF's tf.flags is absl's, re-exported


class _FlagValuesWrapper:
    """absl's ``FlagValues`` that parses ``sys.argv`` when a flag is first read
    unparsed (TF1's ``tf.flags.FLAGS``). All else goes to the wrapped object."""

    def __init__(self, flag_values):
        object.__setattr__(self, "_wrapped", flag_values)

    def __getattr__(self, name):
        wrapped = object.__getattribute__(self, "_wrapped")
        if name in wrapped and not wrapped.is_parsed():
            wrapped(sys.argv, known_only=True)
        return getattr(wrapped, name)

    def __setattr__(self, name, value):
        setattr(self._wrapped, name, value)

    def __delattr__(self, name):
        delattr(self._wrapped, name)

    def __dir__(self):
        return dir(self._wrapped)

    def __getitem__(self, name):
        return self._wrapped[name]

    def __setitem__(self, name, flag):
        self._wrapped[name] = flag

    def __contains__(self, name):
        return name in self._wrapped

    def __len__(self):
        return len(self._wrapped)

    def __iter__(self):
        return iter(self._wrapped)

    def __str__(self):
        return str(self._wrapped)

    def __call__(self, *args, **kwargs):
        return self._wrapped(*args, **kwargs)


FLAGS = _FlagValuesWrapper(_absl_flags.FLAGS)


# TF1's old keyword names for the DEFINE functions, still accepted by tf.flags.
_RENAMED_ARGUMENTS = {"flag_name": "name", "default_value": "default",
                      "docstring": "help"}


def _drop_absl_own_flag(args, kwargs):
    """Removes the flag the program is about to define if absl's own modules
    defined it (``absl.logging``'s ``log_dir`` ...): the program's wins."""
    name = kwargs.get("name", args[0] if args else None)
    flag_values = kwargs.get("flag_values", _absl_flags.FLAGS)
    if not isinstance(name, str) or name not in flag_values:
        return
    owner = flag_values.find_module_defining_flag(name) or ""
    if owner == "absl" or owner.startswith("absl."):
        delattr(flag_values, name)


def _unwrapping(define):
    """absl's ``DEFINE_*`` that also take ``flag_values=nd.flags.FLAGS`` (the
    wrapper) and TF1's old keywords ``flag_name``/``default_value``/``docstring``,
    and let a program redefine a flag of absl's own modules."""

    @functools.wraps(define)
    def wrapper(*args, **kwargs):
        for old, new in _RENAMED_ARGUMENTS.items():
            if old in kwargs:
                kwargs[new] = kwargs.pop(old)
        if isinstance(kwargs.get("flag_values"), _FlagValuesWrapper):
            kwargs["flag_values"] = kwargs["flag_values"]._wrapped
        _drop_absl_own_flag(args, kwargs)
        return define(*args, **kwargs)

    return wrapper


for _name in _absl_flags.__all__:
    if _name.startswith("DEFINE"):
        globals()[_name] = _unwrapping(getattr(_absl_flags, _name))

__all__ = list(_absl_flags.__all__)
