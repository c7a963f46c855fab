"""``ConditionalAccumulator``: a gradient accumulator shared by name, as TF's.

Replicas push gradients with ``apply_grad(grad, local_step)``; a gradient whose
``local_step`` is older than the accumulator's global step is dropped (it is
stale). ``take_grad(n)`` blocks until ``n`` gradients arrived, returns their
average (or sum, with ``reduction_type="SUM"``), resets the accumulator and
increments its global step. As in TF the take happens atomically with the
push that completes it, so a later push can never slip into a finished
average. Ops that use the accumulator are colocated with it.

nbdist runs the nodes of a step one after another, so two ``take_grad`` ops
in one step would start waiting one after the other, where TF's executor
starts them together. ``take_grads`` (op ``AccumulatorTakeGradients``) waits
on several accumulators of one device at once; ``SyncReplicasOptimizer``
uses it, so that a stale gradient cannot reach an accumulator whose take
has not started yet.

=========================  ================================================
op                         inputs
=========================  ================================================
ConditionalAccumulator     (none) -> resource handle
AccumulatorApplyGradient   handle, local_step (int), gradient
AccumulatorTakeGradient    handle, num_required (int32) -> average
AccumulatorTakeGradients   handle_1..handle_N, num_required -> N averages
                           (attr sparse: 3 outputs for a sparse one)
SparseConditionalAccumulator  (none) -> resource handle
SparseAccumulatorApplyGradient  handle, local_step, gradient_indices,
                           gradient_values, gradient_shape
SparseAccumulatorTakeGradient  handle, num_required -> indices, values, shape
AccumulatorNumAccumulated  handle -> int32
AccumulatorSetGlobalStep   handle, new_global_step (int)
=========================  ================================================
"""

from __future__ import annotations

import contextlib

from nbdist.framework import dtypes as _dtypes
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.ops import convert_to_tensor, get_default_graph
from nbdist.framework.tensor_shape import TensorShape, as_shape


def _check_handle(c):
    if c.input_dtypes[0].base_dtype is not _dtypes.resource:
        raise TypeError(f"{c.op_type} needs an accumulator handle as its first input")


def _check_int_scalar(c, i, what):
    d = c.dtype(i)
    if not d.is_integer:
        raise TypeError(f"{what} must be an integer, got {d.name}")
    if c.shape(i).rank not in (None, 0):
        raise ValueError(f"{what} must be a scalar, got shape {c.shape(i)}")


register_op("ConditionalAccumulator", lambda c: [(_dtypes.resource, TensorShape([]))],
            attrs={"dtype": ("type", REQUIRED), "shape": ("shape", TensorShape(None)),
                   "container": ("string", ""), "shared_name": ("string", ""),
                   "reduction_type": ("string", "MEAN")},
            num_inputs=0, stateful=True)


def _apply_infer(c):
    _check_handle(c)
    _check_int_scalar(c, 1, "local_step")
    if c.dtype(2) is not c.attr("dtype"):
        raise TypeError(f"gradient of dtype {c.dtype(2).name} does not match the "
                        f"accumulator's {c.attr('dtype').name}")
    return []


register_op("AccumulatorApplyGradient", _apply_infer,
            attrs={"dtype": ("type", REQUIRED)}, num_inputs=3, ref_inputs=(0,),
            stateful=True)


def _take_infer(c):
    _check_handle(c)
    _check_int_scalar(c, 1, "num_required")
    return [(c.attr("dtype"), TensorShape(None))]


register_op("AccumulatorTakeGradient", _take_infer,
            attrs={"dtype": ("type", REQUIRED)}, num_inputs=2, ref_inputs=(0,),
            stateful=True)
register_op("AccumulatorNumAccumulated",
            lambda c: (_check_handle(c), [(_dtypes.int32, TensorShape([]))])[1],
            num_inputs=1, ref_inputs=(0,), stateful=True)


