"""Neural-network ops (``Relu``, ``Softmax``, the cross-entropies, ``BiasAdd``,
``L2Loss``...) and the helper ops that gradient functions build
(``BroadcastGradientArgs``, ``ReluGrad``, ``StridedSliceGrad``...).

The user-facing wrappers are re-exported by ``nbdist.nn`` (``nd.nn.relu``).
"""

from __future__ import annotations

import numbers

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.op_def_registry import (
    REQUIRED,
    register_op,
    shape_from_constant,
    unchanged,
)
from nbdist.framework.ops import Tensor, convert_to_tensor, get_default_graph
from nbdist.framework.tensor_shape import TensorShape

_FLOATS = (dtypes.float16, dtypes.float32, dtypes.float64)
_INDEX_TYPES = (dtypes.int32, dtypes.int64)


def _float_unchanged(c):
    if c.dtype(0) not in _FLOATS:
        raise TypeError(f"{c.op_type} needs a floating point input, got "
                        f"{c.dtype(0).name}")
    return [(c.dtype(0), c.shape(0))]


def _numeric_unchanged(c):
    if not c.dtype(0).is_numeric:
        raise TypeError(f"{c.op_type} needs a numeric input, got {c.dtype(0).name}")
    return [(c.dtype(0), c.shape(0))]


def _at_least_1d(c):
    c.shape(0).with_rank_at_least(1)
    return _float_unchanged(c)


def _grad_pair(c):
    d = c.check_same_dtypes([0, 1])
    return [(d, c.shape(0).merge_with(c.shape(1)))]


_T = {"T": ("type", None)}
register_op("Relu", _numeric_unchanged, attrs=_T, num_inputs=1)
register_op("Relu6", _numeric_unchanged, attrs=_T, num_inputs=1)
register_op("Elu", _float_unchanged, attrs=_T, num_inputs=1)
register_op("Softplus", _float_unchanged, attrs=_T, num_inputs=1)
register_op("LeakyRelu", _float_unchanged, attrs=dict(_T, alpha=("float", 0.2)),
            num_inputs=1)
register_op("Softmax", _at_least_1d, attrs=_T, num_inputs=1)
register_op("LogSoftmax", _at_least_1d, attrs=_T, num_inputs=1)
for _t in ("ReluGrad", "Relu6Grad", "EluGrad", "SoftplusGrad"):
    register_op(_t, _grad_pair, attrs=_T, num_inputs=2)
register_op("LeakyReluGrad", _grad_pair, attrs=dict(_T, alpha=("float", 0.2)),
            num_inputs=2)


def _xent_infer(c):
    d = c.check_same_dtypes([0, 1])
    if d not in _FLOATS:
        raise TypeError(f"logits must be floating point, got {d.name}")
    shape = c.shape(0).with_rank(2).merge_with(c.shape(1).with_rank(2))
    return [(d, TensorShape([shape[0]])), (d, shape)]


def _sparse_xent_infer(c):
    d = c.dtype(0)
    if d not in _FLOATS:
        raise TypeError(f"logits must be floating point, got {d.name}")
    if c.dtype(1) not in _INDEX_TYPES:
        raise TypeError(f"labels must be int32 or int64, got {c.dtype(1).name}")
    logits = c.shape(0).with_rank(2)
    labels = c.shape(1).with_rank(1)
    batch = TensorShape([logits[0]]).merge_with(labels)
    return [(d, batch), (d, TensorShape([batch[0], logits[1]]))]


register_op("SoftmaxCrossEntropyWithLogits", _xent_infer, attrs=_T, num_inputs=2)
register_op("SparseSoftmaxCrossEntropyWithLogits", _sparse_xent_infer,
            attrs=dict(_T, Tlabels=("type", dtypes.int64)), num_inputs=2)


