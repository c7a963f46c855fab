"""What the NumPy kernels of the math and array ops share: ``op_error`` (an
``InvalidArgumentError`` naming the node), ``fmt`` (a shape as TF writes it),
checks of run-time scalars and axes (``scalar_int``, ``axis_of``), and
``ignore_fp_errors``, which runs a kernel with NumPy's floating-point warnings
off (as in TF, 1/0 is inf).
"""

from __future__ import annotations

import functools

import numpy as np

from nbdist import errors
from nbdist.framework import dtypes


def ignore_fp_errors(fn):
    """Runs ``fn`` with NumPy floating-point warnings off (a fresh errstate per
    call: a shared one is not re-entrant). The executor calls ``fn.fp_quiet``
    (``fn`` itself) instead, inside one errstate for the whole step."""

    @functools.wraps(fn)
    def quiet(*args):
        with np.errstate(all="ignore"):
            return fn(*args)

    quiet.fp_quiet = fn
    return quiet


def op_error(node, message: str) -> errors.OpError:
    return errors.InvalidArgumentError(None, node.name, message)


def fmt(shape) -> str:
    return "[" + ",".join(str(int(d)) for d in shape) + "]"


def ints(v) -> list[int]:
    a = np.asarray(v)
    if a.dtype.kind in "iu":  # the usual case: tolist() is several times faster
        return a.ravel().tolist()
    return [int(x) for x in a.ravel()]


def scalar_int(node, v, what: str) -> int:
    a = np.asarray(v)
    if a.size != 1:
        raise op_error(node, f"{what} must be a scalar, got shape {fmt(a.shape)}")
    return int(a.ravel()[0])


def axis_of(node, a: int, rank: int, what: str = "axis") -> int:
    if a < -rank or a >= rank:
        raise op_error(
            node, f"Expected {what} in the range [{-rank}, {rank}), but got {a}"
        )
    return a % rank


def numpy_type(dtype):
    return (
        np.dtype(object) if dtype is dtypes.string else np.dtype(dtype.as_numpy_dtype)
    )


def unshared_resources(node, shared_name: str):
    """Where a stateful op (queue, reader) keeps its state: the device's
    ``ResourceMgr`` when it has a ``shared_name``, else its session's own (as
    TF, whose kernels for such ops live per session: a new session on a
    server starts with fresh, open queues)."""
    if shared_name:
        return node.resources
    return node.env.session_resources_for(node.device)
