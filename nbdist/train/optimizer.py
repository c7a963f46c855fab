"""The TF1 ``Optimizer`` base class: ``compute_gradients``, ``apply_gradients``,
``minimize``, and slot variables.

Slots (momentum accumulators, Adam's moments ...) are non-trainable variables
named ``<var>/<OptimizerName>[_N]`` and created colocated with their primary
variable, so the update op -- which takes the variable and its slots by
reference -- runs on the task where the variable lives (a parameter server).
"""

from __future__ import annotations

import inspect

from nbdist.framework import dtypes
from nbdist.ops.control_flow_ops import group, no_op
from nbdist.ops.indexed_slices import IndexedSlices
from nbdist.framework.ops import (
    GraphKeys,
    Tensor,
    convert_to_tensor,
    get_default_graph,
)
from nbdist.ops.variables import Variable, trainable_variables
from nbdist.train import cross_replica

_VALID_DTYPES = (dtypes.float16, dtypes.float32, dtypes.float64)


def _var_key(var):
    return (id(var.op.graph), var.op.name)


def _is_variable(v) -> bool:
    return isinstance(v, Variable)


def _call_gradients(ys, xs, grad_ys, **kwargs):
    """``nbdist.ops.gradients.gradients``, passing only the options it takes."""
    from nbdist.ops.gradients import gradients

    try:
        params = inspect.signature(gradients).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins
        params = {}
    accepts_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    extra = {k: v for k, v in kwargs.items() if accepts_all or k in params}
    return gradients(ys, xs, grad_ys=grad_ys, **extra)


def _cast(t, dtype):
    from nbdist.ops import math_ops

    return math_ops.cast(t, dtype)


def group_by_device(inputs, name=None):
    """``group`` as TF's ``control_flow_ops.group`` builds it: the inputs are
    sorted by device and each device gets its own ``NoOp``; with a single
    device that ``NoOp`` (placed there) is the result, else a root ``NoOp``
    in the current scope depends on them.

    For an optimizer whose variables all live on one ps task this keeps the
    ``update`` op, and the global step increment that waits for it, on that
    task: a step needs no control message from the ps to the worker and back.
    """
    from nbdist.ops.control_flow_ops import _as_op

    ops_ = [_as_op(x) for x in inputs if x is not None]
    if not ops_:
        return group([], name=name)
    graph = ops_[0].graph
    by_device: dict = {}
    for op in ops_:
        by_device.setdefault(op.device, []).append(op)

    def on_device(dev, deps, name=None):
        with graph.control_dependencies(deps):
            if dev:
                with graph.device(dev):
                    return no_op(name=name)
            return no_op(name=name)

    if len(by_device) == 1:
        (dev, deps), = by_device.items()
        return on_device(dev, deps, name=name)
    deps = [on_device(dev, by_device[dev]) for dev in sorted(by_device)]
    with graph.control_dependencies(deps):
        return no_op(name=name)