def _take_many_infer(c):
    n = c.attr("N")
    if len(c.input_dtypes) != n + 1:
        raise ValueError(f"expected {n} accumulator handles and num_required, got "
                         f"{len(c.input_dtypes)} inputs")
    for i in range(n):
        if c.input_dtypes[i].base_dtype is not _dtypes.resource:
            raise TypeError(f"input {i} of AccumulatorTakeGradients must be an "
                            "accumulator handle")
    _check_int_scalar(c, n, "num_required")
    if len(c.attr("dtypes")) != n:
        raise ValueError(f"attr dtypes must list {n} types")
    sparse = list(c.attr("sparse") or [0] * n)
    if len(sparse) != n:
        raise ValueError(f"attr sparse must list {n} flags")
    out = []
    for d, is_sparse in zip(c.attr("dtypes"), sparse):
        if is_sparse:
            out += [(_dtypes.int64, TensorShape([None])), (d, TensorShape(None)),
                    (_dtypes.int64, TensorShape([None]))]
        else:
            out.append((d, TensorShape(None)))
    return out


register_op("AccumulatorTakeGradients", _take_many_infer,
            attrs={"N": ("int", REQUIRED), "dtypes": ("list(type)", REQUIRED),
                   "sparse": ("list(int)", [])},
            min_inputs=2, stateful=True)

register_op("SparseConditionalAccumulator",
            lambda c: [(_dtypes.resource, TensorShape([]))],
            attrs={"dtype": ("type", REQUIRED), "shape": ("shape", TensorShape(None)),
                   "container": ("string", ""), "shared_name": ("string", ""),
                   "reduction_type": ("string", "MEAN")},
            num_inputs=0, stateful=True)


def _sparse_apply_infer(c):
    _check_handle(c)
    _check_int_scalar(c, 1, "local_step")
    if c.dtype(3) is not c.attr("dtype"):
        raise TypeError(f"gradient of dtype {c.dtype(3).name} does not match the "
                        f"accumulator's {c.attr('dtype').name}")
    if c.dtype(2) is not _dtypes.int64:
        raise TypeError(f"gradient_indices must be int64, got {c.dtype(2).name}")
    return []


register_op("SparseAccumulatorApplyGradient", _sparse_apply_infer,
            attrs={"dtype": ("type", REQUIRED), "has_known_shape": ("bool", False)},
            num_inputs=5, ref_inputs=(0,), stateful=True)


def _sparse_take_infer(c):
    _check_handle(c)
    _check_int_scalar(c, 1, "num_required")
    return [(_dtypes.int64, TensorShape([None])), (c.attr("dtype"), TensorShape(None)),
            (_dtypes.int64, TensorShape([None]))]


register_op("SparseAccumulatorTakeGradient", _sparse_take_infer,
            attrs={"dtype": ("type", REQUIRED)}, num_inputs=2, ref_inputs=(0,),
            stateful=True)


def _set_step_infer(c):
    _check_handle(c)
    _check_int_scalar(c, 1, "new_global_step")
    return []


register_op("AccumulatorSetGlobalStep", _set_step_infer, num_inputs=2,
            ref_inputs=(0,), stateful=True)


class ConditionalAccumulatorBase:
    """What every conditional accumulator has (TF's base class): the handle
    (``accumulator_ref``), its ``name`` and ``dtype``, the count of gradients
    and the global step. ``ConditionalAccumulator`` and
    ``SparseConditionalAccumulator`` add the gradients' pushes and takes.

    >>> import nbdist as nd
    >>> acc = nd.ConditionalAccumulator(nd.float32, shape=[2])
    >>> isinstance(acc, nd.ConditionalAccumulatorBase)
    True
    """

    def __init__(self, dtype, shape, accumulator_ref):
        self._dtype = _dtypes.as_dtype(dtype)
        self._shape = as_shape(shape) if shape is not None else TensorShape(None)
        self._accumulator_ref = accumulator_ref
        self._name = accumulator_ref.op.name

    accumulator_ref = property(lambda self: self._accumulator_ref)
    name = property(lambda self: self._name)
    dtype = property(lambda self: self._dtype)

    def _op(self, op_type, inputs, attrs, name):
        g = self._accumulator_ref.graph
        with g.colocate_with(self._accumulator_ref.op):
            return g.create_op(op_type, [self._accumulator_ref] + list(inputs),
                               attrs, name=name)

    def num_accumulated(self, name=None):
        """The number of gradients aggregated so far (an int32 scalar)."""
        return self._op("AccumulatorNumAccumulated", [], {},
                        name or "AccumulatorNumAccumulated").outputs[0]

    def set_global_step(self, new_global_step, name=None):
        """Sets the accumulator's global step (gradients older are dropped)."""
        step = convert_to_tensor(new_global_step, preferred_dtype=_dtypes.int64)
        return self._op("AccumulatorSetGlobalStep", [step], {},
                        name or "AccumulatorSetGlobalStep")


