"""``map_fn``, ``scan``, ``foldl`` and ``foldr``: a function applied along the
first dimension of tensors, as TF 1.15 builds them — one ``while_loop`` that
reads row ``i`` of each input from a ``TensorArray`` and (for ``map_fn`` and
``scan``) writes each result to another, stacked at the end. ``elems`` and
the accumulator may be nested structures of tensors; gradients flow through
the loop to ``elems``, ``initializer`` and anything the function captures.

>>> import nbdist as nd
>>> x = nd.constant([1.0, 2.0, 3.0])
>>> sq = nd.map_fn(lambda v: v * v, x)
>>> total = nd.foldl(lambda a, v: a + v, x)
>>> run_sum = nd.scan(lambda a, v: a + v, x, reverse=True)
>>> with nd.Session() as s:
...     [r.tolist() for r in s.run([sq, total, run_sum])]
[[1.0, 4.0, 9.0], 6.0, [6.0, 5.0, 3.0]]
"""

from __future__ import annotations

from nbdist.framework import dtypes, nest
from nbdist.framework.constant_op import constant
from nbdist.framework.ops import convert_to_tensor, get_default_graph
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops import array_ops
from nbdist.ops.control_flow_v2 import while_loop
from nbdist.ops.tensor_array_ops import TensorArray


class _Rows:
    """The flattened ``elems`` of a loop: their length and one TensorArray each."""

    def __init__(self, elems, what):
        self.structure = elems
        self.nested = nest.is_nested(elems)
        flat = nest.flatten(elems) if self.nested else [elems]
        if not flat:
            raise ValueError(f"{what}: elems must not be empty")
        self.flat = [convert_to_tensor(e, name="elem") for e in flat]
        for e in self.flat:
            if e.shape.rank == 0:
                raise ValueError(
                    "elems must be a 1+ dimensional Tensor, not a scalar"
                    if len(self.flat) == 1 else
                    "elements in elems must be 1+ dimensional Tensors, not scalars")
        static = [e.shape.as_list()[0] for e in self.flat if e.shape.rank]
        known = [d for d in static if d is not None]
        if len(set(known)) > 1:
            raise ValueError(f"{what}: the elements of elems have different first "
                             f"dimensions: {known}")
        self.static_n = known[0] if known else None
        self.n = (self.static_n if self.static_n is not None
                  else array_ops.shape(self.flat[0])[0])
        self.tas = [TensorArray(e.dtype.base_dtype, size=self.n, infer_shape=True)
                    .unstack(e) for e in self.flat]

    def pack(self, flat):
        return nest.pack_sequence_as(self.structure, flat) if self.nested else flat[0]

    def read(self, i):
        return self.pack([ta.read(i) for ta in self.tas])

    def stacked(self, tas):
        out = []
        for ta in tas:
            r = ta.stack()
            r.set_shape(TensorShape([self.static_n]).concatenate(
                r.shape.as_list()[1:] if r.shape.rank else TensorShape(None)))
            out.append(r)
        return out


def _check_fn(fn):
    if not callable(fn):
        raise TypeError("fn must be callable.")


def map_fn(fn, elems, dtype=None, parallel_iterations=None, back_prop=True,
           swap_memory=False, infer_shape=True, name=None):
    """``stack([fn(elems[i]) for i ...])`` (``tf.map_fn``). ``dtype`` gives
    the structure and dtypes of ``fn``'s result when they differ from
    ``elems``'.

    >>> import nbdist as nd
    >>> a, b = nd.constant([1, 2]), nd.constant([10, 20])
    >>> s = nd.map_fn(lambda ab: ab[0] + ab[1], (a, b), dtype=nd.int32)
    >>> with nd.Session() as sess:
    ...     sess.run(s).tolist()
    [11, 22]
    """
    _check_fn(fn)
    del swap_memory
    g = get_default_graph()
    with g.name_scope(name or "map"):
        rows = _Rows(elems, "map_fn")
        if dtype is None:
            out_structure = rows.structure
            out_nested = rows.nested
            dtype_flat = [e.dtype.base_dtype for e in rows.flat]
        else:
            out_structure = dtype
            out_nested = nest.is_nested(dtype)
            dtype_flat = [dtypes.as_dtype(d).base_dtype
                          for d in (nest.flatten(dtype) if out_nested else [dtype])]
        accs = [TensorArray(dt, size=rows.n, infer_shape=infer_shape)
                for dt in dtype_flat]

        def compute(i, tas):
            value = fn(rows.read(i))
            if out_nested:
                nest.assert_same_structure(out_structure, value, check_types=False)
                flat = nest.flatten(value)
            else:
                if nest.is_nested(value):
                    raise ValueError(f"map_fn: fn returned a structure {value!r:.60} "
                                     "but dtype (or elems) is a single tensor")
                flat = [value]
            return i + 1, [ta.write(i, v) for ta, v in zip(tas, flat)]

        _, out = while_loop(lambda i, _: i < rows.n, compute, (constant(0), accs),
                            parallel_iterations=parallel_iterations or 10,
                            back_prop=back_prop, maximum_iterations=rows.n)
        results = rows.stacked(out)
        return nest.pack_sequence_as(out_structure, results) if out_nested else (
            results[0])


