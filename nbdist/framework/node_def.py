"""Ops as protos: Python attr values <-> ``AttrValue``, an ``Operation`` as a
``NodeDef`` and a ``Graph`` as a ``GraphDef``.

Nothing here needs the ``Graph`` class, so ``ops`` uses it for ``op.node_def``
and ``graph.as_graph_def()``; reading a ``GraphDef`` back into a graph is
``graph_def.import_graph_def``.
"""

from __future__ import annotations

import numpy as np

from nbdist.framework import dtypes, op_def_registry
from nbdist.framework.tensor_shape import TensorShape
from nbdist.framework.tensor_util import (
    make_ndarray,
    make_tensor_proto,
    shape_from_proto,
    shape_to_proto,
)
from nbdist.proto import attr_value_pb2, graph_pb2, node_def_pb2

PRODUCER_VERSION = 1


# -- attrs ------------------------------------------------------------------------
def _scalar_kind(value) -> str:
    if isinstance(value, dtypes.DType):
        return "type"
    if isinstance(value, TensorShape):
        return "shape"
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, (int, np.integer)):
        return "int"
    if isinstance(value, (float, np.floating)):
        return "float"
    if isinstance(value, (bytes, str)):
        return "string"
    if isinstance(value, np.ndarray):
        return "tensor"
    raise TypeError(f"cannot store {type(value).__name__} {value!r:.60} in an attr")


def _set_scalar(av_or_list, kind, value, in_list):
    if kind == "type":
        (
            av_or_list.type.append
            if in_list
            else lambda v: setattr(av_or_list, "type", v)
        )(value.as_datatype_enum)
    elif kind == "shape":
        (av_or_list.shape.add() if in_list else av_or_list.shape).CopyFrom(
            shape_to_proto(value.dims)
        )
    elif kind == "bool":
        (av_or_list.b.append if in_list else lambda v: setattr(av_or_list, "b", v))(
            bool(value)
        )
    elif kind == "int":
        (av_or_list.i.append if in_list else lambda v: setattr(av_or_list, "i", v))(
            int(value)
        )
    elif kind == "float":
        (av_or_list.f.append if in_list else lambda v: setattr(av_or_list, "f", v))(
            float(value)
        )
    elif kind in ("string", "func"):
        v = value.encode() if isinstance(value, str) else bytes(value)
        (av_or_list.s.append if in_list else lambda x: setattr(av_or_list, "s", x))(v)
    elif kind == "tensor":
        (av_or_list.tensor.add() if in_list else av_or_list.tensor).CopyFrom(
            make_tensor_proto(value)
        )
    else:
        raise TypeError(f"unknown attr kind {kind}")


def python_to_attr_value(value, kind: str | None = None) -> attr_value_pb2.AttrValue:
    av = attr_value_pb2.AttrValue()
    if kind is None:
        if isinstance(value, (list, tuple)):
            kind = f"list({_scalar_kind(value[0])})" if value else "list(int)"
        else:
            kind = _scalar_kind(value)
    if kind.startswith("list("):
        inner = kind[5:-1]
        av.list.SetInParent()
        for v in value:
            _set_scalar(av.list, inner, v, True)
    else:
        _set_scalar(av, kind, value, False)
    return av


def attr_value_to_python(av: attr_value_pb2.AttrValue, kind: str | None, where: str):
    """Decodes an AttrValue; ``kind`` (from the OpDef) is checked when known."""
    which = av.WhichOneof("value")
    if which is None:
        raise ValueError(f"{where}: attr has no value")
    if which == "list":
        lst = av.list
        inner = kind[5:-1] if kind and kind.startswith("list(") else None
        if kind is not None and inner is None:
            raise ValueError(f"{where}: expected a {kind}, got a list")
        fields = [
            f
            for f in ("s", "i", "f", "b", "type", "shape", "tensor")
            if len(getattr(lst, f))
        ]
        if len(fields) > 1:
            raise ValueError(f"{where}: list attr mixes kinds {fields}")
        field = fields[0] if fields else None
        want = {
            "string": "s",
            "func": "s",
            "int": "i",
            "float": "f",
            "bool": "b",
            "type": "type",
            "shape": "shape",
            "tensor": "tensor",
        }.get(inner)
        if field is not None and want is not None and field != want:
            raise ValueError(f"{where}: expected a {kind}, got a list of {field}")
        if field is None:
            return []
        vals = list(getattr(lst, field))
        if field == "s":
            return [v.decode() for v in vals] if inner == "string" else vals
        if field == "type":
            return [_dtype_or_error(v, where) for v in vals]
        if field == "shape":
            return [TensorShape(shape_from_proto(s)) for s in vals]
        if field == "tensor":
            return [make_ndarray(t) for t in vals]
        if field == "b":
            return [bool(v) for v in vals]
        return vals
    want_field = {
        "string": "s",
        "func": "s",
        "int": "i",
        "float": "f",
        "bool": "b",
        "type": "type",
        "shape": "shape",
        "tensor": "tensor",
    }
    if kind is not None and (kind.startswith("list(") or want_field.get(kind) != which):
        raise ValueError(f"{where}: expected a {kind}, got a value of kind {which}")
    if which == "s":
        return av.s.decode() if kind in ("string", "func") else av.s
    if which == "type":
        return _dtype_or_error(av.type, where)
    if which == "shape":
        return TensorShape(shape_from_proto(av.shape))
    if which == "tensor":
        try:
            return make_ndarray(av.tensor)
        except (ValueError, TypeError) as e:
            raise ValueError(f"{where}: malformed tensor: {e}") from None
    return getattr(av, which)


def _dtype_or_error(enum, where):
    try:
        return dtypes.as_dtype(int(enum))
    except TypeError:
        raise ValueError(f"{where}: unknown data type enum {enum}") from None


# -- ops -> protos -------------------------------------------------------------------
def operation_to_node_def(op) -> node_def_pb2.NodeDef:
    nd = node_def_pb2.NodeDef(name=op.name, op=op.type, device=op.device)
    nd.input.extend(t._as_node_def_input() for t in op._inputs)
    nd.input.extend("^" + c.name for c in op._control_inputs)
    odef = op_def_registry.get_op_def(op.type)
    for k, v in op._attrs.items():
        kind = odef.attrs[k][0] if odef and k in odef.attrs else None
        if kind is None and k == "_class":
            kind = "list(string)"
        nd.attr[k].CopyFrom(python_to_attr_value(v, kind))
    return nd


def graph_to_graph_def(graph, from_version=None, add_shapes=False):
    gd = graph_pb2.GraphDef()
    gd.versions.producer = PRODUCER_VERSION
    ops = graph._ops_list[from_version or 0 :]
    for op in ops:
        nd = gd.node.add()
        nd.CopyFrom(operation_to_node_def(op))
        if add_shapes:
            nd.attr["_output_shapes"].CopyFrom(
                python_to_attr_value([t.shape for t in op._outputs], "list(shape)")
            )
    # Graph functions (nd.function, Dataset.map) used by the graph's ops.
    for fdef in getattr(graph, "_functions", {}).values():
        gd.library.function.add().CopyFrom(fdef)
    return gd
