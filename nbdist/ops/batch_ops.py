"""``nondifferentiable_batch_function`` (TF's decorator): TF queues the calls
of concurrent session runs and evaluates them as one batch along axis 0, for
throughput on accelerators; the values are those of the function itself. nbdist
runs each call as it comes (the same values, batch by batch), and, as in TF,
gradients do not flow through the call.

>>> import nbdist as nd
>>> @nd.compat.v1.nondifferentiable_batch_function(1, 4, 1000)
... def double(x):
...     return x * 2.0
>>> with nd.Session() as s:
...     s.run(double(nd.constant([[1.0], [2.0]]))).tolist()
[[2.0], [4.0]]
"""

from __future__ import annotations

import functools

from nbdist.framework import nest
from nbdist.framework.constant_op import stop_gradient
from nbdist.framework.ops import Tensor, get_default_graph


def nondifferentiable_batch_function(num_batch_threads, max_batch_size,
                                     batch_timeout_micros, allowed_batch_sizes=None,
                                     max_enqueued_batches=10, autograph=True,
                                     enable_large_batch_splitting=True):
    """Decorates a function of batched tensors (axis 0 is the batch); the
    arguments are checked as TF checks them."""
    del batch_timeout_micros, max_enqueued_batches, autograph
    del enable_large_batch_splitting
    if num_batch_threads <= 0:
        raise ValueError(f"num_batch_threads must be positive, got "
                         f"{num_batch_threads}")
    if max_batch_size <= 0:
        raise ValueError(f"max_batch_size must be positive, got {max_batch_size}")
    if allowed_batch_sizes:
        sizes = list(allowed_batch_sizes)
        if sizes != sorted(set(sizes)):
            raise ValueError("allowed_batch_sizes entries must be monotonically "
                             "increasing.")
        if sizes[-1] != max_batch_size:
            raise ValueError("final entry in allowed_batch_sizes must equal "
                             "max_batch_size when enable_large_batch_splitting is "
                             "False.")

    def decorator(fn):
        @functools.wraps(fn)
        def batched(*args):
            with get_default_graph().name_scope("batch"):
                out = fn(*args)
                return nest.map_structure(
                    lambda t: stop_gradient(t) if isinstance(t, Tensor) else t, out)

        return batched

    return decorator


__all__ = ["nondifferentiable_batch_function"]
