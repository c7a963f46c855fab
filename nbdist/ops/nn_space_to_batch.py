"""``nn.with_space_to_batch`` (TF's): runs an op of stride-1 windows with a
dilation by moving the dilated grid into the batch (``space_to_batch_nd``),
applying ``op`` with ``"VALID"`` padding, and moving it back
(``batch_to_space_nd``), the way ``atrous_conv2d`` works.

>>> import numpy as np, nbdist as nd
>>> x = np.arange(16, dtype=np.float32).reshape(1, 4, 4, 1)
>>> w = np.ones((2, 2, 1, 1), np.float32)
>>> y = nd.nn.with_space_to_batch(
...     x, [2, 2], "VALID",
...     lambda v, n, p: nd.nn.conv2d(v, w, [1, 1, 1, 1], p))
>>> with nd.Session() as s:
...     s.run(y)[0, :, :, 0].tolist()
[[20.0, 24.0], [36.0, 40.0]]
"""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.op_util import op_scope
from nbdist.framework.ops import convert_to_tensor
from nbdist.ops import array_ops as A
from nbdist.ops.array_ops_space import (
    batch_to_space_nd,
    required_space_to_batch_paddings,
    space_to_batch_nd,
)


def with_space_to_batch(input, dilation_rate, padding, op,
                        filter_shape=None, spatial_dims=None, data_format=None):
    """``op(x, num_spatial_dims, padding)`` over ``input`` as if its window were
    dilated by ``dilation_rate`` along ``spatial_dims`` (default: the dims
    after the batch, or after the channels for an ``NC...`` ``data_format``);
    ``"SAME"`` padding needs ``filter_shape``."""
    with op_scope(None, "with_space_to_batch", [input]):
        x = convert_to_tensor(input, name="input")
        rate = np.asarray(dilation_rate, dtype=np.int32).reshape(-1)
        n = rate.size
        if np.any(rate < 1):
            raise ValueError(f"dilation_rate must be positive, got {rate.tolist()}")
        if spatial_dims is None:
            first = 2 if data_format is not None and data_format.startswith("NC") \
                else 1
            spatial_dims = list(range(first, first + n))
        spatial_dims = [int(d) for d in spatial_dims]
        if len(spatial_dims) != n or spatial_dims != sorted(set(spatial_dims)):
            raise ValueError("spatial_dims must be a strictly increasing list of "
                             f"{n} dimensions, got {spatial_dims}")
        if padding not in ("SAME", "VALID"):
            raise ValueError(f"padding must be SAME or VALID, got {padding!r}")
        if np.all(rate == 1):
            return op(x, n, padding)
        if padding == "SAME":
            if filter_shape is None:
                raise ValueError("filter_shape must be specified for SAME padding")
            size = (np.asarray(filter_shape, np.int32).reshape(-1) - 1) * rate + 1
            start = (size - 1) // 2
            base = np.stack([start, size - 1 - start], axis=1)
        else:
            base = np.zeros([n, 2], np.int32)
        # Dims between the batch and the first spatial dim move with block 1.
        lead = spatial_dims[0] - 1
        block = np.ones(spatial_dims[-1], np.int32)
        full_base = np.zeros([spatial_dims[-1], 2], np.int32)
        for k, d in enumerate(spatial_dims):
            block[d - 1], full_base[d - 1] = rate[k], base[k]
        block, full_base = block[lead:], full_base[lead:]
        shape = A.shape(x)[spatial_dims[0]:spatial_dims[-1] + 1]
        paddings, crops = required_space_to_batch_paddings(
            shape, block, convert_to_tensor(full_base, dtype=dtypes.int32))
        if lead:
            zeros = np.zeros([lead, 2], np.int32)
            paddings = A.concat([zeros, paddings], 0)
            crops = A.concat([zeros, crops], 0)
            block = np.concatenate([np.ones(lead, np.int32), block])
        moved = space_to_batch_nd(x, block, paddings)
        return batch_to_space_nd(op(moved, n, "VALID"), block, crops)


__all__ = ["with_space_to_batch"]
