"""``LinearOperator``: a (batch of) matrices known by what it does, and TF1's
operator classes (``nd.linalg.LinearOperatorDiag`` ...).

The base class answers every question (``matmul``, ``solve``,
``determinant``...) from ``to_dense()``; the structured operators override what
their structure makes cheap (a diagonal's solve is a division, a triangular
one's determinant the product of its diagonal). The hints (``is_self_adjoint``,
``is_positive_definite``...) are carried and reported, as TF, not checked.

>>> import nbdist as nd
>>> op = nd.linalg.LinearOperatorDiag([2.0, 4.0])
>>> with nd.Session() as s:
...     s.run(op.solvevec([2.0, 2.0])).tolist(), float(s.run(op.determinant()))
([1.0, 0.5], 8.0)
"""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.op_util import op_scope
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape, dimension_at_index
from nbdist.ops import array_ops as A
from nbdist.ops import linalg_ops as L
from nbdist.ops.linalg_ops_diag import (
    adjoint as _adjoint,
)
from nbdist.ops.linalg_ops_diag import (
    eye,
    matrix_band_part,
    matrix_diag,
    matrix_diag_part,
)
from nbdist.ops.math_ops import matmul as _matmul
from nbdist.ops.math_ops_elementwise import abs as _abs
from nbdist.ops.math_ops_elementwise import log, reciprocal
from nbdist.ops.math_ops_reduction import (
    reduce_max,
    reduce_min,
    reduce_prod,
    reduce_sum,
)

__all__ = ["LinearOperator", "LinearOperatorAdjoint", "LinearOperatorComposition",
           "LinearOperatorDiag", "LinearOperatorFullMatrix", "LinearOperatorIdentity",
           "LinearOperatorInversion", "LinearOperatorLowerTriangular",
           "LinearOperatorScaledIdentity", "LinearOperatorZeros"]


def _vec_to_mat(x):
    return A.expand_dims(x, -1)


def _mat_to_vec(x):
    return A.squeeze(x, [-1])


