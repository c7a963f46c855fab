"""The structured ``LinearOperator`` s: block diagonal and block lower
triangular, Kronecker products, Householder reflections, permutations, low-rank
updates, tridiagonal, Toeplitz and circulant (1-D, 2-D, 3-D) operators. Each is
defined by its dense form; block and Kronecker operators also solve and take
determinants block by block.

>>> import nbdist as nd
>>> op = nd.linalg.LinearOperatorToeplitz(col=[1.0, 2.0], row=[1.0, 3.0])
>>> with nd.Session() as s:
...     s.run(op.to_dense()).tolist()
[[1.0, 3.0], [2.0, 1.0]]
"""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops import array_ops as A
from nbdist.ops.complex_ops import real
from nbdist.ops.einsum_ops import einsum
from nbdist.ops.linalg_impl import _tridiagonal_dense
from nbdist.ops.linalg_ops_diag import eye
from nbdist.ops.linear_operator import LinearOperator, _LinearOperatorOfOperators
from nbdist.ops.math_ops import matmul
from nbdist.ops.math_ops_elementwise import cast
from nbdist.ops.math_ops_reduction import reduce_sum

__all__ = ["LinearOperatorBlockDiag", "LinearOperatorBlockLowerTriangular",
           "LinearOperatorCirculant", "LinearOperatorCirculant2D",
           "LinearOperatorCirculant3D", "LinearOperatorHouseholder",
           "LinearOperatorKronecker", "LinearOperatorLowRankUpdate",
           "LinearOperatorPermutation", "LinearOperatorToeplitz",
           "LinearOperatorTridiag"]


def _blocks_dense(rows):
    """The dense matrix of a grid of blocks (None: zeros of the right size)."""
    heights = [next(b for b in row if b is not None).range_dimension_tensor()
               for row in rows]
    widths = [rows[j][j].domain_dimension_tensor() for j in range(len(rows))]
    dense_rows = []
    for i, row in enumerate(rows):
        parts = []
        for j in range(len(rows)):
            block = row[j] if j < len(row) else None
            if block is None:
                dtype = rows[0][0].dtype
                parts.append(A.zeros(A.stack([heights[i], widths[j]]), dtype=dtype))
            else:
                parts.append(block.to_dense())
        dense_rows.append(A.concat(parts, -1))
    return A.concat(dense_rows, -2)


class LinearOperatorBlockDiag(_LinearOperatorOfOperators):
    """The block-diagonal operator of square ``operators``."""

    _JOIN = "_ds_"

    def __init__(self, operators, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=True, name=None):
        del is_square  # always square, as TF's
        super().__init__(operators, is_non_singular, is_self_adjoint,
                         is_positive_definite, True, name)

    def _to_dense(self):
        ops = self._operators
        return _blocks_dense([[op if i == j else None for j in range(len(ops))]
                              for i, op in enumerate(ops)])

    def _split(self, x):
        sizes = A.stack([op.domain_dimension_tensor() for op in self._operators])
        return A.split(x, sizes, axis=-2, num=len(self._operators))

    def _matmul(self, x, adjoint):
        parts = self._split(x)
        return A.concat([op.matmul(p, adjoint=adjoint)
                         for op, p in zip(self._operators, parts)], -2)

    def _solve(self, rhs, adjoint):
        parts = self._split(rhs)
        return A.concat([op.solve(p, adjoint=adjoint)
                         for op, p in zip(self._operators, parts)], -2)

    def _determinant(self):
        out = self._operators[0].determinant()
        for op in self._operators[1:]:
            out = out * op.determinant()
        return out

    def _log_abs_determinant(self):
        out = self._operators[0].log_abs_determinant()
        for op in self._operators[1:]:
            out = out + op.log_abs_determinant()
        return out


class LinearOperatorBlockLowerTriangular(LinearOperator):
    """The block lower-triangular operator of ``operators``, a list of rows
    (row i holds i + 1 operators, the last square)."""

    def __init__(self, operators, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None,
                 name="LinearOperatorBlockLowerTriangular"):
        rows = [list(r) for r in operators]
        for i, row in enumerate(rows):
            if len(row) != i + 1:
                raise ValueError(f"Argument `operators[{i}]` must contain "
                                 f"`{i + 1}` blocks. Received: {len(row)} blocks.")
        self._rows = rows
        super().__init__(rows[0][0].dtype, None, is_non_singular, is_self_adjoint,
                         is_positive_definite, True, name, {"operators": operators})

    operators = property(lambda self: [list(r) for r in self._rows])

    def _to_dense(self):
        return _blocks_dense(self._rows)

    def _determinant(self):
        out = self._rows[0][0].determinant()
        for i in range(1, len(self._rows)):
            out = out * self._rows[i][i].determinant()
        return out


