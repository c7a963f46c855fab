"""Tensors kept in a session between runs (TF's ``session_ops``):
``get_session_handle`` stores a value and gives a handle; a later run feeds the
handle to ``get_session_tensor``'s placeholder to use the value again without
it leaving the worker, and ``delete_session_tensor`` frees it.

``Session.run`` returns a fetched handle as a ``TensorHandle`` (its string is
``.handle``); a ``TensorHandle`` may be fed where its handle string goes.

>>> import nbdist as nd
>>> with nd.Session() as s:
...     h = s.run(nd.get_session_handle(nd.constant(10.0)))
...     holder, value = nd.get_session_tensor(h.handle, nd.float32)
...     float(s.run(value * 2.0, feed_dict={holder: h.handle}))
20.0
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.constant_op import placeholder
from nbdist.framework.gradient_registry import NotDifferentiable
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.ops import Tensor, get_default_graph
from nbdist.framework.tensor_shape import TensorShape


def _string_scalar(c):
    if c.dtype(0) is not dtypes.string:
        raise TypeError(f"{c.op_type} ({c.name}): handle must be a string, got "
                        f"{c.dtype(0).name}")


def _get_tensor_infer(c):
    _string_scalar(c)
    return [(c.attr("dtype"), TensorShape(None))]


def _delete_infer(c):
    _string_scalar(c)
    return []


register_op("GetSessionHandle",
            lambda c: [(dtypes.string, TensorShape([]))],
            attrs={"T": ("type", None)}, num_inputs=1, stateful=True)
register_op("GetSessionTensor", _get_tensor_infer,
            attrs={"dtype": ("type", None)}, num_inputs=1, stateful=True)
register_op("DeleteSessionTensor", _delete_infer, num_inputs=1, stateful=True)
for _t in ("GetSessionHandle", "GetSessionTensor", "DeleteSessionTensor"):
    NotDifferentiable(_t)


def _as_str(handle) -> str:
    if isinstance(handle, TensorHandle):
        return handle.handle
    return handle.decode() if isinstance(handle, bytes) else str(handle)


def _device_of(handle) -> str:
    """The device that stores the tensor: the last field of the handle."""
    return _as_str(handle).rsplit(";", 1)[-1]


class TensorHandle:
    """A tensor kept in a session: ``handle`` (its string) and ``eval()``."""

    def __init__(self, handle, dtype, session):
        self._handle = _as_str(handle)
        self._dtype = dtypes.as_dtype(dtype)
        self._session = session

    @property
    def handle(self) -> str:
        """The handle string to feed to ``get_session_tensor``'s placeholder."""
        return self._handle

    def __str__(self):
        return self._handle

    def __repr__(self):
        return f"TensorHandle({self._handle!r}, {self._dtype!r})"

    def eval(self):
        """The stored value, read in the session that stored it."""
        with self._session.graph.as_default():
            holder, tensor = get_session_tensor(self._handle, self._dtype)
        return self._session.run(tensor, feed_dict={holder: self._handle})

    def delete(self):
        """Frees the stored tensor."""
        with self._session.graph.as_default():
            holder, deleter = delete_session_tensor(self._handle)
        self._session.run(deleter, feed_dict={holder: self._handle})


def get_session_handle(data, name=None):
    """A string handle of ``data``'s value, kept in the session when the
    handle is fetched (a ``TensorHandle`` from ``Session.run``)."""
    if not isinstance(data, Tensor):
        raise TypeError("`data` must be of type Tensor.")
    g = data.graph
    with g.colocate_with(data.op):
        return g.create_op("GetSessionHandle", [data], {"T": data.dtype.base_dtype},
                           name=name or "GetSessionHandle").outputs[0]


def get_session_tensor(handle, dtype, name=None):
    """``(holder, tensor)``: feed a handle to the string placeholder ``holder``
    and ``tensor`` is the value it names (of ``dtype``)."""
    g = get_default_graph()
    with g.device(_device_of(handle)):
        holder = placeholder(dtypes.string)
        tensor = g.create_op("GetSessionTensor", [holder],
                             {"dtype": dtypes.as_dtype(dtype)},
                             name=name or "GetSessionTensor").outputs[0]
    return holder, tensor


def delete_session_tensor(handle, name=None):
    """``(holder, deleter)``: running ``deleter`` with a handle fed to
    ``holder`` frees the tensor it names."""
    g = get_default_graph()
    with g.device(_device_of(handle)):
        holder = placeholder(dtypes.string)
        deleter = g.create_op("DeleteSessionTensor", [holder], {},
                              name=name or "DeleteSessionTensor")
    return holder, deleter


__all__ = ["TensorHandle", "delete_session_tensor", "get_session_handle",
           "get_session_tensor"]
