"""Convolution ops (``Conv2D``, its two backprops, ``DepthwiseConv2dNative``) and
the ``nd.nn`` wrappers built on them: ``conv2d``, ``conv2d_transpose``,
``depthwise_conv2d``, ``separable_conv2d``, ``conv1d``, ``convolution``.

Output sizes follow TF's padding arithmetic: ``VALID`` gives
``ceil((in - (k - 1) * d) / s)``, ``SAME`` gives ``ceil(in / s)`` with the odd
pixel of padding after; ``EXPLICIT`` takes ``explicit_paddings``.
"""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.ops import Tensor, convert_to_tensor, get_default_graph
from nbdist.framework.tensor_shape import TensorShape

_FLOATS = (dtypes.float16, dtypes.float32, dtypes.float64)
_INDEX_TYPES = (dtypes.int32, dtypes.int64)
PADDINGS = ("SAME", "VALID", "EXPLICIT")


def _s(v):
    return v.decode() if isinstance(v, bytes) else v


def _fmt_shapes(c):
    return ", ".join("?" if s.rank is None else
                     "[" + ",".join("?" if d is None else str(d) for d in s.dims) + "]"
                     for s in c.input_shapes)


def op_error(c, msg):
    """A build-time ValueError naming the node, as TF's shape functions do."""
    return ValueError(f"{msg} for '{c.name}' (op: '{c.op_type}') with input "
                      f"shapes: {_fmt_shapes(c)}.")


def rank4(c, i):
    s = c.shape(i)
    if s.rank is not None and s.rank != 4:
        raise op_error(c, f"Shape must be rank 4 but is rank {s.rank}")
    return s.with_rank(4)


def check_float(c, indices):
    d = c.check_same_dtypes(indices)
    if d not in _FLOATS:
        raise TypeError(f"{c.op_type} needs floating point inputs, got {d.name}")
    return d


def check_padding(op_type, padding, allowed=PADDINGS):
    p = _s(padding)
    if p not in allowed:
        raise ValueError(f"Attr 'padding' of '{op_type}' Op passed string '{p}' "
                         f"not in: " + ", ".join(f'"{a}"' for a in allowed) + ".")
    return p


def spatial_axes(data_format):
    """(batch, height, width, channel) axes of a 4-D tensor in ``data_format``."""
    fmt = _s(data_format)
    if fmt == "NHWC":
        return 0, 1, 2, 3
    if fmt == "NCHW":
        return 0, 2, 3, 1
    raise ValueError(f"data_format must be NHWC or NCHW, got {fmt!r}")


def window_attr(c, name, fmt, what=None):
    """The (h, w) of a 4-value attr (strides, ksize, dilations) in ``fmt``."""
    v = list(c.attr(name))
    if len(v) != 4:
        raise op_error(c, f"{c.op_type} requires the {what or name} attribute to "
                       f"contain 4 values, but got: {len(v)}")
    n, h, w, ch = spatial_axes(fmt)
    if v[n] != 1 or v[ch] != 1:
        raise op_error(c, f"Current implementation does not yet support {name} in "
                       f"the batch and depth dimensions")
    if min(v) < 1:
        raise op_error(c, f"{name} must be positive, got {v}")
    return v[h], v[w]