def _channel_axis(data_format, rank):
    fmt = data_format.decode() if isinstance(data_format, bytes) else data_format
    if fmt not in ("NHWC", "NCHW"):
        raise ValueError(f"data_format must be NHWC or NCHW, got {fmt!r}")
    return 1 if fmt == "NCHW" else rank - 1


def _bias_add_infer(c):
    d = c.check_same_dtypes([0, 1])
    value = c.shape(0).with_rank_at_least(2)
    bias = c.shape(1).with_rank(1)
    if value.rank is not None:
        ch = value[_channel_axis(c.attr("data_format"), value.rank)]
        if ch is not None and bias[0] is not None and ch != bias[0]:
            raise ValueError(f"Dimensions must be equal, but are {ch} and {bias[0]}")
    return [(d, value)]


def _bias_add_grad_infer(c):
    value = c.shape(0).with_rank_at_least(2)
    if value.rank is None:
        return [(c.dtype(0), TensorShape([None]))]
    return [(c.dtype(0),
             TensorShape([value[_channel_axis(c.attr("data_format"), value.rank)]]))]


register_op("BiasAdd", _bias_add_infer,
            attrs=dict(_T, data_format=("string", "NHWC")), num_inputs=2)
register_op("BiasAddGrad", _bias_add_grad_infer,
            attrs=dict(_T, data_format=("string", "NHWC")), num_inputs=1)
register_op("L2Loss", lambda c: [(_float_unchanged(c)[0][0], TensorShape([]))],
            attrs=_T, num_inputs=1)


def _in_top_k_infer(c):
    c.shape(0).with_rank(2)
    if c.dtype(1) not in _INDEX_TYPES:
        raise TypeError(f"targets must be int32 or int64, got {c.dtype(1).name}")
    return [(dtypes.bool, TensorShape([c.shape(0)[0]]).merge_with(
        c.shape(1).with_rank(1)))]


register_op("InTopKV2", _in_top_k_infer, attrs=_T, num_inputs=3)


# -- helper ops built by the gradient functions ----------------------------------
def _int_vector(c, i, what):
    if c.dtype(i) not in _INDEX_TYPES:
        raise TypeError(f"{what} must be int32 or int64, got {c.dtype(i).name}")
    return c.shape(i).with_rank(1)


def _bcast_args_infer(c):
    d = c.check_same_dtypes([0, 1])
    _int_vector(c, 0, "s0")
    _int_vector(c, 1, "s1")
    return [(d, TensorShape([None])), (d, TensorShape([None]))]


register_op("BroadcastGradientArgs", _bcast_args_infer,
            attrs={"T": ("type", dtypes.int32)}, num_inputs=2)


def _reduced_shape_infer(c):
    # nbdist's own op: the shape of a reduction with keep_dims (TF builds it
    # from DynamicStitch).
    shape = _int_vector(c, 0, "input_shape")
    if c.dtype(1) not in _INDEX_TYPES:
        raise TypeError(f"axes must be int32 or int64, got {c.dtype(1).name}")
    return [(c.dtype(0), shape)]


register_op("ReducedShape", _reduced_shape_infer, num_inputs=2)


def _concat_offset_infer(c):
    if c.dtype(0) is not dtypes.int32:
        raise TypeError(f"concat_dim must be int32, got {c.dtype(0).name}")
    n = len(c.input_dtypes) - 1
    return [(dtypes.int32, _int_vector(c, i + 1, "shape")) for i in range(n)]


register_op("ConcatOffset", _concat_offset_infer, attrs={"N": ("int", REQUIRED)},
            min_inputs=3)


def _prod_others_infer(c):
    # nbdist's own op: for each element, the product of the other elements of its
    # reduction group (zero-safe), i.e. d(reduce_prod)/dx.
    if c.dtype(1) not in _INDEX_TYPES:
        raise TypeError(f"axes must be int32 or int64, got {c.dtype(1).name}")
    return _numeric_unchanged(c)


