"""``nd.cond`` and ``nd.while_loop`` (``tf.compat.v1.cond`` / ``while_loop``).

Each builds one op, ``If`` or ``While``, whose branches are graph functions
(see ``functional_ops``); the op runs where it is placed and its body runs
there too, reading captured tensors that the master brings from any task.
A ``TensorArray`` passes through both as its flow (a float32 scalar) and
comes out rebuilt on the op's output.
"""

from __future__ import annotations

import numpy as np

from nbdist.ops import (
    check_ops,  # noqa: F401  (registers Assert)
    control_flow_grad,  # noqa: F401  (registers the gradients)
)
from nbdist.framework import (
    dtypes,
    nest,
)
from nbdist.ops.functional_ops import common_shape
from nbdist.framework.func_graph import trace, union_captures
from nbdist.framework.function_def import function_name, to_function_def
from nbdist.framework.nest import flatten, is_nested, pack_sequence_as
from nbdist.framework.ops import Operation, _graph_of, convert_to_tensor
from nbdist.ops.tensor_array_ops import as_flow, from_flow, is_tensor_array
from nbdist.framework.tensor_shape import TensorShape, as_shape


def _as_output(v, branch_value: bool):
    if isinstance(v, Operation):
        # As TF1: an op returned by a branch becomes a bool tensor that waits for it.
        from nbdist.framework.constant_op import constant

        with v.graph.control_dependencies([v]):
            return constant(branch_value)
    return convert_to_tensor(as_flow(v))


def assert_same_structure(a, b, what: str):
    """As TF's cond and while_loop: the same nesting (a list may stand for a
    tuple), else a ``ValueError`` that says ``what``."""
    try:
        nest.assert_same_structure(a, b, check_types=False)
    except ValueError as e:
        raise ValueError(f"{what}: {e}") from None


def _rebuild(structure, flat):
    """``flat`` in the shape of ``structure``, TensorArrays rebuilt on their flows."""
    return pack_sequence_as(structure, [from_flow(t, v) for t, v in
                                        zip(flatten(structure), flat)])


def cond(pred, true_fn=None, false_fn=None, strict=False, name=None, fn1=None,
         fn2=None):
    """``true_fn()`` if ``pred`` else ``false_fn()``, as ``tf.compat.v1.cond``.

    Both functions return the same structure of tensors (a singleton list or
    tuple is unpacked unless ``strict``); only the taken branch runs. ``fn1``
    and ``fn2`` are TF1's deprecated names of ``true_fn`` and ``false_fn``.
    Variables a branch creates are created outside it (as TF1 does), so
    ``global_variables_initializer`` initialises them.

    >>> import nbdist as nd
    >>> x = nd.constant(3.0)
    >>> y = nd.cond(x > 2.0, lambda: x * 10.0, lambda: x - 1.0)
    >>> with nd.Session() as s:
    ...     float(s.run(y))
    30.0
    """
    if fn1 is not None:
        if true_fn is not None:
            raise TypeError("cond(): true_fn and fn1 may not be set simultaneously.")
        true_fn = fn1
    if fn2 is not None:
        if false_fn is not None:
            raise TypeError("cond(): false_fn and fn2 may not be set simultaneously.")
        false_fn = fn2
    if isinstance(pred, (bool, np.bool_)):
        raise TypeError("cond: pred must not be a Python bool")
    if not callable(true_fn):
        raise TypeError("cond: true_fn must be callable")
    if not callable(false_fn):
        raise TypeError("cond: false_fn must be callable")
    pred = convert_to_tensor(pred)
    if pred.dtype.base_dtype is not dtypes.bool:
        raise TypeError(f"cond: pred must be a bool tensor, got {pred.dtype.name} "
                        f"({pred.name})")
    if not pred.shape.is_compatible_with(TensorShape([])):
        raise ValueError(f"cond: pred must be a scalar, got shape {pred.shape}")
    g = pred.graph
    with g.as_default(), g.name_scope(name or "cond") as scope:
        structures, traces = [], []
        for fn, value, label in ((true_fn, True, "true"), (false_fn, False, "false")):

            def build(_args, fn=fn, value=value):
                res = fn()
                if res is None:
                    raise ValueError("cond: true_fn and false_fn must return at "
                                     "least one result")
                structures.append(res)
                return [_as_output(v, value) for v in flatten(res)]

            with g.name_scope(label):
                traces.append(trace(g, [], build, f"cond '{scope[:-1]}' ({label}_fn)"))
        res_t, res_f = structures
        assert_same_structure(res_t, res_f, "cond: true_fn and false_fn")
        outs_t, outs_f = traces[0].outputs, traces[1].outputs
        for a, b in zip(outs_t, outs_f):
            if a.dtype.base_dtype is not b.dtype.base_dtype:
                raise TypeError(f"cond: outputs of true_fn and false_fn must have the "
                                f"same type: {a.dtype.name}, {b.dtype.name}")
        caps, names = union_captures(g, traces)
        fd_t = to_function_def(traces[0], function_name(scope + "true"), caps, names)
        fd_f = to_function_def(traces[1], function_name(scope + "false"), caps, names)
        shapes = [common_shape(a.shape, b.shape) for a, b in zip(outs_t, outs_f)]
        attrs = {"then_branch": fd_t.name, "else_branch": fd_f.name,
                 "Tout": [t.dtype.base_dtype for t in outs_t],
                 "output_shapes": shapes,
                 "_then_branch_fdef": fd_t.SerializeToString(),
                 "_else_branch_fdef": fd_f.SerializeToString()}
        ctrl = traces[0].control + [c for c in traces[1].control
                                     if c not in traces[0].control]
        op = g.create_op("If", [pred] + caps, attrs, name=scope, control_inputs=ctrl)
    result = _rebuild(res_t, op.outputs)
    if not strict and isinstance(result, (list, tuple)) and len(result) == 1:
        return result[0]
    return result


