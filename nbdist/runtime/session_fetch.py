"""How a ``Session`` reads its ``fetches`` and ``feed_dict``: nested fetches
flattened to unique graph elements (and results rebuilt in the same structure),
fed values checked and converted to the placeholder's dtype, as TF's
``session.py`` does.
"""

from __future__ import annotations

import collections

import numpy as np

from nbdist import errors
from nbdist.framework import dtypes
from nbdist.framework.ops import Graph, Operation, Tensor


class FeedError(errors.InvalidArgumentError, ValueError):
    """A bad ``feed_dict`` entry (also a ValueError, which TF raised)."""


class FetchError(errors.InvalidArgumentError, ValueError):
    """A fetch that cannot be interpreted (also a ValueError, as in TF)."""


def is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def is_attrs_instance(x) -> bool:
    """An instance of an ``@attr.s`` class (TF fetches its fields in order)."""
    return getattr(type(x), "__attrs_attrs__", None) is not None


class FetchMapper:
    """Flattens nested fetches to unique graph elements and rebuilds results.

    ``tensors`` are the tensor names to fetch, ``targets`` the op names to run.
    """

    def __init__(self, graph: Graph, fetches, session=None):
        self._session = session  # a kept tensor's handle names it (TensorHandle)
        self.tensors: list[str] = []
        self.targets: list[str] = []
        self.elements: list = []  # the graph elements, tensors and ops, in order
        self._index: dict[str, int] = {}
        self._graph = graph
        self._build = self._parse(fetches)

    def _element(self, f):
        if f is None:
            raise TypeError(f"Fetch argument {f!r} has invalid type {type(f)}")
        try:
            el = self._graph.as_graph_element(f, allow_tensor=True,
                                              allow_operation=True)
        except TypeError as e:
            raise TypeError(f"Fetch argument {f!r} has invalid type {type(f)}, must "
                            f"be a string or Tensor. ({e})") from None
        except (ValueError, KeyError) as e:
            msg = e.args[0] if e.args else str(e)
            raise FetchError(None, None, f"Fetch argument {f!r} cannot be "
                             f"interpreted as a Tensor. ({msg})") from None
        if not self._graph.is_fetchable(el):
            raise FetchError(None, None, f"Operation {el.name!r} has been marked as "
                             "not fetchable.")
        return el

    def _parse(self, f):
        if isinstance(f, list) or (isinstance(f, tuple) and not is_namedtuple(f)):
            subs = [self._parse(x) for x in f]
            kind = type(f)
            return lambda vals: kind(s(vals) for s in subs)
        if is_namedtuple(f):
            subs = [self._parse(x) for x in f]
            kind = type(f)
            return lambda vals: kind(*[s(vals) for s in subs])
        if isinstance(f, collections.abc.Mapping):
            items = [(k, self._parse(v)) for k, v in f.items()]
            kind = type(f)
            if kind is collections.defaultdict:
                factory = f.default_factory
                return lambda vals: collections.defaultdict(
                    factory, {k: s(vals) for k, s in items})
            return lambda vals: kind({k: s(vals) for k, s in items}) if kind is not \
                dict else {k: s(vals) for k, s in items}
        if hasattr(f, "_session_fetch_components"):
            # A composite (SparseTensor, IndexedSlices): its parts, then its value.
            subs = [self._parse(x) for x in f._session_fetch_components()]
            return lambda vals: f._session_fetch_value([s(vals) for s in subs])
        if is_attrs_instance(f):
            # As TF: the fields' fetched values, passed positionally.
            subs = [self._parse(getattr(f, a.name)) for a in type(f).__attrs_attrs__]
            kind = type(f)
            return lambda vals: kind(*[s(vals) for s in subs])
        if hasattr(f, "_session_fetch_components"):
            # A composite (SparseTensor, IndexedSlices): its parts, then its value.
            subs = [self._parse(x) for x in f._session_fetch_components()]
            return lambda vals: f._session_fetch_value([s(vals) for s in subs])
        el = self._element(f)
        self.elements.append(el)
        if isinstance(el, Operation):
            if el.name not in self.targets:
                self.targets.append(el.name)
            return lambda vals: None
        name = el.name
        if name not in self._index:
            self._index[name] = len(self.tensors)
            self.tensors.append(name)
        i = self._index[name]
        if el.op.type == "GetSessionHandle" and self._session is not None:
            from nbdist.ops.session_ops import TensorHandle

            dtype, session = el.op.inputs[0].dtype.base_dtype, self._session
            return lambda vals: TensorHandle(vals[i], dtype, session)
        return lambda vals: vals[i]

    def build(self, values):
        return self._build(values)