register_op("ReduceProdOthers", _prod_others_infer, attrs=_T, num_inputs=2)


def _segment_sum_infer(c):
    if c.dtype(1) not in _INDEX_TYPES:
        raise TypeError(f"segment_ids must be int32 or int64, got {c.dtype(1).name}")
    data, ids = c.shape(0), c.shape(1)
    n = c.constant(2)
    first = None if n is None else int(np.asarray(n))
    if data.rank is None or ids.rank is None:
        return [(c.dtype(0), TensorShape(None))]
    if not data[:ids.rank].is_compatible_with(ids):
        raise ValueError(f"segment_ids shape {ids} must be a prefix of data shape "
                         f"{data}")
    return [(c.dtype(0), TensorShape([first]).concatenate(data[ids.rank:]))]


register_op("UnsortedSegmentSum", _segment_sum_infer,
            attrs={"T": ("type", None), "Tindices": ("type", None),
                   "Tnumsegments": ("type", dtypes.int32)}, num_inputs=3)

_SLICE_MASKS = {m: ("int", 0) for m in ("begin_mask", "end_mask", "ellipsis_mask",
                                        "new_axis_mask", "shrink_axis_mask")}
register_op("StridedSliceGrad",
            lambda c: [(c.dtype(4), shape_from_constant(c.constant(0))
                        if c.constant(0) is not None
                        else TensorShape([None] * c.shape(0)[0])
                        if c.shape(0).rank == 1 and c.shape(0)[0] is not None
                        else TensorShape(None))],
            attrs=dict(_SLICE_MASKS, T=("type", None), Index=("type", dtypes.int32)),
            num_inputs=5)


def _mirror_pad_grad_infer(c):
    if c.attr("mode") not in ("REFLECT", "SYMMETRIC"):
        raise ValueError(f"mode must be REFLECT or SYMMETRIC, got {c.attr('mode')!r}")
    shape, pads = c.shape(0), c.constant(1)
    if shape.rank is None or pads is None:
        return [(c.dtype(0), TensorShape(None if shape.rank is None
                                         else [None] * shape.rank))]
    p = np.asarray(pads).reshape(-1, 2)
    return [(c.dtype(0), TensorShape([None if d is None else d - int(a) - int(b)
                                      for d, (a, b) in zip(shape.dims, p)]))]


register_op("MirrorPadGrad", _mirror_pad_grad_infer,
            attrs={"T": ("type", None), "Tpaddings": ("type", dtypes.int32),
                   "mode": ("string", REQUIRED)}, num_inputs=2)
register_op("PreventGradient", unchanged,
            attrs={"T": ("type", None), "message": ("string", "")}, num_inputs=1)


# -- builders for the helper ops (used by the gradient functions) ----------------------
def _index_tensor(v, dtype=dtypes.int32):
    """``v`` (a tensor, or ints made a ``dtype`` constant) as a tensor."""
    if isinstance(v, Tensor):
        return v
    return convert_to_tensor(np.asarray(v, dtype=dtype.as_numpy_dtype))


def broadcast_gradient_args(s0, s1, name=None):
    """The axes to sum a broadcast result's gradient over, for each input shape."""
    s0, s1 = _index_tensor(s0), _index_tensor(s1)
    op = s0.graph.create_op("BroadcastGradientArgs", [s0, s1],
                            {"T": s0.dtype.base_dtype},
                            name=name or "BroadcastGradientArgs")
    return op.outputs[0], op.outputs[1]


def reduced_shape(input_shape, axes, name=None):
    """``input_shape`` with the reduced ``axes`` set to 1."""
    input_shape, axes = _index_tensor(input_shape), _index_tensor(axes)
    return input_shape.graph.create_op("ReducedShape", [input_shape, axes],
                                       name=name or "ReducedShape").outputs[0]


