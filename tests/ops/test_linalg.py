"""Linear algebra: the matrix structure ops (band, diagonals, set_diag, eye,
trace, cross), decompositions and solvers (inverse, determinant, solve,
triangular solve, Cholesky, SVD, eigen-decomposition, LU, expm...), einsum and
tensordot, and the ``nd.linalg`` namespace. Values against NumPy (or TF's
results where the layout is TF's own, checked with TF 2.21), gradients against
finite differences, static shapes, TF's error wording."""

from __future__ import annotations

import numpy as np
import pytest
from op_checks import dynamic, flat, run
from test_gradients import check_gradient

import nbdist as nd

pytestmark = pytest.mark.usefixtures("graph")

RNG = np.random.default_rng(0)
M = RNG.standard_normal((3, 3)) + 3 * np.eye(3)
SPD = M @ M.T
A34 = np.arange(12.0).reshape(3, 4)


def sym(x):
    return (x + nd.matrix_transpose(x)) / 2


# -- structure --------------------------------------------------------------------------
def test_band_part_and_diagonals_match_numpy_and_tf():
    np.testing.assert_array_equal(run(nd.matrix_band_part(A34, 1, 0)),
                                  np.tril(np.triu(A34, -1), 0))
    np.testing.assert_array_equal(run(nd.matrix_band_part(A34, -1, 1)),
                                  np.triu(A34, -A34.shape[0]) * (
                                      np.tri(3, 4, 1) > 0))
    part = nd.matrix_diag_part(A34, k=(-1, 1))
    assert part.shape.as_list() == [3, 3]
    # TF 2.21: superdiagonals right-aligned, subdiagonals left-aligned.
    np.testing.assert_array_equal(run(part), [[1, 6, 11], [0, 5, 10], [4, 9, 0]])
    np.testing.assert_array_equal(run(nd.matrix_diag_part(A34, k=-1)), [4, 9])
    m = nd.matrix_diag([[1, 2, 0], [3, 4, 5]], k=(-1, 0), num_rows=3, num_cols=3)
    np.testing.assert_array_equal(run(m), [[1, 0, 0], [3, 2, 0], [0, 4, 0]])
    assert nd.matrix_diag([[1, 2], [3, 4]], k=1).shape.as_list() == [2, 3, 3]
    got = run(nd.matrix_set_diag(np.zeros((3, 4)), [[1, 2, 3], [4, 5, 6]],
                                 k=(0, 1)))
    np.testing.assert_array_equal(got, [[4, 1, 0, 0], [0, 5, 2, 0], [0, 0, 6, 3]])


def test_eye_trace_diag_cross_transpose():
    np.testing.assert_array_equal(run(nd.eye(2, 3, batch_shape=[2])),
                                  np.broadcast_to(np.eye(2, 3), (2, 2, 3)))
    np.testing.assert_array_equal(run(nd.trace(np.ones((2, 3, 3)))), [3, 3])
    t = np.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(run(nd.diag_part(nd.diag(t))), t)
    assert nd.diag(t).shape.as_list() == [2, 3, 2, 3]
    a, b = RNG.standard_normal((2, 3)), RNG.standard_normal((2, 3))
    np.testing.assert_allclose(run(nd.cross(a, b)), np.cross(a, b))
    np.testing.assert_array_equal(run(nd.matrix_transpose(np.ones((2, 3, 4)))),
                                  np.ones((2, 4, 3)))


def test_structure_errors_use_tf_wording():
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match=r"input must be at least 2-dim, received shape: \[3\]"):
        run(nd.matrix_band_part(dynamic([1, 2, 3]), 0, 0))
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 2 and 3"):
        nd.diag_part(np.ones((2, 3)))
    with pytest.raises(ValueError, match="Dimension must be 3 but is 2"):
        nd.cross([1.0, 2.0], [3.0, 4.0])
    with pytest.raises(nd.errors.FailedPreconditionError,
                       match="Cross-products are only defined for 3-element"):
        run(nd.cross(dynamic([1.0, 2.0]), dynamic([3.0, 4.0])))


