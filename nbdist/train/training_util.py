"""The global step: ``get_or_create_global_step``, ``get_global_step`` ... as TF1.

The global step is an int64 scalar, non-trainable variable named
``global_step``, in the ``GLOBAL_VARIABLES`` and ``GLOBAL_STEP`` collections.
"""

from __future__ import annotations

import logging

from nbdist.framework import dtypes
from nbdist.framework.ops import GraphKeys, Tensor, get_default_graph
from nbdist.ops.variables import Variable, get_variable, zeros_initializer

_log = logging.getLogger(__name__)


def global_step(sess, global_step_tensor) -> int:
    """The value of the global step, as a Python int."""
    return int(sess.run(global_step_tensor))


def get_global_step(graph=None):
    """The global step of ``graph`` (default graph): the only member of the
    ``GLOBAL_STEP`` collection, else the tensor ``global_step:0``, else None."""
    graph = graph or get_default_graph()
    tensors = graph.get_collection(GraphKeys.GLOBAL_STEP)
    if len(tensors) == 1:
        gs = tensors[0]
    elif not tensors:
        try:
            gs = graph.get_tensor_by_name("global_step:0")
        except KeyError:
            return None
    else:
        _log.error("Multiple tensors in global_step collection.")
        return None
    assert_global_step(gs)
    return gs


def create_global_step(graph=None):
    """Creates the global step in ``graph``; ValueError if it already exists."""
    graph = graph or get_default_graph()
    if get_global_step(graph) is not None:
        raise ValueError('"global_step" already exists.')
    with graph.as_default() as g, g.name_scope(None):
        return get_variable(GraphKeys.GLOBAL_STEP, shape=[], dtype=dtypes.int64,
                            initializer=zeros_initializer(), trainable=False,
                            collections=[GraphKeys.GLOBAL_VARIABLES,
                                         GraphKeys.GLOBAL_STEP])


def get_or_create_global_step(graph=None):
    """The global step of ``graph``, created if there is none."""
    graph = graph or get_default_graph()
    gs = get_global_step(graph)
    if gs is None:
        gs = create_global_step(graph)
    return gs


def assert_global_step(global_step_tensor):
    """TypeError unless ``global_step_tensor`` is an integer scalar."""
    if not isinstance(global_step_tensor, (Variable, Tensor)):
        raise TypeError('Existing "global_step" must be a Variable or Tensor. '
                        f"Found: {global_step_tensor!r}")
    if not global_step_tensor.dtype.base_dtype.is_integer:
        raise TypeError('Existing "global_step" does not have integer type: '
                        f"{global_step_tensor.dtype!r}")
    shape = global_step_tensor.get_shape()
    if shape.rank != 0 and shape.is_fully_defined():
        raise TypeError(f'Existing "global_step" is not scalar: {shape}')


__all__ = [
    "assert_global_step",
    "create_global_step",
    "get_global_step",
    "get_or_create_global_step",
    "global_step",
]