def output_size(c, size, k, s, d, padding, explicit=(0, 0)):
    """TF's GetWindowedOutputSize: (out, pad_before, pad_after), or Nones."""
    if size is None:
        return None, None, None
    eff = (k - 1) * d + 1
    if padding == "VALID":
        if size < eff:
            raise op_error(c, f"Negative dimension size caused by subtracting {eff} "
                           f"from {size}")
        return (size - eff) // s + 1, 0, 0
    if padding == "SAME":
        out = -(-size // s)
        total = max((out - 1) * s + eff - size, 0)
        return out, total // 2, total - total // 2
    lo, hi = explicit
    if size + lo + hi < eff:
        raise op_error(c, f"Negative dimension size caused by subtracting {eff} "
                       f"from {size + lo + hi}")
    return (size + lo + hi - eff) // s + 1, lo, hi


def explicit_pads(c, fmt):
    """The (top, bottom), (left, right) pairs of ``explicit_paddings``."""
    p = list(c.attr("explicit_paddings")) if "explicit_paddings" in c.attrs else []
    if _s(c.attr("padding")) != "EXPLICIT":
        if p:
            raise op_error(c, "explicit_paddings must be empty unless padding is "
                           "EXPLICIT")
        return (0, 0), (0, 0)
    if len(p) != 8:
        raise op_error(c, f"explicit_paddings must contain 8 values, got {len(p)}")
    n, h, w, ch = spatial_axes(c.attr("data_format"))
    if p[2 * n] or p[2 * n + 1] or p[2 * ch] or p[2 * ch + 1]:
        raise op_error(c, "explicit_paddings in the batch or depth dimensions "
                       "must be 0")
    if min(p) < 0:
        raise op_error(c, f"explicit_paddings must be nonnegative, got {p}")
    return (p[2 * h], p[2 * h + 1]), (p[2 * w], p[2 * w + 1])


def make_shape(fmt, n, h, w, ch):
    return TensorShape([n, h, w, ch] if _s(fmt) == "NHWC" else [n, ch, h, w])


def _conv_out_shape(c, x, kh, kw, out_ch):
    fmt = c.attr("data_format")
    n_ax, h_ax, w_ax, _ = spatial_axes(fmt)
    sh, sw = window_attr(c, "strides", fmt)
    dh, dw = (window_attr(c, "dilations", fmt) if "dilations" in c.attrs
              else (1, 1))
    pad = check_padding(c.op_type, c.attr("padding"))
    ph, pw = explicit_pads(c, fmt)
    ho = output_size(c, x[h_ax], kh, sh, dh, pad, ph)[0] if kh is not None else None
    wo = output_size(c, x[w_ax], kw, sw, dw, pad, pw)[0] if kw is not None else None
    return make_shape(fmt, x[n_ax], ho, wo, out_ch)


def _conv2d_infer(c):
    d = check_float(c, [0, 1])
    x, f = rank4(c, 0), rank4(c, 1)
    ch = x[spatial_axes(c.attr("data_format"))[3]]
    if ch is not None and f[2] is not None and ch != f[2]:
        raise op_error(c, f"Depth of input ({ch}) is not equal to the input depth "
                       f"of filter ({f[2]})")
    return [(d, _conv_out_shape(c, x, f[0], f[1], f[3]))]


def _depthwise_infer(c):
    d = check_float(c, [0, 1])
    x, f = rank4(c, 0), rank4(c, 1)
    ch = x[spatial_axes(c.attr("data_format"))[3]]
    if ch is not None and f[2] is not None and ch != f[2]:
        raise op_error(c, f"Dimensions must be equal, but are {ch} and {f[2]}")
    ch = ch if ch is not None else f[2]
    out = None if ch is None or f[3] is None else ch * f[3]
    return [(d, _conv_out_shape(c, x, f[0], f[1], out))]


def _sizes_shape(c, i):
    if c.dtype(i) not in _INDEX_TYPES:
        raise TypeError(f"{c.op_type}: sizes must be int32, got {c.dtype(i).name}")
    v = c.constant(i)
    if v is None:
        return TensorShape([None] * 4)
    v = np.ravel(np.asarray(v))
    if v.size != 4:
        raise op_error(c, f"{c.op_type} requires a 4-element sizes vector, got "
                       f"{v.size}")
    return TensorShape([int(x) for x in v])


def _backprop_input_infer(c):
    d = check_float(c, [1, 2])
    rank4(c, 1), rank4(c, 2)
    check_padding(c.op_type, c.attr("padding"))
    return [(d, _sizes_shape(c, 0))]


def _backprop_filter_infer(c):
    d = check_float(c, [0, 2])
    rank4(c, 0), rank4(c, 2)
    check_padding(c.op_type, c.attr("padding"))
    return [(d, _sizes_shape(c, 1))]


CONV_ATTRS = {
    "T": ("type", None), "strides": ("list(int)", REQUIRED),
    "use_cudnn_on_gpu": ("bool", True), "padding": ("string", REQUIRED),
    "explicit_paddings": ("list(int)", []), "data_format": ("string", "NHWC"),
    "dilations": ("list(int)", [1, 1, 1, 1]),
}
DEPTHWISE_ATTRS = {k: v for k, v in CONV_ATTRS.items() if k != "use_cudnn_on_gpu"}
register_op("Conv2D", _conv2d_infer, attrs=CONV_ATTRS, num_inputs=2)
register_op("Conv2DBackpropInput", _backprop_input_infer, attrs=CONV_ATTRS,
            num_inputs=3)
register_op("Conv2DBackpropFilter", _backprop_filter_infer, attrs=CONV_ATTRS,
            num_inputs=3)
register_op("DepthwiseConv2dNative", _depthwise_infer, attrs=DEPTHWISE_ATTRS,
            num_inputs=2)
register_op("DepthwiseConv2dNativeBackpropInput", _backprop_input_infer,
            attrs=DEPTHWISE_ATTRS, num_inputs=3)
register_op("DepthwiseConv2dNativeBackpropFilter", _backprop_filter_infer,
            attrs=DEPTHWISE_ATTRS, num_inputs=3)


# -- wrappers --------------------------------------------------------------------------
def four(v, name, data_format="NHWC"):
    """TF's stride/dilation normalisation: an int, 1, 2 or 4 values -> 4 values."""
    if v is None:
        v = 1
    if isinstance(v, (int, np.integer)):
        v = [int(v)]
    v = [int(x) for x in v]
    if len(v) == 1:
        v = v * 2
    if len(v) == 2:
        return [1, v[0], v[1], 1] if _s(data_format) == "NHWC" else [1, 1, v[0], v[1]]
    if len(v) == 4:
        return v
    raise ValueError(f"{name} should be of length 1, 2 or 4. Received: {name}={v} "
                     f"of length {len(v)}")


def _padding_attrs(op_type, padding, data_format):
    """(padding string, explicit_paddings) from a string or a list of pairs."""
    if isinstance(padding, (list, tuple)):
        pairs = [list(p) for p in padding]
        if len(pairs) != 4 or any(len(p) != 2 for p in pairs):
            raise ValueError(f"padding should be a string or a list of 4 [before, "
                             f"after] pairs, got {padding}")
        return "EXPLICIT", [int(v) for p in pairs for v in p]
    p = _s(padding)
    check_padding(op_type, p, ("SAME", "VALID"))
    return p, []


def _conv_op(op_type, inputs, strides, padding, data_format, dilations, name,
             **extra):
    g = get_default_graph()
    pad, explicit = _padding_attrs(op_type, padding, data_format)
    fmt = _s(data_format or "NHWC")
    attrs = {"T": inputs[-1].dtype.base_dtype, "strides": four(strides, "strides",
                                                               fmt),
             "padding": pad, "explicit_paddings": explicit, "data_format": fmt,
             "dilations": four(dilations, "dilations", fmt), **extra}
    return g.create_op(op_type, inputs, attrs, name=name or op_type).outputs[0]


def _float_pair(a, b, a_name, b_name):
    a = convert_to_tensor(a, name=a_name)
    b = convert_to_tensor(b, dtype=a.dtype.base_dtype, name=b_name)
    return a, b


def _sizes(v):
    if isinstance(v, Tensor):
        return v
    return convert_to_tensor(np.asarray(v, dtype=np.int32))


def conv2d(input, filter=None, strides=None, padding=None,
           use_cudnn_on_gpu=True, data_format="NHWC", dilations=(1, 1, 1, 1),
           name=None, filters=None):
    """2-D convolution (cross-correlation) of ``input`` [N, H, W, C] with
    ``filter`` [kh, kw, C, out]: ``nd.nn.conv2d(x, w, [1, 1, 1, 1], "SAME")``.

    ``padding`` is ``"SAME"``, ``"VALID"`` or explicit ``[[0, 0], [t, b], [l, r],
    [0, 0]]`` pairs.
    """
    filter = filters if filter is None else filter
    x, w = _float_pair(input, filter, "input", "filter")
    return _conv_op("Conv2D", [x, w], strides, padding, data_format, dilations, name,
                    use_cudnn_on_gpu=bool(use_cudnn_on_gpu))


def atrous_conv2d(value, filters, rate, padding, name=None):
    """``conv2d`` with stride 1 and the filter dilated by ``rate``."""
    if int(rate) < 1:
        raise ValueError(f"rate {rate} should be greater than or equal to 1.")
    return conv2d(value, filters, [1, 1, 1, 1], padding,
                  dilations=[1, int(rate), int(rate), 1], name=name or "atrous_conv2d")


def conv2d_backprop_input(input_sizes, filter=None, out_backprop=None,
                          strides=None, padding=None, use_cudnn_on_gpu=True,
                          data_format="NHWC", dilations=(1, 1, 1, 1), name=None,
                          filters=None):
    """The gradient of ``conv2d`` with respect to its input (of ``input_sizes``)."""
    filter = filters if filter is None else filter
    w, dy = _float_pair(filter, out_backprop, "filter", "out_backprop")
    return _conv_op("Conv2DBackpropInput", [_sizes(input_sizes), w, dy], strides,
                    padding, data_format, dilations, name,
                    use_cudnn_on_gpu=bool(use_cudnn_on_gpu))


def conv2d_backprop_filter(input, filter_sizes, out_backprop, strides,
                           padding, use_cudnn_on_gpu=True, data_format="NHWC",
                           dilations=(1, 1, 1, 1), name=None):
    """The gradient of ``conv2d`` with respect to its filter (of ``filter_sizes``)."""
    x, dy = _float_pair(input, out_backprop, "input", "out_backprop")
    return _conv_op("Conv2DBackpropFilter", [x, _sizes(filter_sizes), dy], strides,
                    padding, data_format, dilations, name,
                    use_cudnn_on_gpu=bool(use_cudnn_on_gpu))


def conv2d_transpose(value=None, filter=None, output_shape=None,
                     strides=None, padding="SAME", data_format="NHWC", name=None,
                     input=None, filters=None, dilations=None):
    """The transpose (gradient) of ``conv2d``: ``filter`` is [kh, kw, out, in] and
    ``output_shape`` the 4-D shape of the result."""
    value = input if value is None else value
    filter = filters if filter is None else filter
    g = get_default_graph()
    with g.name_scope(name or "conv2d_transpose") as scope:
        w, x = _float_pair(filter, value, "filter", "value")
        ch_axis = spatial_axes(data_format)[3]
        if (x.shape.rank == 4 and w.shape.rank == 4 and x.shape[ch_axis] is not None
                and w.shape[3] is not None and x.shape[ch_axis] != w.shape[3]):
            raise ValueError(f"input channels does not match filter's input "
                             f"channels, {x.shape[ch_axis]} != {w.shape[3]}")
        if not isinstance(output_shape, Tensor):
            shape = [int(v) for v in output_shape]
            if len(shape) != 4:
                raise ValueError(f"output_shape must have shape (4,), got "
                                 f"({len(shape)},)")
            if w.shape.rank == 4 and w.shape[2] is not None and (
                    shape[ch_axis] != w.shape[2]):
                raise ValueError(f"output_shape does not match filter's output "
                                 f"channels, {shape[ch_axis]} != {w.shape[2]}")
        return _conv_op("Conv2DBackpropInput", [_sizes(output_shape), w, x], strides,
                        padding, data_format, dilations, scope)


def depthwise_conv2d_native(input, filter, strides, padding,
                            data_format="NHWC", dilations=(1, 1, 1, 1), name=None):
    """Each input channel convolved with its own ``channel_multiplier`` filters:
    ``filter`` [kh, kw, C, M] gives C * M output channels."""
    x, w = _float_pair(input, filter, "input", "filter")
    return _conv_op("DepthwiseConv2dNative", [x, w], strides, padding, data_format,
                    dilations, name)


def depthwise_conv2d_native_backprop_input(input_sizes, filter, out_backprop,
                                           strides, padding, data_format="NHWC",
                                           dilations=(1, 1, 1, 1), name=None):
    w, dy = _float_pair(filter, out_backprop, "filter", "out_backprop")
    return _conv_op("DepthwiseConv2dNativeBackpropInput", [_sizes(input_sizes), w, dy],
                    strides, padding, data_format, dilations, name)


def depthwise_conv2d_native_backprop_filter(input, filter_sizes, out_backprop,
                                            strides, padding, data_format="NHWC",
                                            dilations=(1, 1, 1, 1), name=None):
    x, dy = _float_pair(input, out_backprop, "input", "out_backprop")
    return _conv_op("DepthwiseConv2dNativeBackpropFilter",
                    [x, _sizes(filter_sizes), dy], strides, padding, data_format,
                    dilations, name)


def depthwise_conv2d(input, filter, strides, padding, rate=None,
                     name=None, data_format=None, dilations=None):
    """``depthwise_conv2d_native`` with TF1's ``rate`` (dilation) argument."""
    rate = dilations if rate is None else rate
    fmt = data_format or "NHWC"
    with get_default_graph().name_scope(name or "depthwise") as scope:
        return depthwise_conv2d_native(input, filter, strides, padding, fmt,
                                       four(rate, "rate", fmt), name=scope)


def separable_conv2d(input, depthwise_filter, pointwise_filter, strides,
                     padding, rate=None, name=None, data_format=None, dilations=None):
    """A depthwise convolution, then a 1x1 ``pointwise_filter`` convolution."""
    fmt = data_format or "NHWC"
    with get_default_graph().name_scope(name or "separable_conv2d") as scope:
        depthwise = depthwise_conv2d(input, depthwise_filter, strides, padding,
                                     rate=rate if rate is not None else dilations,
                                     name="depthwise", data_format=fmt)
        return conv2d(depthwise, pointwise_filter, [1, 1, 1, 1], "VALID",
                      data_format=fmt, name=scope)


def conv1d(value=None, filters=None, stride=None, padding=None,
           use_cudnn_on_gpu=None, data_format=None, name=None, input=None,
           dilations=None):
    """1-D convolution of ``value`` [N, W, C] (or NCW) with ``filters`` [k, C, out],
    as TF: a ``conv2d`` over a height-1 image."""
    from nbdist.ops import array_ops as A

    value = input if value is None else value
    fmt = data_format or "NWC"
    if fmt not in ("NWC", "NCW", "NHWC", "NCHW"):
        raise ValueError(f"data_format must be NWC or NCW, got {fmt!r}")
    channels_last = fmt in ("NWC", "NHWC")
    stride = 1 if stride is None else stride
    stride = stride[-2 if channels_last else -1] if isinstance(
        stride, (list, tuple)) and len(stride) == 3 else stride
    dil = 1 if dilations is None else dilations
    dil = dil[-2 if channels_last else -1] if isinstance(
        dil, (list, tuple)) and len(dil) == 3 else dil
    with get_default_graph().name_scope(name or "conv1d") as scope:
        value = convert_to_tensor(value, name="input")
        x = A.expand_dims(value, 1 if channels_last else 2)
        w = A.expand_dims(convert_to_tensor(filters, dtype=value.dtype.base_dtype,
                                            name="filters"), 0)
        y = conv2d(x, w, [1, stride] if isinstance(stride, int) else stride, padding,
                   data_format="NHWC" if channels_last else "NCHW",
                   dilations=[1, dil] if isinstance(dil, int) else dil)
        return A.squeeze(y, [1 if channels_last else 2], name=scope)


def convolution(input, filter=None, padding=None, strides=None,
                dilation_rate=None, name=None, data_format=None, filters=None,
                dilations=None):
    """N-D convolution for N = 1 or 2 (``conv1d`` / ``conv2d``)."""
    filter = filters if filter is None else filter
    dilation_rate = dilations if dilation_rate is None else dilation_rate
    w = convert_to_tensor(filter, name="filter")
    rank = w.shape.rank
    if rank == 3:
        return conv1d(input, w, stride=strides or 1, padding=padding,
                      data_format=data_format, dilations=dilation_rate or 1,
                      name=name or "convolution")
    if rank == 4:
        return conv2d(input, w, strides or 1, padding,
                      data_format=data_format or "NHWC",
                      dilations=dilation_rate or 1, name=name or "convolution")
    raise ValueError(f"convolution supports 1-D and 2-D filters (rank 3 or 4), got "
                     f"rank {rank}")


__all__ = [
    "atrous_conv2d",
    "conv1d",
    "conv2d",
    "conv2d_backprop_filter",
    "conv2d_backprop_input",
    "conv2d_transpose",
    "convolution",
    "depthwise_conv2d",
    "depthwise_conv2d_native",
    "depthwise_conv2d_native_backprop_filter",
    "depthwise_conv2d_native_backprop_input",
    "separable_conv2d",
]