class LinearOperator:
    """The base class: a subclass gives ``_to_dense()`` (and ``_shape()`` when
    it knows the static shape better), and may override ``_matmul``,
    ``_solve``, ``_determinant``, ``_log_abs_determinant``, ``_diag_part``."""

    def __init__(self, dtype, graph_parents=None, is_non_singular=None,
                 is_self_adjoint=None, is_positive_definite=None, is_square=None,
                 name=None, parameters=None):
        if is_positive_definite and is_non_singular is False:
            raise ValueError("A positive definite matrix is always non-singular.")
        self._dtype = dtypes.as_dtype(dtype).base_dtype if dtype is not None else None
        self._is_non_singular = (True if is_positive_definite else is_non_singular)
        self._is_self_adjoint = is_self_adjoint
        self._is_positive_definite = is_positive_definite
        self._is_square_hint = is_square
        self._name = name or type(self).__name__
        self._parameters = dict(parameters or {})
        self._graph_parents = list(graph_parents or [])

    # -- what the operator is -------------------------------------------------------
    dtype = property(lambda self: self._dtype)
    name = property(lambda self: self._name)
    parameters = property(lambda self: dict(self._parameters))
    graph_parents = property(lambda self: list(self._graph_parents))
    is_non_singular = property(lambda self: self._is_non_singular)
    is_self_adjoint = property(lambda self: self._is_self_adjoint)
    is_positive_definite = property(lambda self: self._is_positive_definite)

    @property
    def is_square(self):
        m, n = self.range_dimension.value, self.domain_dimension.value
        if m is not None and n is not None:
            return m == n
        return self._is_square_hint

    def _shape(self):
        return self.to_dense().shape

    @property
    def shape(self) -> TensorShape:
        return self._shape()

    def get_shape(self) -> TensorShape:
        return self.shape

    @property
    def batch_shape(self) -> TensorShape:
        s = self.shape
        return TensorShape(None) if s.rank is None else s[:-2]

    @property
    def tensor_rank(self):
        return self.shape.rank

    @property
    def domain_dimension(self):
        # A Dimension, as TF1 gives it (``.value`` is the int or None).
        return dimension_at_index(self.shape, -1)

    @property
    def range_dimension(self):
        return dimension_at_index(self.shape, -2)

    def shape_tensor(self, name="shape_tensor"):
        return A.shape(self.to_dense(), out_type=dtypes.int32)

    def batch_shape_tensor(self, name="batch_shape_tensor"):
        return self.shape_tensor()[:-2]

    def tensor_rank_tensor(self, name="tensor_rank_tensor"):
        return A.size(self.shape_tensor())

    def domain_dimension_tensor(self, name="domain_dimension_tensor"):
        return self.shape_tensor()[-1]

    def range_dimension_tensor(self, name="range_dimension_tensor"):
        return self.shape_tensor()[-2]

    # -- what it does --------------------------------------------------------------
    def to_dense(self, name="to_dense"):
        """The operator as a dense (batch of) matrices."""
        with op_scope(None, f"{self._name}/{name}"):
            return self._to_dense()

    def _to_dense(self):
        raise NotImplementedError(f"{type(self).__name__} has no dense form")

    def matmul(self, x, adjoint=False, adjoint_arg=False, name="matmul"):
        """``op(A) @ op(x)``, ``op`` the adjoint when asked; ``x`` may be
        another ``LinearOperator`` (then the result is their composition)."""
        if isinstance(x, LinearOperator):
            left = self.adjoint() if adjoint else self
            right = x.adjoint() if adjoint_arg else x
            return LinearOperatorComposition([left, right])
        with op_scope(None, f"{self._name}/{name}"):
            x = convert_to_tensor(x, dtype=self._dtype, name="x")
            if adjoint_arg:
                x = _adjoint(x)
            return self._matmul(x, adjoint)

    def _matmul(self, x, adjoint):
        return _matmul(self.to_dense(), x, adjoint_a=adjoint)

    def __matmul__(self, other):
        return self.matmul(other)

    def matvec(self, x, adjoint=False, name="matvec"):
        """``op(A) @ x`` for (a batch of) vectors ``x``."""
        return _mat_to_vec(self.matmul(_vec_to_mat(convert_to_tensor(
            x, dtype=self._dtype)), adjoint=adjoint, name=name))

    def solve(self, rhs, adjoint=False, adjoint_arg=False, name="solve"):
        """``X`` with ``op(A) @ X = op(rhs)``."""
        if self.is_non_singular is False:
            raise NotImplementedError("Exact solve not implemented for an operator "
                                      "that is expected to be singular.")
        with op_scope(None, f"{self._name}/{name}"):
            rhs = convert_to_tensor(rhs, dtype=self._dtype, name="rhs")
            if adjoint_arg:
                rhs = _adjoint(rhs)
            return self._solve(rhs, adjoint)

    def _solve(self, rhs, adjoint):
        return L.matrix_solve(self.to_dense(), rhs, adjoint=adjoint)

    def solvevec(self, rhs, adjoint=False, name="solve"):
        """``x`` with ``op(A) @ x = rhs`` for (a batch of) vectors."""
        return _mat_to_vec(self.solve(_vec_to_mat(convert_to_tensor(
            rhs, dtype=self._dtype)), adjoint=adjoint, name=name))

    def determinant(self, name="det"):
        if self.is_square is False:
            raise NotImplementedError("Determinant not implemented for an operator "
                                      "that is expected to not be square.")
        with op_scope(None, f"{self._name}/{name}"):
            return self._determinant()

    def _determinant(self):
        return L.matrix_determinant(self.to_dense())

    def log_abs_determinant(self, name="log_abs_det"):
        with op_scope(None, f"{self._name}/{name}"):
            return self._log_abs_determinant()

    def _log_abs_determinant(self):
        return L.log_matrix_determinant(self.to_dense())[1]

    def diag_part(self, name="diag_part"):
        with op_scope(None, f"{self._name}/{name}"):
            return self._diag_part()

    def _diag_part(self):
        return matrix_diag_part(self.to_dense())

    def trace(self, name="trace"):
        return reduce_sum(self.diag_part(), -1)

    def add_to_tensor(self, x, name="add_to_tensor"):
        return self.to_dense() + convert_to_tensor(x, dtype=self._dtype)

    def adjoint(self, name="adjoint"):
        if self.is_self_adjoint:
            return self
        return LinearOperatorAdjoint(self)

    H = property(adjoint)

    def inverse(self, name="inverse"):
        if self.is_non_singular is False:
            raise ValueError("Cannot take the Inverse: This operator represents a "
                             "singular matrix.")
        return LinearOperatorInversion(self)

    def cholesky(self, name="cholesky"):
        if not (self.is_self_adjoint and self.is_positive_definite):
            raise ValueError("Cholesky decomposition is only defined for an "
                             "operator that is self-adjoint and positive definite.")
        return LinearOperatorLowerTriangular(L.cholesky(self.to_dense()),
                                             is_non_singular=True)

    def eigvals(self, name="eigvals"):
        if not self.is_self_adjoint:
            raise NotImplementedError("Only self-adjoint matrices are supported.")
        return L.self_adjoint_eigvals(self.to_dense())

    def cond(self, name="cond"):
        s = L.svd(self.to_dense(), compute_uv=False)
        return reduce_max(s, -1) / reduce_min(s, -1)

    def assert_non_singular(self, name="assert_non_singular"):
        from nbdist.ops.check_ops import assert_positive

        return assert_positive(_abs(self.determinant()),
                               message="Singular operator:")

    def assert_positive_definite(self, name="assert_positive_definite"):
        from nbdist.ops.check_ops import assert_positive

        return assert_positive(self.eigvals(), message="Not positive definite:")

    def assert_self_adjoint(self, name="assert_self_adjoint"):
        from nbdist.ops.check_ops import assert_near

        dense = self.to_dense()
        return assert_near(dense, _adjoint(dense), message="Not self-adjoint:")

    def __repr__(self):
        return (f"<nd.linalg.{type(self).__name__} '{self._name}' shape={self.shape}"
                f" dtype={self._dtype.name if self._dtype else None}>")


