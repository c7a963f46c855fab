"""``nd.compat.v1``: the TF1 surface (``tf.compat.v1``) of nbdist.

Every name of ``nd`` (``Session``, ``placeholder``, ``get_variable``,
``variable_scope``, ``global_variables_initializer``, ``ConfigProto`` ...) and
its submodules (``train``, ``nn``, ``data``, ``distribute``, ``errors``,
``random`` ...) is forwarded, not copied: ``nd.compat.v1.X is nd.X``, and a
name added to ``nd`` later appears here too. On top of that, the switches
TF1 programs call before building a graph (``disable_v2_behavior``,
``disable_eager_execution`` ...) are no-ops, since nbdist always builds
graphs, ``logging`` is TF1's ``tf.compat.v1.logging`` on Python's logging,
and ``app``/``flags`` are ``nd.app``/``nd.flags``.

>>> import nbdist as nd
>>> tf = nd.compat.v1
>>> tf.disable_v2_behavior()
>>> tf.executing_eagerly()
False
>>> tf.train.GradientDescentOptimizer is nd.train.GradientDescentOptimizer
True
"""

from __future__ import annotations

import importlib

from nbdist.compat import tf_logging as logging
from nbdist.framework.tensor_shape import (disable_v2_tensorshape,
                                           enable_v2_tensorshape)


def _graph_mode_already(*args, **kwargs):
    """A no-op: nbdist always builds graphs and runs them in sessions (TF1 mode)."""
    del args, kwargs


disable_v2_behavior = _graph_mode_already
disable_eager_execution = _graph_mode_already
disable_resource_variables = _graph_mode_already
disable_control_flow_v2 = _graph_mode_already
disable_tensor_equality = _graph_mode_already
# In TF1 graph mode ``==`` on tensors stays identity even after this (TF's
# element-wise ``==`` applies to eager tensors and functions only).
enable_tensor_equality = _graph_mode_already


def executing_eagerly() -> bool:
    """False: nbdist has no eager mode; ops are built into graphs."""
    return False


def enable_eager_execution(*args, **kwargs):
    """Raises: nbdist runs graphs in sessions only (TF1 mode)."""
    del args, kwargs
    raise NotImplementedError(
        "enable_eager_execution: nbdist has no eager mode; build a graph and run "
        "it with nd.Session (TF1 mode)")


enable_v2_behavior = enable_eager_execution

_MODULES = {"app": "nbdist.app", "flags": "nbdist.flags"}


def __getattr__(name):
    if name in _MODULES:
        return importlib.import_module(_MODULES[name])
    if name.startswith("__"):
        raise AttributeError(name)
    import nbdist

    try:
        return getattr(nbdist, name)
    except AttributeError:
        raise AttributeError(
            f"module 'nbdist.compat.v1' has no attribute '{name}' (nbdist does not "
            f"have tf.compat.v1.{name})") from None


__all__ = [
    "disable_control_flow_v2",
    "disable_eager_execution",
    "disable_resource_variables",
    "disable_tensor_equality",
    "disable_v2_behavior",
    "disable_v2_tensorshape",
    "enable_eager_execution",
    "enable_tensor_equality",
    "enable_v2_behavior",
    "enable_v2_tensorshape",
    "executing_eagerly",
    "logging",
]


def __dir__():
    import nbdist

    return sorted(set(globals()) | set(dir(nbdist)) | set(_MODULES))
