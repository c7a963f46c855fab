"""Pooling ops (``MaxPool``, ``AvgPool``, their gradients, ``MaxPoolWithArgmax``)
and the ``nd.nn.max_pool`` / ``avg_pool`` / ``max_pool_with_argmax`` wrappers.

A ``SAME`` average divides by the number of real (unpadded) elements in each
window, and ``MaxPoolGrad`` routes each gradient to the first maximum of its
window, as TF's CPU kernels do.
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.ops.nn_conv_ops import (
    _s,
    _sizes,
    check_float,
    check_padding,
    four,
    make_shape,
    op_error,
    output_size,
    rank4,
    spatial_axes,
    window_attr,
)
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.ops import convert_to_tensor, get_default_graph

POOL_ATTRS = {
    "T": ("type", None), "ksize": ("list(int)", REQUIRED),
    "strides": ("list(int)", REQUIRED), "padding": ("string", REQUIRED),
    "data_format": ("string", "NHWC"),
}


def pool_shape(c, x):
    fmt = c.attr("data_format")
    n_ax, h_ax, w_ax, ch_ax = spatial_axes(fmt)
    kh, kw = window_attr(c, "ksize", fmt, "kernel sizes")
    sh, sw = window_attr(c, "strides", fmt)
    pad = check_padding(c.op_type, c.attr("padding"), ("SAME", "VALID"))
    ho = output_size(c, x[h_ax], kh, sh, 1, pad)[0]
    wo = output_size(c, x[w_ax], kw, sw, 1, pad)[0]
    return make_shape(fmt, x[n_ax], ho, wo, x[ch_ax])


def _pool_infer(c):
    d = check_float(c, [0])
    return [(d, pool_shape(c, rank4(c, 0)))]


def _max_pool_grad_infer(c):
    d = check_float(c, [0, 1, 2])
    x = rank4(c, 0)
    rank4(c, 1), rank4(c, 2)
    pool_shape(c, x)
    return [(d, x)]


def _max_pool_grad_grad_infer(c):
    d = check_float(c, [0, 1, 2])
    x = rank4(c, 0)
    rank4(c, 1), rank4(c, 2)
    return [(d, pool_shape(c, x))]


def _avg_pool_grad_infer(c):
    from nbdist.ops.nn_conv_ops import _sizes_shape

    d = check_float(c, [1])
    rank4(c, 1)
    check_padding(c.op_type, c.attr("padding"), ("SAME", "VALID"))
    return [(d, _sizes_shape(c, 0))]


def _argmax_infer(c):
    d = check_float(c, [0])
    if c.attr("Targmax") not in (dtypes.int32, dtypes.int64):
        raise TypeError("Targmax must be int32 or int64")
    if _s(c.attr("data_format")) != "NHWC":
        raise op_error(c, "max_pool_with_argmax supports only NHWC")
    out = pool_shape(c, rank4(c, 0))
    return [(d, out), (c.attr("Targmax"), out)]


register_op("MaxPool", _pool_infer, attrs=POOL_ATTRS, num_inputs=1)
register_op("AvgPool", _pool_infer, attrs=POOL_ATTRS, num_inputs=1)
register_op("MaxPoolGrad", _max_pool_grad_infer, attrs=POOL_ATTRS, num_inputs=3)
register_op("MaxPoolGradGrad", _max_pool_grad_grad_infer, attrs=POOL_ATTRS,
            num_inputs=3)
register_op("AvgPoolGrad", _avg_pool_grad_infer, attrs=POOL_ATTRS, num_inputs=2)
register_op("MaxPoolWithArgmax", _argmax_infer,
            attrs=dict(POOL_ATTRS, Targmax=("type", dtypes.int64),
                       include_batch_in_index=("bool", False)), num_inputs=1)


def _pool_attrs(op_type, x, ksize, strides, padding, data_format):
    fmt = _s(data_format or "NHWC")
    return {"T": x.dtype.base_dtype, "ksize": four(ksize, "ksize", fmt),
            "strides": four(strides, "strides", fmt),
            "padding": check_padding(op_type, padding, ("SAME", "VALID")),
            "data_format": fmt}


def _pool(op_type, value, ksize, strides, padding, data_format, name, default):
    x = convert_to_tensor(value, name="input")
    attrs = _pool_attrs(op_type, x, ksize, strides, padding, data_format)
    return x.graph.create_op(op_type, [x], attrs, name=name or default).outputs[0]


def max_pool(value, ksize, strides, padding, data_format="NHWC", name=None,
             input=None):
    """The maximum of each ``ksize`` window: ``nd.nn.max_pool(x, [1, 2, 2, 1],
    [1, 2, 2, 1], "SAME")``."""
    return _pool("MaxPool", input if value is None else value, ksize, strides,
                 padding, data_format, name, "MaxPool")


def avg_pool(value, ksize, strides, padding, data_format="NHWC", name=None,
             input=None):
    """The mean of each ``ksize`` window (padding excluded from the count)."""
    return _pool("AvgPool", input if value is None else value, ksize, strides,
                 padding, data_format, name, "AvgPool")


def max_pool2d(input, ksize, strides, padding, data_format="NHWC", name=None):  # noqa
    """``max_pool`` under its TF 1.15 / 2.x name."""
    return max_pool(input, ksize, strides, padding, data_format, name)


def avg_pool2d(value, ksize, strides, padding, data_format="NHWC", name=None):
    """``avg_pool`` under its TF 1.15 / 2.x name."""
    return avg_pool(value, ksize, strides, padding, data_format, name)


def max_pool_with_argmax(input, ksize, strides, padding,
                         data_format="NHWC", Targmax=None, name=None,
                         output_dtype=None, include_batch_in_index=False):
    """(max_pool output, argmax): each argmax is the flat index
    ``(y * width + x) * channels + c`` of its maximum (plus ``b * height * width *
    channels`` with ``include_batch_in_index``)."""
    x = convert_to_tensor(input, name="input")
    targ = output_dtype or Targmax or dtypes.int64
    attrs = _pool_attrs("MaxPoolWithArgmax", x, ksize, strides, padding, data_format)
    attrs.update(Targmax=dtypes.as_dtype(targ),
                 include_batch_in_index=bool(include_batch_in_index))
    op = x.graph.create_op("MaxPoolWithArgmax", [x], attrs,
                           name=name or "MaxPoolWithArgmax")
    return op.outputs[0], op.outputs[1]


def max_pool_grad(orig_input, orig_output, grad, ksize, strides, padding,
                  data_format="NHWC", name=None):
    """The gradient of ``max_pool``: ``grad`` routed to each window's maximum."""
    x = convert_to_tensor(orig_input)
    attrs = _pool_attrs("MaxPoolGrad", x, ksize, strides, padding, data_format)
    return get_default_graph().create_op(
        "MaxPoolGrad", [x, convert_to_tensor(orig_output), convert_to_tensor(grad)],
        attrs, name=name or "MaxPoolGrad").outputs[0]


def max_pool_grad_grad(orig_input, orig_output, grad, ksize, strides, padding,
                       data_format="NHWC", name=None):
    x = convert_to_tensor(orig_input)
    attrs = _pool_attrs("MaxPoolGradGrad", x, ksize, strides, padding, data_format)
    return get_default_graph().create_op(
        "MaxPoolGradGrad", [x, convert_to_tensor(orig_output),
                            convert_to_tensor(grad)],
        attrs, name=name or "MaxPoolGradGrad").outputs[0]


def avg_pool_grad(orig_input_shape, grad, ksize, strides, padding,
                  data_format="NHWC", name=None):
    """The gradient of ``avg_pool``: each output's gradient spread evenly over
    the real elements of its window."""
    grad = convert_to_tensor(grad)
    attrs = _pool_attrs("AvgPoolGrad", grad, ksize, strides, padding, data_format)
    return get_default_graph().create_op(
        "AvgPoolGrad", [_sizes(orig_input_shape), grad], attrs,
        name=name or "AvgPoolGrad").outputs[0]


__all__ = ["avg_pool", "avg_pool2d", "max_pool", "max_pool2d", "max_pool_with_argmax"]
