"""Kernels of the ``TensorArrayFlow*`` ops: the value of a TensorArray's flow
is a ``TensorArrayValue``, which the ops that change the array copy (a flow
once produced never changes, so a loop's history and its gradient replay see
the values they saw). The checks and messages follow TF's TensorArray: an
index is written once, read once unless ``clear_after_read=False``, and an
unwritten one reads as zeros only when the element shape is fully known.

A gradient array (``is_grad``) holds the gradients of some elements; missing
ones are zeros, and two gradient arrays add up element by element (``AddN``
of two flows' gradients). Values that are not arrays (the zeros that
``ZerosLike`` makes of a flow without gradient) count as empty gradients.
"""

from __future__ import annotations

import numpy as np

from nbdist import errors
from nbdist.executor.kernel import register_kernel


class TensorArrayValue:
    """One version of a TensorArray: its elements by index and its settings."""

    __slots__ = ("name", "size", "dynamic_size", "clear_after_read", "identical",
                 "element_shape", "items", "readers", "closed", "is_grad")

    def __init__(self, name="", size=0, dynamic_size=False, clear_after_read=True,
                 identical=True, element_shape=None, items=None, is_grad=False):
        self.name = name
        self.size = size
        self.dynamic_size = dynamic_size
        self.clear_after_read = clear_after_read
        self.identical = identical
        self.element_shape = element_shape  # tuple (None: unknown dim) or None
        self.items: dict = items if items is not None else {}
        self.readers: dict = {}
        self.closed = False
        self.is_grad = is_grad

    def copy(self) -> TensorArrayValue:
        out = TensorArrayValue(self.name, self.size, self.dynamic_size,
                               self.clear_after_read, self.identical,
                               self.element_shape, dict(self.items), self.is_grad)
        out.readers = dict(self.readers)
        return out

    def __add__(self, other):
        other = as_tensor_array(other)
        if other is None:
            return self
        items = dict(self.items)
        for i, v in other.items.items():
            items[i] = items[i] + v if i in items else v
        return TensorArrayValue(is_grad=True, items=items)

    __radd__ = __add__

    def __repr__(self):
        # Shown when a flow is sent to another task, which it cannot be.
        return (f"<the value of TensorArray {self.name!r} (size {self.size}); a "
                "TensorArray stays on the task that runs its ops>")


def as_tensor_array(value):
    """``value`` as a TensorArrayValue, or None when it is not one."""
    while isinstance(value, np.ndarray) and value.dtype == object and value.ndim == 0:
        value = value.item()
    return value if isinstance(value, TensorArrayValue) else None


def _shape_str(shape) -> str:
    if shape is None:
        return "<unknown>"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def _compatible(shape, want) -> bool:
    if want is None:
        return True
    return len(shape) == len(want) and all(w is None or s == w
                                           for s, w in zip(shape, want))


def _fully_defined(shape) -> bool:
    return shape is not None and all(d is not None for d in shape)


def _error(node, ta, msg):
    return errors.InvalidArgumentError(None, node.name, f"TensorArray {ta.name}: {msg}")


def _forward(node, flow) -> TensorArrayValue:
    ta = as_tensor_array(flow)
    if ta is None or ta.is_grad:
        raise errors.InvalidArgumentError(
            None, node.name, f"{node.name} ({node.op}) expects the flow of a "
            f"TensorArray, got {type(flow).__name__}")
    if ta.closed:
        raise errors.InvalidArgumentError(
            None, node.name, f"TensorArray {ta.name} has already been closed.")
    return ta


