"""``nd.TensorArray`` (``tf.compat.v1.TensorArray``), built functionally.

TF1's TensorArray is a resource mutated in place, ordered by a float32
"flow" tensor. Here the flow carries the array itself: every op takes a flow
and the ``TensorArrayFlow*`` ops that change the array return a new flow (a
new value; the old one is unchanged). So a TensorArray passes through
``cond`` and ``while_loop`` as an ordinary float32 scalar loop variable, and
gradients flow along the flow edges: the gradient of a flow is an array of
gradients (``TensorArrayFlowGrad*`` ops; see ``tensor_array_grad``).

>>> import nbdist as nd
>>> x = nd.constant([1.0, 2.0, 3.0])
>>> ta = nd.TensorArray(nd.float32, size=3)
>>> _, ta = nd.while_loop(lambda i, ta: i < 3,
...                       lambda i, ta: (i + 1, ta.write(i, x[i] * 10.0)),
...                       [0, ta])
>>> with nd.Session() as s:
...     s.run(ta.stack()).tolist()
[10.0, 20.0, 30.0]
"""

from __future__ import annotations

from nbdist import errors
from nbdist.framework import dtypes
from nbdist.ops import tensor_array_grad  # noqa: F401  (registers the gradients)
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.ops import Tensor, _graph_of, convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape, as_shape

_FLOW = (dtypes.float32, TensorShape([]))
_ELEM_ATTRS = {"dtype": ("type", REQUIRED),
               "element_shape": ("shape", TensorShape(None))}


def _flow_out(c):
    return [_FLOW]


def _elements(c):
    return [(c.attr("dtype"), c.attr("element_shape"))]


def _stacked(c):
    return [(c.attr("dtype"), TensorShape([None]).concatenate(c.attr("element_shape")))]


def _concatenated(c):
    e = c.attr("element_shape")
    if e.rank is None:
        return [(c.attr("dtype"), TensorShape(None)), (dtypes.int64, TensorShape([None]))]
    rest = TensorShape([None] + e.as_list()[1:])
    return [(c.attr("dtype"), rest), (dtypes.int64, TensorShape([None]))]


def _like(i):
    return lambda c: [(c.dtype(i), c.shape(i))]


register_op("TensorArrayFlowCreate", _flow_out,
            attrs=dict(_ELEM_ATTRS, dynamic_size=("bool", False),
                       clear_after_read=("bool", True),
                       identical_element_shapes=("bool", True),
                       tensor_array_name=("string", "")),
            num_inputs=1, stateful=True)
register_op("TensorArrayFlowWrite", _flow_out, num_inputs=3)
register_op("TensorArrayFlowScatter", _flow_out, num_inputs=3)
register_op("TensorArrayFlowUnstack", _flow_out, num_inputs=2)
register_op("TensorArrayFlowSplit", _flow_out, num_inputs=3)
register_op("TensorArrayFlowRead", _elements, attrs=_ELEM_ATTRS, num_inputs=2)
register_op("TensorArrayFlowGather", _stacked, attrs=_ELEM_ATTRS, num_inputs=2)
register_op("TensorArrayFlowStack", _stacked, attrs=_ELEM_ATTRS, num_inputs=1)
register_op("TensorArrayFlowConcat", _concatenated, attrs=_ELEM_ATTRS, num_inputs=1)
register_op("TensorArrayFlowSize", lambda c: [(dtypes.int32, TensorShape([]))],
            num_inputs=1)
register_op("TensorArrayFlowClose", lambda c: [], num_inputs=1, stateful=True)
# Gradients: arrays of gradients from tensors, and tensors from them (zeros
# shaped like the forward value where nothing was written).
register_op("TensorArrayFlowGradFromRead", _flow_out, num_inputs=2)
register_op("TensorArrayFlowGradFromGather", _flow_out, num_inputs=2)
register_op("TensorArrayFlowGradFromStack", _flow_out, num_inputs=1)
register_op("TensorArrayFlowGradFromConcat", _flow_out, num_inputs=2)
register_op("TensorArrayFlowGradRead", _like(2), num_inputs=3)
register_op("TensorArrayFlowGradGather", _like(2), num_inputs=3)
register_op("TensorArrayFlowGradUnstack", _like(1), num_inputs=2)
register_op("TensorArrayFlowGradSplit", _like(2), num_inputs=3)


def _static_int(t):
    from nbdist.framework.ops import _static_value

    v = _static_value(t)
    return None if v is None else int(v)