# -- decompositions and solvers ------------------------------------------------------------
def test_inverse_determinant_solve_match_numpy():
    b = RNG.standard_normal((3, 2))
    batch = np.stack([M, SPD])
    np.testing.assert_allclose(run(nd.matrix_inverse(batch)), np.linalg.inv(batch))
    np.testing.assert_allclose(run(nd.matrix_inverse(M, adjoint=True)),
                               np.linalg.inv(M.T))
    np.testing.assert_allclose(run(nd.matrix_determinant(batch)),
                               np.linalg.det(batch))
    sign, logabs = run(nd.linalg.slogdet(-M))
    np.testing.assert_allclose((sign, logabs), np.linalg.slogdet(-M))
    np.testing.assert_allclose(run(nd.matrix_solve(M, b)), np.linalg.solve(M, b))
    np.testing.assert_allclose(run(nd.matrix_solve(M, b, adjoint=True)),
                               np.linalg.solve(M.T, b))
    np.testing.assert_allclose(run(nd.matrix_triangular_solve(M, b)),
                               np.linalg.solve(np.tril(M), b))
    np.testing.assert_allclose(
        run(nd.matrix_triangular_solve(M, b, lower=False, adjoint=True)),
        np.linalg.solve(np.triu(M).T, b))
    np.testing.assert_allclose(run(nd.linalg.logdet(SPD)),
                               np.log(np.linalg.det(SPD)))


def test_cholesky_and_least_squares():
    chol = nd.cholesky(SPD)
    np.testing.assert_allclose(run(chol), np.linalg.cholesky(SPD))
    b = RNG.standard_normal((3, 2))
    np.testing.assert_allclose(run(nd.cholesky_solve(chol, b)),
                               np.linalg.solve(SPD, b))
    tall = RNG.standard_normal((5, 2))
    y = RNG.standard_normal((5, 1))
    np.testing.assert_allclose(run(nd.matrix_solve_ls(tall, y)),
                               np.linalg.lstsq(tall, y, rcond=None)[0])
    wide = tall.T
    np.testing.assert_allclose(run(nd.linalg.lstsq(wide, y[:2])),
                               np.linalg.lstsq(wide, y[:2], rcond=None)[0])


def test_svd_eig_lu_and_matrix_functions():
    a = RNG.standard_normal((4, 3))
    s, u, v = run(nd.svd(a))
    np.testing.assert_allclose(s, np.linalg.svd(a, compute_uv=False))
    np.testing.assert_allclose(u @ np.diag(s) @ v.T, a, atol=1e-12)
    assert nd.svd(a, full_matrices=True)[1].shape.as_list() == [4, 4]
    e, vec = run(nd.self_adjoint_eig(SPD))
    np.testing.assert_allclose(e, np.linalg.eigvalsh(SPD))
    np.testing.assert_allclose(vec @ np.diag(e) @ vec.T, SPD, atol=1e-10)
    np.testing.assert_allclose(run(nd.self_adjoint_eigvals(SPD)), e)
    x = np.array([[1.0, 2, 3], [4, 5, 6], [7, 8, 10]])
    lu, p = run(nd.linalg.lu(x))
    # TF 2.21 gives p = [2, 0, 1] and x[p] = L @ U.
    assert p.tolist() == [2, 0, 1]
    lower, upper = np.tril(lu, -1) + np.eye(3), np.triu(lu)
    np.testing.assert_allclose(lower @ upper, x[p])
    np.testing.assert_allclose(run(nd.linalg.lu_reconstruct(lu, p)), x)
    np.testing.assert_allclose(run(nd.linalg.lu_matrix_inverse(lu, p)),
                               np.linalg.inv(x))
    np.testing.assert_allclose(run(nd.linalg.lu_solve(lu, p, np.eye(3)[:, :1])),
                               np.linalg.inv(x)[:, :1])
    # TF 2.21: expm(x / 10)[0] and sqrtm(x x^T)[0].
    np.testing.assert_allclose(run(nd.linalg.expm(x / 10))[0],
                               [1.38109869, 0.54078553, 0.72755543], rtol=1e-7)
    np.testing.assert_allclose(run(nd.linalg.sqrtm(x @ x.T))[0],
                               [1.5821328, 1.83891267, 2.84872884], rtol=1e-7)
    c = np.array([[2.0, 1.0], [0.5, 3.0]], np.complex128)
    np.testing.assert_allclose(run(nd.linalg.expm(nd.linalg.logm(c))), c)