def _write(node, ta: TensorArrayValue, i: int, value, infer=True):
    """Writes into ``ta`` (a fresh copy owned by the calling kernel)."""
    if i < 0 or (not ta.dynamic_size and i >= ta.size):
        raise _error(node, ta, f"Tried to write to index {i} but array is not "
                     f"resizeable and size is: {ta.size}")
    value = np.asarray(value)
    if not _compatible(value.shape, ta.element_shape):
        raise _error(node, ta, f"Could not write to TensorArray index {i} because "
                     f"the value shape is {_shape_str(value.shape)} which is "
                     "incompatible with the TensorArray's inferred element shape: "
                     f"{_shape_str(ta.element_shape)} (consider setting "
                     "infer_shape=False).")
    if infer and ta.identical and not _fully_defined(ta.element_shape):
        ta.element_shape = tuple(value.shape)
    if i in ta.readers:
        raise _error(node, ta, f"Could not write to TensorArray index {i} because "
                     "it has already been read.")
    if i in ta.items:
        raise _error(node, ta, f"Could not write to TensorArray index {i} because "
                     "it has already been written to.")
    ta.items[i] = value
    ta.size = max(ta.size, i + 1)


def _read(node, ta: TensorArrayValue, i: int, dtype):
    if i < 0 or i >= ta.size:
        raise errors.InvalidArgumentError(
            None, node.name, f"Tried to read from index {i} but array size is: "
            f"{ta.size}")
    if ta.clear_after_read:
        # The same reader again is the gradient recomputing it, not a second read.
        prev = ta.readers.get(i)
        if prev is not None and prev != node.name:
            raise _error(node, ta, f"Could not read index {i} twice because it was "
                         "cleared after a previous read (perhaps try setting "
                         "clear_after_read = false?).")
    value = ta.items.get(i)
    if value is None:
        if not _fully_defined(ta.element_shape):
            raise _error(node, ta, f"Could not read from TensorArray index {i}.  "
                         "Furthermore, the element shape is not fully defined: "
                         f"{_shape_str(ta.element_shape)}.  It is possible you are "
                         "working with a resizeable TensorArray and stop_gradients "
                         "is not allowing the gradients to be written.  If you set "
                         "the full element_shape property on the forward "
                         "TensorArray, the proper all-zeros tensor will be returned "
                         "instead of incurring this error.")
        value = np.zeros(ta.element_shape, dtype=dtype)
    ta.readers[i] = node.name
    return value


def _np_dtype(node):
    return node.attrs["dtype"].as_numpy_dtype


def _indices(node, value) -> list:
    a = np.asarray(value)
    if a.ndim != 1:
        raise errors.InvalidArgumentError(
            None, node.name, f"{node.name}: indices must be a vector, got shape "
            f"{a.shape}")
    return [int(i) for i in a.tolist()]


def _stack(node, ta, indices, dtype):
    if not indices:
        shape = ta.element_shape
        es = node.attrs.get("element_shape")
        if not _fully_defined(shape) and es is not None and es.is_fully_defined():
            # The shape the graph inferred from the writes (a map_fn over no
            # rows), as TF's gather kernel takes its element_shape attr.
            shape = tuple(es.as_list())
        if not _fully_defined(shape):
            raise _error(node, ta, "TensorArray has size zero, but element shape "
                         f"{_shape_str(shape)} is not fully defined. "
                         "Currently only static shapes are supported when packing "
                         "zero-size TensorArrays.")
        return np.zeros((0,) + tuple(shape), dtype=dtype)
    values = [_read(node, ta, i, dtype) for i in indices]
    shapes = {v.shape for v in values}
    if len(shapes) > 1:
        raise _error(node, ta, "Could not stack elements of different shapes "
                     f"({', '.join(_shape_str(s) for s in sorted(shapes))}); "
                     "use concat() for elements that differ in their first axis")
    return np.stack(values).astype(dtype, copy=False)


# -- forward kernels -------------------------------------------------------------------
@register_kernel("TensorArrayFlowCreate")
def create_kernel(node):
    a = node.attrs
    es = a["element_shape"]
    element_shape = None if es.rank is None else tuple(es.as_list())

    def compute(step, size):
        n = int(np.asarray(size))
        if n < 0:
            raise errors.InvalidArgumentError(
                None, node.name, f"Size should be >= 0, got {n}")
        name = a["tensor_array_name"]
        return TensorArrayValue(name.decode() if isinstance(name, bytes) else name,
                                n, a["dynamic_size"], a["clear_after_read"],
                                a["identical_element_shapes"], element_shape)

    return compute