class LinearOperatorFullMatrix(LinearOperator):
    """The operator of a dense ``matrix`` (``[..., M, N]``)."""

    def __init__(self, matrix, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None,
                 name="LinearOperatorFullMatrix"):
        self._matrix = convert_to_tensor(matrix, name="matrix")
        super().__init__(self._matrix.dtype, [self._matrix], is_non_singular,
                         is_self_adjoint, is_positive_definite, is_square, name,
                         {"matrix": matrix})

    def _shape(self):
        return self._matrix.shape

    def _to_dense(self):
        return self._matrix


class LinearOperatorDiag(LinearOperator):
    """The diagonal matrices of ``diag`` (``[..., N]``)."""

    def __init__(self, diag, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=True, name="LinearOperatorDiag"):
        if is_square is False:
            raise ValueError("Only square diagonal operators currently supported.")
        self._diag = convert_to_tensor(diag, name="diag")
        if self._diag.dtype.base_dtype.is_floating and is_self_adjoint is None:
            is_self_adjoint = True
        super().__init__(self._diag.dtype, [self._diag], is_non_singular,
                         is_self_adjoint, is_positive_definite, True, name,
                         {"diag": diag})

    diag = property(lambda self: self._diag)

    def _shape(self):
        s = self._diag.shape
        return TensorShape(None) if s.rank is None else s.concatenate(s[-1:])

    def _to_dense(self):
        return matrix_diag(self._diag)

    def _matmul(self, x, adjoint):
        return _vec_to_mat(self._diag) * x

    def _solve(self, rhs, adjoint):
        return rhs / _vec_to_mat(self._diag)

    def _determinant(self):
        return reduce_prod(self._diag, -1)

    def _log_abs_determinant(self):
        return reduce_sum(log(_abs(self._diag)), -1)

    def _diag_part(self):
        return self._diag


