"""Initializers: ``init(shape, dtype, partition_info)`` returns the initial
value of a variable (or of one shard of a partitioned one).

>>> import nbdist as nd
>>> with nd.Session() as s:
...     s.run(nd.ones_initializer()([2])).tolist()
[1.0, 1.0]
"""

from __future__ import annotations

import math

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.tensor_shape import as_shape


# -- initializers ---------------------------------------------------------------------
class Initializer:
    """``init(shape, dtype)`` returns a tensor of that shape and dtype."""

    def __call__(self, shape, dtype=None, partition_info=None):
        raise NotImplementedError


class zeros_initializer(Initializer):  # noqa: N801 - TF's names
    def __init__(self, dtype=dtypes.float32):
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from nbdist.framework.constant_op import constant

        dtype = dtypes.as_dtype(dtype or self.dtype)
        return constant(np.zeros(as_shape(shape).as_list(), dtype.as_numpy_dtype),
                        dtype=dtype)


class ones_initializer(Initializer):  # noqa: N801
    def __init__(self, dtype=dtypes.float32):
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from nbdist.framework.constant_op import constant

        dtype = dtypes.as_dtype(dtype or self.dtype)
        return constant(np.ones(as_shape(shape).as_list(), dtype.as_numpy_dtype),
                        dtype=dtype)


class constant_initializer(Initializer):  # noqa: N801
    def __init__(self, value=0, dtype=dtypes.float32, verify_shape=False):
        self.value = value
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from nbdist.framework.constant_op import constant

        dtype = dtypes.as_dtype(dtype or self.dtype)
        return constant(self.value, dtype=dtype, shape=shape)


class random_normal_initializer(Initializer):  # noqa: N801
    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=dtypes.float32):
        self.mean, self.stddev, self.seed = mean, stddev, seed
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from nbdist.ops.random_ops import random_normal

        return random_normal(shape, self.mean, self.stddev,
                             dtype or self.dtype, seed=self.seed)


class random_uniform_initializer(Initializer):  # noqa: N801
    def __init__(self, minval=0.0, maxval=None, seed=None, dtype=dtypes.float32):
        self.minval, self.maxval, self.seed = minval, maxval, seed
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from nbdist.ops.random_ops import random_uniform

        maxval = 1.0 if self.maxval is None else self.maxval
        return random_uniform(shape, self.minval, maxval, dtype or self.dtype,
                              seed=self.seed)


class glorot_uniform_initializer(Initializer):  # noqa: N801
    def __init__(self, seed=None, dtype=dtypes.float32):
        self.seed = seed
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from nbdist.ops.random_ops import random_uniform

        # A shard's fans are those of the whole variable, as in TF.
        dims = as_shape(partition_info.full_shape if partition_info is not None
                        else shape).as_list()
        if len(dims) == 0:
            fan_in = fan_out = 1
        elif len(dims) == 1:
            fan_in = fan_out = dims[0]
        else:
            receptive = int(np.prod(dims[:-2])) if len(dims) > 2 else 1
            fan_in, fan_out = dims[-2] * receptive, dims[-1] * receptive
        limit = float(np.sqrt(6.0 / max(1.0, (fan_in + fan_out))))
        return random_uniform(shape, -limit, limit, dtype or self.dtype,
                              seed=self.seed)


# -- TF1's other initializers ----------------------------------------------------------
def _compute_fans(shape):
    """(fan_in, fan_out) of a weight shape, as TF: a conv kernel's receptive
    field multiplies both."""
    dims = [int(d) for d in shape]
    if not dims:
        return 1, 1
    if len(dims) == 1:
        return dims[0], dims[0]
    receptive = int(np.prod(dims[:-2])) if len(dims) > 2 else 1
    return dims[-2] * receptive, dims[-1] * receptive


def _full_shape(shape, partition_info):
    # A shard is scaled as the whole variable, as in TF.
    return as_shape(partition_info.full_shape if partition_info is not None
                    else shape).as_list()