class Optimizer:
    """Base class of the optimizers (``tf.compat.v1.train.Optimizer``).

    Subclasses implement ``_create_slots``, ``_prepare``, ``_apply_dense`` and,
    when they update non-slot variables, ``_finish``.
    """

    GATE_NONE = 0
    GATE_OP = 1
    GATE_GRAPH = 2

    def __init__(self, use_locking, name):
        if not name:
            raise ValueError("Must specify the optimizer name")
        self._use_locking = use_locking
        self._name = name
        # slot name -> {var key -> slot variable}
        self._slots: dict[str, dict] = {}
        # (name, graph id) -> variable
        self._non_slot_dict: dict = {}
        self._hyper: dict[str, object] = {}
        self._hyper_tensors: dict = {}

    def get_name(self) -> str:
        return self._name

    # -- the public API ---------------------------------------------------------
    def minimize(self, loss, global_step=None, var_list=None,
                 gate_gradients=GATE_OP, aggregation_method=None,
                 colocate_gradients_with_ops=False, name=None, grad_loss=None):
        """``compute_gradients`` then ``apply_gradients``; returns the train op."""
        grads_and_vars = self.compute_gradients(
            loss, var_list=var_list, gate_gradients=gate_gradients,
            aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops,
            grad_loss=grad_loss)
        vars_with_grad = [v for g, v in grads_and_vars if g is not None]
        if not vars_with_grad:
            raise ValueError(
                "No gradients provided for any variable, check your graph for ops "
                "that do not support gradients, between variables "
                f"{[str(v) for _, v in grads_and_vars]} and loss {loss}.")
        return self.apply_gradients(grads_and_vars, global_step=global_step,
                                    name=name)

    def compute_gradients(self, loss, var_list=None, gate_gradients=GATE_OP,
                          aggregation_method=None,
                          colocate_gradients_with_ops=False, grad_loss=None):
        """A list of (gradient, variable) pairs; the gradient is None where the
        loss does not depend on the variable."""
        if callable(loss) and not isinstance(loss, (Tensor, Variable)):
            loss = loss()
        if gate_gradients not in (Optimizer.GATE_NONE, Optimizer.GATE_OP,
                                  Optimizer.GATE_GRAPH):
            raise ValueError("gate_gradients must be one of: Optimizer.GATE_NONE, "
                             f"Optimizer.GATE_OP, Optimizer.GATE_GRAPH. Not "
                             f"{gate_gradients}")
        loss = convert_to_tensor(loss)
        self._assert_valid_dtypes([loss])
        if grad_loss is not None:
            grad_loss = convert_to_tensor(grad_loss)
            self._assert_valid_dtypes([grad_loss])
        if var_list is None:
            with loss.graph.as_default():
                var_list = trainable_variables()
        else:
            var_list = _flatten(var_list)
        if not var_list:
            raise ValueError("No variables to optimize.")
        for v in var_list:
            if not _is_variable(v):
                raise TypeError(f"Argument is not a Variable: {v!r}")
        targets = [v._ref() for v in var_list]
        grads = _call_gradients(
            loss, targets, grad_loss,
            gate_gradients=(gate_gradients == Optimizer.GATE_OP),
            aggregation_method=aggregation_method,
            colocate_gradients_with_ops=colocate_gradients_with_ops)
        grads = list(grads)
        if gate_gradients == Optimizer.GATE_GRAPH:
            from nbdist.ops.indexed_slices import gate

            grads = gate(grads)
        grads_and_vars = list(zip(grads, var_list))
        self._assert_valid_dtypes([v for g, v in grads_and_vars if g is not None])
        return grads_and_vars

    def apply_gradients(self, grads_and_vars, global_step=None, name=None):
        """Builds the update of every variable with a gradient; returns the op.

        With ``global_step``, the returned op increments it after all updates.
        """
        grads_and_vars = tuple(grads_and_vars)
        if not grads_and_vars:
            raise ValueError("No variables provided.")
        converted = []
        for g, v in grads_and_vars:
            if not _is_variable(v):
                raise TypeError(f"Argument is not a Variable: {v!r}")
            if isinstance(g, IndexedSlices):
                if not g.dtype.base_dtype.is_compatible_with(v.dtype.base_dtype):
                    raise ValueError(f"Gradient {g.name} has dtype "
                                     f"{g.dtype.base_dtype.name} but variable "
                                     f"{v.name} has {v.dtype.base_dtype.name}")
            elif g is not None:
                if hasattr(g, "values") and hasattr(g, "indices") and not isinstance(
                        g, Tensor):
                    g = _densify(g)
                try:
                    g = convert_to_tensor(g)
                except (TypeError, ValueError) as e:
                    raise TypeError(f"Gradient must be convertible to a Tensor or "
                                    f"IndexedSlices, or None: {g!r}") from e
                if not g.dtype.base_dtype.is_compatible_with(v.dtype.base_dtype):
                    raise ValueError(f"Gradient {g.name} has dtype "
                                     f"{g.dtype.base_dtype.name} but variable "
                                     f"{v.name} has {v.dtype.base_dtype.name}")
            converted.append((g, v))
        aggregate = cross_replica.gradient_aggregator()
        if aggregate is not None:  # inside a strategy: e.g. the all-reduced mean
            converted = list(aggregate([
                (convert_to_tensor(g) if isinstance(g, IndexedSlices) else g, v)
                for g, v in converted]))
        var_list = [v for g, v in converted if g is not None]
        if not var_list:
            raise ValueError("No gradients provided for any variable: "
                             f"{tuple(str(v) for _, v in converted)}.")
        graph = var_list[0].graph
        with graph.as_default():
            # As TF's init_scope: slots are built outside control dependencies.
            with graph.control_dependencies(None):
                self._create_slots(var_list)
            update_ops = []
            with graph.name_scope(name or self._name) as scope:
                self._prepare()
                self._prepare_for(var_list)
                for grad, var in converted:
                    if grad is None:
                        continue
                    with graph.name_scope("update_" + var.op.name), \
                            graph.colocate_with(var.op):
                        if isinstance(grad, IndexedSlices):
                            update_ops.append(
                                self._apply_sparse_duplicate_indices(grad, var))
                        else:
                            update_ops.append(self._apply_dense(grad, var))
                if global_step is None:
                    apply_updates = self._finish(update_ops, scope)
                else:
                    with graph.control_dependencies(
                            [self._finish(update_ops, "update")]):
                        gs = global_step._ref() if _is_variable(global_step) else (
                            global_step)
                        from nbdist.ops.state_ops import assign_add

                        with graph.colocate_with(gs.op):
                            apply_updates = assign_add(gs, 1, name=scope)
            if isinstance(apply_updates, Tensor):
                apply_updates = apply_updates.op
            train_ops = graph.get_collection_ref(GraphKeys.TRAIN_OP)
            if apply_updates not in train_ops:
                train_ops.append(apply_updates)
        return apply_updates

    def get_slot(self, var, name):
        """The slot ``name`` created for ``var``, or None."""
        named = self._slots.get(name)
        if not named:
            return None
        return named.get(_var_key(var))

    def get_slot_names(self) -> list[str]:
        return sorted(self._slots)

    def variables(self) -> list:
        """This optimizer's variables (slots and others) in the default graph."""
        g = get_default_graph()
        out = [v for (_, gid), v in self._non_slot_dict.items() if v.graph is g]
        for slots in self._slots.values():
            out.extend(v for v in slots.values() if v.graph is g)
        return sorted(out, key=lambda v: v.name)

    # -- for subclasses ---------------------------------------------------------
    def _create_slots(self, var_list):
        pass

    def _prepare(self):
        """Converts the hyper-parameters in ``self._hyper`` to tensors."""

    def _prepare_for(self, var_list):
        g = var_list[0].graph
        self._hyper_tensors = {}
        var_dtypes = []
        for v in var_list:
            if v.dtype.base_dtype not in var_dtypes:
                var_dtypes.append(v.dtype.base_dtype)
        from nbdist.framework.constant_op import constant

        with g.colocate_with(None):
            for hname, value in self._hyper.items():
                if callable(value) and not isinstance(value, (Tensor, Variable)):
                    value = value()
                if isinstance(value, (Tensor, Variable)):
                    self._hyper_tensors[hname] = convert_to_tensor(value, name=hname)
                else:
                    for dt in var_dtypes:
                        self._hyper_tensors[(hname, dt)] = constant(
                            value, dtype=dt, name=hname)

    def _get_hyper(self, name, dtype):
        """Hyper-parameter ``name`` as a tensor of ``dtype`` (cast if needed)."""
        dtype = dtype.base_dtype
        t = self._hyper_tensors.get((name, dtype))
        if t is not None:
            return t
        t = self._hyper_tensors[name]
        if t.dtype.base_dtype is not dtype:
            t = _cast(t, dtype)
        return t

    def _apply_dense(self, grad, var):
        raise NotImplementedError()

    def _apply_sparse_duplicate_indices(self, grad, var):
        """Applies the ``IndexedSlices`` ``grad``: by default its rows named
        twice are summed first, then ``_apply_sparse`` (as TF)."""
        from nbdist.ops.indexed_slices import deduplicate_indexed_slices

        values, indices = deduplicate_indexed_slices(grad.values, grad.indices)
        return self._apply_sparse(IndexedSlices(values, indices, grad.dense_shape),
                                  var)

    def _apply_sparse(self, grad, var):
        """The update for an ``IndexedSlices`` gradient with unique indices.
        An optimizer without a sparse update applies the dense gradient."""
        return self._apply_dense(convert_to_tensor(grad), var)

    def _resource_apply_sparse(self, grad, var, indices):
        """TF's name for the sparse update given values and indices."""
        return self._apply_sparse(IndexedSlices(grad, indices, None), var)

    def _finish(self, update_ops, name_scope):
        return group_by_device(list(update_ops), name=name_scope)

    def _assert_valid_dtypes(self, tensors):
        for t in tensors:
            dtype = t.dtype.base_dtype
            if dtype not in _VALID_DTYPES:
                raise ValueError(
                    f"Invalid type {dtype!r} for {t.name}, expected: "
                    f"{list(_VALID_DTYPES)}.")

    # -- slots ------------------------------------------------------------------
    def _slot_dict(self, slot_name):
        return self._slots.setdefault(slot_name, {})

    def _get_or_make_slot_with_initializer(self, var, initializer, shape, dtype,
                                           slot_name, op_name):
        named = self._slot_dict(slot_name)
        key = _var_key(var)
        if key not in named:
            named[key] = create_slot_with_initializer(var, initializer, shape, dtype,
                                                      op_name)
        return named[key]

    def _zeros_slot(self, var, slot_name, op_name):
        from nbdist.ops.variables import zeros_initializer

        return self._get_or_make_slot_with_initializer(
            var, zeros_initializer(dtype=var.dtype.base_dtype), var.shape,
            var.dtype.base_dtype, slot_name, op_name)

    def _create_non_slot_variable(self, initial_value, name, colocate_with):
        g = colocate_with.graph
        key = (name, id(g))
        v = self._non_slot_dict.get(key)
        if v is None:
            with g.as_default(), g.name_scope(None), \
                    g.control_dependencies(None), \
                    g.colocate_with(colocate_with.op):
                v = Variable(initial_value, name=name, trainable=False)
            self._non_slot_dict[key] = v
        return v

    def _get_non_slot_variable(self, name, graph=None):
        g = graph if graph is not None else get_default_graph()
        return self._non_slot_dict.get((name, id(g)))

    def _non_slot_variables(self):
        return list(self._non_slot_dict.values())


