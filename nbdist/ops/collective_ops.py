"""Collective ops between the tasks of a cluster, as TF's ``collective_ops``:
``all_reduce``, ``all_gather``, ``broadcast_send``, ``broadcast_recv``.

Each names its group (``group_size``, ``group_key``) and its instance
(``instance_key``); every member of the group runs an op with the same keys,
each in its own session and step (between-graph), and they meet there::

    >>> import nbdist as nd
    >>> from nbdist.ops import collective_ops
    >>> with nd.Graph().as_default():
    ...     total = collective_ops.all_reduce(
    ...         nd.constant([1.0, 2.0]), group_size=1, group_key=1, instance_key=1)
    ...     with nd.Session() as sess:
    ...         sess.run(total)
    array([1., 2.], dtype=float32)

nbdist additions: ``group_members`` lists the group's tasks in rank order
(default: tasks 0..group_size-1 of the running task's job; TF asks its group
leader), and ``broadcast_recv`` names its ``source_task`` (default: the first
member). Every run of an op is one execution of its instance; the members run
the instance the same number of times, in the same order.
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.op_def_registry import REQUIRED, register_op, shape_from_constant
from nbdist.framework.ops import convert_to_tensor, get_default_graph
from nbdist.framework.tensor_shape import TensorShape

__all__ = ["all_gather", "all_gather_v2", "all_reduce", "all_reduce_v2",
           "broadcast_recv", "broadcast_recv_v2", "broadcast_send",
           "broadcast_send_v2"]

_KEY_INPUTS = ("group_size", "group_key", "instance_key")
_COMMON_ATTRS = {
    "communication_hint": ("string", "auto"),
    "timeout_seconds": ("float", 0.0),
    "group_members": ("list(string)", []),
}


def _check_keys(c, first: int) -> None:
    for i, name in enumerate(_KEY_INPUTS, first):
        if c.dtype(i) is not dtypes.int32:
            raise TypeError(f"{name} must be int32, got {c.dtype(i).name}")
        if c.shape(i).rank not in (None, 0):
            raise ValueError(f"{name} must be a scalar, got shape {c.shape(i)}")


def _reduce_infer(c):
    _check_keys(c, 1)
    if c.attr("merge_op") not in ("Add", "Mul", "Min", "Max"):
        raise ValueError(f"merge_op must be Add, Mul, Min or Max, got "
                         f"{c.attr('merge_op')!r}")
    if c.attr("final_op") not in ("Id", "Div"):
        raise ValueError(f"final_op must be Id or Div, got {c.attr('final_op')!r}")
    return [(c.dtype(0), c.shape(0))]


def _gather_infer(c):
    _check_keys(c, 1)
    shape = c.shape(0)
    if shape.rank == 0:
        raise ValueError("all_gather needs a tensor of rank >= 1 (gathered on "
                         "axis 0), got a scalar")
    if shape.rank is None:
        return [(c.dtype(0), shape)]
    return [(c.dtype(0), TensorShape([None] + shape.as_list()[1:]))]


def _bcast_send_infer(c):
    _check_keys(c, 1)
    return [(c.dtype(0), c.shape(0))]


def _bcast_recv_infer(c):
    _check_keys(c, 0)
    value = c.constant(3)
    shape = shape_from_constant(value) if value is not None else TensorShape(None)
    return [(c.attr("T"), shape)]


register_op("CollectiveReduceV2", _reduce_infer, num_inputs=4, stateful=True,
            attrs=dict(_COMMON_ATTRS, T=("type", None), merge_op=("string", "Add"),
                       final_op=("string", "Id")))
register_op("CollectiveGatherV2", _gather_infer, num_inputs=4, stateful=True,
            attrs=dict(_COMMON_ATTRS, T=("type", None)))
register_op("CollectiveBcastSendV2", _bcast_send_infer, num_inputs=4, stateful=True,
            attrs=dict(_COMMON_ATTRS, T=("type", None)))
register_op("CollectiveBcastRecvV2", _bcast_recv_infer, num_inputs=4, stateful=True,
            attrs=dict(_COMMON_ATTRS, T=("type", REQUIRED),
                       Tshape=("type", dtypes.int32), source_task=("string", "")))


def _keys(group_size, group_key, instance_key) -> list:
    return [convert_to_tensor(v, dtype=dtypes.int32, name=n) for v, n in
            zip((group_size, group_key, instance_key), _KEY_INPUTS)]


def _attrs(communication_hint, timeout, group_members) -> dict:
    return {"communication_hint": communication_hint or "auto",
            "timeout_seconds": float(timeout or 0.0),
            "group_members": [str(m) for m in (group_members or [])]}


def all_reduce_v2(t, group_size, group_key, instance_key, merge_op="Add",
                  final_op="Id", communication_hint="auto", timeout=0,
                  ordering_token=None, max_subdivs_per_device=-1, name=None,
                  group_members=None):
    """The element-wise ``merge_op`` ("Add", "Mul", "Min", "Max") of ``t`` over
    the group, then ``final_op`` ("Id", or "Div" by ``group_size``: the mean).

    ``timeout`` (seconds, 0: none) bounds the wait for the other members.
    ``ordering_token`` and ``max_subdivs_per_device`` are accepted and ignored.
    """
    del ordering_token, max_subdivs_per_device
    g = get_default_graph()
    t = convert_to_tensor(t)
    attrs = _attrs(communication_hint, timeout, group_members)
    attrs.update(T=t.dtype.base_dtype, merge_op=merge_op, final_op=final_op)
    return g.create_op("CollectiveReduceV2",
                       [t, *_keys(group_size, group_key, instance_key)], attrs,
                       name=name or "CollectiveReduceV2").outputs[0]


def all_gather_v2(t, group_size, group_key, instance_key, communication_hint="auto",
                  timeout=0, ordering_token=None, name=None, group_members=None):
    """Every member's ``t`` concatenated on axis 0, in rank order."""
    del ordering_token
    return _one_input_op("CollectiveGatherV2", t, group_size, group_key,
                         instance_key, _attrs(communication_hint, timeout,
                                              group_members), name)