def _float_dtype(dtype) -> dtypes.DType:
    dtype = dtypes.as_dtype(dtype).base_dtype
    if not dtype.is_floating:
        raise ValueError(f"Expected floating point type, got {dtype.name}.")
    return dtype


class truncated_normal_initializer(Initializer):  # noqa: N801
    """Samples N(mean, stddev**2), redrawing samples beyond two stddevs."""

    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=dtypes.float32):
        self.mean, self.stddev, self.seed = mean, stddev, seed
        self.dtype = _float_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from nbdist.ops.random_ops import truncated_normal

        return truncated_normal(shape, self.mean, self.stddev,
                                _float_dtype(dtype or self.dtype), seed=self.seed)

    def get_config(self):
        return {"mean": self.mean, "stddev": self.stddev, "seed": self.seed,
                "dtype": self.dtype.name}


class uniform_unit_scaling_initializer(Initializer):  # noqa: N801
    """Uniform in [-m, m], m = factor * sqrt(3 / input_size), the input size being
    the product of all dimensions but the last (TF1's deprecated initializer)."""

    def __init__(self, factor=1.0, seed=None, dtype=dtypes.float32):
        self.factor, self.seed = factor, seed
        self.dtype = _float_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from nbdist.ops.random_ops import random_uniform

        input_size = max(float(np.prod(_full_shape(shape, partition_info)[:-1])), 1.0)
        max_val = math.sqrt(3 / input_size) * self.factor
        return random_uniform(shape, -max_val, max_val,
                              _float_dtype(dtype or self.dtype), seed=self.seed)

    def get_config(self):
        return {"factor": self.factor, "seed": self.seed, "dtype": self.dtype.name}


# scipy.stats.truncnorm.std(a=-2, b=2, loc=0., scale=1.): the truncated normal's
# stddev, divided out so the samples have the variance asked for (as TF).
_TRUNCATED_NORMAL_STDDEV = 0.87962566103423978


class variance_scaling_initializer(Initializer):  # noqa: N801
    """Samples with variance ``scale / n``, ``n`` the fan-in, fan-out or their
    mean (``mode``), from a truncated normal (``"truncated_normal"``, also
    ``"normal"``), a normal (``"untruncated_normal"``) or a uniform distribution.

    >>> import nbdist as nd
    >>> init = nd.variance_scaling_initializer(scale=2.0, mode="fan_in")
    >>> init.get_config()["distribution"]
    'truncated_normal'
    """

    def __init__(self, scale=1.0, mode="fan_in", distribution="truncated_normal",
                 seed=None, dtype=dtypes.float32):
        if scale <= 0.0:
            raise ValueError("`scale` must be positive float.")
        if mode not in ("fan_in", "fan_out", "fan_avg"):
            raise ValueError(f"Invalid `mode` argument: {mode}")
        distribution = distribution.lower()
        if distribution not in ("normal", "uniform", "truncated_normal",
                                "untruncated_normal"):
            raise ValueError(f"Invalid `distribution` argument: {distribution}")
        self.scale, self.mode, self.distribution = scale, mode, distribution
        self.seed = seed
        self.dtype = _float_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from nbdist.ops.random_ops import random_normal, random_uniform
        from nbdist.ops.random_ops import truncated_normal

        dtype = _float_dtype(dtype or self.dtype)
        fan_in, fan_out = _compute_fans(_full_shape(shape, partition_info))
        n = {"fan_in": fan_in, "fan_out": fan_out,
             "fan_avg": (fan_in + fan_out) / 2.0}[self.mode]
        scale = self.scale / max(1.0, n)
        if self.distribution in ("normal", "truncated_normal"):
            stddev = math.sqrt(scale) / _TRUNCATED_NORMAL_STDDEV
            return truncated_normal(shape, 0.0, stddev, dtype, seed=self.seed)
        if self.distribution == "untruncated_normal":
            return random_normal(shape, 0.0, math.sqrt(scale), dtype, seed=self.seed)
        limit = math.sqrt(3.0 * scale)
        return random_uniform(shape, -limit, limit, dtype, seed=self.seed)

    def get_config(self):
        return {"scale": self.scale, "mode": self.mode,
                "distribution": self.distribution, "seed": self.seed,
                "dtype": self.dtype.name}


