"""TF's generic ``Conv`` op as ``tf.conv`` (2-D and 3-D convolutions with extra
batch dimensions, channels last or first, and grouped filters) and the ``V2``
backprops of ``conv2d`` that take the other operand itself instead of its shape
(``conv2d_backprop_filter_v2``, ``conv2d_backprop_input_v2``). All are built
from ``conv2d``/``conv3d`` and their gradients, so they differentiate.

>>> import numpy as np, nbdist as nd
>>> x = np.ones((1, 3, 3, 1), np.float32)
>>> w = np.ones((2, 2, 1, 1), np.float32)
>>> with nd.Session() as s:
...     s.run(nd.conv(x, w, [1, 1, 1, 1], "VALID"))[0, :, :, 0].tolist()
[[4.0, 4.0], [4.0, 4.0]]
"""

from __future__ import annotations

from nbdist.framework.constant_op import identity
from nbdist.framework.op_util import op_scope
from nbdist.framework.ops import convert_to_tensor
from nbdist.ops import array_ops as A
from nbdist.ops import nn_conv3d_ops, nn_conv_ops

_FORMATS = {("CHANNELS_LAST", 2): "NHWC", ("CHANNELS_FIRST", 2): "NCHW",
            ("CHANNELS_LAST", 3): "NDHWC", ("CHANNELS_FIRST", 3): "NCDHW"}


def _padding(padding, explicit_paddings):
    """TF's ``"EXPLICIT"`` + flat ``explicit_paddings`` as conv2d's pairs."""
    if padding != "EXPLICIT":
        return padding
    flat = list(explicit_paddings)
    return [flat[i:i + 2] for i in range(0, len(flat), 2)]


def _one_conv(x, w, strides, padding, fmt, dilations):
    if len(fmt) == 4:
        return nn_conv_ops.conv2d(x, w, strides, padding, data_format=fmt,
                                  dilations=dilations)
    return nn_conv3d_ops.conv3d(x, w, strides, padding, data_format=fmt,
                                dilations=dilations)


def conv(input, filter, strides, padding, explicit_paddings=(),
         data_format="CHANNELS_LAST", dilations=(), batch_dims=1, groups=1,
         name=None):
    """An N-D convolution (N = 2 or 3) of ``input`` of rank ``N + 1 +
    batch_dims`` with ``filter`` [k1, ..., kN, in / groups, out].

    ``strides`` and ``dilations`` have ``N + 2`` entries (``dilations`` empty
    for ones); ``padding`` is ``"SAME"``, ``"VALID"`` or ``"EXPLICIT"`` with
    ``explicit_paddings`` (2-D only); ``groups`` splits the channels into that
    many independent convolutions."""
    with op_scope(name, "Conv", [input, filter]) as (_, scope):
        x = convert_to_tensor(input, name="input")
        w = convert_to_tensor(filter, dtype=x.dtype.base_dtype, name="filter")
        rank, n = x.shape.rank, w.shape.rank
        if n not in (4, 5) or rank is None or rank != n - 1 + batch_dims:
            raise ValueError(
                f"Conv: input tensor must be rank 4 or 5, excluding extra batch "
                f"dimensions, and the filter rank 4 or 5 to match; got input rank "
                f"{rank} with batch_dims={batch_dims} and filter rank {n}")
        fmt = _FORMATS.get((data_format, n - 2))
        if fmt is None:
            raise ValueError(f"Conv: data_format must be CHANNELS_LAST or "
                             f"CHANNELS_FIRST, got {data_format!r}")
        if len(strides) != n:
            raise ValueError(f"Conv: Stride attribute should contain {n} values, "
                             f"but got: {len(strides)}")
        dilations = list(dilations) or [1] * n
        padding = _padding(padding, explicit_paddings)
        outer = A.shape(x)[:batch_dims]
        if batch_dims != 1:
            x = A.reshape(x, A.concat([[-1], A.shape(x)[batch_dims:]], 0))
        axis = -1 if fmt.endswith("C") else 1
        if groups == 1:
            y = _one_conv(x, w, strides, padding, fmt, dilations)
        else:
            xs = A.split(x, groups, axis=axis)
            ws = A.split(w, groups, axis=-1)
            y = A.concat([_one_conv(xi, wi, strides, padding, fmt, dilations)
                          for xi, wi in zip(xs, ws)], axis)
        if batch_dims != 1:
            y = A.reshape(y, A.concat([outer, A.shape(y)[1:]], 0))
        return identity(y, name=scope)


def conv2d_backprop_filter_v2(input, filter, out_backprop, strides,
                              padding, use_cudnn_on_gpu=True, explicit_paddings=(),
                              data_format="NHWC", dilations=(1, 1, 1, 1),
                              name=None):
    """The gradient of ``conv2d`` with respect to its filter; ``filter`` gives
    only the shape (``conv2d_backprop_filter`` takes the shape itself)."""
    with op_scope(name, "Conv2DBackpropFilterV2", [input, filter]) as (_, scope):
        w = convert_to_tensor(filter, name="filter")
        padding = _padding(padding, explicit_paddings)
        return nn_conv_ops.conv2d_backprop_filter(
            input, A.shape(w), out_backprop, strides, padding, use_cudnn_on_gpu,
            data_format, dilations, name=scope)


def conv2d_backprop_input_v2(input, filter, out_backprop, strides,
                             padding, use_cudnn_on_gpu=True, explicit_paddings=(),
                             data_format="NHWC", dilations=(1, 1, 1, 1), name=None):
    """The gradient of ``conv2d`` with respect to its input; ``input`` gives
    only the shape (``conv2d_backprop_input`` takes the shape itself)."""
    with op_scope(name, "Conv2DBackpropInputV2", [input, filter]) as (_, scope):
        x = convert_to_tensor(input, name="input")
        padding = _padding(padding, explicit_paddings)
        return nn_conv_ops.conv2d_backprop_input(
            A.shape(x), filter, out_backprop, strides, padding, use_cudnn_on_gpu,
            data_format, dilations, name=scope)


__all__ = ["conv", "conv2d_backprop_filter_v2", "conv2d_backprop_input_v2"]
