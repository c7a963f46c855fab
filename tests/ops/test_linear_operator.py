"""The ``nd.linalg.LinearOperator`` classes: each one's dense form against
NumPy (and TF 2.21's for the layouts TF defines: permutation, Toeplitz,
circulant, Kronecker), and its matmul, solve, determinant, log |det|, trace,
diagonal, adjoint and inverse against NumPy on that dense form."""

from __future__ import annotations

import numpy as np
import pytest
from op_checks import run

import nbdist as nd

pytestmark = pytest.mark.usefixtures("graph")

L = nd.linalg
RNG = np.random.default_rng(5)
M = RNG.standard_normal((3, 3)) + 3 * np.eye(3)
M2 = RNG.standard_normal((2, 2)) + 2 * np.eye(2)


def _full(m):
    return L.LinearOperatorFullMatrix(m)


OPERATORS = {
    "full": (lambda: _full(M), M),
    "diag": (lambda: L.LinearOperatorDiag([2.0, -3.0, 0.5]), np.diag([2, -3, 0.5])),
    "lower": (lambda: L.LinearOperatorLowerTriangular(M), np.tril(M)),
    "identity": (lambda: L.LinearOperatorIdentity(3, dtype=nd.float64), np.eye(3)),
    "scaled_identity": (lambda: L.LinearOperatorScaledIdentity(3, 2.5),
                        2.5 * np.eye(3)),
    "adjoint": (lambda: _full(M).adjoint(), M.T),
    "inverse": (lambda: _full(M).inverse(), np.linalg.inv(M)),
    "composition": (lambda: L.LinearOperatorComposition([_full(M), _full(M.T)]),
                    M @ M.T),
    "block_diag": (lambda: L.LinearOperatorBlockDiag([_full(M2),
                                                      L.LinearOperatorDiag(np.array([4.0]))]),
                   np.block([[M2, np.zeros((2, 1))],
                             [np.zeros((1, 2)), np.full((1, 1), 4.0)]])),
    "block_lower": (lambda: L.LinearOperatorBlockLowerTriangular(
        [[_full(M2)], [_full(np.ones((1, 2))), _full(np.full((1, 1), 4.0))]]),
                    np.block([[M2, np.zeros((2, 1))],
                              [np.ones((1, 2)), np.full((1, 1), 4.0)]])),
    "kronecker": (lambda: L.LinearOperatorKronecker([_full(M2), _full(M2.T)]),
                  np.kron(M2, M2.T)),
    "householder": (lambda: L.LinearOperatorHouseholder([1.0, 2.0, 2.0]),
                    np.eye(3) - 2 * np.outer([1, 2, 2], [1, 2, 2]) / 9),
    "permutation": (lambda: L.LinearOperatorPermutation([2, 0, 1], dtype=nd.float64),
                    np.eye(3)[[2, 0, 1]]),
    "low_rank_update": (lambda: L.LinearOperatorLowRankUpdate(
        L.LinearOperatorDiag([1.0, 2.0, 3.0]), [[1.0], [2.0], [0.5]],
        diag_update=[3.0]), np.diag([1, 2, 3.0]) + 3 * np.outer([1, 2, .5],
                                                                 [1, 2, .5])),
    "tridiag": (lambda: L.LinearOperatorTridiag([[1.0, 2, 0], [4, 5, 6], [0, 7, 8]]),
                np.diag([4.0, 5, 6]) + np.diag([1.0, 2], 1) + np.diag([7.0, 8], -1)),
    "toeplitz": (lambda: L.LinearOperatorToeplitz([4.0, 2, 1], [4.0, 1, 0.5]),
                 np.array([[4.0, 1, 0.5], [2, 4, 1], [1, 2, 4]])),
    # TF 2.21: the circulant of spectrum [6, -3, -3] is [[0, 3, 3], [3, 0, 3], ...].
    "circulant": (lambda: L.LinearOperatorCirculant(
        [6.0, -3.0, -3.0], input_output_dtype=nd.float64),
                  np.array([[0.0, 3, 3], [3, 0, 3], [3, 3, 0]])),
}