def test_pinv_rank_norms():
    a = RNG.standard_normal((2, 3))
    np.testing.assert_allclose(run(nd.linalg.pinv(a)), np.linalg.pinv(a))
    assert run(nd.linalg.matrix_rank(np.ones((3, 3)))) == 1
    x = np.array([[1.0, 2, 3], [4, 5, 6], [7, 8, 10]])
    for ord_ in ("fro", 1, 2, np.inf):
        np.testing.assert_allclose(run(nd.norm(x, ord=ord_, axis=[0, 1])),
                                   np.linalg.norm(x, ord_), rtol=1e-6)
    np.testing.assert_allclose(run(nd.norm(x)), np.linalg.norm(x))
    np.testing.assert_allclose(run(nd.norm(x, ord=3, axis=1)),
                               np.linalg.norm(x, 3, axis=1))
    assert nd.norm(x, axis=1, keepdims=True).shape.as_list() == [3, 1]
    with pytest.raises(ValueError, match=r"'ord' must be a supported matrix norm in "
                                         r"\['euclidean', 'fro', 1, 2, inf\], got 3"):
        nd.norm(x, ord=3, axis=[0, 1])
    unit, n = run(nd.linalg.normalize(x[0]))
    np.testing.assert_allclose(unit * n, x[0])


def test_tridiagonal_and_matvec():
    compact = np.array([[1.0, 2, 0], [4, 5, 6], [0, 7, 8]])
    dense = np.diag([4.0, 5, 6]) + np.diag([1.0, 2], 1) + np.diag([7.0, 8], -1)
    rhs = np.ones((3, 1))
    np.testing.assert_allclose(run(nd.linalg.tridiagonal_solve(compact, rhs)),
                               np.linalg.solve(dense, rhs))
    np.testing.assert_allclose(run(nd.linalg.tridiagonal_matmul(compact, rhs)),
                               dense @ rhs)
    np.testing.assert_allclose(run(nd.linalg.matvec(dense, [1.0, 2, 3])),
                               dense @ [1, 2, 3])
    np.testing.assert_allclose(run(nd.linalg.eigh_tridiagonal([4.0, 5], [1.0])),
                               np.linalg.eigvalsh([[4.0, 1], [1, 5]]))
    state = nd.linalg.experimental.conjugate_gradient(SPD, np.ones(3), tol=1e-10)
    np.testing.assert_allclose(run(state.x), np.linalg.solve(SPD, np.ones(3)))


def test_decomposition_errors_use_tf_wording():
    with pytest.raises(nd.errors.InvalidArgumentError, match="Input is not "
                                                             "invertible."):
        run(nd.matrix_inverse(dynamic(np.zeros((2, 2)))))
    with pytest.raises(nd.errors.InvalidArgumentError, match="Input matrix is not "
                                                             "invertible."):
        run(nd.matrix_solve(dynamic(np.zeros((2, 2))), dynamic(np.ones((2, 1)))))
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match="Input matrix must be square."):
        run(nd.matrix_inverse(dynamic(np.zeros((2, 3)))))
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 2 and 3"):
        nd.matrix_inverse(np.zeros((2, 3)))
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 2 and 3"):
        nd.matrix_triangular_solve(np.eye(2), np.ones((3, 1)))
    with pytest.raises(ValueError, match="Shape must be at least rank 2 but is "
                                         "rank 1"):
        nd.svd(np.ones(3))
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match="Cholesky decomposition was not successful"):
        run(nd.cholesky(dynamic(-np.eye(2))))


# -- einsum, tensordot ------------------------------------------------------------------------
@pytest.mark.parametrize("equation,shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("ij,jk", [(2, 3), (3, 4)]),
    ("ii", [(3, 3)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (5, 3, 4)]),
    ("i,j->ij", [(2,), (3,)]),
])
def test_einsum_matches_numpy_and_infers_shape(equation, shapes):
    xs = [RNG.standard_normal(s) for s in shapes]
    out = nd.einsum(equation, *xs)
    want = np.einsum(equation, *xs)
    assert out.shape.as_list() == list(want.shape)
    np.testing.assert_allclose(run(out), want)


