"""NumPy kernels of ``nbdist.ops.linalg_ops_diag``: bands and diagonals of
matrices, the tensor diagonal and ``Cross``."""

from __future__ import annotations

import numpy as np

from nbdist import errors
from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import fmt, ints, op_error, scalar_int
from nbdist.ops import linalg_ops_diag  # noqa: F401  (registers the ops)
from nbdist.ops.linalg_ops_diag import diagonal_length


def _matrix(node, x):
    x = np.asarray(x)
    if x.ndim < 2:
        raise op_error(node, f"input must be at least 2-dim, received shape: "
                             f"{fmt(x.shape)}")
    return x


@register_kernel("MatrixBandPart")
def band_part_kernel(node):
    def compute(step, x, num_lower, num_upper):
        x = _matrix(node, x)
        m, n = x.shape[-2:]
        lo = scalar_int(node, num_lower, "num_lower")
        hi = scalar_int(node, num_upper, "num_upper")
        if lo > m:
            raise op_error(node, f"num_lower must be negative or less or equal to "
                                 f"number of rows ({m}) got: {lo}")
        if hi > n:
            raise op_error(node, f"num_upper must be negative or less or equal to "
                                 f"number of columns ({n}) got: {hi}")
        i, j = np.arange(m)[:, None], np.arange(n)[None, :]
        keep = ((lo < 0) | (i - j <= lo)) & ((hi < 0) | (j - i <= hi))
        return np.where(keep, x, np.zeros((), x.dtype))

    return compute


class _Band:
    """Where each diagonal of a band sits: matrix positions and slots in the
    stored (padded, aligned) diagonal rows."""

    def __init__(self, node, k, m, n, align):
        ks = ints(k)
        if not 1 <= len(ks) <= 2 or ks[0] > ks[-1]:
            raise op_error(node, f"k must be a scalar or a pair (lo <= hi), got {ks}")
        self.lo, self.hi = ks[0], ks[-1]
        if self.lo < -m or self.hi > n:
            raise op_error(node, f"diagonal index k = ({self.lo}, {self.hi}) is out "
                                 f"of bounds for a {m}x{n} matrix")
        self.single = self.lo == self.hi
        lengths = [diagonal_length(m, n, d) for d in self.offsets()]
        self.longest = max(lengths)
        super_align, sub_align = align.split("_")
        self.places = []
        for row, d in enumerate(self.offsets()):
            length = diagonal_length(m, n, d)
            first = max(0, -d)
            rows = np.arange(first, first + length)
            cols = rows + d
            aligned = super_align if d >= 0 else sub_align
            shift = self.longest - length if aligned == "RIGHT" else 0
            self.places.append((row, rows, cols, np.arange(length) + shift))

    def offsets(self):
        return range(self.hi, self.lo - 1, -1)

    def place(self, out, stored):
        """Writes the ``stored`` diagonal rows into the matrices ``out``."""
        for row, rows, cols, slots in self.places:
            out[..., rows, cols] = stored[..., row, slots]
        return out

    def stored(self, diag):
        """``diag`` with a diagonals axis (a single diagonal has none)."""
        return diag[..., None, :] if self.single else diag


def _align(node):
    return node.attrs["align"].decode() if isinstance(
        node.attrs["align"], bytes) else node.attrs["align"]


@register_kernel("MatrixDiagPartV3")
def diag_part_kernel(node):
    align = _align(node)

    def compute(step, x, k, padding_value):
        x = _matrix(node, x)
        band = _Band(node, k, x.shape[-2], x.shape[-1], align)
        out = np.full(x.shape[:-2] + (band.hi - band.lo + 1, band.longest),
                      padding_value, x.dtype)
        for row, rows, cols, slots in band.places:
            out[..., row, slots] = x[..., rows, cols]
        return out[..., 0, :] if band.single else out

    return compute


@register_kernel("MatrixDiagV3")
def diag_kernel(node):
    align = _align(node)

    def compute(step, diagonal, k, num_rows, num_cols, padding_value):
        d = np.asarray(diagonal)
        ks = ints(k)
        lo, hi = ks[0], ks[-1]
        if d.ndim < (1 if lo == hi else 2):
            raise op_error(node, f"diagonal must be at least "
                                 f"{1 if lo == hi else 2}-dim, got {fmt(d.shape)}")
        longest = d.shape[-1]
        m = scalar_int(node, num_rows, "num_rows")
        n = scalar_int(node, num_cols, "num_cols")
        min_m, min_n = longest - min(hi, 0), longest + max(lo, 0)
        if m == -1 and n == -1:
            m = n = max(min_m, min_n)
        elif m == -1:
            m = min_m
        elif n == -1:
            n = min_n
        if m < min_m or n < min_n:
            raise op_error(node, f"The number of rows or columns is not consistent "
                                 f"with the specified d_lower ({lo}), d_upper "
                                 f"({hi}), and diagonal.")
        band = _Band(node, k, m, n, align)
        stored = band.stored(d)
        if stored.shape[-2] != hi - lo + 1:
            raise op_error(node, f"diagonal has {stored.shape[-2]} diagonals, k = "
                                 f"({lo}, {hi}) names {hi - lo + 1}")
        batch = stored.shape[:-2]
        out = np.full(batch + (m, n), padding_value, d.dtype)
        return band.place(out, stored)

    return compute


@register_kernel("MatrixSetDiagV3")
def set_diag_kernel(node):
    align = _align(node)

    def compute(step, x, diagonal, k):
        x = _matrix(node, x)
        band = _Band(node, k, x.shape[-2], x.shape[-1], align)
        diagonal = np.asarray(diagonal)
        want = x.shape[:-2] + ((band.longest,) if band.single else (
            band.hi - band.lo + 1, band.longest))
        if diagonal.shape != want:
            raise op_error(node, f"diagonal must have shape {fmt(want)}, got "
                                 f"{fmt(diagonal.shape)}")
        stored = band.stored(diagonal)
        out = np.array(x, copy=True)
        return band.place(out, stored)

    return compute


@register_kernel("Diag")
def tensor_diag_kernel(node):
    def compute(step, d):
        d = np.asarray(d)
        out = np.zeros((d.size, d.size), d.dtype)
        out[np.arange(d.size), np.arange(d.size)] = d.ravel()
        return out.reshape(d.shape + d.shape)

    return compute


@register_kernel("DiagPart")
def tensor_diag_part_kernel(node):
    def compute(step, x):
        x = np.asarray(x)
        half = x.ndim // 2
        if x.ndim % 2 or x.ndim == 0 or x.shape[:half] != x.shape[half:]:
            raise op_error(node, f"Invalid shape {fmt(x.shape)}: dimensions do not "
                                 "match.")
        size = int(np.prod(x.shape[:half]))
        flat = x.reshape(size, size)
        return flat[np.arange(size), np.arange(size)].reshape(x.shape[:half])

    return compute


@register_kernel("Cross")
def cross_kernel(node):
    def compute(step, a, b):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            raise op_error(node, f"Both inputs must be of same shape: "
                                 f"{fmt(a.shape)} vs. {fmt(b.shape)}")
        if a.shape[-1:] != (3,):
            raise errors.FailedPreconditionError(
                None, node.name, "Cross-products are only defined for 3-element "
                "vectors.")
        return np.cross(a, b)

    return compute