def feed_tensor(graph: Graph, key) -> Tensor:
    """The feedable tensor a ``feed_dict`` key names or is."""
    if isinstance(key, tuple) and not is_namedtuple(key):
        raise TypeError("Feeding tuples (sparse tensors) is not supported")
    try:
        t = graph.as_graph_element(key, allow_tensor=True, allow_operation=False)
    except (TypeError, ValueError, KeyError) as e:
        msg = e.args[0] if e.args else str(e)
        raise TypeError(f"Cannot interpret feed_dict key as Tensor: {msg}") from None
    if not graph.is_feedable(t):
        raise FeedError(None, t.op, f"Tensor {t.name} may not be fed.")
    return t


def convert_feeds(graph: Graph, feed_dict) -> dict:
    """``feed_dict`` as tensor name -> array of the tensor's dtype."""
    out = {}
    items = []
    for key, value in feed_dict.items():
        # A composite key (a sparse placeholder) feeds each of its parts.
        parts = getattr(key, "_session_feed_components", None)
        items.extend(parts(value) if parts else [(key, value)])
    from nbdist.ops.session_ops import TensorHandle

    for key, value in items:
        t = feed_tensor(graph, key)
        if isinstance(value, TensorHandle):
            value = value.handle  # a kept tensor is fed by its handle
        if isinstance(value, (Tensor, Operation)):
            raise TypeError("The value of a feed cannot be a nd.Tensor object. "
                            "Acceptable feed values include Python scalars, "
                            "strings, lists, numpy ndarrays.")
        out[t.name] = convert_feed(t, value)
    return out


def _check_python_int(t: Tensor, value, dtype):
    """TF's rule for a Python int fed: it must keep its value in the tensor's
    dtype (300 into uint8, 2**40 into int32 or any int into a string: a
    TypeError, before anything runs)."""
    target = np.dtype(dtype.as_numpy_dtype)
    try:
        ok = target != object and target.type(value) == value
    except (OverflowError, ValueError, TypeError):
        ok = False
    if not ok:
        kind = "object" if target == object else f"numpy.{target.name}"
        raise TypeError(f"Type of feed value {value} with type {type(value)} is not "
                        f"compatible with Tensor type <class '{kind}'> of "
                        f"'{t.name}'. Try explicitly setting the type of the feed "
                        "tensor to a larger type (e.g. int64).")


def convert_feed(t: Tensor, value) -> np.ndarray:
    """``value`` as an array of ``t``'s dtype, checked against its shape."""
    dtype = t.dtype.base_dtype
    where = t.op.name
    if isinstance(value, int) and not isinstance(value, np.generic):
        _check_python_int(t, value, dtype)
    try:
        if dtype is dtypes.string:
            from nbdist.framework.constant_op import to_numpy

            arr = to_numpy(value, dtypes.string)
        else:
            arr = np.asarray(value)
            if arr.dtype == object or arr.dtype.kind in "SU":
                raise TypeError("not a number")
            target = np.dtype(dtype.as_numpy_dtype)
            if arr.dtype != target:
                if arr.dtype.kind == "f" and target.kind in "iub" and arr.size and (
                        not np.all(np.mod(arr, 1) == 0)):
                    raise TypeError("fractional values")
                if arr.dtype.kind == "b" and target.kind != "b":
                    raise TypeError("bool values")
                arr = arr.astype(target)
    except (TypeError, ValueError) as e:
        raise FeedError(None, t.op, f"Cannot feed value {value!r:.60} to "
                        f"'{t.name}' (placeholder '{where}'), which has dtype "
                        f"{dtype.name}: {e}") from None
    if not t.shape.is_compatible_with(arr.shape):
        raise FeedError(None, t.op, f"Cannot feed value of shape {arr.shape} for "
                        f"Tensor '{t.name}' (placeholder '{where}'), which has "
                        f"shape '{t.shape}'")
    return arr