def while_loop(cond, body, loop_vars, shape_invariants=None, parallel_iterations=10,
               back_prop=True, swap_memory=False, maximum_iterations=None,
               name=None, return_same_structure=False):
    """Repeats ``body`` while ``cond`` is true, as ``tf.compat.v1.while_loop``.

    ``loop_vars`` is a (possibly nested) list or tuple; ``cond(*loop_vars)``
    returns a bool scalar and ``body(*loop_vars)`` new values of the same
    structure, dtypes and shapes (``shape_invariants`` relax the shapes). A
    single loop variable comes back as a tensor, not a list, as in TF1.
    ``maximum_iterations`` bounds the number of iterations.

    >>> import nbdist as nd
    >>> i, x = nd.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x * 2.0),
    ...                      [0, nd.constant(1.0)])
    >>> with nd.Session() as s:
    ...     [int(v) for v in s.run([i, x])]
    [3, 8]
    """
    if not callable(cond):
        raise TypeError("while_loop: cond must be callable")
    if not callable(body):
        raise TypeError("while_loop: body must be callable")
    if parallel_iterations < 1:
        raise TypeError("while_loop: parallel_iterations must be a positive integer")
    if not isinstance(loop_vars, (list, tuple)):
        raise TypeError(f"while_loop: loop_vars must be a list or tuple, got "
                        f"{type(loop_vars).__name__}")
    if not loop_vars:
        raise ValueError("while_loop: no loop variables provided")
    g = _graph_of(flatten(loop_vars) + [maximum_iterations])
    with g.as_default(), g.name_scope(name or "while") as scope:
        try_to_pack = len(loop_vars) == 1 and not return_same_structure
        if maximum_iterations is not None:
            cond, body, loop_vars, shape_invariants = _with_counter(
                cond, body, loop_vars, shape_invariants, maximum_iterations,
                try_to_pack)
        outs, structure = _build_while(g, scope, cond, body, loop_vars,
                                       shape_invariants, parallel_iterations,
                                       back_prop)
    packed = pack_sequence_as(structure, outs)
    if maximum_iterations is not None:
        return packed[1]
    if return_same_structure:
        return packed
    return packed[0] if len(outs) == 1 else packed


def _with_counter(cond, body, loop_vars, shape_invariants, maximum_iterations,
                  try_to_pack):
    from nbdist.framework.constant_op import constant
    from nbdist.ops.math_ops import logical_and

    max_it = convert_to_tensor(maximum_iterations, name="maximum_iterations")
    if max_it.shape.rank != 0:
        raise ValueError(f"while_loop: maximum_iterations must be a scalar, saw "
                         f"shape: {max_it.shape}")
    counter = constant(0, dtype=max_it.dtype, name="iteration_counter")
    orig_cond, orig_body = cond, body
    if try_to_pack:
        loop_vars = (counter, loop_vars[0])
        new_cond = lambda i, lv: logical_and(i < max_it, orig_cond(lv))
        new_body = lambda i, lv: (i + 1, orig_body(lv))
    else:
        loop_vars = (counter, loop_vars)
        new_cond = lambda i, lv: logical_and(i < max_it, orig_cond(*lv))
        new_body = lambda i, lv: (i + 1, orig_body(*lv))
    if shape_invariants is not None:
        shape_invariants = (TensorShape([]), shape_invariants)
    return new_cond, new_body, loop_vars, shape_invariants


