"""Kernels of the collective ops: they hand the work to the task's collective
executor (``env.collectives``, the runtime's ``CollectiveExecutor``)."""

from __future__ import annotations

import numpy as np

from nbdist import errors
from nbdist.executor.kernel import register_kernel


def _text(v) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


class _Collective:
    """What every collective kernel reads from its node: the task's executor,
    the group's members and the op's timeout."""

    def __init__(self, node):
        self.name = node.op
        self.node = node
        self.collectives = getattr(node.env, "collectives", None)
        if self.collectives is None:
            raise errors.UnimplementedError(
                None, node.name, f"{node.op} {node.name}: this executor runs no "
                "collectives (it needs a task's worker)")
        self.members = [_text(m) for m in node.attrs.get("group_members") or []]
        self.timeout_s = float(node.attrs.get("timeout_seconds") or 0.0) or None

    def group(self, group_size, group_key):
        return self.collectives.group(int(group_key), int(group_size), self.members,
                                      self.name)


@register_kernel("CollectiveReduceV2")
def collective_reduce_kernel(node):
    c = _Collective(node)
    merge_op, final_op = _text(node.attrs["merge_op"]), _text(node.attrs["final_op"])
    hint = _text(node.attrs.get("communication_hint") or "auto")

    def compute(step, x, group_size, group_key, instance_key):
        return c.collectives.all_reduce(
            step, x, c.group(group_size, group_key), int(instance_key), merge_op,
            final_op, c.timeout_s, hint)

    return compute


_ONE_INPUT = {"CollectiveGatherV2": "all_gather",
              "CollectiveBcastSendV2": "broadcast_send"}


@register_kernel(*_ONE_INPUT)
def collective_one_input_kernel(node):
    c = _Collective(node)
    method = getattr(c.collectives, _ONE_INPUT[node.op])

    def compute(step, x, group_size, group_key, instance_key):
        return method(step, x, c.group(group_size, group_key), int(instance_key),
                      c.timeout_s)

    return compute


@register_kernel("CollectiveBcastRecvV2")
def collective_bcast_recv_kernel(node):
    c = _Collective(node)
    dtype = np.dtype(node.attrs["T"].as_numpy_dtype)
    source = _text(node.attrs.get("source_task") or "")

    def compute(step, group_size, group_key, instance_key, shape):
        group = c.group(group_size, group_key)
        return c.collectives.broadcast_recv(
            step, group, int(instance_key), source or group.members[0],
            [int(d) for d in np.ravel(shape)], dtype, c.timeout_s)

    return compute