def concat_offset(axis, shapes, name=None):
    """Where each of ``shapes`` starts in their concatenation along ``axis``."""
    axis = _index_tensor(axis)
    shapes = [_index_tensor(s) for s in shapes]
    op = axis.graph.create_op("ConcatOffset", [axis] + shapes, {"N": len(shapes)},
                              name=name or "ConcatOffset")
    return op.outputs


def reduce_prod_others(x, axes, name=None):
    """For each element, the product of the other elements reduced with it."""
    x, axes = convert_to_tensor(x), _index_tensor(axes)
    return x.graph.create_op("ReduceProdOthers", [x, axes],
                             {"T": x.dtype.base_dtype},
                             name=name or "ReduceProdOthers").outputs[0]


def unsorted_segment_sum(data, segment_ids, num_segments, name=None):
    """out[i] = sum of data[j...] over the j with segment_ids[j...] == i."""
    data = convert_to_tensor(data)
    segment_ids = convert_to_tensor(segment_ids)
    num_segments = _index_tensor(num_segments)
    return data.graph.create_op(
        "UnsortedSegmentSum", [data, segment_ids, num_segments],
        {"T": data.dtype.base_dtype, "Tindices": segment_ids.dtype.base_dtype,
         "Tnumsegments": num_segments.dtype.base_dtype},
        name=name or "UnsortedSegmentSum").outputs[0]


def strided_slice_grad(shape, begin, end, strides, dy, begin_mask=0, end_mask=0,
                       ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0,
                       name=None):
    """A zero tensor of ``shape`` with ``dy`` where StridedSlice picked values."""
    begin = _index_tensor(begin)
    index = begin.dtype.base_dtype
    shape, end, strides = (_index_tensor(v, index) for v in (shape, end, strides))
    dy = convert_to_tensor(dy)
    return dy.graph.create_op(
        "StridedSliceGrad", [shape, begin, end, strides, dy],
        {"T": dy.dtype.base_dtype, "Index": index, "begin_mask": int(begin_mask),
         "end_mask": int(end_mask), "ellipsis_mask": int(ellipsis_mask),
         "new_axis_mask": int(new_axis_mask),
         "shrink_axis_mask": int(shrink_axis_mask)},
        name=name or "StridedSliceGrad").outputs[0]


def prevent_gradient(input, message="", name=None):  # TF's names
    """``input``, but taking its gradient raises LookupError with ``message``."""
    t = convert_to_tensor(input)
    return t.graph.create_op("PreventGradient", [t],
                             {"T": t.dtype.base_dtype, "message": message},
                             name=name or "PreventGradient").outputs[0]


def mirror_pad_grad(grad, paddings, mode, name=None):
    """The gradient of MirrorPad: the padded borders folded back onto the input."""
    grad, paddings = convert_to_tensor(grad), _index_tensor(paddings)
    mode = mode.decode() if isinstance(mode, bytes) else mode
    return grad.graph.create_op(
        "MirrorPadGrad", [grad, paddings],
        {"T": grad.dtype.base_dtype, "Tpaddings": paddings.dtype.base_dtype,
         "mode": mode}, name=name or "MirrorPadGrad").outputs[0]


def _grad_op(op_type, grads, features, name=None, **attrs):
    grads, features = convert_to_tensor(grads), convert_to_tensor(features)
    return grads.graph.create_op(op_type, [grads, features],
                                 dict(attrs, T=grads.dtype.base_dtype),
                                 name=name or op_type).outputs[0]


def relu_grad(gradients, features, name=None):
    return _grad_op("ReluGrad", gradients, features, name)


def bias_add_grad(out_backprop, data_format="NHWC", name=None):
    t = convert_to_tensor(out_backprop)
    return t.graph.create_op("BiasAddGrad", [t],
                             {"T": t.dtype.base_dtype, "data_format": data_format},
                             name=name or "BiasAddGrad").outputs[0]