class ConditionalAccumulator(ConditionalAccumulatorBase):
    """A conditional accumulator for aggregating gradients (TF's class).

    >>> import nbdist as nd
    >>> from nbdist.ops.accumulator_ops import ConditionalAccumulator
    >>> acc = ConditionalAccumulator(nd.float32, shape=[2])
    >>> pushes = [acc.apply_grad([1.0, 2.0]), acc.apply_grad([3.0, 4.0])]
    >>> avg = acc.take_grad(2)
    >>> with nd.Session() as s:
    ...     _ = [s.run(p) for p in pushes]
    ...     s.run(avg).tolist()
    [2.0, 3.0]
    """

    _op_type = "ConditionalAccumulator"

    def __init__(self, dtype, shape=None, shared_name=None,
                 name="conditional_accumulator", reduction_type="MEAN"):
        if reduction_type not in ("MEAN", "SUM"):
            raise ValueError(f"reduction_type must be 'MEAN' or 'SUM', got "
                             f"{reduction_type!r}")
        dtype = _dtypes.as_dtype(dtype)
        shape = as_shape(shape) if shape is not None else TensorShape(None)
        ref = get_default_graph().create_op(
            self._op_type, [],
            {"dtype": dtype, "shape": shape,
             "shared_name": shared_name or "", "reduction_type": reduction_type},
            name=name).outputs[0]
        super().__init__(dtype, shape, ref)

    def apply_grad(self, grad, local_step=0, name=None):
        """Pushes ``grad`` computed at ``local_step`` (dropped if stale)."""
        grad = convert_to_tensor(grad, dtype=self._dtype)
        grad.shape.assert_is_compatible_with(self._shape)
        local_step = convert_to_tensor(local_step, preferred_dtype=_dtypes.int64)
        return self._op("AccumulatorApplyGradient", [local_step, grad],
                        {"dtype": self._dtype}, name or "AccumulatorApplyGradient")

    def take_grad(self, num_required, name=None):
        """Blocks until ``num_required`` gradients arrived; returns their average."""
        n = convert_to_tensor(num_required, dtype=_dtypes.int32)
        op = self._op("AccumulatorTakeGradient", [n],
                      {"dtype": self._dtype},
                      name or "AccumulatorTakeGradient")
        out = op.outputs[0]
        out.set_shape(self._shape)
        return out