@pytest.mark.parametrize("case", sorted(OPERATORS))
def test_operator_matches_its_dense_form(case):
    build, dense = OPERATORS[case]
    op = build()
    x = RNG.standard_normal((dense.shape[1], 2))
    logdet = np.linalg.slogdet(dense)[1]
    got = run({
        "dense": op.to_dense(), "matmul": op.matmul(x),
        "matmul_adj": op.matmul(x, adjoint=True), "matvec": op.matvec(x[:, 0]),
        "solve": op.solve(x), "solve_adj": op.solve(x, adjoint=True),
        "det": op.determinant(), "logdet": op.log_abs_determinant(),
        "trace": op.trace(), "diag": op.diag_part(),
        "adjoint": op.adjoint().to_dense(), "inverse": op.inverse().to_dense(),
    })
    np.testing.assert_allclose(got["dense"], dense, atol=1e-6)
    np.testing.assert_allclose(got["matmul"], dense @ x, atol=1e-6)
    np.testing.assert_allclose(got["matmul_adj"], dense.T @ x, atol=1e-6)
    np.testing.assert_allclose(got["matvec"], dense @ x[:, 0], atol=1e-6)
    np.testing.assert_allclose(got["solve"], np.linalg.solve(dense, x), atol=1e-5)
    np.testing.assert_allclose(got["solve_adj"], np.linalg.solve(dense.T, x),
                               atol=1e-5)
    np.testing.assert_allclose(got["det"], np.linalg.det(dense), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(got["logdet"], logdet, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["trace"], np.trace(dense), atol=1e-6)
    np.testing.assert_allclose(got["diag"], np.diag(dense), atol=1e-6)
    np.testing.assert_allclose(got["adjoint"], dense.T, atol=1e-6)
    np.testing.assert_allclose(got["inverse"], np.linalg.inv(dense), atol=1e-5)
    assert op.shape.as_list() in ([3, 3], [4, 4], [None, None]) or (
        op.shape.rank is None)


def test_properties_hints_and_composition_by_matmul():
    op = L.LinearOperatorDiag([1.0, 2.0], is_positive_definite=True)
    assert op.shape.as_list() == [2, 2] and op.batch_shape.as_list() == []
    assert (op.domain_dimension, op.range_dimension, op.tensor_rank) == (2, 2, 2)
    assert op.is_self_adjoint and op.is_non_singular and op.is_square
    chol = run(op.cholesky().to_dense())
    np.testing.assert_allclose(chol, np.diag(np.sqrt([1.0, 2.0])), rtol=1e-6)
    both = op @ L.LinearOperatorFullMatrix([[1.0, 1.0], [0.0, 1.0]])
    assert isinstance(both, L.LinearOperatorComposition)
    np.testing.assert_allclose(run(both.to_dense()), [[1, 1], [0, 2]])
    batch = L.LinearOperatorIdentity(2, batch_shape=[3])
    assert batch.shape.as_list() == [3, 2, 2]
    with pytest.raises(ValueError, match="positive definite matrix is always "
                                         "non-singular"):
        L.LinearOperatorFullMatrix(np.eye(2), is_non_singular=False,
                                   is_positive_definite=True)
    with pytest.raises(ValueError, match="must contain `2` blocks"):
        L.LinearOperatorBlockLowerTriangular([[op], [op]])


def test_range_and_domain_dimension_are_dimensions_as_in_tf1():
    # TF1 code reads ``operator.range_dimension.value``.
    op = nd.linalg.LinearOperatorFullMatrix(np.ones((2, 3, 4)))
    assert op.range_dimension.value == 3 and op.domain_dimension.value == 4
    assert op.range_dimension == 3 and not op.is_square
    assert nd.linalg.LinearOperatorIdentity(3).is_square
    unknown = nd.linalg.LinearOperatorFullMatrix(nd.placeholder(nd.float32))
    assert unknown.range_dimension.value is None
