"""Matrix structure ops: bands and diagonals of (batches of) matrices
(``MatrixBandPart``, ``MatrixDiagV3``, ``MatrixDiagPartV3``,
``MatrixSetDiagV3``), the tensor diagonal (``Diag``, ``DiagPart``), ``Cross``,
and ``eye``, ``trace``, ``matrix_transpose`` and ``adjoint`` built from them.

A diagonal is named by its offset ``k`` (0 the main one, > 0 above it, < 0
below); ``k=(lo, hi)`` names a band of them, stored from ``hi`` down to ``lo``,
each padded to the longest, the short ones aligned as ``align`` says
("RIGHT_LEFT": those above the main diagonal to the right, the others to the
left). The kernels are in ``nbdist/executor/kernels/matrix_diag_kernels.py``.

>>> import nbdist as nd
>>> with nd.Session() as s:
...     s.run(nd.matrix_diag_part([[1, 2], [3, 4]])).tolist()
[1, 4]
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import register_gradient
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import INDEX, check_type, const_ints, op_scope
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops import array_ops as A
from nbdist.ops.array_ops_partition import _dims_must_match

__all__ = [
    "cross",
    "diag",
    "diag_part",
    "eye",
    "matrix_band_part",
    "matrix_diag",
    "matrix_diag_part",
    "matrix_set_diag",
    "matrix_transpose",
    "trace",
]

ALIGNS = ("RIGHT_LEFT", "LEFT_RIGHT", "LEFT_LEFT", "RIGHT_RIGHT")


def _at_least_matrix(c, i=0, what="input"):
    s = c.shape(i)
    if s.rank is not None and s.rank < 2:
        raise ValueError(f"Shape must be at least rank 2 but is rank {s.rank} "
                         f"({what} must be at least 2-dim)")
    return s


def diagonal_length(m, n, k):
    """The length of diagonal ``k`` of an ``m`` x ``n`` matrix (None if unknown)."""
    if m is None or n is None:
        return None
    return max(0, min(m + min(0, k), n - max(0, k)))


def _offsets(c, i):
    ks = const_ints(c, i)
    if ks is None:
        return None
    if not 1 <= len(ks) <= 2:
        raise ValueError(f"{c.op_type}: k must be a scalar or a pair, got {ks}")
    lo, hi = ks[0], ks[-1]
    if lo > hi:
        raise ValueError(f"{c.op_type}: lower diagonal index must not be larger "
                         f"than upper diagonal index, got k = ({lo}, {hi})")
    return lo, hi


# -- MatrixBandPart ---------------------------------------------------------------------
def _band_part_infer(c):
    _at_least_matrix(c)
    for i, what in ((1, "num_lower"), (2, "num_upper")):
        check_type(c, i, INDEX, what)
        if c.shape(i).rank not in (None, 0):
            raise ValueError(f"{what} must be a scalar, got shape {c.shape(i)}")
    return [(c.dtype(0), c.shape(0))]


register_op("MatrixBandPart", _band_part_infer,
            attrs={"T": ("type", None), "Tindex": ("type", dtypes.int64)},
            num_inputs=3)


def matrix_band_part(input, num_lower, num_upper, name=None):
    """``input`` with every entry outside the band zeroed: kept are the
    ``num_lower`` diagonals below the main one and ``num_upper`` above it (a
    negative count keeps all). ``band_part(x, -1, 0)`` is the lower triangle.

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     s.run(nd.matrix_band_part([[1, 2], [3, 4]], -1, 0)).tolist()
    [[1, 0], [3, 4]]
    """
    with op_scope(name, "MatrixBandPart", [input, num_lower, num_upper]) as (
            g, scope):
        x = convert_to_tensor(input, name="input")
        lo = convert_to_tensor(num_lower, dtype=dtypes.int64, name="num_lower")
        hi = convert_to_tensor(num_upper, dtype=dtypes.int64, name="num_upper")
        return g.create_op("MatrixBandPart", [x, lo, hi],
                           {"T": x.dtype.base_dtype, "Tindex": dtypes.int64},
                           name=scope).outputs[0]


@register_gradient("MatrixBandPart")
def _band_part_grad(op, grad):
    return [matrix_band_part(grad, op.inputs[1], op.inputs[2]), None, None]


# -- MatrixDiagV3, MatrixDiagPartV3, MatrixSetDiagV3 -----------------------------------
def _diag_infer(c):
    d = c.dtype(0)
    diag = c.shape(0)
    ks = _offsets(c, 1)
    rows, cols = const_ints(c, 2), const_ints(c, 3)
    if diag.rank is None or ks is None:
        return [(d, TensorShape(None))]
    lo, hi = ks
    batch = diag[:-1] if lo == hi else diag[:-2]
    if lo != hi and diag.rank < 2:
        raise ValueError("diagonal must be at least 2-dim for a band of diagonals")
    longest = diag[-1]
    rows = None if rows is None else rows[0]
    cols = None if cols is None else cols[0]
    if longest is None:
        return [(d, batch.concatenate([None, None]))]
    min_rows, min_cols = longest - min(hi, 0), longest + max(lo, 0)
    if rows in (None, -1) and cols in (None, -1):
        rows = cols = max(min_rows, min_cols)
    elif rows in (None, -1):
        rows = min_rows
    elif cols in (None, -1):
        cols = min_cols
    return [(d, batch.concatenate([rows, cols]))]


def _diag_part_infer(c):
    x = _at_least_matrix(c)
    ks = _offsets(c, 1)
    d = c.dtype(0)
    if x.rank is None or ks is None:
        return [(d, TensorShape(None))]
    lo, hi = ks
    m, n = x[-2], x[-1]
    lengths = [diagonal_length(m, n, k) for k in (lo, hi)] + (
        [diagonal_length(m, n, 0)] if lo <= 0 <= hi else [])
    longest = None if None in lengths else max(lengths)
    if m is not None and n is not None and (lo < -m or hi > n):
        raise ValueError(f"{c.op_type}: diagonal index k = ({lo}, {hi}) is out of "
                         f"bounds for a {m}x{n} matrix")
    tail = [longest] if lo == hi else [hi - lo + 1, longest]
    return [(d, x[:-2].concatenate(tail))]


def _set_diag_infer(c):
    x = _at_least_matrix(c)
    diag, = _diag_part_infer(_Shifted(c))
    want = diag[1]
    got = c.shape(1)
    if want.rank is not None and got.rank is not None:
        if want.rank != got.rank:
            raise ValueError(f"{c.op_type}: diagonal must have shape {want}, got "
                             f"{got}")
        _dims_must_match(c, want, got)
    return [(c.dtype(0), x)]


class _Shifted:
    """The inputs (input, k) of a set-diag op as a diag-part op sees them."""

    def __init__(self, c):
        self._c = c
        self.op_type, self.name = c.op_type, c.name

    def shape(self, i):
        return self._c.shape(0 if i == 0 else 2)

    def dtype(self, i):
        return self._c.dtype(0)

    def constant(self, i):
        return self._c.constant(0 if i == 0 else 2)


_ALIGN_ATTR = {"T": ("type", None), "align": ("string", "RIGHT_LEFT")}
register_op("MatrixDiagV3", _diag_infer, attrs=_ALIGN_ATTR, num_inputs=5)
register_op("MatrixDiagPartV3", _diag_part_infer, attrs=_ALIGN_ATTR, num_inputs=3)
register_op("MatrixSetDiagV3", _set_diag_infer, attrs=_ALIGN_ATTR, num_inputs=3)


def _k_tensor(k):
    return convert_to_tensor(k, dtype=dtypes.int32, name="k")


def _check_align(align):
    if align not in ALIGNS:
        raise ValueError(f"align must be one of {', '.join(ALIGNS)}, got {align!r}")
    return align


def matrix_diag(diagonal, name="diag", k=0, num_rows=-1, num_cols=-1,
                padding_value=0, align="RIGHT_LEFT"):
    """A (batch of) matrices with ``diagonal`` on diagonal ``k`` (or the band
    ``k=(lo, hi)``) and ``padding_value`` elsewhere; the size is the smallest
    that fits unless ``num_rows``/``num_cols`` say.

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     s.run(nd.matrix_diag([1, 2], k=1)).tolist()
    [[0, 1, 0], [0, 0, 2], [0, 0, 0]]
    """
    with op_scope(name, "MatrixDiag", [diagonal]) as (g, scope):
        d = convert_to_tensor(diagonal, name="diagonal")
        rows = convert_to_tensor(num_rows, dtype=dtypes.int32, name="num_rows")
        cols = convert_to_tensor(num_cols, dtype=dtypes.int32, name="num_cols")
        pad = convert_to_tensor(padding_value, dtype=d.dtype.base_dtype,
                                name="padding_value")
        return g.create_op("MatrixDiagV3", [d, _k_tensor(k), rows, cols, pad],
                           {"T": d.dtype.base_dtype, "align": _check_align(align)},
                           name=scope).outputs[0]


def matrix_diag_part(input, name="diag_part", k=0, padding_value=0,
                     align="RIGHT_LEFT"):
    """Diagonal ``k`` (or the band ``k=(lo, hi)``, padded with
    ``padding_value``) of each matrix of ``input``."""
    with op_scope(name, "MatrixDiagPart", [input]) as (g, scope):
        x = convert_to_tensor(input, name="input")
        pad = convert_to_tensor(padding_value, dtype=x.dtype.base_dtype,
                                name="padding_value")
        return g.create_op("MatrixDiagPartV3", [x, _k_tensor(k), pad],
                           {"T": x.dtype.base_dtype, "align": _check_align(align)},
                           name=scope).outputs[0]


def matrix_set_diag(input, diagonal, name="set_diag", k=0,
                    align="RIGHT_LEFT"):
    """``input`` with diagonal ``k`` (or the band ``k=(lo, hi)``) replaced by
    ``diagonal``."""
    with op_scope(name, "MatrixSetDiag", [input, diagonal]) as (g, scope):
        x = convert_to_tensor(input, name="input")
        d = convert_to_tensor(diagonal, dtype=x.dtype.base_dtype, name="diagonal")
        return g.create_op("MatrixSetDiagV3", [x, d, _k_tensor(k)],
                           {"T": x.dtype.base_dtype, "align": _check_align(align)},
                           name=scope).outputs[0]


@register_gradient("MatrixDiagV3")
def _diag_grad(op, grad):
    return [matrix_diag_part(grad, k=op.inputs[1], align=op.get_attr("align")),
            None, None, None, None]


@register_gradient("MatrixDiagPartV3")
def _diag_part_grad(op, grad):
    x, k = op.inputs[0], op.inputs[1]
    return [matrix_set_diag(A.zeros_like(x), grad, k=k, align=op.get_attr("align")),
            None, None]


@register_gradient("MatrixSetDiagV3")
def _set_diag_grad(op, grad):
    _, d, k = op.inputs
    align = op.get_attr("align")
    return [matrix_set_diag(grad, A.zeros_like(d), k=k, align=align),
            matrix_diag_part(grad, k=k, align=align), None]


# -- Diag, DiagPart (the tensor diagonal) ------------------------------------------------
def _tensor_diag_infer(c):
    s = c.shape(0)
    return [(c.dtype(0), TensorShape(None) if s.rank is None else s.concatenate(s))]


def _tensor_diag_part_infer(c):
    s = c.shape(0)
    if s.rank is None:
        return [(c.dtype(0), TensorShape(None))]
    if s.rank % 2 or s.rank == 0:
        raise ValueError(f"Input must have even rank, got rank {s.rank}")
    half = s.rank // 2
    _dims_must_match(c, s[:half], s[half:])
    return [(c.dtype(0), s[:half].merge_with(s[half:]))]


register_op("Diag", _tensor_diag_infer, attrs={"T": ("type", None)}, num_inputs=1)
register_op("DiagPart", _tensor_diag_part_infer, attrs={"T": ("type", None)},
            num_inputs=1)


def diag(diagonal, name=None):
    """The rank-2k tensor with ``diagonal`` (rank k) on its diagonal:
    ``out[i..., i...] = diagonal[i...]``, zeros elsewhere."""
    with op_scope(name, "Diag", [diagonal]) as (g, scope):
        d = convert_to_tensor(diagonal, name="diagonal")
        return g.create_op("Diag", [d], {"T": d.dtype.base_dtype},
                           name=scope).outputs[0]


def diag_part(input, name=None):
    """The diagonal of a rank-2k tensor: ``out[i...] = input[i..., i...]``."""
    with op_scope(name, "DiagPart", [input]) as (g, scope):
        x = convert_to_tensor(input, name="input")
        return g.create_op("DiagPart", [x], {"T": x.dtype.base_dtype},
                           name=scope).outputs[0]


register_gradient("Diag")(lambda op, grad: [diag_part(grad)])
register_gradient("DiagPart")(lambda op, grad: [diag(grad)])


# -- Cross ----------------------------------------------------------------------------------
def _cross_infer(c):
    d = c.check_same_dtypes()
    a, b = c.shape(0), c.shape(1)
    for s in (a, b):
        if s.rank == 0:
            raise ValueError("Cross: inputs must be at least 1-dim")
        if s.rank is not None and s[-1] is not None and s[-1] != 3:
            raise ValueError(f"Dimension must be 3 but is {s[-1]}")
    if a.rank is not None and b.rank is not None:
        if not a.is_compatible_with(b):
            raise ValueError(f"Cross: a and b must have one shape, got {a} and {b}")
        return [(d, a.merge_with(b))]
    return [(d, a if a.rank is not None else b)]


register_op("Cross", _cross_infer, attrs={"T": ("type", None)}, num_inputs=2)


def cross(a, b, name=None):
    """The cross products of the 3-vectors in the last dimension of ``a`` and
    ``b``.

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     s.run(nd.cross([1, 0, 0], [0, 1, 0])).tolist()
    [0, 0, 1]
    """
    with op_scope(name, "Cross", [a, b]) as (g, scope):
        x = convert_to_tensor(a, name="a")
        y = convert_to_tensor(b, dtype=x.dtype.base_dtype, name="b")
        return g.create_op("Cross", [x, y], {"T": x.dtype.base_dtype},
                           name=scope).outputs[0]


@register_gradient("Cross")
def _cross_grad(op, grad):
    a, b = op.inputs
    return [cross(b, grad), cross(grad, a)]


# -- built from other ops ---------------------------------------------------------------------
def eye(num_rows, num_columns=None, batch_shape=None, dtype=dtypes.float32,
        name=None):
    """The identity matrix (``num_rows`` x ``num_columns``), or a batch of them.

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     s.run(nd.eye(2, 3, dtype=nd.int32)).tolist()
    [[1, 0, 0], [0, 1, 0]]
    """
    with op_scope(name, "eye", [num_rows, num_columns, batch_shape]):
        rows = convert_to_tensor(num_rows, dtype=dtypes.int32, name="num_rows")
        cols = rows if num_columns is None else convert_to_tensor(
            num_columns, dtype=dtypes.int32, name="num_columns")
        from nbdist.ops.math_ops_elementwise import minimum

        n = minimum(rows, cols)
        batch = [] if batch_shape is None else batch_shape
        ones = A.ones(A.concat([A.reshape(convert_to_tensor(
            batch, dtype=dtypes.int32), [-1]), A.reshape(n, [1])], 0), dtype=dtype)
        return matrix_diag(ones, num_rows=rows, num_cols=cols)


def trace(x, name=None):
    """The sum of the main diagonal of each matrix of ``x``."""
    from nbdist.ops.math_ops_reduction import reduce_sum

    with op_scope(name, "Trace", [x]):
        return reduce_sum(matrix_diag_part(convert_to_tensor(x, name="x")), [-1])


def matrix_transpose(a, name="matrix_transpose", conjugate=False):
    """Each matrix of ``a`` transposed (conjugated too with ``conjugate``)."""
    with op_scope(name, "matrix_transpose", [a]):
        x = convert_to_tensor(a, name="a")
        r = x.shape.rank
        if r is None:
            raise ValueError("matrix_transpose needs an input of known rank")
        if r < 2:
            raise ValueError(f"Argument 'a' should be a (batch) matrix, with rank "
                             f">= 2.  Found: {x.shape}")
        perm = list(range(r - 2)) + [r - 1, r - 2]
        return A.transpose(x, perm, conjugate=conjugate)


def adjoint(matrix, name=None):
    """The conjugate transpose of each matrix of ``matrix``."""
    return matrix_transpose(matrix, name=name or "adjoint", conjugate=True)
