"""``nd.case`` and ``nd.switch_case``: chains of ``cond`` (TF1's
``control_flow_ops.case`` and ``switch_case``).

``case`` tries its predicates in order; with ``exclusive`` an ``Assert``
that at most one is true runs first. Without ``default`` the last function is
the fallback, guarded by an ``Assert`` that its predicate holds, so no true
predicate fails the step with ``InvalidArgumentError`` as in TF.
"""

from __future__ import annotations

import collections

from nbdist.framework import dtypes
from nbdist.ops.control_flow_v2 import cond
from nbdist.ops.check_ops import Assert
from nbdist.framework.nest import flatten, pack_sequence_as
from nbdist.framework.ops import Operation, Tensor, _graph_of, convert_to_tensor


def _pairs(pred_fn_pairs):
    if isinstance(pred_fn_pairs, collections.OrderedDict):
        items = list(pred_fn_pairs.items())
    elif isinstance(pred_fn_pairs, dict):
        # As TF: a plain dict's pairs are tried in the order of the preds' names.
        items = sorted(pred_fn_pairs.items(), key=lambda kv: getattr(kv[0], "name",
                                                                      ""))
    elif isinstance(pred_fn_pairs, (list, tuple)):
        items = list(pred_fn_pairs)
    else:
        raise TypeError(f"'pred_fn_pairs' must be a list, tuple, or dict. Received: "
                        f"{type(pred_fn_pairs)}")
    preds, fns = [], []
    for item in items:
        if not isinstance(item, tuple) or len(item) != 2:
            raise TypeError(f"Each entry in 'pred_fn_pairs' must be a 2-tuple. "
                            f"Received {item}.")
        pred, fn = item
        if not isinstance(pred, Tensor):
            raise TypeError(f"pred must be a Tensor, got: {pred}")
        if pred.dtype.base_dtype is not dtypes.bool:
            raise TypeError(f"pred must be Tensor of type bool: {pred.name}")
        if not callable(fn):
            raise TypeError(f"fn for pred {pred.name} must be callable.")
        preds.append(pred)
        fns.append(fn)
    return preds, fns


def _at_most_n_true(preds, n: int, msg: str):
    from nbdist.framework.constant_op import constant
    from nbdist.ops.array_ops import stack
    from nbdist.ops.math_ops import cast, less_equal, reduce_sum

    preds_c = stack(preds, name="preds_c")
    num_true = reduce_sum(cast(preds_c, dtypes.int32), name="num_true_conds")
    condition = less_equal(num_true, constant(n, name="n_true_conds"))
    names = ", ".join(p.name for p in preds)
    return Assert(condition, [f"{msg}: more than {n} conditions ({names}) "
                              "evaluated as True:", preds_c],
                  summarize=len(preds))


def _after(deps, fn):
    """``fn``'s results, each produced only after ``deps`` ran."""
    from nbdist.framework.constant_op import identity
    from nbdist.ops.control_flow_ops import group

    g = _graph_of(deps)
    with g.control_dependencies(deps):
        res = fn()
        if res is None:
            return None
        flat = [group(v) if isinstance(v, Operation) else identity(v)
                for v in flatten(res)]
    return pack_sequence_as(res, flat)


def _guarded_default(preds, fns):
    """The last function as the default, asserting its predicate holds."""
    from nbdist.ops.array_ops import stack

    last_pred, last_fn = preds[-1], fns[-1]
    others = preds[:-1]

    def default():
        checks = [Assert(last_pred, ["Input error: None of conditions evaluated as "
                                     "True:", stack(preds, name="preds_c")],
                         summarize=len(preds))]
        if others:
            checks.append(_at_most_n_true(
                others, 0, "Implementation error: selected default action #"
                f"{len(preds) - 1} was called, but some of other predicates are "
                "True"))
        return _after(checks, last_fn)

    return others, fns[:-1], default


def _chain(preds, fns, default):
    def build(k):
        if k == len(preds):
            return default()
        return cond(preds[k], fns[k], lambda: build(k + 1), strict=True)

    return build(0)


def _unpack(result, strict):
    if not strict and isinstance(result, (list, tuple)) and len(result) == 1:
        return result[0]
    return result


