"""``py_func`` and ``numpy_function``: a Python function as a graph op
(``PyFunc`` / ``PyFuncStateless``), as ``tf.compat.v1.py_func``.

The op holds a token, not the function: the function stays in a registry of
the process that built the graph, and the kernel looks the token up when the
op runs. So the op runs only in that process — on a ``Session("")``, or on an
in-process ``nd.Server`` of the client's Python — and an op placed on a task of
another process fails with a ``FailedPreconditionError`` that names the op and
the task (TF has the same rule: the function is not part of the GraphDef).
The function gets NumPy arrays and returns an array (or a list of them) of
the ``Tout`` dtypes exactly; its exceptions become the matching ``OpError``
(``ValueError``/``TypeError`` → ``InvalidArgumentError``, ``StopIteration`` →
``OutOfRangeError``, others ``UnknownError``). It has no gradient.

>>> import numpy as np
>>> import nbdist as nd
>>> y = nd.py_func(lambda a: np.sort(a), [nd.constant([3, 1, 2])], nd.int32)
>>> with nd.Session() as s:
...     s.run(y).tolist()
[1, 2, 3]
"""

from __future__ import annotations

import itertools
import threading
import weakref

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import NotDifferentiable
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.ops import convert_to_tensor, get_default_graph
from nbdist.framework.tensor_shape import TensorShape

# token -> the graph holding the function. The graph owns the function (a
# function often refers to the graph's tensors; a strong global reference to it
# would keep every graph that ever made a py_func alive).
_FUNCS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_LOCK = threading.Lock()
_COUNTER = itertools.count()


def register_function(graph, func) -> str:
    """A token for ``func``, valid in this process while ``graph`` lives."""
    with _LOCK:
        token = f"pyfunc_{next(_COUNTER)}"
        graph.__dict__.setdefault("_py_funcs", {})[token] = func
        _FUNCS[token] = graph
    return token


def lookup_function(token: str):
    """The function registered under ``token`` in this process, else None."""
    graph = _FUNCS.get(token)
    return None if graph is None else graph._py_funcs.get(token)


def _py_func_infer(c):
    return [(t, TensorShape(None)) for t in c.attr("Tout")]


_ATTRS = {"token": ("string", REQUIRED), "Tin": ("list(type)", []),
          "Tout": ("list(type)", [])}
register_op("PyFunc", _py_func_infer, attrs=_ATTRS, stateful=True)
register_op("PyFuncStateless", _py_func_infer, attrs=_ATTRS)
NotDifferentiable("PyFunc")
NotDifferentiable("PyFuncStateless")


def _internal_py_func(func, inp, Tout, stateful, name):  # noqa: N803 - TF's name
    if not callable(func):
        raise TypeError(f"py_func: func must be callable, got {func!r}")
    single = not isinstance(Tout, (list, tuple))
    tout = [dtypes.as_dtype(t).base_dtype for t in ([Tout] if single else Tout)]
    g = get_default_graph()
    with g.name_scope(name or "PyFunc") as scope:
        inputs = [convert_to_tensor(x) for x in (inp or [])]
        token = register_function(g, func)
        op = g.create_op("PyFunc" if stateful else "PyFuncStateless", inputs,
                         {"token": token, "Tin": [t.dtype.base_dtype for t in inputs],
                          "Tout": tout}, name=scope)
    if single:
        return op.outputs[0]
    return list(op.outputs) if op.outputs else op


def py_func(func, inp, Tout, stateful=True, name=None):  # noqa: N803 - TF's name
    """``func(*values of inp)`` run as an op; ``Tout`` a dtype (one output) or
    a list of dtypes (a list of outputs). See the module doc for where it runs.
    """
    return _internal_py_func(func, inp, Tout, stateful, name)


def numpy_function(func, inp, Tout, name=None):  # noqa: N803 - TF's name
    """As :func:`py_func`, always stateful (``tf.numpy_function``)."""
    return _internal_py_func(func, inp, Tout, True, name)


__all__ = ["numpy_function", "py_func"]
