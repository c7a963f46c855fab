"""Static shapes: ``TensorShape`` with unknown ranks and unknown dimensions."""

from __future__ import annotations


class TensorShape:
    """A possibly partial shape. ``TensorShape([None, 3]).as_list() == [None, 3]``.

    Dimensions are plain ints (or None when unknown), as in TF2's behaviour.
    """

    __slots__ = ("_dims",)

    def __init__(self, dims=None):
        if dims is None:
            self._dims = None
        elif isinstance(dims, TensorShape):
            self._dims = dims._dims
        elif isinstance(dims, int):
            self._dims = (int(dims),)
        else:
            out = []
            for d in dims:
                if d is None or (hasattr(d, "value") and d.value is None):
                    out.append(None)
                else:
                    d = int(d.value if hasattr(d, "value") else d)
                    if d < 0:
                        if d == -1:
                            out.append(None)
                            continue
                        raise ValueError(f"Dimension {d} must be >= 0")
                    out.append(d)
            self._dims = tuple(out)

    @property
    def dims(self):
        return None if self._dims is None else list(self._dims)

    @property
    def rank(self):
        return None if self._dims is None else len(self._dims)

    ndims = rank

    def __len__(self) -> int:
        if self._dims is None:
            raise ValueError("Cannot take the length of shape with unknown rank.")
        return len(self._dims)

    def __iter__(self):
        if self._dims is None:
            raise ValueError("Cannot iterate over a shape with unknown rank.")
        return iter(self._dims)

    def __getitem__(self, key):
        if self._dims is None:
            if isinstance(key, slice):
                return TensorShape(None)
            return None
        if isinstance(key, slice):
            return TensorShape(self._dims[key])
        return self._dims[key]

    def is_fully_defined(self) -> bool:
        return self._dims is not None and all(d is not None for d in self._dims)

    def assert_is_fully_defined(self):
        if not self.is_fully_defined():
            raise ValueError(f"Shape {self} is not fully defined")

    def as_list(self):
        if self._dims is None:
            raise ValueError("as_list() is not defined on an unknown TensorShape.")
        return list(self._dims)

    def num_elements(self):
        if not self.is_fully_defined():
            return None
        n = 1
        for d in self._dims:
            n *= d
        return n

    def is_compatible_with(self, other) -> bool:
        other = as_shape(other)
        if self._dims is None or other._dims is None:
            return True
        if len(self._dims) != len(other._dims):
            return False
        return all(a is None or b is None or a == b for a, b in zip(self._dims, other._dims))

    def merge_with(self, other) -> TensorShape:
        other = as_shape(other)
        if self._dims is None:
            return other
        if other._dims is None:
            return self
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {other} are not compatible")
        return TensorShape(
            [a if a is not None else b for a, b in zip(self._dims, other._dims)]
        )

    def assert_is_compatible_with(self, other):
        if not self.is_compatible_with(other):
            raise ValueError(f"Shapes {self} and {as_shape(other)} are incompatible")

    def concatenate(self, other) -> TensorShape:
        other = as_shape(other)
        if self._dims is None or other._dims is None:
            return TensorShape(None)
        return TensorShape(self._dims + other._dims)

    def with_rank(self, rank: int) -> TensorShape:
        if self._dims is None:
            return TensorShape([None] * rank)
        if len(self._dims) != rank:
            raise ValueError(f"Shape {self} must have rank {rank}")
        return self

    def with_rank_at_least(self, rank: int) -> TensorShape:
        if self._dims is not None and len(self._dims) < rank:
            raise ValueError(f"Shape {self} must have rank at least {rank}")
        return self

    def __eq__(self, other) -> bool:
        try:
            other = as_shape(other)
        except (TypeError, ValueError):
            return NotImplemented
        return self._dims == other._dims

    def __hash__(self) -> int:
        return hash(self._dims)

    def __repr__(self) -> str:
        if self._dims is None:
            return "TensorShape(None)"
        return f"TensorShape({list(self._dims)})"

    def __str__(self) -> str:
        if self._dims is None:
            return "<unknown>"
        inner = ", ".join("?" if d is None else str(d) for d in self._dims)
        return f"({inner},)" if len(self._dims) == 1 else f"({inner})"

    def __reduce__(self):
        return (TensorShape, (self.dims,))


def as_shape(shape) -> TensorShape:
    return shape if isinstance(shape, TensorShape) else TensorShape(shape)


def unknown_shape(rank=None) -> TensorShape:
    return TensorShape(None if rank is None else [None] * rank)


def scalar() -> TensorShape:
    return TensorShape([])


def broadcast_shapes(a: TensorShape, b: TensorShape) -> TensorShape:
    """NumPy broadcasting on static shapes; raises ValueError when impossible."""
    if a._dims is None or b._dims is None:
        return TensorShape(None)
    x, y = list(a._dims), list(b._dims)
    n = max(len(x), len(y))
    x = [1] * (n - len(x)) + x
    y = [1] * (n - len(y)) + y
    out = []
    for p, q in zip(x, y):
        if p == 1:
            out.append(q)
        elif q == 1:
            out.append(p)
        elif p is None or q is None:
            out.append(p if q is None else q)
        elif p == q:
            out.append(p)
        else:
            raise ValueError(f"Incompatible shapes for broadcasting: {a} and {b}")
    return TensorShape(out)