class LinearOperatorLowerTriangular(LinearOperator):
    """The lower triangle of ``tril`` (the rest of it is ignored)."""

    def __init__(self, tril, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None,
                 name="LinearOperatorLowerTriangular"):
        self._tril = matrix_band_part(convert_to_tensor(tril, name="tril"), -1, 0)
        super().__init__(self._tril.dtype, [self._tril], is_non_singular,
                         is_self_adjoint, is_positive_definite, True, name,
                         {"tril": tril})

    def _shape(self):
        return self._tril.shape

    def _to_dense(self):
        return self._tril

    def _solve(self, rhs, adjoint):
        return L.matrix_triangular_solve(self._tril, rhs, lower=True,
                                         adjoint=adjoint)

    def _determinant(self):
        return reduce_prod(matrix_diag_part(self._tril), -1)

    def _log_abs_determinant(self):
        return reduce_sum(log(_abs(matrix_diag_part(self._tril))), -1)


def _static_int(v):
    if isinstance(v, (int, np.integer)):
        return int(v)
    from nbdist.framework.ops import _static_value

    value = _static_value(convert_to_tensor(v))
    return None if value is None else int(value)


class LinearOperatorIdentity(LinearOperator):
    """The ``num_rows`` x ``num_rows`` identity (a batch of them with
    ``batch_shape``)."""

    def __init__(self, num_rows, batch_shape=None, dtype=None, is_non_singular=True,
                 is_self_adjoint=True, is_positive_definite=True, is_square=True,
                 assert_proper_shapes=False, name="LinearOperatorIdentity"):
        self._num_rows = num_rows
        self._batch = [] if batch_shape is None else list(batch_shape)
        super().__init__(dtype or dtypes.float32, None, is_non_singular,
                         is_self_adjoint, is_positive_definite, is_square, name,
                         {"num_rows": num_rows, "batch_shape": batch_shape})

    def _shape(self):
        n = _static_int(self._num_rows)
        batch = [_static_int(b) for b in self._batch]
        return TensorShape(batch + [n, n])

    def _to_dense(self):
        return eye(self._num_rows, batch_shape=self._batch or None, dtype=self._dtype)

    def _scale(self):
        return None

    def _matmul(self, x, adjoint):
        s = self._scale()
        out = x if s is None else (_vec_to_mat(_vec_to_mat(s)) * x)
        if self._batch:
            return out * A.ones_like(self.to_dense()[..., :1])
        return out

    def _solve(self, rhs, adjoint):
        s = self._scale()
        return rhs if s is None else rhs / _vec_to_mat(_vec_to_mat(s))

    def _determinant(self):
        return reduce_prod(self.diag_part(), -1)

    def _log_abs_determinant(self):
        return reduce_sum(log(_abs(self.diag_part())), -1)


class LinearOperatorScaledIdentity(LinearOperatorIdentity):
    """``multiplier`` times the ``num_rows`` x ``num_rows`` identity."""

    def __init__(self, num_rows, multiplier, is_non_singular=None,
                 is_self_adjoint=None, is_positive_definite=None, is_square=True,
                 assert_proper_shapes=False, name="LinearOperatorScaledIdentity"):
        self._multiplier = convert_to_tensor(multiplier, name="multiplier")
        super().__init__(num_rows, batch_shape=self._multiplier.shape.as_list()
                         if self._multiplier.shape.rank else None,
                         dtype=self._multiplier.dtype, name=name,
                         is_non_singular=is_non_singular,
                         is_self_adjoint=is_self_adjoint,
                         is_positive_definite=is_positive_definite)
        self._parameters["multiplier"] = multiplier

    multiplier = property(lambda self: self._multiplier)

    def _scale(self):
        return self._multiplier

    def _to_dense(self):
        return _vec_to_mat(_vec_to_mat(self._multiplier)) * eye(
            self._num_rows, dtype=self._dtype)


