"""The hook a distribution strategy installs so that ``Optimizer.apply_gradients``
aggregates gradients across replicas first (TF's ``merge_call`` into the
strategy's ``batch_reduce_to``), without the optimizer knowing any strategy."""

from __future__ import annotations

import contextlib
import threading

__all__ = ["aggregating_gradients", "gradient_aggregator"]

_local = threading.local()


def gradient_aggregator():
    """The innermost ``aggregate(grads_and_vars) -> grads_and_vars`` of this
    thread, or None."""
    stack = getattr(_local, "stack", None)
    return stack[-1] if stack else None


@contextlib.contextmanager
def aggregating_gradients(aggregate):
    """Within the block, ``apply_gradients`` passes its (gradient, variable)
    pairs through ``aggregate`` before it applies them."""
    stack = _local.__dict__.setdefault("stack", [])
    stack.append(aggregate)
    try:
        yield
    finally:
        stack.pop()