@register_kernel("TensorArrayFlowWrite")
def write_kernel(node):
    def compute(step, flow, index, value):
        ta = _forward(node, flow).copy()
        _write(node, ta, int(np.asarray(index)), value)
        return ta

    return compute


def _scatter(node, flow, indices, value, infer=True):
    ta = _forward(node, flow).copy()
    value = np.asarray(value)
    if value.ndim == 0 or value.shape[0] != len(indices):
        raise _error(node, ta, f"Expected len(indices) == values.shape[0], but saw: "
                     f"{len(indices)} vs. {value.shape[0] if value.ndim else 0}")
    for k, i in enumerate(indices):
        _write(node, ta, i, value[k], infer)
    return ta


@register_kernel("TensorArrayFlowScatter")
def scatter_kernel(node):
    return lambda step, flow, indices, value: _scatter(
        node, flow, _indices(node, indices), value)


@register_kernel("TensorArrayFlowUnstack")
def unstack_kernel(node):
    def compute(step, flow, value):
        value = np.asarray(value)
        if value.ndim == 0:
            raise errors.InvalidArgumentError(
                None, node.name, f"{node.name}: unstack needs a value of rank >= 1")
        return _scatter(node, flow, list(range(value.shape[0])), value)

    return compute


@register_kernel("TensorArrayFlowSplit")
def split_kernel(node):
    def compute(step, flow, value, lengths):
        ta = _forward(node, flow).copy()
        value = np.asarray(value)
        lens = [int(x) for x in np.asarray(lengths).reshape(-1).tolist()]
        if value.ndim == 0:
            raise _error(node, ta, "Expected value to be at least a vector, but "
                         "received shape: []")
        if sum(lens) != value.shape[0]:
            raise _error(node, ta, "Expected sum of lengths to be equal to "
                         f"values.shape[0], but sum of lengths is {sum(lens)} and "
                         f"value's shape is: {_shape_str(value.shape)}")
        if not ta.dynamic_size and ta.size != len(lens):
            raise _error(node, ta, "TensorArray's size is not equal to the size of "
                         f"lengths ({ta.size} vs. {len(lens)}), and the TensorArray "
                         "is not marked as dynamically resizeable")
        for k, piece in enumerate(np.split(value, np.cumsum(lens)[:-1])):
            _write(node, ta, k, piece, infer=False)
        return ta

    return compute


@register_kernel("TensorArrayFlowRead")
def read_kernel(node):
    dtype = _np_dtype(node)
    return lambda step, flow, index: _read(node, _forward(node, flow),
                                           int(np.asarray(index)), dtype)


@register_kernel("TensorArrayFlowGather")
def gather_kernel(node):
    dtype = _np_dtype(node)
    return lambda step, flow, indices: _stack(node, _forward(node, flow),
                                              _indices(node, indices), dtype)


@register_kernel("TensorArrayFlowStack")
def stack_kernel(node):
    dtype = _np_dtype(node)

    def compute(step, flow):
        ta = _forward(node, flow)
        return _stack(node, ta, list(range(ta.size)), dtype)

    return compute


