"""NumPy kernels of the linear-algebra ops (``nbdist.ops.linalg_ops``).

LAPACK has no float16 routines: float16 inputs are computed in float32. A
singular or non-definite matrix is an ``InvalidArgumentError`` in TF's words.
"""

from __future__ import annotations

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import fmt, numpy_type, op_error
from nbdist.ops import linalg_ops  # noqa: F401  (registers the ops)


def _matrices(node, x, square=True):
    x = np.asarray(x)
    if x.ndim < 2:
        raise op_error(node, f"Input must have rank >= 2, got {x.ndim}")
    if square and x.shape[-1] != x.shape[-2]:
        raise op_error(node, "Input matrix must be square.")
    return x.astype(np.float32) if x.dtype == np.float16 else x


def _kernel(fn):
    """A kernel factory running ``fn(node, *inputs)`` and casting its outputs
    back to the op's dtype ``T``."""

    def factory(node):
        out_type = numpy_type(node.attrs["T"])

        def compute(step, *inputs):
            out = fn(node, *inputs)
            if isinstance(out, tuple):
                return tuple(o if o.dtype.kind in "iu" else o.astype(out_type)
                             for o in out)
            return out.astype(out_type)

        return compute

    return factory


def _adjoint(x):
    return np.conj(np.swapaxes(x, -1, -2))


def _qr(node, x):
    mode = "complete" if node.attrs["full_matrices"] else "reduced"
    return np.linalg.qr(_matrices(node, x, square=False), mode=mode)


def _inverse(node, x):
    x = _matrices(node, x)
    if node.attrs["adjoint"]:
        x = _adjoint(x)
    try:
        inv = np.linalg.inv(x)
    except np.linalg.LinAlgError:
        raise op_error(node, "Input is not invertible.") from None
    if not np.all(np.isfinite(inv)) and np.all(np.isfinite(x)):
        raise op_error(node, "Input is not invertible.")
    return inv


def _determinant(node, x):
    return np.asarray(np.linalg.det(_matrices(node, x)))


def _log_determinant(node, x):
    sign, log_abs = np.linalg.slogdet(_matrices(node, x))
    return np.asarray(sign), np.asarray(log_abs)


def _check_rhs(node, a, b):
    b = np.asarray(b)
    if b.ndim < 2 or b.shape[-2] != a.shape[-1]:
        raise op_error(node, f"Input matrix and right-hand side must have the same "
                             f"number of rows: {fmt(a.shape)} vs. {fmt(b.shape)}")
    return b.astype(a.dtype) if b.dtype == np.float16 else b


def _solve(node, a, b):
    a = _matrices(node, a)
    b = _check_rhs(node, a, b)
    if node.attrs["adjoint"]:
        a = _adjoint(a)
    if a.shape[:-2] != b.shape[:-2]:
        raise op_error(node, f"The batch dimensions of matrix {fmt(a.shape)} and "
                             f"rhs {fmt(b.shape)} must match")
    try:
        x = np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        raise op_error(node, "Input matrix is not invertible.") from None
    return x


def _triangular_solve(node, a, b):
    a = _matrices(node, a)
    b = _check_rhs(node, a, b)
    tri = np.tril(a) if node.attrs["lower"] else np.triu(a)
    if node.attrs["adjoint"]:
        tri = _adjoint(tri)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    tri = np.broadcast_to(tri, batch + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    with np.errstate(all="ignore"):
        # As TF, a zero on the diagonal gives inf/nan rather than an error.
        try:
            return np.linalg.solve(tri, b)
        except np.linalg.LinAlgError:
            return np.full(batch + b.shape[-2:], np.nan, a.dtype)


def _cholesky(node, x):
    try:
        return np.linalg.cholesky(_matrices(node, x))
    except np.linalg.LinAlgError:
        raise op_error(node, "Cholesky decomposition was not successful. The input "
                             "might not be valid.") from None


def _svd(node, x):
    x = _matrices(node, x, square=False)
    if not node.attrs["compute_uv"]:
        empty = np.zeros((0,), x.dtype)
        return np.linalg.svd(x, compute_uv=False), empty, empty
    u, s, vh = np.linalg.svd(x, full_matrices=node.attrs["full_matrices"])
    return s, u, _adjoint(vh)


def _eig(node, x):
    x = _matrices(node, x)
    if not node.attrs["compute_v"]:
        return np.linalg.eigvalsh(x), np.zeros((0,), x.dtype)
    e, v = np.linalg.eigh(x)
    return e, v


def _expm(node, x):
    x = _matrices(node, x)
    # Scale until the norm is below 1/2, sum the series, square back.
    norm = np.max(np.sum(np.abs(x), axis=-2)) if x.size else 0.0
    squarings = max(0, int(np.ceil(np.log2(norm))) + 1) if norm > 0.5 else 0
    y = x / (2.0 ** squarings)
    term = np.broadcast_to(np.eye(x.shape[-1], dtype=x.dtype), x.shape).copy()
    out = term.copy()
    for k in range(1, 20):
        term = term @ y / k
        out = out + term
    for _ in range(squarings):
        out = out @ out
    return out


def _eig_function(node, x, fn):
    x = _matrices(node, x)
    w, v = np.linalg.eig(x)
    try:
        v_inv = np.linalg.inv(v)
    except np.linalg.LinAlgError:
        raise op_error(node, "The input matrix is not diagonalizable.") from None
    return (v * fn(w)[..., None, :]) @ v_inv


def _logm(node, x):
    return _eig_function(node, x, np.log)


def _sqrtm(node, x):
    x = np.asarray(x)
    out = _eig_function(node, x, lambda w: np.sqrt(w.astype(complex)))
    if x.dtype.kind != "c":
        if np.max(np.abs(out.imag), initial=0.0) > 1e-6 * max(
                1.0, np.max(np.abs(out.real), initial=0.0)):
            raise op_error(node, "The matrix has no real square root (negative "
                                 "real eigenvalues).")
        out = out.real
    return out


def _lu(node, x):
    x = _matrices(node, x)
    idx_type = numpy_type(node.attrs["output_idx_type"])
    n = x.shape[-1]
    flat = x.reshape((-1, n, n))
    lus = np.empty_like(flat)
    perms = np.empty(flat.shape[:2], idx_type)
    for b, a in enumerate(flat):
        a = a.copy()
        perm = np.arange(n)
        for k in range(n):
            p = k + int(np.argmax(np.abs(a[k:, k])))
            if p != k:
                a[[k, p]] = a[[p, k]]
                perm[[k, p]] = perm[[p, k]]
            if a[k, k] != 0:
                a[k + 1:, k] /= a[k, k]
                a[k + 1:, k + 1:] -= np.outer(a[k + 1:, k], a[k, k + 1:])
        lus[b], perms[b] = a, perm
    return lus.reshape(x.shape), perms.reshape(x.shape[:-1])


for _op, _fn in (("Qr", _qr), ("MatrixInverse", _inverse),
                 ("MatrixDeterminant", _determinant),
                 ("LogMatrixDeterminant", _log_determinant),
                 ("MatrixSolve", _solve), ("MatrixTriangularSolve", _triangular_solve),
                 ("Cholesky", _cholesky), ("Svd", _svd), ("SelfAdjointEigV2", _eig),
                 ("MatrixExponential", _expm), ("MatrixLogarithm", _logm),
                 ("MatrixSquareRoot", _sqrtm), ("Lu", _lu)):
    register_kernel(_op)(_kernel(_fn))
