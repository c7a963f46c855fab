"""``xavier_initializer`` and ``variance_scaling_initializer`` of TF1's
``tf.contrib.layers`` (fans from the shape; truncated normal or uniform)."""

from __future__ import annotations

import math

import numpy as np

import nbdist as nd


def variance_scaling_initializer(factor=2.0, mode="FAN_IN", uniform=False,
                                 seed=None, dtype=nd.float32):
    """Samples with variance ``factor / n``, ``n`` the fan in, fan out or their
    average (``mode``): uniform in ±sqrt(3 factor / n), or a normal truncated
    at two stddevs with stddev sqrt(1.3 factor / n) (He et al. by default)."""
    if not nd.as_dtype(dtype).is_floating:
        raise TypeError("Cannot create initializer for non-floating point type.")
    if mode not in ("FAN_IN", "FAN_OUT", "FAN_AVG"):
        raise TypeError(f"Unknown mode {mode} [FAN_IN, FAN_OUT, FAN_AVG]")

    def init(shape, dtype=dtype, partition_info=None):
        dims = nd.TensorShape(partition_info.full_shape if partition_info is not None
                              else shape).as_list()
        if not dtype or not nd.as_dtype(dtype).is_floating:
            raise TypeError("Cannot create initializer for non-floating point type.")
        if len(dims) > 1:
            receptive = int(np.prod(dims[:-2])) if len(dims) > 2 else 1
            fan_in, fan_out = dims[-2] * receptive, dims[-1] * receptive
        else:
            fan_in = fan_out = dims[0] if dims else 1
        n = {"FAN_IN": fan_in, "FAN_OUT": fan_out,
             "FAN_AVG": (fan_in + fan_out) / 2.0}[mode]
        if uniform:
            limit = math.sqrt(3.0 * factor / n)
            return nd.random_uniform(shape, -limit, limit, dtype, seed=seed)
        stddev = math.sqrt(1.3 * factor / n)
        return nd.truncated_normal(shape, 0.0, stddev, dtype, seed=seed)

    return init


def xavier_initializer(uniform=True, seed=None, dtype=nd.float32):
    """Glorot and Bengio's initializer: variance 2 / (fan_in + fan_out)."""
    return variance_scaling_initializer(factor=1.0, mode="FAN_AVG", uniform=uniform,
                                        seed=seed, dtype=dtype)


xavier_initializer_conv2d = xavier_initializer