def scan(fn, elems, initializer=None, parallel_iterations=10, back_prop=True,
         swap_memory=False, infer_shape=True, reverse=False, name=None):
    """Every accumulator of ``a = fn(a, elems[i])``, stacked (``tf.scan``).
    Without ``initializer`` the first (last, with ``reverse``) row of
    ``elems`` starts the accumulation and is the first output row."""
    _check_fn(fn)
    del swap_memory
    g = get_default_graph()
    with g.name_scope(name or "scan"):
        rows = _Rows(elems, "scan")
        structure = rows.structure if initializer is None else initializer
        nested = nest.is_nested(structure)
        first = rows.n - 1 if reverse else 0
        if initializer is None:
            a_flat = [ta.read(first) for ta in rows.tas]
        else:
            a_flat = [convert_to_tensor(a) for a in
                      (nest.flatten(initializer) if nested else [initializer])]
        accs = [TensorArray(a.dtype.base_dtype, size=rows.n, infer_shape=infer_shape,
                            element_shape=a.shape if infer_shape else None)
                for a in a_flat]
        if initializer is None:
            accs = [ta.write(first, a) for ta, a in zip(accs, a_flat)]

        def pack(flat):
            return nest.pack_sequence_as(structure, flat) if nested else flat[0]

        def compute(i, a_flat, tas):
            a_out = fn(pack(a_flat), rows.read(i))
            nest.assert_same_structure(structure, a_out, check_types=False)
            flat = nest.flatten(a_out) if nested else [a_out]
            tas = [ta.write(i, v) for ta, v in zip(tas, flat)]
            return (i - 1 if reverse else i + 1), flat, tas

        start = 0 if initializer is not None else 1
        if reverse:
            i0, cond = rows.n - 1 - start, (lambda i, _a, _t: i >= 0)
        else:
            i0, cond = start, (lambda i, _a, _t: i < rows.n)
        _, _, out = while_loop(cond, compute, (convert_to_tensor(i0), a_flat, accs),
                               parallel_iterations=parallel_iterations,
                               back_prop=back_prop, maximum_iterations=rows.n)
        return pack(rows.stacked(out))


def _fold(fn, elems, initializer, parallel_iterations, back_prop, name, reverse):
    _check_fn(fn)
    g = get_default_graph()
    with g.name_scope(name or ("foldr" if reverse else "foldl")):
        rows = _Rows(elems, "foldr" if reverse else "foldl")
        if initializer is None:
            a = rows.read(rows.n - 1 if reverse else 0)
            start = 1
        else:
            a, start = initializer, 0
        i0 = rows.n - 1 - start if reverse else start

        def compute(i, a):
            return (i - 1 if reverse else i + 1), fn(a, rows.read(i))

        def cond(i, _a):
            return i >= 0 if reverse else i < rows.n

        _, r = while_loop(cond, compute, [convert_to_tensor(i0), a],
                          parallel_iterations=parallel_iterations, back_prop=back_prop,
                          maximum_iterations=rows.n)
        return r


def foldl(fn, elems, initializer=None, parallel_iterations=10, back_prop=True,
          swap_memory=False, name=None):
    """``a = fn(a, elems[i])`` for i = 0, 1, ...; returns the last ``a``
    (``tf.foldl``). Without ``initializer``, ``elems[0]`` starts it."""
    del swap_memory
    return _fold(fn, elems, initializer, parallel_iterations, back_prop, name, False)


def foldr(fn, elems, initializer=None, parallel_iterations=10, back_prop=True,
          swap_memory=False, name=None):
    """As :func:`foldl` from the last row to the first (``tf.foldr``)."""
    del swap_memory
    return _fold(fn, elems, initializer, parallel_iterations, back_prop, name, True)


__all__ = ["foldl", "foldr", "map_fn", "scan"]