class SparseConditionalAccumulator(ConditionalAccumulator):
    """An accumulator of ``IndexedSlices`` gradients (TF's class): rows are
    summed by index; with ``reduction_type="MEAN"`` each row is divided by
    the number of gradients that held it (as TF). The take returns the rows
    in increasing order of index.

    >>> import nbdist as nd
    >>> acc = SparseConditionalAccumulator(nd.float32, shape=[4, 1])
    >>> pushes = [acc.apply_grad([3, 1], [[2.0], [4.0]]),
    ...           acc.apply_grad([1], [[8.0]])]
    >>> avg = acc.take_indexed_slices_grad(2)
    >>> with nd.Session() as s:
    ...     _ = [s.run(p) for p in pushes]
    ...     v = s.run(avg)
    >>> v.indices.tolist(), v.values.tolist()
    ([1, 3], [[6.0], [2.0]])
    """

    _op_type = "SparseConditionalAccumulator"

    def __init__(self, dtype, shape=None, shared_name=None,
                 name="sparse_conditional_accumulator", reduction_type="MEAN"):
        super().__init__(dtype, shape=shape, shared_name=shared_name, name=name,
                         reduction_type=reduction_type)

    def apply_indexed_slices_grad(self, grad, local_step=0, name=None):
        """Pushes the ``IndexedSlices`` ``grad`` computed at ``local_step``."""
        return self.apply_grad(grad.indices, grad.values, grad.dense_shape,
                               local_step=local_step, name=name)

    def apply_grad(self, grad_indices, grad_values, grad_shape=None, local_step=0,
                   name=None):
        """Pushes the rows ``grad_values`` at ``grad_indices`` (dropped if
        ``local_step`` is stale)."""
        from nbdist.ops.math_ops_elementwise import cast

        indices = convert_to_tensor(grad_indices)
        if indices.dtype.base_dtype is not _dtypes.int64:
            indices = cast(indices, _dtypes.int64)
        values = convert_to_tensor(grad_values, dtype=self._dtype)
        if self._shape.rank is not None and values.shape.rank is not None:
            values.shape[1:].assert_is_compatible_with(self._shape[1:])
        known = grad_shape is not None
        shape = convert_to_tensor([] if grad_shape is None else grad_shape)
        if shape.dtype.base_dtype is not _dtypes.int64:
            shape = cast(shape, _dtypes.int64)
        local_step = convert_to_tensor(local_step, preferred_dtype=_dtypes.int64)
        return self._op("SparseAccumulatorApplyGradient",
                        [local_step, indices, values, shape],
                        {"dtype": self._dtype, "has_known_shape": known},
                        name or "SparseAccumulatorApplyGradient")

    def take_grad(self, num_required, name=None):
        """Blocks until ``num_required`` gradients arrived; returns the
        (indices, values, shape) of their average."""
        n = convert_to_tensor(num_required, dtype=_dtypes.int32)
        op = self._op("SparseAccumulatorTakeGradient", [n], {"dtype": self._dtype},
                      name or "SparseAccumulatorTakeGradient")
        return tuple(op.outputs)

    def take_indexed_slices_grad(self, num_required, name=None):
        """``take_grad`` as an ``IndexedSlices``."""
        from nbdist.ops.indexed_slices import IndexedSlices

        indices, values, shape = self.take_grad(num_required, name=name)
        return IndexedSlices(values, indices, shape)


def take_grads(accumulators, num_required, name=None):
    """Takes the average gradient of each accumulator, waiting on all of them
    at once (they must be placed on one device). Returns a list of tensors.

    >>> import nbdist as nd
    >>> a = ConditionalAccumulator(nd.float32, shape=[], shared_name="a")
    >>> b = ConditionalAccumulator(nd.float32, shape=[], shared_name="b")
    >>> pushes = [a.apply_grad(1.0), a.apply_grad(3.0), b.apply_grad(5.0),
    ...           b.apply_grad(7.0)]
    >>> avgs = take_grads([a, b], 2)
    >>> with nd.Session() as s:
    ...     _ = [s.run(p) for p in pushes]
    ...     [float(v) for v in s.run(avgs)]
    [2.0, 6.0]
    """
    accumulators = list(accumulators)
    if not accumulators:
        raise ValueError("take_grads needs at least one accumulator")
    g = accumulators[0].accumulator_ref.graph
    n = convert_to_tensor(num_required, dtype=_dtypes.int32)
    with contextlib.ExitStack() as stack:
        for acc in accumulators:
            stack.enter_context(g.colocate_with(acc.accumulator_ref.op))
        sparse = [int(isinstance(acc, SparseConditionalAccumulator))
                  for acc in accumulators]
        attrs = {"N": len(accumulators),
                 "dtypes": [acc.dtype for acc in accumulators]}
        if any(sparse):
            attrs["sparse"] = sparse
        op = g.create_op("AccumulatorTakeGradients",
                         [acc.accumulator_ref for acc in accumulators] + [n],
                         attrs, name=name or "AccumulatorTakeGradients")
    outs = list(op.outputs)
    result = []
    for acc, is_sparse in zip(accumulators, sparse):
        if is_sparse:
            from nbdist.ops.indexed_slices import IndexedSlices

            indices, values, shape = outs[:3]
            del outs[:3]
            result.append(IndexedSlices(values, indices, shape))
        else:
            out = outs.pop(0)
            out.set_shape(acc._shape)
            result.append(out)
    return result


__all__ = ["ConditionalAccumulator", "ConditionalAccumulatorBase",
           "SparseConditionalAccumulator", "take_grads"]