def create_slot_with_initializer(primary, initializer, shape, dtype, name):
    """A non-trainable variable ``<primary>/<name>`` placed with ``primary``."""
    g = primary.graph
    with g.as_default(), g.name_scope(None), g.control_dependencies(None), \
            g.colocate_with(primary.op):
        slot = Variable(lambda: initializer(shape, dtype=dtype),
                        name=primary.op.name + "/" + name, trainable=False,
                        dtype=dtype)
    info = getattr(primary, "_save_slice_info", None)
    n = slot.shape.rank
    if info is not None and (n is None or n > 0):
        # The shard of a partitioned variable has its slot saved as the slot of
        # the whole variable (``<full name>/<slot>``), as TF's slot_creator.
        from nbdist.ops.partitioned_variables import SaveSliceInfo

        real_name = slot.op.name[len(primary.op.name) + 1:]  # "Ftrl_1" if taken
        slot._set_save_slice_info(SaveSliceInfo(
            info.full_name + "/" + real_name, info.full_shape[:n], info.var_offset[:n],
            info.var_shape[:n]))
    return slot


def create_zeros_slot(primary, name, dtype=None):
    from nbdist.ops.variables import zeros_initializer

    dtype = dtype or primary.dtype.base_dtype
    return create_slot_with_initializer(primary, zeros_initializer(dtype=dtype),
                                        primary.shape, dtype, name)


def _flatten(x):
    if isinstance(x, dict):
        x = list(x.values())
    if isinstance(x, (list, tuple)):
        out = []
        for i in x:
            out.extend(_flatten(i))
        return out
    return [x]


def _densify(slices):
    """An IndexedSlices-like gradient (``values``, ``indices``, ``dense_shape``)
    as a dense tensor. (nbdist's gradients are dense; this is for callers
    that build such pairs themselves.)"""
    from nbdist.ops.nn_ops import unsorted_segment_sum

    dense_shape = getattr(slices, "dense_shape", None)
    if dense_shape is None:
        raise ValueError("Cannot convert IndexedSlices without dense_shape")
    return unsorted_segment_sum(slices.values, slices.indices, dense_shape[0])


__all__ = [
    "Optimizer",
    "create_slot_with_initializer",
    "create_zeros_slot",
]
