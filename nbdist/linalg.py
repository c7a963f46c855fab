"""``nd.linalg``: TF1's ``tf.linalg`` names over nbdist's linear-algebra ops.

>>> import nbdist as nd
>>> a = [[4.0, 2.0], [2.0, 3.0]]
>>> with nd.Session() as s:
...     round(float(s.run(nd.linalg.det(a))), 4)
8.0

The ``LinearOperator`` classes answer from their dense form where their
structure gives no cheaper way (``nbdist.ops.linear_operator``).
``experimental`` holds ``conjugate_gradient``.
"""

from __future__ import annotations

import types

from nbdist.ops.clip_ops import global_norm
from nbdist.ops.einsum_ops import einsum, tensordot
from nbdist.ops.linalg_impl import (
    cholesky_solve,
    conjugate_gradient,
    eigh_tridiagonal,
    logdet,
    lstsq,
    lu_matrix_inverse,
    lu_reconstruct,
    lu_solve,
    matrix_rank,
    matvec,
    norm,
    normalize,
    pinv,
    tridiagonal_matmul,
    tridiagonal_solve,
)
from nbdist.ops.linalg_ops import (
    cholesky,
    lu,
    matrix_triangular_solve,
    qr,
    svd,
)
from nbdist.ops.linalg_ops import (
    log_matrix_determinant as slogdet,
)
from nbdist.ops.linalg_ops import (
    matrix_determinant as det,
)
from nbdist.ops.linalg_ops import (
    matrix_exponential as expm,
)
from nbdist.ops.linalg_ops import (
    matrix_inverse as inv,
)
from nbdist.ops.linalg_ops import (
    matrix_logarithm as logm,
)
from nbdist.ops.linalg_ops import (
    matrix_solve as solve,
)
from nbdist.ops.linalg_ops import (
    matrix_square_root as sqrtm,
)
from nbdist.ops.linalg_ops import (
    self_adjoint_eig as eigh,
)
from nbdist.ops.linalg_ops import (
    self_adjoint_eigvals as eigvalsh,
)
from nbdist.ops.linalg_ops_diag import (
    adjoint,
    cross,
    eye,
    matrix_transpose,
    trace,
)
from nbdist.ops.linalg_ops_diag import (
    diag as tensor_diag,
)
from nbdist.ops.linalg_ops_diag import (
    diag_part as tensor_diag_part,
)
from nbdist.ops.linalg_ops_diag import (
    matrix_band_part as band_part,
)
from nbdist.ops.linalg_ops_diag import (
    matrix_diag as diag,
)
from nbdist.ops.linalg_ops_diag import (
    matrix_diag_part as diag_part,
)
from nbdist.ops.linalg_ops_diag import (
    matrix_set_diag as set_diag,
)
from nbdist.ops.linear_operator import (
    LinearOperator,
    LinearOperatorAdjoint,
    LinearOperatorComposition,
    LinearOperatorDiag,
    LinearOperatorFullMatrix,
    LinearOperatorIdentity,
    LinearOperatorInversion,
    LinearOperatorLowerTriangular,
    LinearOperatorScaledIdentity,
    LinearOperatorZeros,
)
from nbdist.ops.linear_operator_structured import (
    LinearOperatorBlockDiag,
    LinearOperatorBlockLowerTriangular,
    LinearOperatorCirculant,
    LinearOperatorCirculant2D,
    LinearOperatorCirculant3D,
    LinearOperatorHouseholder,
    LinearOperatorKronecker,
    LinearOperatorLowRankUpdate,
    LinearOperatorPermutation,
    LinearOperatorToeplitz,
    LinearOperatorTridiag,
)
from nbdist.ops.math_ops import matmul
from nbdist.ops.nn_ops import l2_normalize

transpose = matrix_transpose
experimental = types.SimpleNamespace(conjugate_gradient=conjugate_gradient)


def triangular_solve(matrix, rhs, lower=True, adjoint=False, name=None):
    """``X`` with ``matrix @ X = rhs`` for triangular matrices (only the
    ``lower`` or upper triangle is read; batch dimensions broadcast)."""
    return matrix_triangular_solve(matrix, rhs, lower=lower, adjoint=adjoint,
                                   name=name)


__all__ = [
    "LinearOperator",
    "LinearOperatorAdjoint",
    "LinearOperatorBlockDiag",
    "LinearOperatorBlockLowerTriangular",
    "LinearOperatorCirculant",
    "LinearOperatorCirculant2D",
    "LinearOperatorCirculant3D",
    "LinearOperatorComposition",
    "LinearOperatorDiag",
    "LinearOperatorFullMatrix",
    "LinearOperatorHouseholder",
    "LinearOperatorIdentity",
    "LinearOperatorInversion",
    "LinearOperatorKronecker",
    "LinearOperatorLowRankUpdate",
    "LinearOperatorLowerTriangular",
    "LinearOperatorPermutation",
    "LinearOperatorScaledIdentity",
    "LinearOperatorToeplitz",
    "LinearOperatorTridiag",
    "LinearOperatorZeros",
    "adjoint",
    "band_part",
    "cholesky",
    "cholesky_solve",
    "cross",
    "det",
    "diag",
    "diag_part",
    "eigh",
    "eigh_tridiagonal",
    "eigvalsh",
    "einsum",
    "experimental",
    "expm",
    "eye",
    "global_norm",
    "inv",
    "l2_normalize",
    "logdet",
    "logm",
    "lstsq",
    "lu",
    "lu_matrix_inverse",
    "lu_reconstruct",
    "lu_solve",
    "matmul",
    "matrix_rank",
    "matrix_transpose",
    "matvec",
    "norm",
    "normalize",
    "pinv",
    "qr",
    "set_diag",
    "slogdet",
    "solve",
    "sqrtm",
    "svd",
    "tensor_diag",
    "tensor_diag_part",
    "tensordot",
    "trace",
    "transpose",
    "triangular_solve",
    "tridiagonal_matmul",
    "tridiagonal_solve",
]
