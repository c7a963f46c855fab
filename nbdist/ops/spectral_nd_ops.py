"""N-D Fourier transforms over chosen axes (TF's ``tf.fftnd``, ``ifftnd``,
``rfftnd``, ``irfftnd``): each axis of ``axes`` is cropped or zero-padded to its
``fft_length`` first, as ``numpy.fft.fftn(x, s=fft_length, axes=axes)``.

>>> import nbdist as nd
>>> with nd.Session() as s:
...     s.run(nd.rfftnd([[1.0, 0.0], [0.0, 0.0]], [2, 2], [0, 1])).tolist()
[[(1+0j), (1+0j)], [(1+0j), (1+0j)]]
"""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import COMPLEX, FLOAT, check_type, op_scope
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape

# op type -> (input is complex, output keeps half of the last axis)
_KINDS = {"FFTND": (True, False), "IFFTND": (True, False),
          "RFFTND": (False, True), "IRFFTND": (True, False)}


def _nd_infer(op_type):
    in_complex, halves = _KINDS[op_type]

    def infer(c):
        check_type(c, 0, COMPLEX if in_complex else FLOAT, "input")
        out = (c.attr("Tcomplex") if op_type == "RFFTND" else
               c.attr("Treal") if op_type == "IRFFTND" else c.dtype(0))
        s = c.shape(0)
        lengths, axes = c.constant(1), c.constant(2)
        if s.rank is None:
            return [(out, TensorShape(None))]
        dims = s.as_list()
        if lengths is None or axes is None:
            return [(out, TensorShape([None] * len(dims)))]
        lengths, axes = np.ravel(lengths).tolist(), np.ravel(axes).tolist()
        if len(lengths) != len(axes):
            raise ValueError(f"{op_type}: fft_length and axes must have the same "
                             f"length, got {len(lengths)} and {len(axes)}")
        for n, a in zip(lengths, axes):
            if not -len(dims) <= a < len(dims):
                raise ValueError(f"{op_type}: axis {a} is out of range for an input "
                                 f"of rank {len(dims)}")
            dims[a] = int(n)
        if halves and axes:
            dims[axes[-1]] = int(lengths[-1]) // 2 + 1
        return [(out, TensorShape(dims))]

    return infer


for _t in ("FFTND", "IFFTND"):
    register_op(_t, _nd_infer(_t), attrs={"Tcomplex": ("type", None)}, num_inputs=3)
register_op("RFFTND", _nd_infer("RFFTND"),
            attrs={"Treal": ("type", dtypes.float32),
                   "Tcomplex": ("type", dtypes.complex64)}, num_inputs=3)
register_op("IRFFTND", _nd_infer("IRFFTND"),
            attrs={"Treal": ("type", dtypes.float32),
                   "Tcomplex": ("type", dtypes.complex64)}, num_inputs=3)


def _nd(op_type, input, fft_length, axes, name, out_dtype=None):
    with op_scope(name, op_type, [input]) as (g, scope):
        x = convert_to_tensor(input, name="input")
        if _KINDS[op_type][0] and not x.dtype.is_complex:
            x = convert_to_tensor(input, dtype=dtypes.complex64, name="input")
        lengths = convert_to_tensor(fft_length, dtype=dtypes.int32, name="fft_length")
        axes = convert_to_tensor(axes, dtype=dtypes.int32, name="axes")
        attrs = {"RFFTND": {"Treal": x.dtype.base_dtype, "Tcomplex": out_dtype},
                 "IRFFTND": {"Tcomplex": x.dtype.base_dtype, "Treal": out_dtype},
                 }.get(op_type, {"Tcomplex": x.dtype.base_dtype})
        return g.create_op(op_type, [x, lengths, axes], attrs, name=scope).outputs[0]


def fftnd(input, fft_length, axes, name=None):
    """The N-D FFT of complex ``input`` over ``axes``, each cropped or zero-padded
    to its entry of ``fft_length``."""
    return _nd("FFTND", input, fft_length, axes, name)


def ifftnd(input, fft_length, axes, name=None):
    """The inverse of ``fftnd``: the N-D inverse FFT over ``axes``."""
    return _nd("IFFTND", input, fft_length, axes, name)


def rfftnd(input, fft_length, axes, Tcomplex=dtypes.complex64,
           name=None):
    """The N-D FFT of real ``input`` over ``axes``; the last axis keeps its
    ``fft_length // 2 + 1`` non-negative frequencies."""
    return _nd("RFFTND", input, fft_length, axes, name, dtypes.as_dtype(Tcomplex))


def irfftnd(input, fft_length, axes, Treal=dtypes.float32,
            name=None):
    """The inverse of ``rfftnd``: a real signal of ``fft_length`` over ``axes``."""
    return _nd("IRFFTND", input, fft_length, axes, name, dtypes.as_dtype(Treal))


__all__ = ["fftnd", "ifftnd", "irfftnd", "rfftnd"]
