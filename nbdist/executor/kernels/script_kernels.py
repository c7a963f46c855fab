"""Kernels of ``PyFunc`` / ``PyFuncStateless`` (a Python function of this
process, found by its token) and ``Print`` (a line on this process's stderr).
See ``nbdist.ops.script_ops`` and ``nbdist.ops.logging_ops``.
"""

from __future__ import annotations

import sys
import threading
import traceback

import numpy as np

import nbdist.ops.logging_ops  # noqa: F401  (registers Print)
from nbdist import errors
from nbdist.executor.kernel import register_kernel
from nbdist.framework import dtypes
from nbdist.ops.script_ops import lookup_function

_EXCEPTIONS = ((ValueError, errors.InvalidArgumentError),
               (TypeError, errors.InvalidArgumentError),
               (StopIteration, errors.OutOfRangeError),
               (MemoryError, errors.ResourceExhaustedError),
               (NotImplementedError, errors.UnimplementedError))


def _as_output(node, i, value, want):
    arr = np.asarray(value)
    if want is dtypes.string:
        if arr.dtype.kind in "SUO":
            return arr.astype(object)
    elif arr.dtype == np.dtype(want.as_numpy_dtype):
        return arr
    got = (dtypes.as_dtype(arr.dtype).name if arr.dtype.kind not in "SUO"
           else "string")
    raise errors.InvalidArgumentError(
        None, node.name, f"{i}-th value returned by {node.attrs['token']} is {got}, "
        f"but expects {want.name}")


@register_kernel("PyFunc", "PyFuncStateless")
def py_func_kernel(node):
    token = node.attrs["token"]
    tout = list(node.attrs["Tout"])

    def compute(step, *args):
        func = lookup_function(token)
        if func is None:
            raise errors.FailedPreconditionError(
                None, node.name,
                f"{node.op} '{node.name}': the Python function {token} is not in the "
                f"process of task {node.device or '(local)'}. py_func and "
                "numpy_function run only in the process that built the graph: "
                "place the op on the client's in-process task")
        try:
            ret = func(*args)
        except Exception as e:  # noqa: BLE001 - handed back as an OpError
            kind = next((k for t, k in _EXCEPTIONS if isinstance(e, t)),
                        errors.UnknownError)
            raise kind(None, node.name, f"{type(e).__name__}: {e}\nTraceback (most "
                       "recent call last):\n" + "".join(traceback.format_tb(
                           e.__traceback__)).rstrip()) from None
        if not tout:
            return None
        values = list(ret) if isinstance(ret, (list, tuple)) else [ret]
        if len(values) != len(tout):
            raise errors.InvalidArgumentError(
                None, node.name, f"{token} returned {len(values)} values, but "
                f"expects {len(tout)}")
        outs = tuple(_as_output(node, i, v, t)
                     for i, (v, t) in enumerate(zip(values, tout)))
        return outs[0] if len(outs) == 1 else outs

    return compute


def _element(v) -> str:
    # TF's PrintOneElement: floats as %g with 6 (15) digits, more if needed to
    # read back the same value; bools as 1/0; strings raw.
    if isinstance(v, (bytes, np.bytes_)):
        return v.decode("utf-8", "replace")
    if isinstance(v, (np.bool_, bool)):
        return "1" if v else "0"
    if isinstance(v, np.floating):
        short, full = (6, 9) if v.dtype.itemsize <= 4 else (15, 17)
        s = f"{v:.{short}g}"
        return s if v.dtype.type(s) == v else f"{v:.{full}g}"
    if isinstance(v, np.complexfloating):
        return f"({_element(v.real)},{_element(v.imag)})"
    return str(v)


def summarize(value, limit: int) -> str:
    """TF's ``Tensor::SummarizeValue``: the first ``limit`` (-1: all) values,
    bracketed per dimension, ``...`` where values were left out."""
    arr = np.asarray(value)
    flat = arr.reshape(-1)
    limit = flat.size if limit < 0 else min(limit, flat.size)
    if arr.ndim == 0:
        return _element(flat[0])
    out: list[str] = []
    index = [0]

    def dim(d):
        if index[0] >= limit:
            return
        count = arr.shape[d]
        if d == arr.ndim - 1:
            for i in range(count):
                if index[0] >= limit:
                    if d != 0:
                        out.append("...")
                    return
                if i:
                    out.append(" ")
                out.append(_element(flat[index[0]]))
                index[0] += 1
            return
        for _ in range(count):
            opened = index[0] < limit
            if opened:
                out.append("[")
            dim(d + 1)
            if index[0] < limit or opened:
                out.append("]")

    dim(0)
    if flat.size > limit:
        out.append("...")
    return "".join(out)


@register_kernel("Print")
def print_kernel(node):
    message = node.attrs["message"]
    first_n, limit = int(node.attrs["first_n"]), int(node.attrs["summarize"])
    lock = threading.Lock()
    printed = [0]

    def compute(step, value, *data):
        with lock:
            if first_n >= 0 and printed[0] >= first_n:
                return value
            printed[0] += 1
        line = message + "".join(f"[{summarize(d, limit)}]" for d in data)
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
        return value

    return compute
