"""NumPy kernels of the N-d gather/scatter ops (``nbdist.ops.array_ops_scatter``):
``GatherNd``, ``ScatterNd``, ``TensorScatter*`` and the variable forms."""

from __future__ import annotations

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import fmt, op_error
from nbdist.ops import array_ops_scatter  # noqa: F401  (registers the ops)


def _flat_index(node, indices, shape, what):
    """``indices`` as an [N, K] array, each row checked to address ``shape``."""
    idx = np.asarray(indices)
    if idx.ndim == 0:
        raise op_error(node, "indices must be at least a vector")
    k = idx.shape[-1]
    if k > len(shape):
        raise op_error(node, f"index innermost dimension length must be <= "
                             f"{what} rank; saw: {k} vs. {len(shape)}")
    flat = idx.reshape(-1, k)
    bad = np.any((flat < 0) | (flat >= np.asarray(shape[:k], np.int64)), axis=1)
    if bad.any():
        i = int(np.argmax(bad))
        row = ", ".join(str(int(v)) for v in flat[i])
        noun = "param shape" if what == "params" else "shape"
        raise op_error(node, f"indices[{i}] = [{row}] does not index into {noun} "
                             f"{fmt(shape)}")
    return flat


def _slices(node, flat, updates, shape, idx_shape):
    """``updates`` as [N, *shape[K:]], checked against ``indices``' shape."""
    upd = np.asarray(updates)
    want = tuple(idx_shape[:-1]) + tuple(shape[flat.shape[1]:])
    if upd.shape != want:
        raise op_error(node, f"updates must have shape {fmt(want)} (indices.shape"
                             f"[:-1] + shape[{flat.shape[1]}:]), got "
                             f"{fmt(upd.shape)}")
    return upd.reshape((flat.shape[0],) + tuple(shape[flat.shape[1]:]))


@register_kernel("GatherNd")
def gather_nd_kernel(node):
    def compute(step, params, indices):
        params = np.asarray(params)
        flat = _flat_index(node, indices, params.shape, "params")
        lead = np.shape(indices)[:-1]
        if flat.shape[1] == 0:  # each empty index vector names all of params
            out = np.broadcast_to(params, (flat.shape[0],) + params.shape)
        else:
            out = params[tuple(flat.T)]
        return np.array(out.reshape(lead + params.shape[flat.shape[1]:]))

    return compute


_APPLY = {
    "update": lambda out, at, upd: out.__setitem__(at, upd),
    "add": np.add.at,
    "sub": np.subtract.at,
    "max": np.maximum.at,
    "min": np.minimum.at,
    "mul": np.multiply.at,
}


def _divide_at(out, at, upd):
    if out.dtype.kind in "iu":
        # TF divides integers with truncation toward zero.
        for i, u in zip(at, upd):
            out[i] = np.trunc(out[i] / u).astype(out.dtype)
    else:
        np.divide.at(out, at, upd)


_APPLY["div"] = _divide_at


def _apply_nd(node, kind, out, indices, updates):
    flat = _flat_index(node, indices, out.shape, "shape")
    upd = _slices(node, flat, updates, out.shape, np.shape(indices))
    if flat.shape[1] == 0:  # an empty index vector addresses the whole tensor
        view, at = out[np.newaxis], np.zeros(flat.shape[0], np.intp)
    else:
        view, at = out, tuple(flat.T)
    _APPLY[kind](view, at, upd.astype(out.dtype, copy=False))
    return out


@register_kernel("ScatterNd")
def scatter_nd_kernel(node):
    def compute(step, indices, updates, shape):
        dims = tuple(int(d) for d in np.ravel(shape))
        if any(d < 0 for d in dims):
            raise op_error(node, f"shape must be non-negative, got {fmt(dims)}")
        out = np.zeros(dims, np.asarray(updates).dtype)
        return _apply_nd(node, "add", out, indices, updates)

    return compute


def _tensor_scatter(kind):
    def factory(node):
        def compute(step, tensor, indices, updates):
            out = np.array(tensor, copy=True)
            return _apply_nd(node, kind, out, indices, updates)

        return compute

    return factory


for _kind in ("update", "add", "sub", "max", "min"):
    register_kernel(f"TensorScatter{_kind.capitalize()}")(_tensor_scatter(_kind))


def update_variable(ref, apply):
    """Runs ``apply(array)`` on the variable's value under its lock, in place when
    nothing else holds the array, else on a copy that replaces it."""
    with ref.lock:
        writable = ref.claim_in_place()
        try:
            new = ref.read_unlocked()
            if not writable:
                new = np.array(new, copy=True)
            apply(new)
            if not writable:
                ref.value = new
        finally:
            ref.end_in_place()
    return ref


def _ref_scatter_nd(kind):
    def factory(node):
        def compute(step, ref, indices, updates):
            return update_variable(
                ref, lambda new: _apply_nd(node, kind, new, indices, updates))

        return compute

    return factory


for _kind in ("update", "add", "sub"):
    register_kernel(f"ScatterNd{_kind.capitalize()}")(_ref_scatter_nd(_kind))


def _ref_scatter_rows(kind):
    def factory(node):
        def compute(step, ref, indices, updates):
            idx = np.asarray(indices)

            def apply(new):
                bad = (idx < 0) | (idx >= new.shape[0])
                if bad.any():
                    pos = np.unravel_index(int(np.argmax(bad)), idx.shape)
                    where = ",".join(str(int(p)) for p in pos)
                    raise op_error(node, f"indices[{where}] = "
                                         f"{int(idx[pos])} is not in [0, "
                                         f"{new.shape[0]})")
                upd = np.broadcast_to(np.asarray(updates, new.dtype),
                                      idx.shape + new.shape[1:])
                _APPLY[kind](new, idx.ravel(),
                             upd.reshape((idx.size,) + new.shape[1:]))

            return update_variable(ref, apply)

        return compute

    return factory


for _kind in ("mul", "div", "max", "min"):
    register_kernel(f"Scatter{_kind.capitalize()}")(_ref_scatter_rows(_kind))
