"""``Assert`` (``tf.compat.v1.Assert``) and the ``assert_*`` checks of
``tf.debugging`` (TF1's ``check_ops``).

``Assert`` is an op without outputs: run (or waited for through
``control_dependencies``), it raises ``InvalidArgumentError`` whose message
lists ``data`` when its condition is false. The checks decide statically
where TF does (known constants raise ``InvalidArgumentError`` at build time,
known shapes and dtypes ``ValueError``/``TypeError``) and otherwise build an
``Assert`` op; a check decided true by static shapes or dtypes is a ``NoOp``.

>>> import nbdist as nd
>>> x = nd.placeholder(nd.float32, [None])
>>> with nd.control_dependencies([nd.debugging.assert_positive(x)]):
...     y = nd.sqrt(x)
>>> with nd.Session() as s:
...     s.run(y, {x: [4.0]}).tolist()
[2.0]
"""

from __future__ import annotations

import numpy as np

from nbdist import errors
from nbdist.framework import dtypes
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.ops import _graph_of, _static_value, convert_to_tensor


def _assert_infer(c):
    if c.dtype(0) is not dtypes.bool:
        raise TypeError(f"Assert: condition must be a bool tensor, got "
                        f"{c.dtype(0).name}")
    return []


register_op("Assert", _assert_infer,
            attrs={"T": ("list(type)", []), "summarize": ("int", 3)},
            min_inputs=1, stateful=True)


def Assert(condition, data, summarize=None, name=None):  # noqa: N802 - TF's name
    """Asserts that ``condition`` (a bool scalar) is true when the op runs.

    Otherwise the step fails with ``InvalidArgumentError``: "assertion failed:"
    followed by each item of ``data`` (strings as they are, tensors showing
    their first ``summarize`` values, 3 by default). Returns the op.

    >>> import nbdist as nd
    >>> x = nd.placeholder(nd.int32, [])
    >>> check = nd.Assert(x > 0, ["x must be positive, got", x])
    >>> with nd.Session() as s:
    ...     try:
    ...         s.run(check, {x: -2})
    ...     except nd.errors.InvalidArgumentError as e:
    ...         print(e.message.splitlines()[0])
    assertion failed: [x must be positive, got] [-2]
    """
    cond = convert_to_tensor(condition, name="Condition")
    items = [convert_to_tensor(d) for d in (data or [])]
    g = _graph_of([cond] + items)
    with g.as_default(), g.name_scope(name or "Assert"):
        return g.create_op("Assert", [cond] + items,
                           {"T": [t.dtype.base_dtype for t in items],
                            "summarize": 3 if summarize is None else int(summarize)},
                           name="Assert")


# -- the checks -------------------------------------------------------------------
def _static(t):
    v = _static_value(t)
    return None if v is None else np.asarray(v)


def _describe(t) -> str:
    return f"{t.name.split(':')[0]} ({t.name})"


def _fail_static(data):
    parts = []
    for d in data:
        v = _static(d) if hasattr(d, "op") else d
        if isinstance(v, np.ndarray) and v.dtype == object:
            v = v.reshape(-1)[0] if v.size == 1 else v
        if isinstance(v, bytes):
            v = v.decode()
        parts.append(str(v))
    raise errors.InvalidArgumentError(None, None, "\n".join(parts))


def _binary_assert(sym, np_fn, graph_fn, name, x, y, data, summarize, message):
    g = _graph_of([x, y])
    with g.as_default(), g.name_scope(name):
        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(y, name="y", dtype=x.dtype.base_dtype)
        if data is None:
            data = [f"Condition x {sym} y did not hold element-wise:",
                    f"x (name = {x.name}) = ", x, f"y (name = {y.name}) = ", y]
            if message is not None:
                data = [message] + data
        elif message is not None:
            data = [message] + list(data)
        xs, ys = _static(x), _static(y)
        if xs is not None and ys is not None and not np.all(np_fn(xs, ys)):
            _fail_static([message or f"Condition x {sym} y did not hold"] +
                         [f"x = {xs}", f"y = {ys}"])
        from nbdist.ops.math_ops import reduce_all

        condition = reduce_all(graph_fn(x, y))
        return Assert(condition, data, summarize=summarize)


