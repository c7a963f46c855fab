"""Gradients of the linear-algebra ops (``linalg_ops``), for real matrices.

Each is the textbook matrix-calculus result, built from the ops themselves:
``d inv(A) = -inv(A) dA inv(A)``; the solves reuse the solve with the adjoint;
``Cholesky`` and ``SelfAdjointEigV2`` read only the lower triangle of their
input, so the gradient of the eigen-decomposition is folded onto it (the
Cholesky one is returned symmetric, as TF does); ``Svd`` follows Townsend's
"Differentiating the Singular Value Decomposition" (2016); ``MatrixExponential``
uses the block identity ``expm([[A^T, G], [0, A^T]])[:n, n:]``.

``Qr`` (as TF 1.15: reduced, with at least as many rows as columns) follows
Walter & Lehmann's result ``dA = (dQ + Q copyltu(M)) R^-T``,
``M = R dR^T - dQ^T Q``. ``MatrixLogarithm``, ``MatrixSquareRoot`` and ``Lu``
have no gradient here.
"""

from __future__ import annotations

from nbdist.framework.gradient_registry import register_gradient
from nbdist.ops import array_ops as A
from nbdist.ops import linalg_ops as L
from nbdist.ops.linalg_ops_diag import (
    matrix_band_part,
    matrix_diag,
    matrix_diag_part,
    matrix_set_diag,
    matrix_transpose,
)
from nbdist.ops.math_grad import sum_to
from nbdist.ops.math_ops import matmul
from nbdist.ops.math_ops_elementwise import reciprocal, square


def _unsqueeze2(t):
    return A.expand_dims(A.expand_dims(t, -1), -1)


@register_gradient("MatrixInverse")
def _inverse_grad(op, grad):
    inv = op.outputs[0]
    adj = op.get_attr("adjoint")
    inner = matmul(grad, inv, adjoint_a=adj, adjoint_b=not adj)
    return [-matmul(inv, inner, adjoint_a=not adj)]


@register_gradient("MatrixDeterminant")
def _det_grad(op, grad):
    a = op.inputs[0]
    scale = _unsqueeze2(grad * op.outputs[0])
    return [scale * L.matrix_inverse(a, adjoint=True)]


@register_gradient("LogMatrixDeterminant")
def _log_det_grad(op, _sign_grad, grad):
    return [_unsqueeze2(grad) * L.matrix_inverse(op.inputs[0], adjoint=True)]


@register_gradient("MatrixSolve")
def _solve_grad(op, grad):
    a, _ = op.inputs
    x = op.outputs[0]
    adj = op.get_attr("adjoint")
    grad_b = L.matrix_solve(a, grad, adjoint=not adj)
    grad_a = -(matmul(x, grad_b, adjoint_b=True) if adj
               else matmul(grad_b, x, adjoint_b=True))
    return [grad_a, grad_b]


@register_gradient("MatrixTriangularSolve")
def _triangular_solve_grad(op, grad):
    a, b = op.inputs
    x = op.outputs[0]
    adj, lower = op.get_attr("adjoint"), op.get_attr("lower")
    grad_b = L.matrix_triangular_solve(a, grad, lower=lower, adjoint=not adj)
    grad_a = -(matmul(x, grad_b, adjoint_b=True) if adj
               else matmul(grad_b, x, adjoint_b=True))
    grad_a = matrix_band_part(grad_a, -1, 0) if lower else matrix_band_part(
        grad_a, 0, -1)
    return [sum_to(grad_a, a), sum_to(grad_b, b)]


@register_gradient("Cholesky")
def _cholesky_grad(op, grad):
    chol = op.outputs[0]
    chol_inv = L.matrix_triangular_solve(chol, _eye_like(chol))
    middle = matmul(chol, grad, adjoint_a=True)
    middle = matrix_set_diag(middle, 0.5 * matrix_diag_part(middle))
    middle = matrix_band_part(middle, -1, 0)
    grad_a = matmul(matmul(chol_inv, middle, adjoint_a=True), chol_inv)
    return [0.5 * (grad_a + matrix_transpose(grad_a))]


def _eye_like(m):
    """Identity matrices of ``m``'s (batch) shape and dtype."""
    return matrix_diag(A.ones_like(matrix_diag_part(m)))