# -- wrappers --------------------------------------------------------------------------
def _unary(op_type, x, name, **attrs):
    x = convert_to_tensor(x, name="features" if op_type != "L2Loss" else "t")
    return x.graph.create_op(op_type, [x], dict(attrs, T=x.dtype.base_dtype),
                             name=name or op_type).outputs[0]


def relu(features, name=None):
    """max(features, 0)."""
    return _unary("Relu", features, name)


def relu6(features, name=None):
    """min(max(features, 0), 6)."""
    return _unary("Relu6", features, name)


def elu(features, name=None):
    """features if > 0 else exp(features) - 1."""
    return _unary("Elu", features, name)


def softplus(features, name=None):
    """log(exp(features) + 1)."""
    return _unary("Softplus", features, name)


def leaky_relu(features, alpha=0.2, name=None):
    """features if > 0 else alpha * features."""
    return _unary("LeakyRelu", features, name, alpha=float(alpha))


def l2_loss(t, name=None):
    """sum(t ** 2) / 2, a scalar."""
    return _unary("L2Loss", t, name)


def _swap_axis_to_last(x, axis):
    """(x with ``axis`` moved last, the permutation that undoes it) or (x, None)."""
    from nbdist.ops import array_ops

    rank = x.shape.rank
    if axis is None or axis == -1 or (rank is not None and axis == rank - 1):
        return x, None
    if rank is None:
        raise ValueError(f"softmax over axis {axis} needs a tensor of known rank")
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of range for a tensor of rank {rank}")
    axis %= rank
    perm = list(range(rank))
    perm[axis], perm[-1] = perm[-1], perm[axis]
    return array_ops.transpose(x, perm), perm


def _move_axis_to_end(x, axis):
    """``x`` with ``axis`` moved last, the other axes keeping their order."""
    from nbdist.ops import array_ops

    rank = x.shape.rank
    if axis == -1 or (rank is not None and axis == rank - 1):
        return x
    if rank is None:
        raise ValueError(f"axis {axis} needs a tensor of known rank")
    if not -rank <= axis < rank:
        raise ValueError(f"axis {axis} is out of range for a tensor of rank {rank}")
    axis %= rank
    perm = [i for i in range(rank) if i != axis] + [axis]
    return array_ops.transpose(x, perm)


def _softmax(op_type, logits, axis, name):
    from nbdist.ops import array_ops

    logits = convert_to_tensor(logits, name="logits")
    moved, perm = _swap_axis_to_last(logits, axis)
    if perm is None:
        return _unary(op_type, logits, name)
    out = _unary(op_type, moved, None)
    return array_ops.transpose(out, perm, name=name)


def softmax(logits, axis=None, name=None, dim=None):
    """exp(logits) / sum(exp(logits), axis), over the last axis by default."""
    return _softmax("Softmax", logits, dim if axis is None else axis, name)


def log_softmax(logits, axis=None, name=None, dim=None):
    """logits - log(sum(exp(logits), axis))."""
    return _softmax("LogSoftmax", logits, dim if axis is None else axis, name)


