"""``replica_device_setter``: the device function of between-graph replication.

Placement is TF's ``_ReplicaDeviceChooser``: ops whose type is in ``ps_ops``
(the variables, by default) go to the ps job, on the task ``ps_strategy``
picks (round robin unless told otherwise); every other op goes to the worker
device. With ``merge_devices`` only the fields an inner scope left unset are
filled in. ``GreedyLoadBalancingStrategy`` and ``byte_size_load_fn`` are TF's
``contrib.training`` versions.

>>> import nbdist as nd
>>> with nd.Graph().as_default():
...     with nd.device(nd.train.replica_device_setter(ps_tasks=2)):
...         v1 = nd.Variable(1.0, name="v1")
...         v2 = nd.Variable(2.0, name="v2")
...         s = v1 + v2
>>> v1.device, v2.device, s.device
('/job:ps/task:0', '/job:ps/task:1', '/job:worker')
"""

from __future__ import annotations

import logging

import numpy as np

from nbdist.framework.device import DeviceSpec
from nbdist.framework.tensor_shape import TensorShape

_log = logging.getLogger("nbdist")

# The op types placed on ps tasks by default (TF's list). Queues are not ps ops.
STANDARD_PS_OPS = (
    "Variable", "VariableV2", "AutoReloadVariable", "MutableHashTable",
    "MutableHashTableV2", "MutableHashTableOfTensors",
    "MutableHashTableOfTensorsV2", "MutableDenseHashTable",
    "MutableDenseHashTableV2", "VarHandleOp",
)


class _RoundRobinStrategy:
    """The next ps task index, cycling over ``num_tasks``."""

    def __init__(self, num_tasks):
        self._num_tasks = num_tasks
        self._next_task = 0

    def __call__(self, unused_op):
        task = self._next_task
        self._next_task = (self._next_task + 1) % self._num_tasks
        return task


class _ReplicaDeviceChooser:
    def __init__(self, ps_tasks, ps_device, worker_device, merge_devices, ps_ops,
                 ps_strategy):
        self._ps_tasks = ps_tasks
        self._ps_device = ps_device
        self._worker_device = worker_device
        self._merge_devices = merge_devices
        self._ps_ops = ps_ops
        self._ps_strategy = ps_strategy

    def device_function(self, op):
        """The device for ``op`` (an Operation or a NodeDef)."""
        # Without merging, an op that already has a device keeps it.
        if not self._merge_devices and op.device:
            return op.device
        current_device = DeviceSpec.from_string(op.device or "")
        op_type = getattr(op, "type", None)
        if op_type is None:
            op_type = op.op  # a NodeDef
        if self._ps_tasks and self._ps_device and op_type in self._ps_ops:
            ps_device = DeviceSpec.from_string(self._ps_device)
            current_job, ps_job = current_device.job, ps_device.job
            # The task is only chosen when the op's own job does not override
            # the ps job.
            if ps_job and (not current_job or current_job == ps_job):
                ps_device.task = int(self._ps_strategy(op))
            ps_device.merge_from(current_device)
            return ps_device.to_string()
        worker_device = DeviceSpec.from_string(self._worker_device or "")
        worker_device.merge_from(current_device)
        return worker_device.to_string()


def replica_device_setter(ps_tasks=0, ps_device="/job:ps", worker_device="/job:worker",
                          merge_devices=True, cluster=None, ps_ops=None,
                          ps_strategy=None):
    """A device function for ``nd.device(...)`` when building a replica's graph.

    With ``cluster`` (a ``ClusterSpec``, a dict or a ``ClusterDef``) the number
    of ps tasks is that of the ps job (None if the cluster has no such job);
    otherwise ``ps_tasks``. Returns None when there is no ps task.

    Raises:
      TypeError: if ``ps_strategy`` is not callable.
    """
    if cluster is not None:
        from nbdist.runtime.cluster_spec import ClusterSpec

        spec = cluster if isinstance(cluster, ClusterSpec) else ClusterSpec(cluster)
        cluster_spec = spec.as_dict()
        ps_job_name = DeviceSpec.from_string(ps_device).job
        if ps_job_name not in cluster_spec or cluster_spec[ps_job_name] is None:
            return None
        ps_tasks = len(cluster_spec[ps_job_name])
    if ps_tasks == 0:
        return None
    if ps_ops is None:
        ps_ops = list(STANDARD_PS_OPS)
    if not merge_devices:
        _log.warning("DEPRECATION: It is recommended to set merge_devices=true in "
                     "replica_device_setter")
    if ps_strategy is None:
        ps_strategy = _RoundRobinStrategy(ps_tasks)
    if not callable(ps_strategy):
        raise TypeError("ps_strategy must be callable")
    chooser = _ReplicaDeviceChooser(ps_tasks, ps_device, worker_device,
                                    merge_devices, ps_ops, ps_strategy)
    return chooser.device_function


class GreedyLoadBalancingStrategy:
    """Places each ps op on the least-loaded ps task so far (by ``load_fn``).

    As the original, it is sensitive to the order in which the ops are
    created: each op goes to ``argmin(loads)`` and then adds its load there.

    >>> s = GreedyLoadBalancingStrategy(2, lambda op: op)
    >>> [int(s(load)) for load in (4, 1, 1, 1)]
    [0, 1, 1, 1]
    """

    def __init__(self, num_tasks, load_fn):
        self._num_tasks = num_tasks
        self._load_fn = load_fn
        self._ps_loads = np.zeros(num_tasks)

    def __call__(self, op):
        task = int(np.argmin(self._ps_loads))
        self._ps_loads[task] += self._load_fn(op)
        return task


def byte_size_load_fn(op):
    """The byte size of ``op``'s single output (a variable's size in bytes).

    For variables whose output shape is not known yet the ``shape`` attr is
    used, as in TF.

    Raises:
      ValueError: if ``op`` does not have exactly one output, or if the shape
        is not fully defined.
    """
    outputs = op.outputs
    if len(outputs) != 1:
        raise ValueError(f"Op {op} must have a single output")
    output = outputs[0]
    elem_size = output.dtype.size
    shape = output.get_shape()
    if not shape.is_fully_defined():
        try:
            attr = op.get_attr("shape")
        except ValueError:
            attr = None
        if attr is not None:
            shape = attr if isinstance(attr, TensorShape) else TensorShape(attr)
    if not shape.is_fully_defined():
        raise ValueError(f"Shape {shape} of op {op.name} is not fully defined")
    return shape.num_elements() * elem_size


__all__ = [
    "STANDARD_PS_OPS",
    "GreedyLoadBalancingStrategy",
    "byte_size_load_fn",
    "replica_device_setter",
]
