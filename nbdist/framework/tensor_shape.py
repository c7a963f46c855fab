"""Static shapes: ``TensorShape`` of ``Dimension`` objects, as TF1 has them.

In TF1 ``x.get_shape()[1]`` is a ``Dimension``: ``.value`` is an int or None,
it does arithmetic and comparisons with ints, Dimensions and None (an unknown
dimension gives an unknown result, as ``None``), and it works as an int
wherever Python asks for one (``range``, NumPy shapes, ``int()``). That is the
default here, as ``tf.compat.v1.disable_v2_tensorshape()`` makes it in TF;
``enable_v2_tensorshape()`` switches indexing and iteration to plain ints.

>>> s = TensorShape([None, 784])
>>> s[1].value, s[1] * 2, s[0] + 1, s.as_list()
(784, Dimension(1568), Dimension(None), [None, 784])
"""

from __future__ import annotations

import operator
import sys

# True: shape[i] and iteration give ints (TF2); False: Dimension objects (TF1).
_V2_BEHAVIOR = False


def _ints() -> bool:
    """Whether the caller of ``TensorShape.__getitem__``/``__iter__`` reads ints.

    A program reads TF1's ``Dimension`` objects (unless it enabled TF2 shapes);
    nbdist's own modules (shape functions, gradients, op wrappers, layers) are
    written against ints and None and read those, whatever the program chose.
    """
    if _V2_BEHAVIOR:
        return True
    return sys._getframe(2).f_globals.get("__name__", "").startswith("nbdist.")


def enable_v2_tensorshape():
    """``shape[i]`` and ``iter(shape)`` give ints or None, as in TF2."""
    global _V2_BEHAVIOR
    _V2_BEHAVIOR = True


def disable_v2_tensorshape():
    """``shape[i]`` and ``iter(shape)`` give ``Dimension`` objects (TF1; default)."""
    global _V2_BEHAVIOR
    _V2_BEHAVIOR = False


class Dimension:
    """One dimension of a ``TensorShape``: ``.value`` is an int >= 0, or None.

    >>> Dimension(3) + 1, Dimension(None) * 2, Dimension(3) == 3
    (Dimension(4), Dimension(None), True)
    >>> list(range(Dimension(2)))
    [0, 1]
    """

    __slots__ = ("_value",)

    def __init__(self, value):
        if isinstance(value, Dimension):
            value = value._value
        if value is None:
            self._value = None
            return
        if isinstance(value, (str, bytes, float)) or not hasattr(value, "__index__"):
            raise TypeError(
                "Dimension value must be integer or None or have an __index__ "
                f"method, got value '{value!r}' with type '{type(value)}'")
        self._value = operator.index(value)
        if self._value < 0:
            raise ValueError(f"Dimension {self._value} must be >= 0")

    @property
    def value(self):
        return self._value

    def __repr__(self) -> str:
        return f"Dimension({self._value!r})"

    def __str__(self) -> str:
        return "?" if self._value is None else str(self._value)

    def __int__(self) -> int:
        if self._value is None:
            raise TypeError("int() of an unknown Dimension")
        return self._value

    def __index__(self) -> int:
        return self.__int__()

    def __float__(self) -> float:
        return float(self.__int__())

    def __bool__(self) -> bool:
        return bool(self._value)

    def __hash__(self) -> int:
        # Consistent with int's hash, so a Dimension finds its int in a dict.
        return hash(self._value)

    def __reduce__(self):
        return (Dimension, (self._value,))

    def is_compatible_with(self, other) -> bool:
        """True when either is unknown or both have the same value."""
        other = as_dimension(other)
        return (self._value is None or other._value is None
                or self._value == other._value)

    def assert_is_compatible_with(self, other):
        if not self.is_compatible_with(other):
            raise ValueError(
                f"Dimensions {self} and {as_dimension(other)} are not compatible")

    def merge_with(self, other) -> Dimension:
        """The known one of two compatible dimensions; ValueError if they differ."""
        other = as_dimension(other)
        self.assert_is_compatible_with(other)
        return Dimension(self._value if self._value is not None else other._value)


def _arith(fn, reflected: bool):
    def method(self, other):
        other = _as_dimension_or_none(other)
        if other is NotImplemented:
            return NotImplemented
        if self._value is None or other._value is None:
            return Dimension(None)
        a, b = (other._value, self._value) if reflected else (self._value, other._value)
        return Dimension(fn(a, b))

    return method