def case(pred_fn_pairs, default=None, exclusive=False, strict=False, name="case"):
    """The result of the first ``fn`` whose ``pred`` is true, as TF1's ``case``.

    ``pred_fn_pairs``: a list of ``(bool scalar tensor, callable)`` pairs or a
    dict of them. ``default`` runs when no predicate is true (without it the
    last pair is the fallback and the step fails if its predicate is false).
    ``exclusive=True`` fails the step when more than one predicate is true.

    >>> import nbdist as nd
    >>> x = nd.placeholder(nd.int32, [])
    >>> y = nd.case([(nd.equal(x, 1), lambda: nd.constant(10)),
    ...              (nd.equal(x, 2), lambda: nd.constant(20))],
    ...             default=lambda: nd.constant(-1))
    >>> with nd.Session() as s:
    ...     [int(s.run(y, {x: v})) for v in (1, 2, 3)]
    [10, 20, -1]
    """
    preds, fns = _pairs(pred_fn_pairs)
    if default is not None and not callable(default):
        raise TypeError("default must be callable.")
    if not preds:
        if default is None:
            raise ValueError("case: pred_fn_pairs is empty and there is no default")
        return _unpack(default(), strict)
    g = _graph_of(preds)
    with g.as_default(), g.name_scope(name or "case"):
        if default is None:
            preds_c, fns_c, default_fn = _guarded_default(preds, fns)
        else:
            preds_c, fns_c, default_fn = preds, fns, default
        if exclusive:
            check = _at_most_n_true(preds, 1, "Input error: exclusive=True")
            with g.control_dependencies([check]):
                result = _chain(preds_c, fns_c, default_fn)
        else:
            result = _chain(preds_c, fns_c, default_fn)
    return _unpack(result, strict)


def _branches(branch_fns):
    if isinstance(branch_fns, dict):
        items = list(branch_fns.items())
    elif isinstance(branch_fns, (list, tuple)) and all(
            isinstance(b, tuple) and len(b) == 2 for b in branch_fns) and branch_fns:
        items = list(branch_fns)
    elif isinstance(branch_fns, (list, tuple)):
        items = list(enumerate(branch_fns))
    else:
        raise TypeError("branch_fns must be a list, tuple, or dict")
    for key, fn in items:
        if not isinstance(key, int):
            raise TypeError(f"branch_fns dict keys must be ints, got {key!r}")
        if not callable(fn):
            raise TypeError(f"fn for branch {key} must be callable.")
    keys = sorted(k for k, _ in items)
    if keys != list(range(len(items))):
        found = ",".join(str(k) for k in keys)
        raise ValueError(f"branch indices (keys) must form contiguous range of [0 "
                         f"to {len(items)}) but found {{{found}}}")
    by_key = dict(items)
    return [by_key[k] for k in range(len(items))]


def switch_case(branch_index, branch_fns, default=None, name="switch_case"):
    """``branch_fns[branch_index]()``, as ``tf.switch_case``.

    ``branch_fns``: a list of callables, of ``(int, callable)`` pairs or a
    dict from 0..N-1 to callables. An index outside [0, N) runs ``default``,
    or the last branch when there is none.

    >>> import nbdist as nd
    >>> i = nd.placeholder(nd.int32, [])
    >>> y = nd.switch_case(i, [lambda: nd.constant(10), lambda: nd.constant(20)])
    >>> with nd.Session() as s:
    ...     [int(s.run(y, {i: v})) for v in (0, 1, 7)]
    [10, 20, 20]
    """
    fns = _branches(branch_fns)
    if not fns:
        raise ValueError("Must provide at least one item in branch_fns")
    if default is not None and not callable(default):
        raise TypeError("default must be callable.")
    index = convert_to_tensor(branch_index, name="branch_index")
    if not index.dtype.base_dtype.is_integer:
        raise TypeError(f"'branch_index' must be an integer Tensor, got "
                        f"{index.dtype}")
    g = index.graph
    with g.as_default(), g.name_scope(name or "switch_case"):
        from nbdist.ops.math_ops import equal

        if default is None:
            fns, default = fns[:-1], fns[-1]
        preds = [equal(index, k) for k in range(len(fns))]
        return _chain(preds, fns, default)


__all__ = ["case", "switch_case"]
