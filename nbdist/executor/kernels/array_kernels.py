"""Kernels for constants, placeholders, identity, and the executor's own
feed/fetch and Send/Recv nodes."""

from __future__ import annotations

from nbdist import errors
from nbdist.executor.kernel import register_kernel
from nbdist.executor.rendezvous import make_key
from nbdist.framework import dtypes
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.tensor_shape import TensorShape

# The executor's own ops: client-terminated feeds/fetches and cross-task edges.
register_op("_Feed", lambda c: [(c.attr("dtype"), c.attr("shape"))],
            attrs={"key": ("string", REQUIRED), "dtype": ("type", REQUIRED),
                   "shape": ("shape", TensorShape(None))}, num_inputs=0)
register_op("_Fetch", lambda c: [], attrs={"key": ("string", REQUIRED)},
            num_inputs=1)
_RDV_ATTRS = {"tensor_name": ("string", REQUIRED), "send_device": ("string", REQUIRED),
              "send_device_incarnation": ("int", 0),
              "recv_device": ("string", REQUIRED),
              "client_terminated": ("bool", False)}
register_op("_Send", lambda c: [], attrs=dict(_RDV_ATTRS, T=("type", None)),
            num_inputs=1)
register_op("_Recv", lambda c: [(c.attr("tensor_type"), TensorShape(None))],
            attrs=dict(_RDV_ATTRS, tensor_type=("type", REQUIRED)), num_inputs=0)


@register_kernel("Const")
def const_kernel(node):
    value = node.attrs["value"]
    return lambda step: value


def _shape_str(shape: TensorShape) -> str:
    if shape.rank is None:
        return "<unknown>"
    return "[" + ",".join("?" if d is None else str(d) for d in shape.dims) + "]"


@register_kernel("Placeholder")
def placeholder_kernel(node):
    dt, shape, name = node.attrs["dtype"], node.attrs["shape"], node.name

    def compute(step):
        raise errors.InvalidArgumentError(
            None, name, f"You must feed a value for placeholder tensor '{name}' "
            f"with dtype {dt.name} and shape {_shape_str(shape)}")

    return compute


@register_kernel("PlaceholderWithDefault", "Identity", "StopGradient")
def identity_kernel(node):
    if node.op == "Identity" and node.input_dtypes and (
            node.input_dtypes[0].is_ref_dtype):
        return lambda step, x: x.read()
    return lambda step, x: x


@register_kernel("_Feed")
def feed_kernel(node):
    key = node.attrs["key"]

    def compute(step):
        try:
            return step.feeds[key]
        except KeyError:
            raise errors.InvalidArgumentError(
                None, node.name, f"No value was fed for '{key}'") from None

    return compute


@register_kernel("_Fetch")
def fetch_kernel(node):
    key = node.attrs["key"]

    def compute(step, x):
        step.fetches[key] = x

    return compute


@register_kernel("_Send")
def send_kernel(node):
    a = node.attrs
    key = make_key(a["send_device"], a["send_device_incarnation"], a["recv_device"],
                   a["tensor_name"])
    rendezvous = node.env.rendezvous

    def compute(step, x):
        rendezvous.send(step.step_id, key, x)

    return compute


@register_kernel("_Recv")
def recv_kernel(node):
    a = node.attrs
    key = make_key(a["send_device"], a["send_device_incarnation"], a["recv_device"],
                   a["tensor_name"])
    recv = node.env.recv
    src = a["send_device"]
    return lambda step: recv(step, src, key)


__all__ = ["dtypes"]