class LinearOperatorZeros(LinearOperator):
    """The ``num_rows`` x ``num_columns`` zero matrix (a batch with
    ``batch_shape``)."""

    def __init__(self, num_rows, num_columns=None, batch_shape=None, dtype=None,
                 is_non_singular=False, is_self_adjoint=True,
                 is_positive_definite=False, is_square=True,
                 assert_proper_shapes=False, name="LinearOperatorZeros"):
        self._rows = num_rows
        self._cols = num_rows if num_columns is None else num_columns
        self._batch = [] if batch_shape is None else list(batch_shape)
        super().__init__(dtype or dtypes.float32, None, is_non_singular,
                         is_self_adjoint, is_positive_definite, is_square, name,
                         {"num_rows": num_rows, "num_columns": num_columns})

    def _shape(self):
        return TensorShape([_static_int(b) for b in self._batch]
                           + [_static_int(self._rows), _static_int(self._cols)])

    def _to_dense(self):
        return A.zeros(self._batch + [self._rows, self._cols], dtype=self._dtype)


class LinearOperatorAdjoint(LinearOperator):
    """The adjoint of ``operator``."""

    def __init__(self, operator, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None, name=None):
        self._operator = operator
        super().__init__(operator.dtype, None, operator.is_non_singular,
                         operator.is_self_adjoint, operator.is_positive_definite,
                         operator.is_square, name or operator.name + "_adjoint",
                         {"operator": operator})

    operator = property(lambda self: self._operator)

    def _to_dense(self):
        return _adjoint(self._operator.to_dense())

    def _matmul(self, x, adjoint):
        return self._operator.matmul(x, adjoint=not adjoint)

    def _solve(self, rhs, adjoint):
        return self._operator.solve(rhs, adjoint=not adjoint)

    def _determinant(self):
        return self._operator.determinant()

    def _log_abs_determinant(self):
        return self._operator.log_abs_determinant()


class LinearOperatorInversion(LinearOperator):
    """The inverse of the non-singular ``operator``."""

    def __init__(self, operator, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None, name=None):
        self._operator = operator
        super().__init__(operator.dtype, None, True, operator.is_self_adjoint,
                         operator.is_positive_definite, operator.is_square,
                         name or operator.name + "_inv", {"operator": operator})

    operator = property(lambda self: self._operator)

    def _shape(self):
        return self._operator.shape

    def _to_dense(self):
        return L.matrix_inverse(self._operator.to_dense())

    def _matmul(self, x, adjoint):
        return self._operator.solve(x, adjoint=adjoint)

    def _solve(self, rhs, adjoint):
        return self._operator.matmul(rhs, adjoint=adjoint)

    def _determinant(self):
        return reciprocal(self._operator.determinant())

    def _log_abs_determinant(self):
        return -self._operator.log_abs_determinant()


class _LinearOperatorOfOperators(LinearOperator):
    """An operator made of ``operators`` (composition, Kronecker, block
    diagonal): one constructor, its default name joined by ``_JOIN``."""

    _JOIN = "_o_"

    def __init__(self, operators, is_non_singular=None, is_self_adjoint=None,
                 is_positive_definite=None, is_square=None, name=None):
        if not operators:
            raise ValueError("Expected a non-empty list of operators.")
        self._operators = list(operators)
        super().__init__(self._operators[0].dtype, None, is_non_singular,
                         is_self_adjoint, is_positive_definite, is_square,
                         name or self._JOIN.join(o.name for o in self._operators),
                         {"operators": operators})

    operators = property(lambda self: list(self._operators))


class LinearOperatorComposition(_LinearOperatorOfOperators):
    """The product ``operators[0] @ operators[1] @ ...``."""

    def _to_dense(self):
        out = self._operators[-1].to_dense()
        for op in reversed(self._operators[:-1]):
            out = op.matmul(out)
        return out

    def _matmul(self, x, adjoint):
        ops = self._operators if adjoint else list(reversed(self._operators))
        for op in ops:
            x = op.matmul(x, adjoint=adjoint)
        return x

    def _solve(self, rhs, adjoint):
        ops = list(reversed(self._operators)) if adjoint else self._operators
        for op in ops:
            rhs = op.solve(rhs, adjoint=adjoint)
        return rhs

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