@register_kernel("TensorArrayFlowConcat")
def concat_kernel(node):
    dtype = _np_dtype(node)

    def compute(step, flow):
        ta = _forward(node, flow)
        values = [_read(node, ta, i, dtype) for i in range(ta.size)]
        if not values:
            es = ta.element_shape
            if es is None or not es or not _fully_defined(es[1:]):
                raise _error(node, ta, "Concat saw a TensorArray of size zero and "
                             "an element shape that is not fully defined")
            return np.zeros((0,) + tuple(es[1:]), dtype=dtype), np.zeros(0, np.int64)
        if any(v.ndim == 0 for v in values):
            raise _error(node, ta, "Concat saw a scalar shape at an index but "
                         "requires at least vectors.")
        tails = {v.shape[1:] for v in values}
        if len(tails) > 1:
            raise _error(node, ta, "Concat needs elements that agree past their "
                         f"first axis, got {', '.join(_shape_str(t) for t in tails)}")
        lengths = np.array([v.shape[0] for v in values], dtype=np.int64)
        return np.concatenate(values).astype(dtype, copy=False), lengths

    return compute


@register_kernel("TensorArrayFlowSize")
def size_kernel(node):
    return lambda step, flow: np.int32(_forward(node, flow).size)


@register_kernel("TensorArrayFlowClose")
def close_kernel(node):
    def compute(step, flow):
        _forward(node, flow).closed = True

    return compute


# -- gradient kernels ------------------------------------------------------------------
def _grad_items(value) -> dict:
    ta = as_tensor_array(value)
    return ta.items if ta is not None else {}


@register_kernel("TensorArrayFlowGradFromRead")
def grad_from_read_kernel(node):
    return lambda step, index, dy: TensorArrayValue(
        is_grad=True, items={int(np.asarray(index)): np.asarray(dy)})


@register_kernel("TensorArrayFlowGradFromGather")
def grad_from_gather_kernel(node):
    def compute(step, indices, dy):
        dy = np.asarray(dy)
        items: dict = {}
        for k, i in enumerate(_indices(node, indices)):
            items[i] = items[i] + dy[k] if i in items else dy[k]
        return TensorArrayValue(is_grad=True, items=items)

    return compute


@register_kernel("TensorArrayFlowGradFromStack")
def grad_from_stack_kernel(node):
    def compute(step, dy):
        dy = np.asarray(dy)
        return TensorArrayValue(is_grad=True, items=dict(enumerate(dy)))

    return compute


@register_kernel("TensorArrayFlowGradFromConcat")
def grad_from_concat_kernel(node):
    def compute(step, dy, lengths):
        pieces = np.split(np.asarray(dy), np.cumsum(np.asarray(lengths))[:-1])
        return TensorArrayValue(is_grad=True, items=dict(enumerate(pieces)))

    return compute


def _grad_or_zeros(items, i, like):
    g = items.get(i)
    return np.zeros_like(like) if g is None else np.asarray(g, dtype=like.dtype)


@register_kernel("TensorArrayFlowGradRead")
def grad_read_kernel(node):
    return lambda step, gflow, index, like: _grad_or_zeros(
        _grad_items(gflow), int(np.asarray(index)), np.asarray(like))


def _grad_rows(items, indices, like):
    like = np.asarray(like)
    if not items:
        return np.zeros_like(like)
    rows = [_grad_or_zeros(items, i, like[k]) for k, i in enumerate(indices)]
    return np.stack(rows) if rows else np.zeros_like(like)


@register_kernel("TensorArrayFlowGradGather")
def grad_gather_kernel(node):
    return lambda step, gflow, indices, like: _grad_rows(
        _grad_items(gflow), _indices(node, indices), like)


@register_kernel("TensorArrayFlowGradUnstack")
def grad_unstack_kernel(node):
    def compute(step, gflow, like):
        like = np.asarray(like)
        return _grad_rows(_grad_items(gflow), list(range(like.shape[0])), like)

    return compute


@register_kernel("TensorArrayFlowGradSplit")
def grad_split_kernel(node):
    def compute(step, gflow, lengths, like):
        like = np.asarray(like)
        items = _grad_items(gflow)
        if not items:
            return np.zeros_like(like)
        pieces = np.split(like, np.cumsum(np.asarray(lengths))[:-1])
        return np.concatenate([_grad_or_zeros(items, k, p)
                               for k, p in enumerate(pieces)])

    return compute