def softmax_cross_entropy_with_logits_v2(_sentinel=None, labels=None, logits=None,
                                         axis=None, name=None, dim=None):
    """Cross-entropy between ``labels`` (a distribution) and softmax(``logits``).

    Gradients flow into both ``labels`` and ``logits``.
    """
    from nbdist.ops import array_ops, math_ops

    _check_sentinel("softmax_cross_entropy_with_logits", _sentinel, labels, logits)
    axis = dim if axis is None else axis
    axis = -1 if axis is None else axis
    g = get_default_graph()
    with g.name_scope(name or "softmax_cross_entropy_with_logits") as scope:
        logits = convert_to_tensor(logits, name="logits")
        labels = convert_to_tensor(labels, name="labels")
        if labels.dtype.base_dtype is not logits.dtype.base_dtype:
            labels = math_ops.cast(labels, logits.dtype.base_dtype)
        logits = _move_axis_to_end(logits, axis)
        labels = _move_axis_to_end(labels, axis)
        rank = logits.shape.rank
        if rank == 2:
            return g.create_op("SoftmaxCrossEntropyWithLogits", [logits, labels],
                               {"T": logits.dtype.base_dtype},
                               name=scope).outputs[0]
        if rank is None:
            raise ValueError("softmax_cross_entropy_with_logits needs logits of "
                             "known rank")
        if rank == 0:
            raise ValueError("logits must have rank at least 1")
        classes = logits.shape[-1]
        if classes is None:
            raise ValueError("the number of classes (last dimension of logits) must "
                             "be known")
        cost = g.create_op(
            "SoftmaxCrossEntropyWithLogits",
            [array_ops.reshape(logits, [-1, classes]),
             array_ops.reshape(labels, [-1, classes])],
            {"T": logits.dtype.base_dtype}, name="xent").outputs[0]
        out_shape = (logits.shape[:-1].as_list() if logits.shape[:-1]
                     .is_fully_defined() else
                     array_ops.slice(array_ops.shape(logits), [0],
                                          [rank - 1]))
        return array_ops.reshape(cost, out_shape, name=scope)


def softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None,
                                      dim=-1, name=None, axis=None):
    """TF1's version: like ``_v2`` but no gradient flows into ``labels``."""
    from nbdist.framework.constant_op import stop_gradient

    _check_sentinel("softmax_cross_entropy_with_logits", _sentinel, labels, logits)
    labels = stop_gradient(labels, name="labels_stop_gradient")
    return softmax_cross_entropy_with_logits_v2(
        labels=labels, logits=logits, axis=dim if axis is None else axis, name=name)


def sparse_softmax_cross_entropy_with_logits(_sentinel=None, labels=None,
                                             logits=None, name=None):
    """Cross-entropy between integer class ``labels`` and softmax(``logits``)."""
    from nbdist.ops import array_ops

    _check_sentinel("sparse_softmax_cross_entropy_with_logits", _sentinel, labels,
                    logits)
    g = get_default_graph()
    with g.name_scope(name or "SparseSoftmaxCrossEntropyWithLogits"):
        labels = convert_to_tensor(labels)
        logits = convert_to_tensor(logits)
        lr, gr = labels.shape.rank, logits.shape.rank
        if gr == 0:
            raise ValueError(f"Logits cannot be scalars - received shape "
                             f"{logits.shape}.")
        if lr is not None and gr is not None and lr != gr - 1:
            raise ValueError(f"Rank mismatch: Rank of labels (received {lr}) should "
                             f"equal rank of logits minus 1 (received {gr}).")
        if labels.dtype.base_dtype not in _INDEX_TYPES:
            raise TypeError(f"labels must be int32 or int64, got "
                            f"{labels.dtype.name}")
        attrs = {"T": logits.dtype.base_dtype, "Tlabels": labels.dtype.base_dtype}
        if gr == 2:
            return g.create_op("SparseSoftmaxCrossEntropyWithLogits",
                               [logits, labels], attrs,
                               name=name or "SparseSoftmaxCrossEntropyWithLogits"
                               ).outputs[0]
        if gr is None:
            raise ValueError("sparse_softmax_cross_entropy_with_logits needs logits "
                             "of known rank")
        classes = logits.shape[-1]
        if classes is None:
            raise ValueError("the number of classes (last dimension of logits) must "
                             "be known")
        labels_shape = array_ops.shape(labels)
        cost = g.create_op(
            "SparseSoftmaxCrossEntropyWithLogits",
            [array_ops.reshape(logits, [-1, classes]),
             array_ops.reshape(labels, [-1])], attrs,
            name="SparseSoftmaxCrossEntropyWithLogits").outputs[0]
        out_shape = (labels.shape.as_list() if labels.shape.is_fully_defined()
                     else labels_shape)
        return array_ops.reshape(cost, out_shape)


