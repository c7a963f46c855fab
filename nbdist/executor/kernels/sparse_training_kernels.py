"""Kernels of the sparse training updates (``SparseApplyMomentum`` ...).

Each row update is the dense formula of ``training_kernels`` applied to the
rows ``indices`` names. The rows are updated in rounds, each round holding
every index at most once, so an index named twice is applied twice in order
(as TF's kernels loop over the indices) while each round stays vectorised.
Each kernel takes the locks of the variable and its slots (by id, as the
dense kernels), then writes the rows into the arrays when nothing else refers
to them (``claim_in_place``), else into copies that replace them.
"""

from __future__ import annotations

import numpy as np

from nbdist import errors
from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import ignore_fp_errors
from nbdist.ops.sparse_training_ops import SPARSE_TRAINING_OPS


def _rounds(indices: np.ndarray):
    """Positions of ``indices`` split into rounds of distinct indices, in order."""
    if indices.size == 0:
        return []
    order = np.argsort(indices, kind="stable")
    sorted_idx = indices[order]
    starts = np.r_[True, sorted_idx[1:] != sorted_idx[:-1]]
    group_start = np.maximum.accumulate(np.where(starts, np.arange(order.size), 0))
    occurrence = np.empty_like(order)
    occurrence[order] = np.arange(order.size) - group_start
    if occurrence.max() == 0:
        return [np.arange(indices.size)]
    return [np.flatnonzero(occurrence == k) for k in range(int(occurrence.max()) + 1)]


def _register(op_type):
    names, refs, scalars, grad_i = SPARSE_TRAINING_OPS[op_type]
    idx_i = names.index("indices")

    def deco(make_update):
        @register_kernel(op_type)
        def factory(node):
            update = make_update(node.attrs)

            @ignore_fp_errors  # as TF: inf/nan, no warning
            def compute(step, *args):
                resources = [args[i] for i in refs]
                ordered = sorted({id(r): r for r in resources}.values(), key=id)
                acquired, claimed = [], []
                try:
                    for r in ordered:
                        r.lock.acquire()
                        acquired.append(r)
                    distinct = len(ordered) == len(resources)
                    writable = distinct
                    if distinct:
                        claimed = resources
                        writable = all(r.claim_in_place() for r in resources)
                    arrays = [r.read_unlocked() for r in resources]
                    var = arrays[0]
                    if not writable:
                        arrays = [np.array(a, copy=True) for a in arrays]
                    grad = np.asarray(args[grad_i])
                    indices = np.asarray(args[idx_i]).astype(np.int64, copy=False)
                    hyper = [np.asarray(args[i]) for i in scalars]
                    for i, h in zip(scalars, hyper):
                        if h.ndim != 0:
                            raise errors.InvalidArgumentError(
                                None, node.name, f"{names[i]} is not a scalar: "
                                f"{list(h.shape)}")
                    for i, a in zip(refs[1:], arrays[1:]):
                        if a.shape != var.shape:
                            raise errors.InvalidArgumentError(
                                None, node.name, f"var and {names[i]} do not have "
                                f"the same shape {list(var.shape)} "
                                f"{list(a.shape)}")
                    if indices.ndim != 1 or grad.shape != indices.shape + var.shape[1:]:
                        raise errors.InvalidArgumentError(
                            None, node.name, f"grad must be indices.shape + "
                            f"var.shape[1:]: grad {list(grad.shape)}, indices "
                            f"{list(indices.shape)}, var {list(var.shape)}")
                    if indices.size and (indices.min() < 0
                                         or indices.max() >= var.shape[0]):
                        bad = indices[(indices < 0) | (indices >= var.shape[0])][0]
                        raise errors.InvalidArgumentError(
                            None, node.name, f"Index {int(bad)} at offset of "
                            f"indices is not in [0, {var.shape[0]}) "
                            f"({resources[0].name})")
                    dtype = var.dtype
                    grad = grad.astype(dtype, copy=False)
                    hyper = [h.astype(dtype) for h in hyper]
                    for pos in _rounds(indices):
                        rows = indices[pos]
                        new = update([a[rows] for a in arrays], grad[pos], *hyper)
                        for a, v in zip(arrays, new):
                            a[rows] = v
                    if not writable:
                        for r, a in zip(resources, arrays):
                            r.value = a
                finally:
                    for r in claimed:
                        r.end_in_place()
                    for r in reversed(acquired):
                        r.lock.release()
                return resources[0]

            return compute

        return factory

    return deco


@_register("SparseApplyMomentum")
def _momentum(attrs):
    nesterov = attrs["use_nesterov"]

    def update(rows, grad, lr, momentum):
        var, accum = rows
        accum = accum * momentum + grad
        if nesterov:
            var = var - (grad * lr + accum * momentum * lr)
        else:
            var = var - accum * lr
        return var, accum

    return update


@_register("SparseApplyAdagrad")
def _adagrad(attrs):
    update_slots = attrs["update_slots"]

    def update(rows, grad, lr):
        var, accum = rows
        if update_slots:
            accum = accum + grad * grad
        return var - grad * lr * (1 / np.sqrt(accum)), accum

    return update


@_register("SparseApplyRMSProp")
def _rmsprop(attrs):
    def update(rows, grad, lr, rho, momentum, epsilon):
        var, ms, mom = rows
        one = np.ones((), dtype=var.dtype)
        ms = ms + (grad * grad - ms) * (one - rho)
        mom = mom * momentum + (grad * lr) / np.sqrt(ms + epsilon)
        return var - mom, ms, mom

    return update


@_register("SparseApplyCenteredRMSProp")
def _centered_rmsprop(attrs):
    def update(rows, grad, lr, rho, momentum, epsilon):
        var, mg, ms, mom = rows
        one = np.ones((), dtype=var.dtype)
        ms = ms + (grad * grad - ms) * (one - rho)
        mg = mg + (grad - mg) * (one - rho)
        mom = mom * momentum + (grad * lr) / np.sqrt((ms - mg * mg) + epsilon)
        return var - mom, mg, ms, mom

    return update
