"""Linear algebra built from the linear-algebra ops (TF's ``linalg_impl``):
``cholesky_solve``, ``matrix_solve_ls`` (``lstsq``), ``norm``, ``normalize``,
``logdet``, ``matvec``, ``matrix_rank``, ``pinv``, the LU helpers
(``lu_solve``, ``lu_reconstruct``, ``lu_matrix_inverse``), the tridiagonal
solvers, ``eigh_tridiagonal`` and ``conjugate_gradient``. Being compositions,
they are differentiable wherever the ops they use are.

>>> import nbdist as nd
>>> with nd.Session() as s:
...     float(s.run(nd.norm([[3.0, 4.0]])))
5.0
"""

from __future__ import annotations

import collections

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.op_util import op_scope
from nbdist.framework.ops import convert_to_tensor
from nbdist.ops import array_ops as A
from nbdist.ops import linalg_ops as L
from nbdist.ops.linalg_ops_diag import (
    matrix_diag,
    matrix_diag_part,
    matrix_transpose,
)
from nbdist.ops.math_ops import matmul
from nbdist.ops.math_ops_elementwise import (
    abs,
    cast,
    greater,
    log,
    maximum,
    pow,
    sqrt,
    square,
)
from nbdist.ops.math_ops_reduction import reduce_max, reduce_sum

__all__ = ["cholesky_solve", "matrix_solve_ls", "norm"]


def cholesky_solve(chol, rhs, name=None):
    """``X`` with ``A @ X = rhs`` given ``chol``, the Cholesky factor of ``A``.

    >>> import nbdist as nd
    >>> chol = nd.cholesky([[4.0, 2.0], [2.0, 2.0]])
    >>> with nd.Session() as s:
    ...     s.run(nd.cholesky_solve(chol, [[6.0], [4.0]])).round(6).tolist()
    [[1.0], [1.0]]
    """
    with op_scope(name, "cholesky_solve", [chol, rhs]):
        y = L.matrix_triangular_solve(chol, rhs, lower=True, adjoint=False)
        return L.matrix_triangular_solve(chol, y, lower=True, adjoint=True)


def matrix_solve_ls(matrix, rhs, l2_regularizer=0.0, fast=True, name=None):
    """The least-squares ``X`` minimising ``|matrix @ X - rhs|^2 + l2 |X|^2``
    (the minimum-norm one when ``matrix`` has more columns than rows), through
    the regularised normal equations."""
    if not fast:
        raise NotImplementedError("matrix_solve_ls is only implemented for "
                                  "fast=True")
    with op_scope(name, "matrix_solve_ls", [matrix, rhs, l2_regularizer]):
        a = convert_to_tensor(matrix, name="matrix")
        b = convert_to_tensor(rhs, dtype=a.dtype.base_dtype, name="rhs")
        m, n = a.shape[-2], a.shape[-1]
        l2 = cast(l2_regularizer, a.dtype.base_dtype)
        if m is not None and n is not None and m < n:
            gram = matmul(a, a, adjoint_b=True)
            reg = gram + l2 * _eye_of(gram)
            return matmul(a, cholesky_solve(L.cholesky(reg), b), adjoint_a=True)
        gram = matmul(a, a, adjoint_a=True)
        reg = gram + l2 * _eye_of(gram)
        return cholesky_solve(L.cholesky(reg), matmul(a, b, adjoint_a=True))


def _eye_of(m):
    return matrix_diag(A.ones_like(matrix_diag_part(m)))


lstsq = matrix_solve_ls

_MATRIX_ORDS = ("euclidean", "fro", 1, 2, np.inf)


def norm(tensor, ord="euclidean", axis=None, keepdims=None,
         name=None, keep_dims=None):
    """The vector norm (``axis`` None or an int) or matrix norm (``axis`` a
    pair) of ``tensor``: ``ord`` is "euclidean"/"fro", 1, 2, ``np.inf`` or any
    p > 0 for vectors.

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     float(s.run(nd.norm([[1.0, -2.0], [3.0, 4.0]], ord=1, axis=[0, 1])))
    6.0
    """
    keepdims = bool(keepdims or keep_dims)
    with op_scope(name, "norm", [tensor]):
        x = convert_to_tensor(tensor, name="tensor")
        is_matrix = isinstance(axis, (list, tuple)) and len(axis) == 2
        if is_matrix:
            if ord not in _MATRIX_ORDS:
                raise ValueError(f"'ord' must be a supported matrix norm in "
                                 f"['euclidean', 'fro', 1, 2, inf], got {ord}")
            return _matrix_norm(x, ord, list(axis), keepdims)
        if isinstance(axis, (list, tuple)):
            if len(axis) != 1:
                raise ValueError(f"'axis' must be None, an integer, or a tuple of "
                                 f"2 unique integers, got {axis}")
            axis = axis[0]
        if not (ord in ("euclidean", "fro") or (
                isinstance(ord, (int, float)) and ord > 0)):
            raise ValueError(f"'ord' must be a supported vector norm, got {ord}")
        if ord == "fro" and axis is not None:
            raise ValueError("'fro' is a matrix norm: give axis as a pair")
        if axis is None:
            rank = x.shape.rank
            out = _vector_norm(A.reshape(x, [-1]), ord, 0, False)
            if keepdims:
                if rank is None:
                    raise ValueError("norm with keepdims needs an input of known "
                                     "rank")
                out = A.reshape(out, [1] * rank)
            return out
        return _vector_norm(x, ord, axis, keepdims)