def _off_diagonal_reciprocal(v):
    """``F[i, j] = 1 / (v[j] - v[i])`` off the diagonal, 0 on it."""
    diff = A.expand_dims(v, -2) - A.expand_dims(v, -1)
    return matrix_set_diag(reciprocal(diff), A.zeros_like(v))


@register_gradient("SelfAdjointEigV2")
def _eig_grad(op, grad_e, grad_v):
    e, v = op.outputs
    if not op.get_attr("compute_v"):
        _, v = L.self_adjoint_eig(op.inputs[0])
        inner = matrix_diag(grad_e)
    else:
        f = _off_diagonal_reciprocal(e)
        inner = matrix_diag(grad_e) + f * matmul(v, grad_v, adjoint_a=True)
    grad_a = matmul(v, matmul(inner, v, adjoint_b=True))
    # The op reads only the lower triangle: fold the upper part onto it.
    grad_a = matrix_band_part(grad_a + matrix_transpose(grad_a), -1, 0)
    return [matrix_set_diag(grad_a, 0.5 * matrix_diag_part(grad_a))]


@register_gradient("Svd")
def _svd_grad(op, grad_s, grad_u, grad_v):
    a = op.inputs[0]
    if not op.get_attr("compute_uv"):
        _, u, v = L.svd(a, compute_uv=True)
        return [matmul(u * A.expand_dims(grad_s, -2), v, adjoint_b=True)]
    s, u, v = op.outputs
    m, n = a.shape[-2], a.shape[-1]
    if op.get_attr("full_matrices") and m != n:
        raise NotImplementedError(
            "SVD gradient has not been implemented for input with unknown inner "
            "matrix shape or full_matrices=True with non-square input")
    f = _off_diagonal_reciprocal(square(s))
    s_row = A.expand_dims(s, -2)
    s_inv_row = A.expand_dims(reciprocal(s), -2)
    ut_gu = matmul(u, grad_u, adjoint_a=True)
    vt_gv = matmul(v, grad_v, adjoint_a=True)
    inner = (f * (ut_gu - matrix_transpose(ut_gu)) * s_row + matrix_diag(grad_s)
             + A.expand_dims(s, -1) * (f * (vt_gv - matrix_transpose(vt_gv))))
    grad_a = matmul(matmul(u, inner), v, adjoint_b=True)
    # The parts of grad_u and grad_v outside the spans of u and v (rectangular
    # inputs).
    grad_a += matmul((grad_u - matmul(u, ut_gu)) * s_inv_row, v, adjoint_b=True)
    grad_a += matmul(u * s_inv_row, grad_v - matmul(v, vt_gv), adjoint_b=True)
    return [grad_a]


@register_gradient("MatrixExponential")
def _expm_grad(op, grad):
    a_t = matrix_transpose(op.inputs[0])
    zeros = A.zeros_like(a_t)
    block = A.concat([A.concat([a_t, grad], -1), A.concat([zeros, a_t], -1)], -2)
    n = A.shape(a_t)[-1]
    big = L.matrix_exponential(block)
    return [big[..., :n, n:]]


@register_gradient("Qr")
def _qr_grad(op, grad_q, grad_r):
    a = op.inputs[0]
    q, r = op.outputs
    m, n = a.shape.as_list()[-2:] if a.shape.rank is not None else (None, None)
    if m is None or n is None or n > m or (op.get_attr("full_matrices") and m != n):
        raise NotImplementedError(
            "QrGrad not implemented when ncols > nrows or full_matrices is true "
            "and ncols != nrows.")
    grad_q = A.zeros_like(q) if grad_q is None else grad_q
    grad_r = A.zeros_like(r) if grad_r is None else grad_r
    m_ = matmul(r, grad_r, adjoint_b=True) - matmul(grad_q, q, adjoint_a=True)
    lower = matrix_band_part(m_, -1, 0)
    # copyltu: the lower triangle with its strict part mirrored above.
    strict = matrix_set_diag(lower, A.zeros_like(matrix_diag_part(m_)))
    copyltu = lower + matrix_transpose(strict)
    b = grad_q + matmul(q, copyltu)
    return [matrix_transpose(L.matrix_triangular_solve(
        r, matrix_transpose(b), lower=False))]
