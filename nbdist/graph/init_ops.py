"""Initializers: ``init(shape, dtype, partition_info)`` returns the initial
value of a variable (or of one shard of a partitioned one).

>>> import nbdist as nd
>>> with nd.Session() as s:
...     s.run(nd.ones_initializer()([2])).tolist()
[1.0, 1.0]
"""

from __future__ import annotations

import numpy as np

from nbdist.graph import dtypes
from nbdist.graph.shapes import as_shape


# -- initializers ---------------------------------------------------------------------
class Initializer:
    """``init(shape, dtype)`` returns a tensor of that shape and dtype."""

    def __call__(self, shape, dtype=None, partition_info=None):
        raise NotImplementedError


class zeros_initializer(Initializer):  # noqa: N801 - TF's names
    def __init__(self, dtype=dtypes.float32):
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from nbdist.graph.array_ops import constant

        dtype = dtypes.as_dtype(dtype or self.dtype)
        return constant(np.zeros(as_shape(shape).as_list(), dtype.as_numpy_dtype),
                        dtype=dtype)


class ones_initializer(Initializer):  # noqa: N801
    def __init__(self, dtype=dtypes.float32):
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from nbdist.graph.array_ops import constant

        dtype = dtypes.as_dtype(dtype or self.dtype)
        return constant(np.ones(as_shape(shape).as_list(), dtype.as_numpy_dtype),
                        dtype=dtype)


class constant_initializer(Initializer):  # noqa: N801
    def __init__(self, value=0, dtype=dtypes.float32, verify_shape=False):
        self.value = value
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from nbdist.graph.array_ops import constant

        dtype = dtypes.as_dtype(dtype or self.dtype)
        return constant(self.value, dtype=dtype, shape=shape)


class random_normal_initializer(Initializer):  # noqa: N801
    def __init__(self, mean=0.0, stddev=1.0, seed=None, dtype=dtypes.float32):
        self.mean, self.stddev, self.seed = mean, stddev, seed
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from nbdist.graph.random_ops import random_normal

        return random_normal(shape, self.mean, self.stddev,
                             dtype or self.dtype, seed=self.seed)


class random_uniform_initializer(Initializer):  # noqa: N801
    def __init__(self, minval=0.0, maxval=None, seed=None, dtype=dtypes.float32):
        self.minval, self.maxval, self.seed = minval, maxval, seed
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from nbdist.graph.random_ops import random_uniform

        maxval = 1.0 if self.maxval is None else self.maxval
        return random_uniform(shape, self.minval, maxval, dtype or self.dtype,
                              seed=self.seed)


class glorot_uniform_initializer(Initializer):  # noqa: N801
    def __init__(self, seed=None, dtype=dtypes.float32):
        self.seed = seed
        self.dtype = dtypes.as_dtype(dtype)

    def __call__(self, shape, dtype=None, partition_info=None):
        from nbdist.graph.random_ops import random_uniform

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