def _vector_norm(x, ord, axis, keepdims):
    if ord in ("euclidean", "fro", 2):
        return sqrt(reduce_sum(square(x), axis, keepdims=keepdims))
    if ord == np.inf:
        return reduce_max(abs(x), axis, keepdims=keepdims)
    if ord == 1:
        return reduce_sum(abs(x), axis, keepdims=keepdims)
    p = cast(ord, x.dtype.base_dtype)
    return pow(reduce_sum(pow(abs(x), p), axis, keepdims=keepdims), 1.0 / p)


def _matrix_norm(x, ord, axis, keepdims):
    rank = x.shape.rank
    if rank is None:
        raise ValueError("norm over a pair of axes needs an input of known rank")
    rows, cols = (a % rank for a in axis)
    if rows == cols:
        raise ValueError(f"'axis' must be None, an integer, or a tuple of 2 unique "
                         f"integers, got {axis}")
    if ord in ("euclidean", "fro"):
        return sqrt(reduce_sum(square(x), [rows, cols], keepdims=keepdims))
    if ord == 1:
        col_sums = reduce_sum(abs(x), rows, keepdims=True)
        out = reduce_max(col_sums, cols, keepdims=True)
    elif ord == np.inf:
        row_sums = reduce_sum(abs(x), cols, keepdims=True)
        out = reduce_max(row_sums, rows, keepdims=True)
    else:  # 2: the largest singular value
        rest = [a for a in range(rank) if a not in (rows, cols)]
        moved = A.transpose(x, rest + [rows, cols])
        s = L.svd(moved, compute_uv=False)
        out = reduce_max(s, -1)
        back = [None] * rank
        shape = A.concat([A.shape(out), [1, 1]], 0)
        out = A.reshape(out, shape)
        order = rest + [rows, cols]
        for pos, a in enumerate(order):
            back[a] = pos
        out = A.transpose(out, back)
    return out if keepdims else A.squeeze(out, [rows, cols])


def normalize(tensor, ord="euclidean", axis=None, name=None):
    """(tensor / norm, norm): ``tensor`` scaled to unit norm, and the norm."""
    with op_scope(name, "normalize", [tensor]):
        x = convert_to_tensor(tensor, name="tensor")
        n = norm(x, ord=ord, axis=axis, keepdims=True)
        return x / n, n


def logdet(matrix, name=None):
    """``log(det(matrix))`` of each Hermitian positive definite matrix, through
    its Cholesky factor (stable where ``det`` overflows)."""
    with op_scope(name, "logdet", [matrix]):
        chol = L.cholesky(matrix)
        return 2.0 * reduce_sum(log(matrix_diag_part(chol)), -1)


def matvec(a, b, transpose_a=False, adjoint_a=False, a_is_sparse=False,
           b_is_sparse=False, name=None):
    """``a @ b`` for (batches of) matrices ``a`` and vectors ``b``."""
    with op_scope(name, "MatVec", [a, b]):
        b = A.expand_dims(convert_to_tensor(b, name="b"), -1)
        return A.squeeze(matmul(a, b, transpose_a=transpose_a, adjoint_a=adjoint_a),
                         [-1])


def matrix_rank(a, tol=None, validate_args=False, name=None):
    """The number of singular values of each matrix above ``tol`` (by default
    ``max(singular value) * max(m, n) * eps``)."""
    with op_scope(name, "matrix_rank", [a]):
        x = convert_to_tensor(a, name="a")
        s = L.svd(x, compute_uv=False)
        if tol is None:
            eps = np.finfo(x.dtype.as_numpy_dtype).eps
            size = cast(maximum(A.shape(x)[-2], A.shape(x)[-1]), x.dtype.base_dtype)
            tol = reduce_max(s, -1, keepdims=True) * size * eps
        return reduce_sum(cast(greater(s, tol), dtypes.int32), -1)