def _one_input_op(op_type, t, group_size, group_key, instance_key, attrs, name):
    t = convert_to_tensor(t)
    attrs["T"] = t.dtype.base_dtype
    return get_default_graph().create_op(
        op_type, [t, *_keys(group_size, group_key, instance_key)], attrs,
        name=name or op_type).outputs[0]


def broadcast_send_v2(t, group_size, group_key, instance_key,
                      communication_hint="auto", timeout=0, name=None,
                      group_members=None):
    """Sends ``t`` to the other members (they run ``broadcast_recv``); returns it."""
    return _one_input_op("CollectiveBcastSendV2", t, group_size, group_key,
                         instance_key, _attrs(communication_hint, timeout,
                                              group_members), name)


def broadcast_recv_v2(shape, dtype, group_size, group_key, instance_key,
                      communication_hint="auto", timeout=0, name=None,
                      group_members=None, source_task=None):
    """The tensor of ``shape`` and ``dtype`` that ``source_task`` (default: the
    group's first member) sends with ``broadcast_send``."""
    g = get_default_graph()
    shape = convert_to_tensor(shape, dtype=dtypes.int32, name="shape")
    attrs = _attrs(communication_hint, timeout, group_members)
    attrs.update(T=dtypes.as_dtype(dtype).base_dtype, Tshape=dtypes.int32,
                 source_task=source_task or "")
    return g.create_op("CollectiveBcastRecvV2",
                       [*_keys(group_size, group_key, instance_key), shape], attrs,
                       name=name or "CollectiveBcastRecvV2").outputs[0]


# TF's v1 names; the ops are the V2 ones (keys as tensors).
all_reduce = all_reduce_v2
all_gather = all_gather_v2
broadcast_send = broadcast_send_v2
broadcast_recv = broadcast_recv_v2
