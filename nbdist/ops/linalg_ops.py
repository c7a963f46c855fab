"""Linear-algebra ops on (batches of) square or rectangular matrices in the last
two dimensions: ``Qr``, ``MatrixInverse``, ``MatrixDeterminant``,
``LogMatrixDeterminant``, ``MatrixSolve``, ``MatrixTriangularSolve``,
``Cholesky``, ``Svd``, ``SelfAdjointEigV2``, ``MatrixExponential``,
``MatrixLogarithm``, ``MatrixSquareRoot`` and ``Lu``. Their gradients are in
``linalg_grad``, the kernels in ``nbdist/executor/kernels/linalg_kernels.py``;
the ops built from these (``cholesky_solve``, ``matrix_solve_ls``, ``pinv``,
``lu_solve``...) are in ``nbdist.linalg``.

>>> import numpy as np
>>> import nbdist as nd
>>> a = np.array([[3.0, 1.0], [4.0, 2.0]], np.float32)
>>> q, r = nd.qr(a)
>>> with nd.Session() as s:
...     np.allclose(s.run(nd.matmul(q, r)), a, atol=1e-6)
True
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import COMPLEX, FLOAT, INDEX, check_type, op_scope
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops.array_ops_partition import _dims_must_match

_QR_TYPES = (dtypes.float16, dtypes.float32, dtypes.float64)
_TYPES = FLOAT + COMPLEX

__all__ = [
    "cholesky",
    "matrix_determinant",
    "matrix_inverse",
    "matrix_solve",
    "matrix_square_root",
    "matrix_triangular_solve",
    "qr",
    "self_adjoint_eig",
    "self_adjoint_eigvals",
    "svd",
]


# -- shape functions ------------------------------------------------------------------
def matrix_shape(c, i=0, square=False, what="input"):
    """Input ``i``'s shape, checked to be a (batch of) matrices, square when
    ``square`` (TF's wording)."""
    s = c.shape(i)
    if s.rank is None:
        return s
    if s.rank < 2:
        raise ValueError(f"Shape must be at least rank 2 but is rank {s.rank} "
                         f"({what})")
    if square:
        _dims_must_match(c, s[-2:-1], s[-1:])
    return s


def _qr_infer(c):
    d = check_type(c, 0, _QR_TYPES, "input")
    shape = matrix_shape(c)
    if shape.rank is None:
        return [(d, TensorShape(None)), (d, TensorShape(None))]
    dims = shape.as_list()
    batch, m, n = dims[:-2], dims[-2], dims[-1]
    full = c.attr("full_matrices")
    k = None if m is None or n is None else min(m, n)
    q_cols = m if full else k
    r_rows = m if full else k
    return [(d, TensorShape(batch + [m, q_cols])),
            (d, TensorShape(batch + [r_rows, n]))]


def _square_infer(c):
    d = check_type(c, 0, _TYPES, "input")
    return [(d, matrix_shape(c, square=True))]


def _det_infer(c):
    d = check_type(c, 0, _TYPES, "input")
    s = matrix_shape(c, square=True)
    return [(d, TensorShape(None) if s.rank is None else s[:-2])]


def _log_det_infer(c):
    (d, s), = _det_infer(c)
    return [(d, s), (d, s)]


def _solve_infer(c):
    d = check_type(c, 0, _TYPES, "matrix")
    if c.dtype(1) is not d:
        raise TypeError(f"{c.op_type}: rhs ({c.dtype(1).name}) must be {d.name} as "
                        "matrix")
    a = matrix_shape(c, 0, square=True, what="matrix")
    b = matrix_shape(c, 1, what="rhs")
    if a.rank is None or b.rank is None:
        return [(d, TensorShape(None))]
    _dims_must_match(c, a[-1:], b[-2:-1])
    if c.op_type == "MatrixTriangularSolve":
        from nbdist.framework.tensor_shape import broadcast_shapes

        batch = broadcast_shapes(a[:-2], b[:-2])
    else:
        _dims_must_match(c, a[:-2], b[:-2])
        batch = a[:-2].merge_with(b[:-2]) if a[:-2].is_compatible_with(
            b[:-2]) else b[:-2]
    return [(d, batch.concatenate([a[-1], b[-1]]))]


def _svd_infer(c):
    d = check_type(c, 0, _TYPES, "input")
    s = matrix_shape(c)
    if s.rank is None:
        return [(d, TensorShape(None))] * 3
    batch, m, n = s[:-2], s[-2], s[-1]
    k = None if m is None or n is None else min(m, n)
    if not c.attr("compute_uv"):
        return [(d, batch.concatenate([k])), (d, TensorShape([0])),
                (d, TensorShape([0]))]
    full = c.attr("full_matrices")
    return [(d, batch.concatenate([k])),
            (d, batch.concatenate([m, m if full else k])),
            (d, batch.concatenate([n, n if full else k]))]


def _eig_infer(c):
    d = check_type(c, 0, _TYPES, "input")
    s = matrix_shape(c, square=True)
    if s.rank is None:
        return [(d, TensorShape(None))] * 2
    vectors = s if c.attr("compute_v") else TensorShape([0])
    return [(d, s[:-1]), (d, vectors)]


def _lu_infer(c):
    d = check_type(c, 0, _TYPES, "input")
    s = matrix_shape(c, square=True)
    idx = c.attr("output_idx_type")
    return [(d, s), (idx, TensorShape(None) if s.rank is None else s[:-1])]


_T = {"T": ("type", None)}
register_op("Qr", _qr_infer, attrs=dict(_T, full_matrices=("bool", False)),
            num_inputs=1)
for _t in ("MatrixInverse",):
    register_op(_t, _square_infer, attrs=dict(_T, adjoint=("bool", False)),
                num_inputs=1)
for _t in ("MatrixExponential", "MatrixLogarithm", "MatrixSquareRoot", "Cholesky"):
    register_op(_t, _square_infer, attrs=_T, num_inputs=1)
register_op("MatrixDeterminant", _det_infer, attrs=_T, num_inputs=1)
register_op("LogMatrixDeterminant", _log_det_infer, attrs=_T, num_inputs=1)
register_op("MatrixSolve", _solve_infer, attrs=dict(_T, adjoint=("bool", False)),
            num_inputs=2)
register_op("MatrixTriangularSolve", _solve_infer,
            attrs=dict(_T, adjoint=("bool", False), lower=("bool", True)),
            num_inputs=2)
register_op("Svd", _svd_infer, attrs=dict(_T, compute_uv=("bool", True),
                                          full_matrices=("bool", False)),
            num_inputs=1)
register_op("SelfAdjointEigV2", _eig_infer, attrs=dict(_T, compute_v=("bool", True)),
            num_inputs=1)
register_op("Lu", _lu_infer, attrs=dict(_T, output_idx_type=("type", dtypes.int32)),
            num_inputs=1)


# -- wrappers -----------------------------------------------------------------------------
def _unary(op_type, x, name, what="input", **attrs):
    with op_scope(name, op_type, [x]) as (g, scope):
        t = convert_to_tensor(x, name=what)
        attrs["T"] = t.dtype.base_dtype
        return g.create_op(op_type, [t], attrs, name=scope).outputs


def qr(input, full_matrices=False, name=None):
    """The QR decomposition of (a batch of) matrices: ``q, r = nd.qr(a)`` with
    ``a = q @ r``, ``q`` orthonormal columns and ``r`` upper triangular."""
    return tuple(_unary("Qr", input, name, full_matrices=bool(full_matrices)))


def matrix_inverse(input, adjoint=False, name=None):
    """The inverse of each square matrix of ``input`` (of its adjoint with
    ``adjoint``); InvalidArgumentError "Input is not invertible." when one is
    singular.

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     s.run(nd.matrix_inverse([[2.0, 0.0], [0.0, 4.0]])).tolist()
    [[0.5, 0.0], [0.0, 0.25]]
    """
    return _unary("MatrixInverse", input, name, adjoint=bool(adjoint))[0]


def matrix_determinant(input, name=None):
    """The determinant of each square matrix of ``input``."""
    return _unary("MatrixDeterminant", input, name)[0]


def log_matrix_determinant(input, name=None):
    """(sign, log_abs_determinant) of each square matrix of ``input``."""
    return tuple(_unary("LogMatrixDeterminant", input, name))


def cholesky(input, name=None):
    """The lower-triangular ``L`` with ``L @ L^H = input`` for each Hermitian
    positive definite matrix (only the lower triangle of ``input`` is read).

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     s.run(nd.cholesky([[4.0, 2.0], [2.0, 2.0]])).tolist()
    [[2.0, 0.0], [1.0, 1.0]]
    """
    return _unary("Cholesky", input, name)[0]


def _solve(op_type, matrix, rhs, name, **attrs):
    with op_scope(name, op_type, [matrix, rhs]) as (g, scope):
        a = convert_to_tensor(matrix, name="matrix")
        b = convert_to_tensor(rhs, dtype=a.dtype.base_dtype, name="rhs")
        attrs["T"] = a.dtype.base_dtype
        return g.create_op(op_type, [a, b], attrs, name=scope).outputs[0]


def matrix_solve(matrix, rhs, adjoint=False, name=None):
    """``X`` with ``matrix @ X = rhs`` (``adjoint(matrix) @ X`` with ``adjoint``)
    for each square matrix; InvalidArgumentError "Input matrix is not
    invertible." when one is singular."""
    return _solve("MatrixSolve", matrix, rhs, name, adjoint=bool(adjoint))


def matrix_triangular_solve(matrix, rhs, lower=True, adjoint=False, name=None):
    """``matrix_solve`` for triangular matrices: only the lower (``lower``) or
    upper triangle of ``matrix`` is read; batch dimensions broadcast."""
    return _solve("MatrixTriangularSolve", matrix, rhs, name, lower=bool(lower),
                  adjoint=bool(adjoint))


def svd(tensor, full_matrices=False, compute_uv=True, name=None):
    """The singular values ``s`` (descending) of each matrix of ``tensor`` and,
    with ``compute_uv``, ``u`` and ``v`` with ``tensor = u @ diag(s) @ v^H``;
    returns ``s`` alone without ``compute_uv``, else ``(s, u, v)``."""
    s, u, v = _unary("Svd", tensor, name, compute_uv=bool(compute_uv),
                     full_matrices=bool(full_matrices))
    return (s, u, v) if compute_uv else s


def self_adjoint_eig(tensor, name=None):
    """(e, v): the eigenvalues (ascending) and eigenvectors (columns) of each
    self-adjoint matrix of ``tensor`` (only its lower triangle is read)."""
    return tuple(_unary("SelfAdjointEigV2", tensor, name, compute_v=True))


def self_adjoint_eigvals(tensor, name=None):
    """The eigenvalues (ascending) of each self-adjoint matrix of ``tensor``."""
    return _unary("SelfAdjointEigV2", tensor, name, compute_v=False)[0]


def matrix_exponential(input, name=None):
    """``exp(input)`` of each square matrix (the power series)."""
    return _unary("MatrixExponential", input, name)[0]


def matrix_logarithm(input, name=None):
    """The principal logarithm of each complex square matrix of ``input``."""
    t = convert_to_tensor(input, name="input")
    if t.dtype.base_dtype not in COMPLEX:
        raise TypeError(f"Value passed to parameter 'input' has DataType "
                        f"{t.dtype.name} not in list of allowed values: complex64, "
                        "complex128")
    return _unary("MatrixLogarithm", t, name)[0]


def matrix_square_root(input, name=None):
    """The principal square root ``Y`` (``Y @ Y = input``) of each square
    matrix."""
    return _unary("MatrixSquareRoot", input, name)[0]


def lu(input, output_idx_type=dtypes.int32, name=None):
    """(lu, p): the LU decomposition with partial pivoting of each square
    matrix: ``input[p] = L @ U`` with ``L`` unit lower triangular (below the
    diagonal of ``lu``) and ``U`` upper triangular (the rest of ``lu``)."""
    if output_idx_type not in INDEX:
        raise TypeError(f"output_idx_type must be int32 or int64, got "
                        f"{output_idx_type}")
    return tuple(_unary("Lu", input, name, output_idx_type=output_idx_type))
