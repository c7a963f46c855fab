"""Kernels for variables: the ref is a ``VariableResource`` in the task's
resource manager, keyed by (container, shared_name or node name)."""

from __future__ import annotations

import numpy as np

from nbdist import errors
from nbdist.executor.kernel import register_kernel
from nbdist.executor.resources import VariableResource


@register_kernel("VariableV2")
def variable_kernel(node):
    a = node.attrs
    container = a["container"]
    name = a["shared_name"] or node.name
    dtype, shape = a["dtype"], a["shape"]
    rm = node.resources

    def factory():
        return VariableResource(node.name, dtype, shape)

    return lambda step: rm.lookup_or_create(container, "var", name, factory)


def _check_value(node, var, value):
    if not isinstance(value, np.ndarray):
        value = np.asarray(value)
    want = var.dtype.as_numpy_dtype
    if value.dtype != want and var.dtype.name != "string":
        raise errors.InvalidArgumentError(
            None, node.name, f"Assign to {var.name}: expected {var.dtype.name}, got "
            f"{value.dtype}")
    return value


@register_kernel("Assign")
def assign_kernel(node):
    validate = node.attrs["validate_shape"]

    def compute(step, ref, value):
        value = _check_value(node, ref, value)
        shape = ref.shape
        if validate and shape.rank is not None and (
                not shape.is_compatible_with(value.shape)):
            raise errors.InvalidArgumentError(
                None, node.name, f"Assign requires shapes of both tensors to match. "
                f"lhs shape= {list(shape.dims)} rhs shape= {list(value.shape)}")
        new = np.array(value, copy=True)
        with ref.lock:
            first = ref.value is None
            ref.value = new
        if first:
            _publish_created(node, ref, new)
        return ref

    return compute


def _publish_created(node, var, value):
    """A ``variable_created`` event on the variable's first assignment, when the
    task publishes events (``Worker.publish``, set by a server)."""
    publish = getattr(node.env, "publish", None)
    if publish is None:
        return
    publish("variable_created", {
        "name": var.name,
        "device": node.device or getattr(node.env, "task_name", ""),
        "shape": [int(d) for d in value.shape],
        "dtype": var.dtype.name,
        "bytes": int(value.nbytes),
    })


def _update(sign):
    def factory(node):
        def compute(step, ref, delta):
            with ref.lock:
                cur = ref.read_unlocked()
                new = cur + delta if sign > 0 else cur - delta
                if new.shape != cur.shape:
                    raise errors.InvalidArgumentError(
                        None, node.name, f"Cannot update variable {ref.name} of shape "
                        f"{list(cur.shape)} with a value of shape "
                        f"{list(np.shape(delta))}")
                ref.value = new.astype(cur.dtype, copy=False)
            return ref

        return compute

    return factory


register_kernel("AssignAdd")(_update(+1))
register_kernel("AssignSub")(_update(-1))


@register_kernel("CountUpTo")
def count_up_to_kernel(node):
    limit = node.attrs["limit"]

    def compute(step, ref):
        with ref.lock:
            before = ref.read_unlocked()
            if before >= limit:
                raise errors.OutOfRangeError(None, node.name,
                                             f"Reached limit of {limit}")
            ref.value = before + 1
        return np.array(before, copy=True)

    return compute


@register_kernel("IsVariableInitialized")
def is_initialized_kernel(node):
    return lambda step, ref: np.bool_(ref.value is not None)


@register_kernel("UninitializedNames")
def uninitialized_names_kernel(node):
    names = [n.encode() for n in node.attrs["names"]]

    def compute(step, *flags):
        return np.array([n for n, f in zip(names, flags) if not f], dtype=object)

    return compute


def _scatter(kind):
    def factory(node):
        def compute(step, ref, indices, updates):
            with ref.lock:
                # The rows are written into the variable's array when nothing
                # else refers to it (a sparse update then costs its rows, not
                # a copy of the table), else into a copy that replaces it.
                writable = ref.claim_in_place()
                try:
                    new = ref.read_unlocked()
                    if not writable:
                        new = np.array(new, copy=True)
                    idx = np.asarray(indices)
                    if idx.size and (idx.min() < 0 or idx.max() >= new.shape[0]):
                        raise errors.InvalidArgumentError(
                            None, node.name, f"indices {idx.tolist()} out of range "
                            f"[0, {new.shape[0]}) for {ref.name}")
                    updates = np.asarray(updates, dtype=new.dtype)
                    if kind == "add":
                        np.add.at(new, idx, updates)
                    elif kind == "sub":
                        np.subtract.at(new, idx, updates)
                    else:
                        new[idx] = updates
                    if not writable:
                        ref.value = new
                finally:
                    ref.end_in_place()
            return ref

        return compute

    return factory


register_kernel("ScatterAdd")(_scatter("add"))
register_kernel("ScatterSub")(_scatter("sub"))
register_kernel("ScatterUpdate")(_scatter("update"))