def _cmp(sym, np_fn, fn_name, default_name):
    def check(x, y, data=None, summarize=None, message=None, name=None):
        from nbdist.ops import math_ops

        return _binary_assert(sym, np_fn, getattr(math_ops, fn_name),
                              name or default_name, x, y, data, summarize, message)

    check.__name__ = default_name
    check.__doc__ = (f"An op asserting ``x {sym} y`` element-wise (broadcasting), "
                     f"as ``tf.debugging.{default_name}``.")
    return check


assert_equal = _cmp("==", np.equal, "equal", "assert_equal")
assert_none_equal = _cmp("!=", np.not_equal, "not_equal", "assert_none_equal")
assert_less = _cmp("<", np.less, "less", "assert_less")
assert_less_equal = _cmp("<=", np.less_equal, "less_equal", "assert_less_equal")
assert_greater = _cmp(">", np.greater, "greater", "assert_greater")
assert_greater_equal = _cmp(">=", np.greater_equal, "greater_equal",
                            "assert_greater_equal")


def _sign_check(default_name, zero_first, inner):
    def check(x, data=None, summarize=None, message=None, name=None):
        x = convert_to_tensor(x, name="x")
        with x.graph.as_default(), x.graph.name_scope(name or default_name):
            from nbdist.framework.constant_op import constant

            zero = constant(0, dtype=x.dtype.base_dtype, name="zero")
            if data is None:
                data = [message or f"Condition {default_name[7:]} did not hold "
                        "element-wise:", f"x (name = {x.name}) = ", x]
            a, b = (zero, x) if zero_first else (x, zero)
            return inner(a, b, data=data, summarize=summarize, message=None)

    check.__name__ = default_name
    check.__doc__ = f"An op asserting every element of ``x`` is {default_name[7:]}."
    return check


assert_positive = _sign_check("assert_positive", True, assert_less)
assert_negative = _sign_check("assert_negative", False, assert_less)
assert_non_negative = _sign_check("assert_non_negative", True, assert_less_equal)
assert_non_positive = _sign_check("assert_non_positive", False, assert_less_equal)


def assert_near(x, y, rtol=None, atol=None, data=None, summarize=None, message=None,
                name=None):
    """An op asserting ``|x - y| <= atol + rtol * |y|`` element-wise (defaults:
    10 * the dtype's eps for both)."""
    g = _graph_of([x, y])
    with g.as_default(), g.name_scope(name or "assert_near"):
        from nbdist.ops import math_ops

        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(y, name="y", dtype=x.dtype.base_dtype)
        dt = x.dtype.base_dtype
        eps = np.finfo(dt.as_numpy_dtype).eps if dt.is_floating else 0
        rtol = convert_to_tensor(10 * eps if rtol is None else rtol, dtype=dt,
                                 name="rtol")
        atol = convert_to_tensor(10 * eps if atol is None else atol, dtype=dt,
                                 name="atol")
        if data is None:
            data = [message or "", "x and y not equal to tolerance rtol = ", rtol,
                    ", atol = ", atol, f"x (name = {x.name}) = ", x,
                    f"y (name = {y.name}) = ", y]
        tol = atol + rtol * math_ops.abs(y)
        diff = math_ops.abs(x - y)
        condition = math_ops.reduce_all(math_ops.less_equal(diff, tol))
        return Assert(condition, data, summarize=summarize)


def _rank_check(x, static_ok, dynamic_cond, what, data, summarize, message,
                name, default_name):
    x = convert_to_tensor(x, name="x")
    g = x.graph
    with g.as_default(), g.name_scope(name or default_name):
        from nbdist.ops.control_flow_ops import no_op

        if x.shape.rank is not None:
            if not static_ok(x.shape.rank):
                raise ValueError(f"{message + '. ' if message else ''}Tensor "
                                 f"{x.name} must have rank {what}. Received rank "
                                 f"{x.shape.rank}, shape {x.shape}")
            return no_op(name="static_checks_determined_all_ok")
        from nbdist.ops.array_ops_shape import rank

        r = rank(x)
        if data is None:
            data = [message or "", f"Tensor {x.name} must have rank {what}. "
                    "Received shape: ", x]
        return Assert(dynamic_cond(r), data, summarize=summarize)