def sigmoid_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None,
                                      name=None):
    """max(x, 0) - x * z + log(1 + exp(-abs(x))), for logits x and labels z."""
    from nbdist.ops import array_ops, math_ops

    _check_sentinel("sigmoid_cross_entropy_with_logits", _sentinel, labels, logits)
    g = get_default_graph()
    with g.name_scope(name or "logistic_loss") as scope:
        logits = convert_to_tensor(logits, name="logits")
        labels = convert_to_tensor(labels, dtype=logits.dtype.base_dtype,
                                   name="labels")
        if not logits.shape.is_compatible_with(labels.shape):
            raise ValueError(f"logits and labels must have the same shape "
                             f"({logits.shape} vs {labels.shape})")
        zeros = array_ops.zeros_like(logits)
        cond = math_ops.greater_equal(logits, zeros)
        relu_logits = array_ops.where(cond, logits, zeros)
        neg_abs = array_ops.where(cond, math_ops.negative(logits), logits)
        one = convert_to_tensor(1, dtype=logits.dtype.base_dtype)
        return math_ops.add(
            math_ops.subtract(relu_logits, math_ops.multiply(logits, labels)),
            math_ops.log(math_ops.add(one, math_ops.exp(neg_abs))), name=scope)


def _check_sentinel(name, sentinel, labels, logits):
    if sentinel is not None:
        raise ValueError(f"Only call `{name}` with named arguments (labels=..., "
                         "logits=..., ...)")
    if labels is None or logits is None:
        raise ValueError("Both labels and logits must be provided.")


def bias_add(value, bias, data_format=None, name=None):
    """value + bias, with ``bias`` (1-D) added along the channel dimension."""
    g = get_default_graph()
    with g.name_scope(name or "BiasAdd") as scope:
        value = convert_to_tensor(value, name="input")
        bias = convert_to_tensor(bias, dtype=value.dtype.base_dtype, name="bias")
        return g.create_op("BiasAdd", [value, bias],
                           {"T": value.dtype.base_dtype,
                            "data_format": data_format or "NHWC"},
                           name=scope).outputs[0]


def xw_plus_b(x, weights, biases, name=None):
    """matmul(x, weights) + biases."""
    from nbdist.ops import math_ops

    g = get_default_graph()
    with g.name_scope(name or "xw_plus_b") as scope:
        mm = math_ops.matmul(x, weights)
        return bias_add(mm, biases, name=scope)


def in_top_k(predictions, targets, k, name=None):
    """Whether each target's prediction is among the ``k`` largest of its row."""
    predictions = convert_to_tensor(predictions)
    targets = convert_to_tensor(targets)
    k = convert_to_tensor(k, dtype=targets.dtype.base_dtype)
    return predictions.graph.create_op(
        "InTopKV2", [predictions, targets, k], {"T": targets.dtype.base_dtype},
        name=name or "in_top_k").outputs[0]


def l2_normalize(x, axis=None, epsilon=1e-12, name=None, dim=None):
    """x / sqrt(max(sum(x ** 2, axis), epsilon))."""
    from nbdist.ops import math_ops

    axis = dim if axis is None else axis
    g = get_default_graph()
    with g.name_scope(name or "l2_normalize") as scope:
        x = convert_to_tensor(x, name="x")
        square_sum = math_ops.reduce_sum(math_ops.square(x), axis, keepdims=True)
        eps = convert_to_tensor(epsilon, dtype=x.dtype.base_dtype)
        inv = math_ops.rsqrt(math_ops.maximum(square_sum, eps))
        return math_ops.multiply(x, inv, name=scope)