def pinv(a, rcond=None, validate_args=False, name=None):
    """The Moore-Penrose pseudo-inverse of each matrix of ``a`` (singular values
    below ``rcond`` times the largest count as zero)."""
    with op_scope(name, "pinv", [a]):
        x = convert_to_tensor(a, name="a")
        if rcond is None:
            m, n = x.shape[-2], x.shape[-1]
            size = max(m or 1, n or 1)
            rcond = 10.0 * size * np.finfo(x.dtype.as_numpy_dtype).eps
        s, u, v = L.svd(x, full_matrices=False)
        cutoff = rcond * reduce_max(s, -1, keepdims=True)
        big = greater(s, cutoff)
        safe = A.where(big, s, A.ones_like(s))
        s_inv = A.where(big, 1.0 / safe, A.zeros_like(s))
        return matmul(v * A.expand_dims(s_inv, -2), u, adjoint_b=True)


def lu_reconstruct(lower_upper, perm, validate_args=False, name=None):
    """The matrix whose LU decomposition is ``(lower_upper, perm)``."""
    from nbdist.ops.array_ops_scatter import batch_gather
    from nbdist.ops.linalg_ops_diag import matrix_band_part, matrix_set_diag

    with op_scope(name, "lu_reconstruct", [lower_upper, perm]):
        lu = convert_to_tensor(lower_upper, name="lower_upper")
        lower = matrix_set_diag(matrix_band_part(lu, -1, 0),
                                A.ones_like(matrix_diag_part(lu)))
        upper = matrix_band_part(lu, 0, -1)
        rows = matmul(lower, upper)
        inverse = _invert_permutations(convert_to_tensor(perm, name="perm"))
        return _gather_rows(rows, inverse, batch_gather)


def _invert_permutations(perm):
    """The inverse of each permutation in the last dimension of ``perm``."""
    from nbdist.ops.array_ops_scatter import leading_coordinates, scatter_nd

    positions = A.broadcast_to(A.range(A.shape(perm)[-1], dtype=perm.dtype),
                               A.shape(perm))
    index = A.concat([leading_coordinates(perm, perm.shape.rank - 1),
                      A.expand_dims(perm, -1)], -1)
    return scatter_nd(index, positions, A.shape(perm, out_type=perm.dtype))


def _gather_rows(m, rows, batch_gather):
    """``m[..., rows[...], :]`` per batch entry."""
    return batch_gather(m, rows) if m.shape.rank > 2 else A.gather(m, rows)


def lu_solve(lower_upper, perm, rhs, validate_args=False, name=None):
    """``X`` with ``A @ X = rhs`` given ``A``'s LU decomposition."""
    from nbdist.ops.array_ops_scatter import batch_gather
    from nbdist.ops.linalg_ops_diag import matrix_band_part, matrix_set_diag

    with op_scope(name, "lu_solve", [lower_upper, perm, rhs]):
        lu = convert_to_tensor(lower_upper, name="lower_upper")
        b = convert_to_tensor(rhs, dtype=lu.dtype.base_dtype, name="rhs")
        permuted = _gather_rows(b, convert_to_tensor(perm), batch_gather)
        lower = matrix_set_diag(matrix_band_part(lu, -1, 0),
                                A.ones_like(matrix_diag_part(lu)))
        y = L.matrix_triangular_solve(lower, permuted, lower=True)
        return L.matrix_triangular_solve(lu, y, lower=False)


def lu_matrix_inverse(lower_upper, perm, validate_args=False, name=None):
    """The inverse of ``A`` given its LU decomposition."""
    with op_scope(name, "lu_matrix_inverse", [lower_upper, perm]):
        lu = convert_to_tensor(lower_upper, name="lower_upper")
        return lu_solve(lu, perm, _eye_of(lu))


def _tridiagonal_dense(diagonals, diagonals_format):
    """The dense matrices of tridiagonal ``diagonals`` in TF's formats."""
    if diagonals_format == "matrix":
        return convert_to_tensor(diagonals, name="diagonals")
    if diagonals_format == "sequence":
        if len(diagonals) != 3:
            raise ValueError("Expected diagonals to be a sequence of length 3.")
        sup, main, sub = (convert_to_tensor(d) for d in diagonals)
    elif diagonals_format == "compact":
        d = convert_to_tensor(diagonals, name="diagonals")
        sup, main, sub = d[..., 0, :], d[..., 1, :], d[..., 2, :]
    else:
        raise ValueError(f"Unrecognized diagonals_format: {diagonals_format}")
    # The superdiagonal's last and the subdiagonal's first entry are unused.
    return (matrix_diag(sup[..., :-1], k=1) + matrix_diag(main)
            + matrix_diag(sub[..., 1:], k=-1))


