"""What one request may cost a server: ``Limits``, read from
``ConfigProto.server_limits`` (the ``ServerLimits`` message documents each
field and its default), and the checks that apply them before anything large
is allocated.

A server holds one ``Limits`` (its worker's ``limits``); an in-process
``Session("")`` has none (``None``: nothing is checked). Going over a limit is
``ResourceExhaustedError`` naming the op or the request, the size it would
take and the limit; the server stays healthy.

>>> limits = Limits.from_config({"max_tensor_bytes": 1 << 20})
>>> limits.max_tensor_bytes, limits.max_request_bytes == Limits().max_request_bytes
(1048576, True)
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from nbdist import errors
from nbdist.framework import tensor_util
from nbdist.proto import types_pb2

__all__ = [
    "Limits",
    "array_nbytes",
    "check_graph_def",
    "check_output",
    "check_tensor",
    "over_limit",
]

_MiB = 1 << 20
_GiB = 1 << 30


@dataclasses.dataclass(frozen=True)
class Limits:
    """Bounds on the work and memory requests may cost a server, in bytes."""

    max_request_bytes: int = 256 * _MiB
    max_tensor_bytes: int = _GiB
    max_graph_constant_bytes: int = 2 * _GiB
    max_pushed_bytes_per_client: int = _GiB
    max_pushed_bytes: int = 4 * _GiB
    max_parked_bytes: int = 4 * _GiB
    max_key_value_bytes: int = 256 * _MiB

    def __post_init__(self):
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
                raise ValueError(
                    f"server limit {f.name} must be a positive number of bytes, "
                    f"got {v!r}"
                )

    @classmethod
    def from_config(cls, config=None) -> Limits:
        """From a ``ConfigProto`` (its ``server_limits``), a ``ServerLimits``, a
        dict of some fields, or None; fields unset or 0 take the defaults."""
        if config is None:
            return cls()
        if isinstance(config, dict):
            names = {f.name for f in dataclasses.fields(cls)}
            unknown = set(config) - names
            if unknown:
                raise ValueError(
                    f"unknown server limit(s) {sorted(unknown)}; known: {sorted(names)}"
                )
            return cls(**{k: v for k, v in config.items() if v})
        proto = getattr(config, "server_limits", config)
        given = {
            f.name: int(getattr(proto, f.name))
            for f in dataclasses.fields(cls)
            if getattr(proto, f.name, 0)
        }
        return cls(**given)


def _size(n: int) -> str:
    for unit, scale in (("GiB", _GiB), ("MiB", _MiB), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} bytes"


def over_limit(
    name: str, limit: int, what: str, nbytes: int, node: str | None = None
) -> errors.ResourceExhaustedError:
    """The error of ``what`` needing ``nbytes`` over the limit ``name``."""
    return errors.ResourceExhaustedError(
        None,
        node,
        f"{what} would take {_size(nbytes)} ({nbytes} bytes), over this server's "
        f"limit {name} = {_size(limit)} (ConfigProto.server_limits.{name}, "
        f"nbdist-server --{name})",
    )


def array_nbytes(dtype, num_elements: int, string_bytes: int = 0) -> int:
    """Bytes of an array of ``num_elements`` of ``dtype`` (strings: each
    ``tensor_util.STRING_ELEMENT_BYTES`` plus ``string_bytes``)."""
    dt = np.dtype(dtype)
    if dt.kind in "OSU":
        return num_elements * (tensor_util.STRING_ELEMENT_BYTES + string_bytes)
    return num_elements * dt.itemsize


def check_tensor(limits: Limits | None, nbytes: int, what: str, node=None) -> None:
    """Raises when a tensor of ``nbytes`` passes ``max_tensor_bytes``."""
    if limits is not None and nbytes > limits.max_tensor_bytes:
        raise over_limit(
            "max_tensor_bytes", limits.max_tensor_bytes, what, nbytes, node
        )


def check_output(node, shape, dtype, string_bytes: int = 0) -> None:
    """For shape-making kernels: raises before allocating an output of
    ``shape`` and ``dtype`` larger than the task's ``max_tensor_bytes``."""
    # Executors made outside a worker (tests, tools) have no limits.
    limits = getattr(node.env, "limits", None)
    if limits is None:
        return
    n = math.prod(int(d) for d in shape)
    nbytes = array_nbytes(dtype, n, string_bytes)
    if nbytes > limits.max_tensor_bytes:
        dims = ",".join(str(int(d)) for d in shape)
        raise over_limit(
            "max_tensor_bytes",
            limits.max_tensor_bytes,
            f"{node.op} '{node.name}': an output of dtype {np.dtype(dtype).name} "
            f"and shape [{dims}]",
            nbytes,
            node.name,
        )


def _dtype_name(enum: int) -> str:
    try:
        return types_pb2.DataType.Name(enum)
    except ValueError:
        return str(enum)


def _tensor_attrs(nodes):
    for n in nodes:
        for key, av in n.attr.items():
            if av.HasField("tensor"):
                yield n, key, av.tensor
            for t in av.list.tensor:
                yield n, key, t


def check_graph_def(graph_def, limits: Limits | None, where: str = "GraphDef"):
    """Raises when a constant of ``graph_def`` (or of a function of its
    library) would pass ``max_tensor_bytes`` once materialised, or all of
    them ``max_graph_constant_bytes``; sizes come from shapes and dtypes,
    nothing is materialised."""
    if limits is None:
        return
    nodes = [graph_def.node] + [f.node_def for f in graph_def.library.function]
    total = 0
    for group in nodes:
        for n, key, proto in _tensor_attrs(group):
            nbytes = tensor_util.materialized_nbytes(proto)
            if nbytes > limits.max_tensor_bytes:
                dims = ",".join(str(d.size) for d in proto.tensor_shape.dim)
                dtype = _dtype_name(proto.dtype)
                raise over_limit(
                    "max_tensor_bytes",
                    limits.max_tensor_bytes,
                    f"{where}: {n.op} '{n.name}' (attr {key}: {dtype} of shape "
                    f"[{dims}])",
                    nbytes,
                    n.name,
                )
            total += nbytes
    if total > limits.max_graph_constant_bytes:
        raise over_limit(
            "max_graph_constant_bytes",
            limits.max_graph_constant_bytes,
            f"{where}: its constants",
            total,
        )