def assert_rank(x, rank, message=None, name=None, data=None, summarize=None):
    """Asserts ``x`` has rank ``rank``: a ValueError now if the rank is known."""
    from nbdist.ops.math_ops import equal

    want = int(rank)
    return _rank_check(x, lambda r: r == want, lambda r: equal(r, want), str(want),
                       data, summarize, message, name, "assert_rank")


def assert_rank_at_least(x, rank, message=None, name=None, data=None,
                         summarize=None):
    """Asserts ``x`` has rank ``rank`` or more."""
    from nbdist.ops.math_ops import greater_equal

    want = int(rank)
    return _rank_check(x, lambda r: r >= want, lambda r: greater_equal(r, want),
                       f"at least {want}", data, summarize, message, name,
                       "assert_rank_at_least")


def assert_rank_in(x, ranks, message=None, name=None, data=None, summarize=None):
    """Asserts the rank of ``x`` is one of ``ranks``."""
    from nbdist.ops import math_ops

    wants = [int(r) for r in ranks]

    def dynamic(r):
        hits = [math_ops.equal(r, w) for w in wants]
        from nbdist.ops.array_ops import stack

        return math_ops.reduce_any(stack(hits))

    return _rank_check(x, lambda r: r in wants, dynamic, f"in {wants}", data,
                       summarize, message, name, "assert_rank_in")


def assert_type(tensor, tf_type, message=None, name=None):
    """Raises TypeError now unless ``tensor``'s dtype is ``tf_type``; else a NoOp."""
    from nbdist.ops.control_flow_ops import no_op

    tensor = convert_to_tensor(tensor)
    want = dtypes.as_dtype(tf_type).base_dtype
    if tensor.dtype.base_dtype is not want:
        raise TypeError(f"{message + ' ' if message else ''}{tensor.name} must be "
                        f"of type {want.name}; got {tensor.dtype.base_dtype.name}")
    with tensor.graph.as_default():
        return no_op(name=name or "statically_determined_correct_type")


def assert_integer(x, message=None, name=None):
    """Raises TypeError now unless ``x`` has an integer dtype; else a NoOp."""
    from nbdist.ops.control_flow_ops import no_op

    x = convert_to_tensor(x)
    if not x.dtype.base_dtype.is_integer:
        raise TypeError(f"{message + ' ' if message else ''}Expected integer type "
                        f"for {x.name}, got {x.dtype.base_dtype.name}")
    with x.graph.as_default():
        return no_op(name=name or "statically_determined_was_integer")


def assert_scalar(tensor, name=None, message=None):
    """Raises ValueError now unless ``tensor`` is statically a scalar; returns it."""
    tensor = convert_to_tensor(tensor)
    if tensor.shape.rank != 0:
        raise ValueError(f"{message + ' ' if message else ''}Expected scalar shape "
                         f"for {tensor.name}, saw shape: {tensor.shape}.")
    return tensor


def verify_tensor_all_finite(t, msg, name=None, x=None, message=None):
    """``t``, available only after an ``Assert`` that it has no NaN or Inf
    (``tf.debugging.assert_all_finite``; ``x``/``message`` are its TF2 names)."""
    t = convert_to_tensor(t if x is None else x)
    msg = msg if message is None else message
    g = t.graph
    with g.as_default(), g.name_scope(name or "VerifyFinite"):
        from nbdist.framework.constant_op import identity
        from nbdist.ops.math_ops import is_finite, reduce_all

        check = Assert(reduce_all(is_finite(t)), [f"{msg} : Tensor had NaN or Inf "
                                                   "values"])
        with g.control_dependencies([check]):
            return identity(t)


def assert_all_finite(x, message, name=None):
    """``x`` after an ``Assert`` that it has no NaN or Inf values."""
    return verify_tensor_all_finite(x, message, name=name)


__all__ = ["Assert", "assert_all_finite", "verify_tensor_all_finite", "assert_equal", "assert_greater", "assert_greater_equal",
           "assert_integer", "assert_less", "assert_less_equal", "assert_near",
           "assert_negative", "assert_non_negative", "assert_non_positive",
           "assert_none_equal", "assert_positive", "assert_rank",
           "assert_rank_at_least", "assert_rank_in", "assert_scalar", "assert_type"]