def test_einsum_and_tensordot_errors_and_tensordot_values():
    with pytest.raises(ValueError, match="Dimensions must be equal, but are 3 and 4"):
        nd.einsum("ij,jk->ik", np.ones((2, 3)), np.ones((4, 5)))
    a, b = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((4, 3))
    np.testing.assert_allclose(run(nd.tensordot(a, b, [[1, 2], [1, 0]])),
                               np.tensordot(a, b, [[1, 2], [1, 0]]))
    np.testing.assert_allclose(run(nd.tensordot(a, b.T, 2)),
                               np.tensordot(a, b.T, 2))


# -- gradients ------------------------------------------------------------------------------
def _r(*shape):
    return RNG.standard_normal(shape)


GRADIENT_CASES = {
    "band_part": (lambda x: nd.matrix_band_part(x, 1, 0), [M]),
    "matrix_diag_band": (lambda d: nd.matrix_diag(d, k=(-1, 0)), [_r(2, 3)]),
    "matrix_diag_part": (lambda x: nd.matrix_diag_part(x, k=(0, 1)), [M]),
    "set_diag": (lambda x, d: nd.matrix_set_diag(x, d), [M, _r(3)]),
    "tensor_diag": (nd.diag, [_r(3)]),
    "cross": (nd.cross, [_r(2, 3), _r(2, 3)]),
    "inverse": (nd.matrix_inverse, [M]),
    "inverse_adjoint": (lambda x: nd.matrix_inverse(x, adjoint=True), [M]),
    "determinant": (nd.matrix_determinant, [M]),
    "slogdet": (lambda x: nd.linalg.slogdet(x)[1], [M]),
    "solve": (nd.matrix_solve, [M, _r(3, 2)]),
    "solve_adjoint": (lambda a, b: nd.matrix_solve(a, b, adjoint=True), [M, _r(3, 2)]),
    "triangular_solve": (nd.matrix_triangular_solve, [M, _r(3, 2)]),
    "triangular_upper_adjoint": (lambda a, b: nd.matrix_triangular_solve(
        a, b, lower=False, adjoint=True), [M, _r(3, 2)]),
    "cholesky": (lambda x: nd.cholesky(sym(x)), [SPD]),
    "eigh": (lambda x: flat(nd.self_adjoint_eig(sym(x))[0],
                            nd.self_adjoint_eig(sym(x))[1] ** 2), [M + M.T]),
    "eigvalsh": (nd.self_adjoint_eigvals, [M + M.T]),
    # u and v are fixed up to sign: the loss reads their squares.
    "svd_tall": (lambda x: flat(nd.svd(x)[0], nd.svd(x)[1] ** 2, nd.svd(x)[2] ** 2),
                 [_r(4, 3)]),
    "svd_wide": (lambda x: flat(nd.svd(x)[0], nd.svd(x)[1] ** 2, nd.svd(x)[2] ** 2),
                 [_r(2, 3)]),
    "svd_values": (lambda x: nd.svd(x, compute_uv=False), [_r(3, 2)]),
    "expm": (nd.linalg.expm, [M / 3]),
    "einsum_matmul": (lambda a, b: nd.einsum("ij,jk->ik", a, b), [_r(2, 3), _r(3, 2)]),
    "einsum_summed_alone": (lambda a, b: nd.einsum("ij,k->i", a, b), [_r(2, 3), _r(2)]),
    "einsum_ellipsis": (lambda a, b: nd.einsum("...ij,...jk->...ik", a, b),
                        [_r(2, 1, 2, 3), _r(3, 3, 2)]),
    "tensordot": (lambda a, b: nd.tensordot(a, b, [[1, 2], [1, 0]]),
                  [_r(2, 3, 2), _r(2, 3)]),
    "lstsq": (nd.matrix_solve_ls, [_r(4, 2), _r(4, 1)]),
    "pinv": (nd.linalg.pinv, [_r(2, 3)]),
    "norm_2": (lambda x: nd.norm(x, ord=2, axis=[0, 1]), [_r(3, 2)]),
}


