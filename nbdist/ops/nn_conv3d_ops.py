"""3-D convolution and pooling (``Conv3D``, ``Conv3DBackpropInputV2``,
``Conv3DBackpropFilterV2``, ``MaxPool3D``, ``AvgPool3D`` and their gradients),
NDHWC, with TF1's ``tf.nn`` functions over them and their gradients.

Output sizes as TF: VALID ``ceil((n - k_eff + 1) / s)``, SAME ``ceil(n / s)``
with the padding split before/after (the extra one after).
"""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import register_gradient
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.ops import convert_to_tensor, get_default_graph
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops.array_ops import shape
from nbdist.ops.image_ops import input_rank


def out_size(n, k, stride, dilation, padding):
    """Output length of one spatial axis."""
    k_eff = (k - 1) * dilation + 1
    if padding == "VALID":
        return max(-(-(n - k_eff + 1) // stride), 0)
    return -(-n // stride)


def pad_before(n, k, stride, dilation, padding):
    if padding == "VALID":
        return 0
    k_eff = (k - 1) * dilation + 1
    total = max((out_size(n, k, stride, dilation, padding) - 1) * stride + k_eff - n,
                0)
    return total // 2


def _check_5(c, name):
    v = list(c.attr(name))
    if len(v) != 5 or v[0] != 1 or v[4] != 1:
        raise ValueError(f"{c.op_type}: {name} must be [1, d, h, w, 1] (NDHWC), got "
                         f"{v}")
    return v[1:4]


def _check_format(c):
    if c.attr("data_format") != "NDHWC":
        raise ValueError(f"{c.op_type}: nbdist supports data_format NDHWC only")
    if c.attr("padding") not in ("SAME", "VALID"):
        raise ValueError(f"padding must be SAME or VALID, got {c.attr('padding')}")


def _spatial(dims, ks, strides, dil, padding):
    return [None if n is None else out_size(n, k, s, d, padding)
            for n, k, s, d in zip(dims, ks, strides, dil)]


def _conv3d_infer(c):
    _check_format(c)
    x = input_rank(c, 0, 5, "input")
    f = input_rank(c, 1, 5, "filter")
    strides, dil = _check_5(c, "strides"), _check_5(c, "dilations")
    if x[4] is not None and f[3] is not None and x[4] != f[3]:
        raise ValueError(f"Depth of input ({x[4]}) must equal the filter's input "
                         f"depth ({f[3]}) for '{c.name}' (op: 'Conv3D')")
    ks = list(f)[:3]
    if None in ks:
        return [(c.dtype(0), TensorShape([x[0], None, None, None, f[4]]))]
    return [(c.dtype(0), TensorShape([x[0], *_spatial(list(x)[1:4], ks, strides, dil,
                                                      c.attr("padding")), f[4]]))]


def _const_shape_infer(i, dtype_input):
    def infer(c):
        _check_format(c)
        v = c.constant(i)
        shape = TensorShape(None if v is None else [int(d) for d in np.ravel(v)])
        return [(c.dtype(dtype_input), shape)]

    return infer


def _pool3d_infer(c):
    _check_format(c)
    x = input_rank(c, 0, 5, "input")
    ks, strides = _check_5(c, "ksize"), _check_5(c, "strides")
    return [(c.dtype(0), TensorShape([x[0], *_spatial(list(x)[1:4], ks, strides,
                                                      [1, 1, 1], c.attr("padding")),
                                      x[4]]))]


_CONV_ATTRS = {"T": ("type", None), "strides": ("list(int)", REQUIRED),
               "padding": ("string", REQUIRED), "data_format": ("string", "NDHWC"),
               "dilations": ("list(int)", [1, 1, 1, 1, 1])}
_POOL_ATTRS = {"T": ("type", None), "ksize": ("list(int)", REQUIRED),
               "strides": ("list(int)", REQUIRED), "padding": ("string", REQUIRED),
               "data_format": ("string", "NDHWC")}
register_op("Conv3D", _conv3d_infer, attrs=_CONV_ATTRS, num_inputs=2)
register_op("Conv3DBackpropInputV2", _const_shape_infer(0, 1),
            attrs=dict(_CONV_ATTRS, Tshape=("type", dtypes.int32)), num_inputs=3)
register_op("Conv3DBackpropFilterV2", _const_shape_infer(1, 0), attrs=_CONV_ATTRS,
            num_inputs=3)
register_op("MaxPool3D", _pool3d_infer, attrs=_POOL_ATTRS, num_inputs=1)
register_op("AvgPool3D", _pool3d_infer, attrs=_POOL_ATTRS, num_inputs=1)
register_op("MaxPool3DGrad", lambda c: [(c.dtype(0), c.shape(0))],
            attrs=dict(_POOL_ATTRS, TInput=("type", dtypes.float32)), num_inputs=3)
register_op("AvgPool3DGrad", _const_shape_infer(0, 1), attrs=_POOL_ATTRS,
            num_inputs=2)


def _five(v, what):
    if isinstance(v, int):
        return [1, v, v, v, 1]
    v = [int(x) for x in v]
    if len(v) == 3:
        return [1, *v, 1]
    if len(v) != 5:
        raise ValueError(f"{what} must have 1, 3 or 5 entries, got {v}")
    return v


def _op(op_type, inputs, attrs, name):
    g = inputs[0].graph
    return g.create_op(op_type, inputs, attrs, name=name or op_type).outputs[0]


def _conv_attrs(x, strides, padding, data_format, dilations):
    return {"T": x.dtype.base_dtype, "strides": _five(strides, "strides"),
            "padding": padding, "data_format": data_format or "NDHWC",
            "dilations": _five(dilations or 1, "dilations")}


def conv3d(input, filter=None, strides=None, padding=None,  # noqa: A002
           data_format="NDHWC", dilations=(1, 1, 1, 1, 1), name=None, filters=None):
    """3-D convolution of ``input`` [N, D, H, W, C] with ``filter``
    [kd, kh, kw, C, out].

    >>> import numpy as np, nbdist as nd
    >>> x = np.ones((1, 3, 3, 3, 1), np.float32)
    >>> with nd.Session() as s:
    ...     s.run(nd.nn.conv3d(x, np.ones((2, 2, 2, 1, 1), np.float32),
    ...                        [1, 1, 1, 1, 1], "VALID")).ravel().tolist()
    [8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0, 8.0]
    """
    filter = filters if filter is None else filter  # noqa: A001
    x = convert_to_tensor(input, name="input")
    f = convert_to_tensor(filter, dtype=x.dtype.base_dtype, name="filter")
    return _op("Conv3D", [x, f], _conv_attrs(x, strides, padding, data_format,
                                             dilations), name)


def conv3d_backprop_filter_v2(input, filter_sizes, out_backprop, strides,  # noqa
                              padding, data_format="NDHWC",
                              dilations=(1, 1, 1, 1, 1), name=None):
    """The gradient of ``conv3d`` in its filter."""
    x = convert_to_tensor(input, name="input")
    sizes = convert_to_tensor(filter_sizes, dtype=dtypes.int32, name="filter_sizes")
    g = convert_to_tensor(out_backprop, dtype=x.dtype.base_dtype, name="out_backprop")
    return _op("Conv3DBackpropFilterV2", [x, sizes, g],
               _conv_attrs(x, strides, padding, data_format, dilations), name)


conv3d_backprop_filter = conv3d_backprop_filter_v2


def _backprop_input(input_sizes, f, g, strides, padding, data_format, dilations,
                    name):
    sizes = convert_to_tensor(input_sizes, dtype=dtypes.int32, name="input_sizes")
    attrs = _conv_attrs(f, strides, padding, data_format, dilations)
    attrs["Tshape"] = dtypes.int32
    return _op("Conv3DBackpropInputV2", [sizes, f, g], attrs, name)


def conv3d_transpose(value, filter=None, output_shape=None,  # noqa: A002
                     strides=None, padding="SAME", data_format="NDHWC", name=None,
                     input=None, filters=None, dilations=None):  # noqa: A002
    """The transpose of ``conv3d``: ``filter`` [kd, kh, kw, out, in] maps
    ``value`` [N, D, H, W, in] to ``output_shape``."""
    value = input if value is None else value
    filter = filters if filter is None else filter  # noqa: A001
    v = convert_to_tensor(value, name="value")
    f = convert_to_tensor(filter, dtype=v.dtype.base_dtype, name="filter")
    with get_default_graph().name_scope(name or "conv3d_transpose") as scope:
        return _backprop_input(output_shape, f, v, strides, padding, data_format,
                               dilations, scope)


def _pool(op_type, x, ksize, strides, padding, data_format, name):
    x = convert_to_tensor(x, name="input")
    return _op(op_type, [x], {"T": x.dtype.base_dtype, "ksize": _five(ksize, "ksize"),
                              "strides": _five(strides, "strides"),
                              "padding": padding,
                              "data_format": data_format or "NDHWC"}, name)


def max_pool3d(input, ksize, strides, padding, data_format="NDHWC",  # noqa: A002
               name=None):
    """Max pooling over [N, D, H, W, C]."""
    return _pool("MaxPool3D", input, ksize, strides, padding, data_format, name)


def avg_pool3d(input, ksize, strides, padding, data_format="NDHWC",  # noqa: A002
               name=None):
    """Average pooling over [N, D, H, W, C] (SAME averages only real inputs)."""
    return _pool("AvgPool3D", input, ksize, strides, padding, data_format, name)


# -- gradients ---------------------------------------------------------------------------
def _attrs_of(op, names):
    return {k: op.get_attr(k) for k in names}


@register_gradient("Conv3D")
def _conv3d_grad(op, grad):
    x, f = op.inputs
    a = _attrs_of(op, ("strides", "padding", "data_format", "dilations"))
    a["T"] = x.dtype.base_dtype
    gx = op.graph.create_op("Conv3DBackpropInputV2", [shape(x), f, grad],
                            dict(a, Tshape=dtypes.int32)).outputs[0]
    gf = op.graph.create_op("Conv3DBackpropFilterV2", [x, shape(f), grad],
                            a).outputs[0]
    return [gx, gf]


@register_gradient("Conv3DBackpropInputV2")
def _conv3d_backprop_input_grad(op, grad):
    _, f, g = op.inputs
    a = _attrs_of(op, ("strides", "padding", "data_format", "dilations"))
    a["T"] = f.dtype.base_dtype
    gf = op.graph.create_op("Conv3DBackpropFilterV2", [grad, shape(f), g],
                            a).outputs[0]
    gg = op.graph.create_op("Conv3D", [grad, f], a).outputs[0]
    return [None, gf, gg]


@register_gradient("MaxPool3D")
def _max_pool3d_grad(op, grad):
    a = _attrs_of(op, ("ksize", "strides", "padding", "data_format"))
    a["T"] = grad.dtype.base_dtype
    a["TInput"] = op.inputs[0].dtype.base_dtype
    return [op.graph.create_op("MaxPool3DGrad", [op.inputs[0], op.outputs[0], grad],
                               a).outputs[0]]


@register_gradient("AvgPool3D")
def _avg_pool3d_grad(op, grad):
    a = _attrs_of(op, ("ksize", "strides", "padding", "data_format"))
    a["T"] = grad.dtype.base_dtype
    return [op.graph.create_op("AvgPool3DGrad", [shape(op.inputs[0]), grad],
                               a).outputs[0]]


__all__ = [
    "avg_pool3d", "conv3d", "conv3d_backprop_filter", "conv3d_backprop_filter_v2",
    "conv3d_transpose", "max_pool3d",
]