def _build_while(g, scope, cond, body, loop_vars, shape_invariants,
                 parallel_iterations, back_prop):
    where = f"while_loop '{scope[:-1]}'"
    templates = flatten(loop_vars)
    flat = [convert_to_tensor(as_flow(v)) for v in templates]
    if shape_invariants is None:
        invariants = [t.shape for t in flat]
    else:
        # A TensorArray's invariant is its flow's: a scalar.
        invariants = [TensorShape([]) if is_tensor_array(v) or is_tensor_array(s)
                      else as_shape(s) for v, s in zip(templates,
                                                       flatten(shape_invariants))]
        if len(invariants) != len(flat):
            raise ValueError(f"{where}: shape_invariants has {len(invariants)} "
                             f"shapes for {len(flat)} loop variables")
        for t, s in zip(flat, invariants):
            if not s.is_compatible_with(t.shape):
                raise ValueError(f"{where}: the shape invariant specified for "
                                 f"{t.name} is not compatible with the initial shape "
                                 f"of the loop variable. It enters the loop with "
                                 f"shape {t.shape}, but the specified shape "
                                 f"invariant is {s}.")
    specs = [(t.dtype.base_dtype, s) for t, s in zip(flat, invariants)]

    def build_cond(args):
        p = convert_to_tensor(cond(*_rebuild(loop_vars, args)))
        if p.dtype.base_dtype is not dtypes.bool or not p.shape.is_compatible_with(
                TensorShape([])):
            raise TypeError(f"{where}: cond must return a bool scalar, got "
                            f"{p.dtype.name} of shape {p.shape}")
        return [p]

    structure = []

    def build_body(args):
        res = body(*_rebuild(loop_vars, args))
        if not is_nested(res):
            res = [res]
        structure.append(res)
        out = [convert_to_tensor(as_flow(v)) for v in flatten(res)]
        if len(out) != len(flat):
            raise ValueError(f"{where}: body returned {len(out)} values for "
                             f"{len(flat)} loop variables")
        for k, (t, v, s) in enumerate(zip(flat, out, invariants)):
            if v.dtype.base_dtype is not t.dtype.base_dtype:
                raise TypeError(f"{where}: loop variable {k} enters the loop as "
                                f"{t.dtype.base_dtype.name} but body returns "
                                f"{v.dtype.base_dtype.name}")
            if not _more_specific(v.shape, s):
                raise ValueError(
                    f"{where}: input tensor '{t.name}' enters the loop with shape "
                    f"{s}, but has shape {v.shape} after one iteration. To allow "
                    "the shape to vary across iterations, use the "
                    "`shape_invariants` argument of while_loop to specify a "
                    "less-specific shape.")
        return out

    with g.name_scope("cond"):
        tr_cond = trace(g, specs, build_cond, f"{where} (cond)")
    with g.name_scope("body"):
        tr_body = trace(g, specs, build_body, f"{where} (body)")
    assert_same_structure(_leaves(loop_vars), _leaves(structure[0]),
                          f"{where}: body must return the structure of loop_vars")
    caps, names = union_captures(g, [tr_cond, tr_body])
    fd_c = to_function_def(tr_cond, function_name(scope + "cond"), caps, names)
    fd_b = to_function_def(tr_body, function_name(scope + "body"), caps, names)
    attrs = {"cond": fd_c.name, "body": fd_b.name,
             "T": [t.dtype.base_dtype for t in flat], "output_shapes": invariants,
             "parallel_iterations": int(parallel_iterations),
             "back_prop": bool(back_prop),
             "_cond_fdef": fd_c.SerializeToString(),
             "_body_fdef": fd_b.SerializeToString()}
    ctrl = tr_cond.control + [c for c in tr_body.control if c not in tr_cond.control]
    op = g.create_op("While", flat + caps, attrs, name=scope, control_inputs=ctrl)
    return [from_flow(t, o) for t, o in zip(templates, op.outputs)], structure[0]


def _leaves(structure):
    return pack_sequence_as(structure, [None] * len(flatten(structure)))


def _more_specific(shape: TensorShape, invariant: TensorShape) -> bool:
    if invariant.rank is None:
        return True
    if shape.rank != invariant.rank:
        return False
    return all(want is None or have == want
               for have, want in zip(shape.as_list(), invariant.as_list()))


__all__ = ["cond", "while_loop"]