class LinearOperatorKronecker(_LinearOperatorOfOperators):
    """The Kronecker product ``operators[0] (x) operators[1] (x) ...``."""

    _JOIN = "_x_"

    def _to_dense(self):
        out = self._operators[0].to_dense()
        for op in self._operators[1:]:
            b = op.to_dense()
            prod = einsum("...ij,...kl->...ikjl", out, b)
            s = A.shape(prod)
            out = A.reshape(prod, A.concat([s[:-4], A.stack([s[-4] * s[-3],
                                                             s[-2] * s[-1]])], 0))
        return out

    def _determinant(self):
        # det(A (x) B) = det(A)^n det(B)^m for A m x m, B n x n.
        sizes = [op.domain_dimension_tensor() for op in self._operators]
        total = sizes[0]
        for s in sizes[1:]:
            total = total * s
        out = None
        for op, n in zip(self._operators, sizes):
            d = op.determinant()
            term = d ** cast(total // n, d.dtype.base_dtype)
            out = term if out is None else out * term
        return out


class LinearOperatorHouseholder(LinearOperator):
    """The reflection ``I - 2 v v^H / (v^H v)`` about the hyperplane orthogonal
    to ``reflection_axis`` (``v``)."""

    def __init__(self, reflection_axis, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None,
                 name="LinearOperatorHouseholder"):
        self._v = convert_to_tensor(reflection_axis, name="reflection_axis")
        super().__init__(self._v.dtype, [self._v], True, True, False, True, name,
                         {"reflection_axis": reflection_axis})

    reflection_axis = property(lambda self: self._v)

    def _to_dense(self):
        v = A.expand_dims(self._v, -1)
        outer = matmul(v, v, adjoint_b=True)
        norm = reduce_sum(self._v * self._v, -1)
        n = A.shape(self._v)[-1]
        return eye(n, dtype=self._dtype) - 2.0 * outer / A.expand_dims(
            A.expand_dims(norm, -1), -1)

    def _solve(self, rhs, adjoint):
        return self._matmul(rhs, adjoint)  # a reflection is its own inverse


class LinearOperatorPermutation(LinearOperator):
    """The permutation matrix ``P`` with ``(P x)[i] = x[perm[i]]``."""

    def __init__(self, perm, dtype=dtypes.float32, is_non_singular=None,
                 is_self_adjoint=None, is_positive_definite=None, is_square=None,
                 name="LinearOperatorPermutation"):
        self._perm = convert_to_tensor(perm, name="perm")
        super().__init__(dtype, [self._perm], True, is_self_adjoint,
                         is_positive_definite, True, name, {"perm": perm})

    perm = property(lambda self: self._perm)

    def _shape(self):
        s = self._perm.shape
        return TensorShape(None) if s.rank is None else s.concatenate(s[-1:])

    def _to_dense(self):
        return A.one_hot(self._perm, A.shape(self._perm)[-1], dtype=self._dtype)

    def _solve(self, rhs, adjoint):
        return self._matmul(rhs, not adjoint)  # P^-1 = P^T


class LinearOperatorLowRankUpdate(LinearOperator):
    """``base_operator + u diag(diag_update) v^H`` (``v = u`` and a unit
    diagonal by default)."""

    def __init__(self, base_operator, u, diag_update=None, v=None,
                 is_diag_update_positive=None, is_non_singular=None,
                 is_self_adjoint=None, is_positive_definite=None, is_square=None,
                 name="LinearOperatorLowRankUpdate"):
        self._base = base_operator
        self._u = convert_to_tensor(u, dtype=base_operator.dtype, name="u")
        self._v = self._u if v is None else convert_to_tensor(
            v, dtype=base_operator.dtype, name="v")
        self._d = None if diag_update is None else convert_to_tensor(
            diag_update, dtype=base_operator.dtype, name="diag_update")
        super().__init__(base_operator.dtype, None, is_non_singular,
                         is_self_adjoint, is_positive_definite, is_square, name,
                         {"base_operator": base_operator, "u": u, "v": v,
                          "diag_update": diag_update})

    base_operator = property(lambda self: self._base)
    u = property(lambda self: self._u)
    v = property(lambda self: self._v)
    diag_update = property(lambda self: self._d)

    def _to_dense(self):
        u = self._u if self._d is None else self._u * A.expand_dims(self._d, -2)
        return self._base.to_dense() + matmul(u, self._v, adjoint_b=True)


class LinearOperatorTridiag(LinearOperator):
    """A tridiagonal operator from its ``diagonals`` ("compact": ``[..., 3,
    N]`` super, main, sub; "sequence": the three; "matrix": dense)."""

    def __init__(self, diagonals, diagonals_format="compact", is_non_singular=None,
                 is_self_adjoint=None, is_positive_definite=None, is_square=None,
                 name="LinearOperatorTridiag"):
        self._diagonals = diagonals
        self._format = diagonals_format
        self._dense = _tridiagonal_dense(diagonals, diagonals_format)
        super().__init__(self._dense.dtype, None, is_non_singular, is_self_adjoint,
                         is_positive_definite, True, name,
                         {"diagonals": diagonals,
                          "diagonals_format": diagonals_format})

    diagonals = property(lambda self: self._diagonals)
    diagonals_format = property(lambda self: self._format)

    def _to_dense(self):
        return self._dense


class LinearOperatorToeplitz(LinearOperator):
    """The Toeplitz matrix with first column ``col`` and first row ``row``
    (``row[0]`` is ignored: the diagonal is ``col[0]``)."""

    def __init__(self, col, row, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None,
                 name="LinearOperatorToeplitz"):
        self._col = convert_to_tensor(col, name="col")
        self._row = convert_to_tensor(row, dtype=self._col.dtype, name="row")
        super().__init__(self._col.dtype, [self._col, self._row], is_non_singular,
                         is_self_adjoint, is_positive_definite, True, name,
                         {"col": col, "row": row})

    col = property(lambda self: self._col)
    row = property(lambda self: self._row)

    def _to_dense(self):
        # T[i, j] = values[i - j + n - 1] with values = reverse(row[1:]) ++ col.
        n = A.shape(self._row)[-1]
        values = A.concat([A.reverse(self._row[..., 1:], [-1]), self._col], -1)
        m = A.shape(self._col)[-1]
        i = A.expand_dims(A.range(m), 1)
        j = A.expand_dims(A.range(n), 0)
        return A.gather(values, i - j + n - 1, axis=values.shape.rank - 1)


class _Circulant(LinearOperator):
    """``F^-1 diag(spectrum) F`` for the DFT ``F`` over the last ``dims``
    dimensions of ``spectrum`` (their sizes must be known)."""

    _dims = 1

    def __init__(self, spectrum, input_output_dtype=dtypes.complex64,
                 is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=True, name=None):
        self._spectrum = convert_to_tensor(spectrum, name="spectrum")
        sizes = self._spectrum.shape[-self._dims:].as_list()
        if None in sizes:
            raise ValueError(f"{type(self).__name__} needs a spectrum of known "
                             f"block sizes, got shape {self._spectrum.shape}")
        self._sizes = sizes
        super().__init__(input_output_dtype, [self._spectrum], is_non_singular,
                         is_self_adjoint, is_positive_definite, True,
                         name or type(self).__name__,
                         {"spectrum": spectrum,
                          "input_output_dtype": input_output_dtype})

    spectrum = property(lambda self: self._spectrum)

    def block_shape_tensor(self):
        return convert_to_tensor(self._sizes, dtype=dtypes.int32)

    def _to_dense(self):
        f = np.ones((1, 1), np.complex128)
        for n in self._sizes:
            k = np.arange(n)
            f = np.kron(f, np.exp(-2j * np.pi * np.outer(k, k) / n))
        total = f.shape[0]
        spectrum = cast(self._spectrum, dtypes.complex128)
        s = A.reshape(spectrum, A.concat([A.shape(spectrum)[:-self._dims],
                                          [total]], 0))
        fwd = convert_to_tensor(f)
        inv = convert_to_tensor(f.conj().T / total)
        dense = einsum("ij,...j,jk->...ik", inv, s, fwd)  # MatMul is real-only
        if self._dtype.is_complex:
            return cast(dense, self._dtype)
        return cast(real(dense), self._dtype)


class LinearOperatorCirculant(_Circulant):
    """The circulant operator whose DFT eigenvalues are ``spectrum``."""

    _dims = 1


class LinearOperatorCirculant2D(_Circulant):
    """The block-circulant operator with circulant blocks of ``spectrum``'s last
    two dimensions."""

    _dims = 2


class LinearOperatorCirculant3D(_Circulant):
    """The doubly block-circulant operator of ``spectrum``'s last three
    dimensions."""

    _dims = 3