class glorot_normal_initializer(variance_scaling_initializer):  # noqa: N801
    """Xavier normal: a truncated normal of variance 2 / (fan_in + fan_out)."""

    def __init__(self, seed=None, dtype=dtypes.float32):
        super().__init__(1.0, "fan_avg", "truncated_normal", seed, dtype)

    def get_config(self):
        return {"seed": self.seed, "dtype": self.dtype.name}


def he_normal(seed=None):
    return variance_scaling_initializer(2.0, "fan_in", "truncated_normal", seed)


def he_uniform(seed=None):
    return variance_scaling_initializer(2.0, "fan_in", "uniform", seed)


def lecun_normal(seed=None):
    return variance_scaling_initializer(1.0, "fan_in", "truncated_normal", seed)


def lecun_uniform(seed=None):
    return variance_scaling_initializer(1.0, "fan_in", "uniform", seed)


class orthogonal_initializer(Initializer):  # noqa: N801
    """A (semi-)orthogonal matrix times ``gain``, from the QR decomposition of a
    normal sample; shapes of rank > 2 are flattened to (prod(shape[:-1]), shape[-1])."""

    def __init__(self, gain=1.0, seed=None, dtype=dtypes.float32):
        self.gain, self.seed = gain, seed
        self.dtype = _float_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from nbdist.ops.array_ops_shape import reshape
        from nbdist.ops.array_ops_transform import transpose
        from nbdist.ops.linalg_ops import qr
        from nbdist.ops.math_ops_elementwise import multiply, sign
        from nbdist.ops.math_ops_reduction import reduce_sum
        from nbdist.ops.random_ops import random_normal

        dtype = _float_dtype(dtype or self.dtype)
        dims = as_shape(shape).as_list()
        if len(dims) < 2:
            raise ValueError("The tensor to initialize must be at least "
                             "two-dimensional")
        rows, cols = int(np.prod(dims[:-1])), int(dims[-1])
        flat = (cols, rows) if rows < cols else (rows, cols)
        q, r = qr(random_normal(flat, dtype=dtype, seed=self.seed))
        # Signs of r's diagonal make the distribution uniform (Mezzadri 2007).
        k = min(flat)
        diag = reduce_sum(multiply(r, np.eye(k, dtype=dtype.as_numpy_dtype)), axis=0)
        q = multiply(q, sign(diag))
        if rows < cols:
            q = transpose(q)
        return multiply(reshape(q, dims), np.asarray(self.gain, dtype.as_numpy_dtype))

    def get_config(self):
        return {"gain": self.gain, "seed": self.seed, "dtype": self.dtype.name}


class identity_initializer(Initializer):  # noqa: N801
    """``gain`` times the identity matrix (2-D shapes only)."""

    def __init__(self, gain=1.0, dtype=dtypes.float32):
        self.gain = gain
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from nbdist.framework.constant_op import constant

        dtype = dtypes.as_dtype(dtype or self.dtype)
        full = _full_shape(shape, partition_info)
        if len(full) != 2:
            raise ValueError("Identity matrix initializer can only be used for 2D "
                             "matrices.")
        eye = np.eye(*full) * self.gain
        if partition_info is not None:
            dims = as_shape(shape).as_list()
            start = partition_info.var_offset
            eye = eye[start[0]:start[0] + dims[0], start[1]:start[1] + dims[1]]
        return constant(eye.astype(dtype.as_numpy_dtype), dtype=dtype)

    def get_config(self):
        return {"gain": self.gain, "dtype": self.dtype.name}