def tridiagonal_solve(diagonals, rhs, diagonals_format="compact",
                      transpose_rhs=False, conjugate_rhs=False, name=None,
                      partial_pivoting=True, perturb_singular=False):
    """``X`` with ``T @ X = rhs`` for tridiagonal ``T`` given by its diagonals
    ("compact": ``[..., 3, M]`` super, main, sub; "sequence": a list of the
    three; "matrix": the dense matrix)."""
    with op_scope(name, "tridiagonal_solve", [rhs]):
        t = _tridiagonal_dense(diagonals, diagonals_format)
        b = convert_to_tensor(rhs, dtype=t.dtype.base_dtype, name="rhs")
        vector = b.shape.rank == t.shape.rank - 1
        if transpose_rhs:
            b = matrix_transpose(b, conjugate=conjugate_rhs)
        if vector:
            b = A.expand_dims(b, -1)
        x = L.matrix_solve(t, b)
        if vector:
            return A.squeeze(x, [-1])
        return matrix_transpose(x) if transpose_rhs else x


def tridiagonal_matmul(diagonals, rhs, diagonals_format="compact", name=None):
    """``T @ rhs`` for tridiagonal ``T`` given by its diagonals (as
    ``tridiagonal_solve``)."""
    with op_scope(name, "tridiagonal_matmul", [rhs]):
        t = _tridiagonal_dense(diagonals, diagonals_format)
        return matmul(t, convert_to_tensor(rhs, dtype=t.dtype.base_dtype))


def eigh_tridiagonal(alpha, beta, eigvals_only=True, select="a",
                     select_range=None, tol=None, name=None):
    """The eigenvalues (and with ``eigvals_only=False`` the eigenvectors) of the
    symmetric tridiagonal matrix with diagonal ``alpha`` and off-diagonal
    ``beta``; ``select="a"`` (all) only."""
    if select != "a":
        raise NotImplementedError("eigh_tridiagonal supports select='a' only")
    with op_scope(name, "eigh_tridiagonal", [alpha, beta]):
        a = convert_to_tensor(alpha, name="alpha")
        b = convert_to_tensor(beta, dtype=a.dtype.base_dtype, name="beta")
        t = matrix_diag(a) + matrix_diag(b, k=1) + matrix_diag(b, k=-1)
        return L.self_adjoint_eigvals(t) if eigvals_only else L.self_adjoint_eig(t)


CGState = collections.namedtuple("CGState", ["i", "x", "r", "p", "gamma"])


def conjugate_gradient(operator, rhs, preconditioner=None, x=None, tol=1e-5,
                       max_iter=20, name="conjugate_gradient"):
    """Solves ``operator @ x = rhs`` for a symmetric positive definite
    ``operator`` (a matrix, or anything with ``matvec``) by conjugate
    gradients; returns the final ``CGState`` (``i``, ``x``, ``r``, ``p``,
    ``gamma``)."""
    from nbdist.ops.control_flow_v2 import while_loop
    from nbdist.ops.math_ops_elementwise import less, logical_and

    apply = operator.matvec if hasattr(operator, "matvec") else (
        lambda v: matvec(operator, v))
    with op_scope(name, "conjugate_gradient", [rhs]):
        b = convert_to_tensor(rhs, name="rhs")
        x0 = A.zeros_like(b) if x is None else convert_to_tensor(x)
        r0 = b - apply(x0)
        gamma0 = reduce_sum(r0 * r0, -1)
        stop = tol * sqrt(reduce_sum(b * b, -1))

        def cond(i, xv, r, p, gamma):
            return logical_and(less(i, max_iter),
                               reduce_max(sqrt(gamma) - stop) > 0)

        def body(i, xv, r, p, gamma):
            q = apply(p)
            alpha = gamma / reduce_sum(p * q, -1)
            xv = xv + A.expand_dims(alpha, -1) * p
            r = r - A.expand_dims(alpha, -1) * q
            new_gamma = reduce_sum(r * r, -1)
            p = r + A.expand_dims(new_gamma / gamma, -1) * p
            return i + 1, xv, r, p, new_gamma

        out = while_loop(cond, body, [0, x0, r0, r0, gamma0])
        return CGState(*out)