class TensorArray:
    """A list of tensors of one dtype, written and read by index inside a graph
    (``tf.compat.v1.TensorArray``).

    Every method that changes the array (``write``, ``scatter``, ``unstack``,
    ``split``) returns a new TensorArray; use the returned object, as in TF1.
    A TensorArray can be a ``while_loop`` variable or a ``cond`` result, and
    ``nd.gradients`` differentiates through ``stack``, ``read``, ``gather``
    and ``concat`` back to what was written.
    """

    def __init__(self, dtype, size=None, dynamic_size=None, clear_after_read=None,
                 tensor_array_name=None, handle=None, flow=None, infer_shape=True,
                 element_shape=None, colocate_with_first_write_call=True,
                 name=None):
        del colocate_with_first_write_call  # one value: nothing to colocate
        self._dtype = dtypes.as_dtype(dtype).base_dtype
        flow = handle if flow is None else flow
        if flow is not None:
            if size is not None:
                raise ValueError("Cannot provide both a flow and size at the same "
                                 "time")
            self._flow = convert_to_tensor(flow)
            self._dynamic_size = bool(dynamic_size)
            self._clear_after_read = clear_after_read is None or clear_after_read
            self._element_shape = [as_shape(element_shape)]
            self._infer_shape = infer_shape
            self._name = tensor_array_name or "TensorArray"
            return
        if size is None:
            raise ValueError("Size must be provided if handle or flow is not "
                             "provided")
        self._dynamic_size = bool(dynamic_size)
        self._clear_after_read = True if clear_after_read is None else bool(
            clear_after_read)
        self._infer_shape = bool(infer_shape)
        self._element_shape = [as_shape(element_shape)]
        size = convert_to_tensor(size, dtype=dtypes.int32, name="size")
        g = size.graph
        with g.as_default(), g.name_scope(name or "TensorArray") as scope:
            self._name = tensor_array_name or scope[:-1]
            self._flow = g.create_op(
                "TensorArrayFlowCreate", [size],
                {"dtype": self._dtype, "element_shape": self._element_shape[0],
                 "dynamic_size": self._dynamic_size,
                 "clear_after_read": self._clear_after_read,
                 "identical_element_shapes": self._infer_shape,
                 "tensor_array_name": self._name}, name=scope).outputs[0]

    # -- properties ---------------------------------------------------------------
    @property
    def flow(self) -> Tensor:
        """The float32 scalar whose value is the array (TF1's flow)."""
        return self._flow

    @property
    def handle(self) -> Tensor:
        """The flow: this TensorArray has no separate resource handle."""
        return self._flow

    @property
    def dtype(self):
        return self._dtype

    @property
    def element_shape(self) -> TensorShape:
        return self._element_shape[0]

    def _with_flow(self, flow: Tensor) -> TensorArray:
        ta = TensorArray.__new__(TensorArray)
        ta.__dict__.update(self.__dict__)
        ta._flow = flow
        return ta

    def _merge_element_shape(self, shape: TensorShape):
        if not self._infer_shape:
            return
        have = self._element_shape[0]
        if not shape.is_compatible_with(have):
            raise ValueError(f"Inconsistent shapes: saw {shape} but expected {have} "
                             "(and infer_shape=True)")
        self._element_shape[0] = have.merge_with(shape)

    def _value(self, value, name="value") -> Tensor:
        if not isinstance(value, Tensor):
            try:  # the array's dtype is preferred, as TF's preferred_dtype
                return convert_to_tensor(value, dtype=self._dtype, name=name)
            except (TypeError, ValueError):
                value = convert_to_tensor(value, name=name)
        if value.dtype.base_dtype is not self._dtype:
            raise errors.InvalidArgumentError(
                None, None, f"TensorArray dtype is {self._dtype.name} but Op is "
                f"trying to write dtype {value.dtype.base_dtype.name}.")
        return value

    def _op(self, op_type, inputs, name, default, attrs=None):
        g = _graph_of([self._flow] + [t for t in inputs if isinstance(t, Tensor)])
        with g.as_default(), g.name_scope(name or default) as scope:
            return g.create_op(op_type, [self._flow] + list(inputs), attrs or {},
                               name=scope)

    def _elem_attrs(self):
        return {"dtype": self._dtype, "element_shape": self._element_shape[0]}

    # -- writing ------------------------------------------------------------------
    def write(self, index, value, name=None) -> TensorArray:
        """A TensorArray with ``value`` at ``index`` (an index is written once)."""
        value = self._value(value)
        self._merge_element_shape(value.shape)
        index = convert_to_tensor(index, dtype=dtypes.int32, name="index")
        op = self._op("TensorArrayFlowWrite", [index, value], name,
                      "TensorArrayWrite")
        return self._with_flow(op.outputs[0])

    def scatter(self, indices, value, name=None) -> TensorArray:
        """A TensorArray with ``value[k]`` at ``indices[k]``."""
        value = self._value(value)
        if value.shape.rank is not None and value.shape.rank >= 1:
            self._merge_element_shape(TensorShape(value.shape.as_list()[1:]))
        indices = convert_to_tensor(indices, dtype=dtypes.int32, name="indices")
        op = self._op("TensorArrayFlowScatter", [indices, value], name,
                      "TensorArrayScatter")
        return self._with_flow(op.outputs[0])

    def unstack(self, value, name=None) -> TensorArray:
        """A TensorArray with ``value[k]`` at index k, for every row k."""
        value = self._value(value)
        if value.shape.rank is not None and value.shape.rank >= 1:
            self._merge_element_shape(TensorShape(value.shape.as_list()[1:]))
        op = self._op("TensorArrayFlowUnstack", [value], name, "TensorArrayUnstack")
        return self._with_flow(op.outputs[0])

    def split(self, value, lengths, name=None) -> TensorArray:
        """A TensorArray whose element k is the k-th slice of ``value`` along
        axis 0, of ``lengths[k]`` rows."""
        value = self._value(value)
        lengths = convert_to_tensor(lengths, dtype=dtypes.int64, name="lengths")
        if value.shape.rank is not None and value.shape.rank >= 1:
            self._merge_element_shape(TensorShape([None] + value.shape.as_list()[1:]))
        op = self._op("TensorArrayFlowSplit", [value, lengths], name,
                      "TensorArraySplit")
        return self._with_flow(op.outputs[0])

    # -- reading ------------------------------------------------------------------
    def read(self, index, name=None) -> Tensor:
        """The element at ``index``."""
        index = convert_to_tensor(index, dtype=dtypes.int32, name="index")
        return self._op("TensorArrayFlowRead", [index], name, "TensorArrayRead",
                        self._elem_attrs()).outputs[0]

    def gather(self, indices, name=None) -> Tensor:
        """The elements at ``indices``, stacked."""
        indices = convert_to_tensor(indices, dtype=dtypes.int32, name="indices")
        out = self._op("TensorArrayFlowGather", [indices], name, "TensorArrayGather",
                       self._elem_attrs()).outputs[0]
        n = indices.shape.as_list()[0] if indices.shape.rank == 1 else None
        if n is not None:
            out.set_shape(TensorShape([n]).concatenate(self._element_shape[0]))
        return out

    def stack(self, name=None) -> Tensor:
        """All elements, stacked along a new axis 0."""
        return self._op("TensorArrayFlowStack", [], name, "TensorArrayStack",
                        self._elem_attrs()).outputs[0]

    def concat(self, name=None) -> Tensor:
        """All elements, concatenated along axis 0."""
        return self._op("TensorArrayFlowConcat", [], name, "TensorArrayConcat",
                        self._elem_attrs()).outputs[0]

    def size(self, name=None) -> Tensor:
        """The number of elements (an int32 scalar)."""
        return self._op("TensorArrayFlowSize", [], name, "TensorArraySize").outputs[0]

    # -- the rest -----------------------------------------------------------------
    def identity(self, name=None) -> TensorArray:
        """This TensorArray through an ``Identity`` op (for control dependencies)."""
        from nbdist.framework.constant_op import identity

        with _graph_of([self._flow]).as_default():
            return self._with_flow(identity(self._flow, name=name))

    def close(self, name=None):
        """An op after which the array may no longer be used."""
        return self._op("TensorArrayFlowClose", [], name, "TensorArrayClose")

    def grad(self, source, flow=None, name=None):
        raise NotImplementedError(
            "TensorArray.grad: gradients of a TensorArray are built by "
            "nd.gradients through its flow; there is no gradient array to get")

    def __repr__(self):
        return (f"<nd.TensorArray '{self._name}' dtype={self._dtype.name} "
                f"element_shape={self._element_shape[0]}>")


def is_tensor_array(x) -> bool:
    return isinstance(x, TensorArray)


def as_flow(x):
    """A TensorArray's flow; anything else unchanged."""
    return x.flow if isinstance(x, TensorArray) else x


def from_flow(template, flow):
    """``template`` (a TensorArray) rebuilt on ``flow``; a tensor unchanged."""
    if isinstance(template, TensorArray):
        return template._with_flow(flow)
    return flow


__all__ = ["TensorArray"]