def _compare(fn):
    def method(self, other):
        other = _as_dimension_or_none(other)
        if other is NotImplemented:
            return NotImplemented
        if self._value is None or other._value is None:
            return None  # unknown, as TF1 answers
        return fn(self._value, other._value)

    return method


def _as_dimension_or_none(other):
    try:
        return as_dimension(other)
    except (TypeError, ValueError):
        return NotImplemented


for _name, _fn in (("add", operator.add), ("sub", operator.sub),
                   ("mul", operator.mul), ("floordiv", operator.floordiv),
                   ("mod", operator.mod)):
    setattr(Dimension, f"__{_name}__", _arith(_fn, reflected=False))
    setattr(Dimension, f"__r{_name}__", _arith(_fn, reflected=True))
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(Dimension, f"__{_name}__", _compare(getattr(operator, _name)))
del _name, _fn


def _no_truediv(self, other):
    raise TypeError(
        f"unsupported operand type(s) for /: 'Dimension' and '{type(other).__name__}'"
        ", please use // instead")


Dimension.__truediv__ = Dimension.__rtruediv__ = _no_truediv


def as_dimension(value) -> Dimension:
    """``value`` as a ``Dimension`` (an int, None, or a Dimension)."""
    return value if isinstance(value, Dimension) else Dimension(value)


def dimension_value(dimension):
    """The int (or None) of a ``Dimension``, an int or None: code that works in
    both TF1 and TF2 shape modes reads ``dimension_value(shape[i])``."""
    return dimension.value if isinstance(dimension, Dimension) else dimension


def dimensions_to_ints(value):
    """``value`` with every ``Dimension`` in it (nested in lists and tuples)
    replaced by its int, as a Python value becomes a constant; an unknown one
    is a ValueError (TF: "Cannot convert an unknown Dimension to a Tensor")."""
    if isinstance(value, Dimension):
        if value.value is None:
            raise ValueError(f"Cannot convert an unknown Dimension to a Tensor: {value}")
        return value.value
    if isinstance(value, (list, tuple)) and any(
            isinstance(v, (Dimension, list, tuple)) for v in value):
        return [dimensions_to_ints(v) for v in value]
    return value


def dimension_at_index(shape, index) -> Dimension:
    """``shape[index]`` as a ``Dimension``; unknown when the rank is unknown."""
    shape = as_shape(shape)
    if shape._dims is None:
        return Dimension(None)
    return Dimension(shape._dims[index])


class TensorShape:
    """A possibly partial shape. ``TensorShape([None, 3]).as_list() == [None, 3]``.

    ``shape[i]``, ``iter(shape)`` and ``shape.dims`` give ``Dimension`` objects
    (TF1); ``as_list()`` gives ints and None.
    """

    __slots__ = ("_dims",)

    def __init__(self, dims=None):
        if dims is None:
            self._dims = None
        elif isinstance(dims, TensorShape):
            self._dims = dims._dims
        elif isinstance(dims, Dimension):
            self._dims = (dims.value,)  # one dimension, as TF takes it
        elif isinstance(dims, int) or (
                hasattr(dims, "__index__") and not hasattr(dims, "__iter__")):
            self._dims = (operator.index(dims),)
        else:
            out = []
            for d in dims:
                if isinstance(d, Dimension):
                    d = d.value
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
        """A list of ``Dimension`` (None when the rank is unknown)."""
        if self._dims is None:
            return None
        if sys._getframe(1).f_globals.get("__name__", "").startswith("nbdist."):
            return list(self._dims)  # nbdist's own code reads ints (see _ints)
        return [Dimension(d) for d in self._dims]

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
        if _ints():
            return iter(self._dims)
        return iter([Dimension(d) for d in self._dims])

    def __getitem__(self, key):
        if self._dims is None:
            if isinstance(key, slice):
                return TensorShape(None)
            return None if _ints() else Dimension(None)
        if isinstance(key, slice):
            return TensorShape(self._dims[key])
        return self._dims[key] if _ints() else Dimension(self._dims[key])

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
        return (TensorShape, (self.as_list() if self._dims is not None else None,))


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