def moments(x, axes, shift=None, name=None, keep_dims=None, keepdims=None):
    """(mean, variance) of ``x`` over ``axes``."""
    from nbdist.framework import constant_op
    from nbdist.ops import math_ops

    keep = bool(keepdims if keepdims is not None else keep_dims)
    g = get_default_graph()
    with g.name_scope(name or "moments"):
        x = convert_to_tensor(x)
        mean = math_ops.reduce_mean(x, axes, keepdims=True, name="mean")
        sq = math_ops.squared_difference(x, constant_op.stop_gradient(mean))
        variance = math_ops.reduce_mean(sq, axes, keepdims=True, name="variance")
        if not keep:
            from nbdist.ops import array_ops

            mean = array_ops.squeeze(mean, axes)
            variance = array_ops.squeeze(variance, axes)
        return mean, variance


def _noise_shape(x, noise_shape):
    from nbdist.ops import array_ops

    if noise_shape is None:
        if x.shape.is_fully_defined():
            return x.shape.as_list()
        return array_ops.shape(x)
    if isinstance(noise_shape, Tensor):
        return noise_shape
    dims = list(noise_shape)
    if any(d is None for d in dims):
        xs = x.shape
        if xs.rank == len(dims):
            dims = [xs[i] if d is None else d for i, d in enumerate(dims)]
        if any(d is None for d in dims):
            raise ValueError(f"noise_shape {noise_shape} has unknown dimensions that "
                             f"the shape of x ({x.shape}) does not give")
    return dims


def dropout(x, keep_prob=None, noise_shape=None, seed=None, name=None, rate=None):
    """Keeps each element with probability ``keep_prob`` (scaled by 1/keep_prob),
    else outputs 0. Give ``keep_prob`` or ``rate`` (= 1 - keep_prob)."""
    from nbdist.ops import math_ops
    from nbdist.ops.random_ops import random_uniform

    if keep_prob is not None and rate is not None:
        raise ValueError("Cannot specify both keep_prob and rate")
    if keep_prob is None and rate is None:
        raise ValueError("dropout needs keep_prob or rate")
    g = get_default_graph()
    with g.name_scope(name or "dropout") as scope:
        x = convert_to_tensor(x, name="x")
        if not x.dtype.is_floating:
            raise ValueError(f"x has to be a floating point tensor since it's going "
                             f"to be scaled. Got a {x.dtype.name} tensor instead.")
        dt = x.dtype.base_dtype
        if keep_prob is None:
            if isinstance(rate, numbers.Real) and not 0 <= rate < 1:
                raise ValueError(f"rate must be a scalar tensor or a float in the "
                                 f"range [0, 1), got {rate:g}")
            if isinstance(rate, numbers.Real):
                keep_prob = 1.0 - float(rate)
            else:
                rate = convert_to_tensor(rate, dtype=dt, name="rate")
                keep_prob = math_ops.subtract(
                    convert_to_tensor(1, dtype=dt), rate)
        if isinstance(keep_prob, numbers.Real):
            if not 0 < keep_prob <= 1:
                raise ValueError(f"keep_prob must be a scalar tensor or a float in "
                                 f"the range (0, 1], got {keep_prob:g}")
            if keep_prob == 1:
                return x
        keep_prob = convert_to_tensor(keep_prob, dtype=dt, name="keep_prob")
        shape = _noise_shape(x, noise_shape)
        random_tensor = math_ops.add(keep_prob,
                                     random_uniform(shape, seed=seed, dtype=dt))
        binary_tensor = math_ops.floor(random_tensor)
        ret = math_ops.multiply(math_ops.divide(x, keep_prob), binary_tensor,
                                name=scope)
        ret.set_shape(x.shape)
        return ret


__all__ = [
    "relu", "relu6", "elu", "softplus", "leaky_relu", "softmax", "log_softmax",
    "softmax_cross_entropy_with_logits", "softmax_cross_entropy_with_logits_v2",
    "sparse_softmax_cross_entropy_with_logits", "sigmoid_cross_entropy_with_logits",
    "bias_add", "xw_plus_b", "l2_loss", "dropout", "in_top_k",
    "l2_normalize", "moments",
]