@pytest.mark.parametrize("case", sorted(GRADIENT_CASES))
def test_gradients_match_finite_differences(case):
    build, values = GRADIENT_CASES[case]
    check_gradient(build, values)


# -- the namespace ----------------------------------------------------------------------------
# Generated with TF 2.21:
#   /work/tfvenv/bin/python -c "import tensorflow as tf; print(sorted(n for n in
#       dir(tf.compat.v1.linalg) if not n.startswith('_')))"
TF1_LINALG = [
    'LinearOperator', 'LinearOperatorAdjoint', 'LinearOperatorBlockDiag',
    'LinearOperatorBlockLowerTriangular', 'LinearOperatorCirculant',
    'LinearOperatorCirculant2D', 'LinearOperatorCirculant3D',
    'LinearOperatorComposition', 'LinearOperatorDiag', 'LinearOperatorFullMatrix',
    'LinearOperatorHouseholder', 'LinearOperatorIdentity', 'LinearOperatorInversion',
    'LinearOperatorKronecker', 'LinearOperatorLowRankUpdate',
    'LinearOperatorLowerTriangular', 'LinearOperatorPermutation',
    'LinearOperatorScaledIdentity', 'LinearOperatorToeplitz', 'LinearOperatorTridiag',
    'LinearOperatorZeros', 'adjoint', 'band_part', 'cholesky', 'cholesky_solve',
    'cross', 'det', 'diag', 'diag_part', 'eigh', 'eigh_tridiagonal', 'eigvalsh',
    'einsum', 'experimental', 'expm', 'eye', 'global_norm', 'inv', 'l2_normalize',
    'logdet', 'logm', 'lstsq', 'lu', 'lu_matrix_inverse', 'lu_reconstruct',
    'lu_solve', 'matmul', 'matrix_rank', 'matrix_transpose', 'matvec', 'norm',
    'normalize', 'pinv', 'qr', 'set_diag', 'slogdet', 'solve', 'sqrtm', 'svd',
    'tensor_diag', 'tensor_diag_part', 'tensordot', 'trace', 'transpose',
    'triangular_solve', 'tridiagonal_matmul', 'tridiagonal_solve',
]


def test_every_tf1_linalg_name_resolves():
    assert [n for n in TF1_LINALG if not hasattr(nd.linalg, n)] == []


@pytest.mark.parametrize("equation, shapes", [
    ("...ij,jk->...ik", [(2, 2, 3), (3, 2)]),
    ("bij,...j->bi", [(2, 2, 3), (3,)]),
])
def test_einsum_gradient_of_an_input_without_the_ellipsis_the_other_broadcasts(
        equation, shapes):
    # The weights of a batched matmul written with "...": their gradient sums
    # over the batch axes.
    rng = np.random.default_rng(3)
    check_gradient(lambda a, b: nd.einsum(equation, a, b),
                   [rng.standard_normal(s) for s in shapes])


def test_adjoint_and_conjugate_transpose_conjugate_complex_matrices():
    x = np.array([[1 + 2j, 3j], [4, 5 - 1j]])
    with nd.Session() as s:
        adj, tr, real = s.run([nd.linalg.adjoint(x), nd.transpose(x, conjugate=True),
                               nd.transpose(np.eye(2), conjugate=True)])
    np.testing.assert_array_equal(adj, x.conj().T)
    np.testing.assert_array_equal(tr, x.conj().T)
    np.testing.assert_array_equal(real, np.eye(2))


@pytest.mark.parametrize("shape", [(3, 3), (4, 2), (2, 3, 2)])
def test_qr_gradient_matches_finite_differences(shape):
    rng = np.random.default_rng(5)
    a = rng.standard_normal(shape)
    check_gradient(lambda x: nd.linalg.qr(x)[0], [a])
    check_gradient(lambda x: nd.linalg.qr(x)[1], [a])
    check_gradient(lambda x: nd.reduce_sum(nd.linalg.qr(x)[0]) * nd.linalg.qr(x)[1], [a])
