"""``MultiWorkerMirroredStrategy`` (``CollectiveAllReduceStrategy``): synchronous
data-parallel training between workers that each run their own graph and
session, their variables mirrored and kept equal by collectives.

Every chief/worker task is one replica. Inside ``scope()`` a variable is
created on the task that builds it, and its initializer takes worker 0's (the
chief's) initial value by a broadcast, so every copy starts equal; inside
``scope()`` or ``run()``, ``Optimizer.apply_gradients`` (and ``minimize``)
replaces the gradients with their mean over the replicas (one packed
all-reduce per dtype) before applying them, so every copy stays equal.

    >>> import nbdist as nd
    >>> strategy = nd.distribute.MultiWorkerMirroredStrategy()  # no cluster: 1 replica
    >>> with nd.Graph().as_default():
    ...     with strategy.scope():
    ...         w = nd.Variable([1.0, 2.0])
    ...         step = nd.train.GradientDescentOptimizer(0.5).minimize(
    ...             nd.reduce_sum(w * w))
    ...     with nd.Session() as sess:
    ...         sess.run(nd.global_variables_initializer())
    ...         _ = sess.run(step)
    ...         sess.run(w)
    array([0., 0.], dtype=float32)

With ``run_distribute_coordinator`` (either mode) each task's copy of the
strategy is configured for that task; otherwise the cluster comes from the
``cluster_resolver`` (default ``TF_CONFIG``). The group is the chief and
worker tasks in that order; collectives go through the tasks' servers, so each
task's session must target its own server (``master_target``).
"""

from __future__ import annotations

import contextlib
import copy

import numpy as np

from nbdist.cluster.resolvers import SimpleClusterResolver, TFConfigClusterResolver
from nbdist.ops import collective_ops, state_ops
from nbdist.framework import ops as _ops
from nbdist.ops.array_ops_creation import ones_like
from nbdist.ops.array_ops_join import concat, split
from nbdist.ops.array_ops_shape import reshape
from nbdist.ops.math_ops_reduction import reduce_sum
from nbdist.framework.ops import GraphKeys
from nbdist.runtime.cluster_spec import ClusterSpec, task_device
from nbdist.train import cross_replica

__all__ = ["CollectiveAllReduceExtended", "CollectiveAllReduceStrategy",
           "MultiWorkerMirroredStrategy", "ReduceOp"]

_GROUP_KEY = 1  # one group: the chief and worker tasks


class ReduceOp:
    """How ``reduce`` combines the replicas' values (``nd.distribute.ReduceOp``)."""

    SUM = "SUM"
    MEAN = "MEAN"


class CollectiveAllReduceExtended:
    """``strategy.extended``: this task, its group and the flags
    ``run_distribute_coordinator`` reads."""

    experimental_between_graph = True
    experimental_should_init = True  # every replica initialises its own copy

    def __init__(self, strategy, cluster_spec: ClusterSpec | None, task_type=None,
                 task_id=None):
        self._strategy = strategy
        self._next_instance = 1
        self._set_cluster(cluster_spec, task_type, task_id)

    def _set_cluster(self, spec, task_type, task_id):
        self._cluster_spec = spec if spec else None
        self._task_type, self._task_id = task_type, task_id
        members = []
        for job in ("chief", "worker"):
            if spec and job in spec.jobs:
                members += [task_device(job, i) for i in spec.task_indices(job)]
        self._members = members
        self._std_server_started = False

    @property
    def should_checkpoint(self) -> bool:
        return self._is_chief

    should_save_summary = should_checkpoint

    @property
    def _is_chief(self) -> bool:
        return not self._members or self._task() == self._members[0]

    def _task(self) -> str | None:
        if self._task_type is None:
            return None
        return task_device(self._task_type, self._task_id or 0)

    @property
    def worker_devices(self) -> tuple:
        task = self._task()
        return (f"{task}/device:CPU:0",) if task else ("/device:CPU:0",)

    parameter_devices = worker_devices

    def configure(self, session_config=None, cluster_spec=None, task_type=None,
                  task_id=None):
        """Sets the task this copy of the strategy runs for."""
        del session_config
        if cluster_spec:
            spec = (cluster_spec if isinstance(cluster_spec, ClusterSpec)
                    else ClusterSpec(cluster_spec))
            self._set_cluster(spec, task_type, task_id)

    _configure = configure

    # -- collectives of this replica ----------------------------------------------------
    def _group(self) -> tuple[int, list[str], str]:
        """(group size, members, device) of this task's collectives."""
        if len(self._members) <= 1:
            return 1, [], ""
        task = self._task()
        if task not in self._members:
            raise ValueError(
                f"MultiWorkerMirroredStrategy: this strategy runs for task {task}, "
                f"which is not one of the group's {self._members}; configure it "
                "with a chief or worker task (run_distribute_coordinator does)")
        return len(self._members), self._members, task

    def _instance_key(self) -> int:
        key, self._next_instance = self._next_instance, self._next_instance + 1
        return key

    def _all_reduce(self, value, final_op: str):
        size, members, device = self._group()
        with _ops.get_default_graph().device(device):
            return collective_ops.all_reduce(
                value, size, _GROUP_KEY, self._instance_key(), "Add", final_op,
                group_members=members)

    def _broadcast_initial_value(self, var):
        """``var``'s initializer, taking the first member's initial value."""
        size, members, device = self._group()
        if size == 1:
            return
        g = var.graph
        with g.control_dependencies(None), g.device(device), g.name_scope(
                var.op.name + "/Broadcast"):
            key = self._instance_key()
            if device == members[0]:
                value = collective_ops.broadcast_send(
                    var.initial_value, size, _GROUP_KEY, key, group_members=members)
            else:
                value = collective_ops.broadcast_recv(
                    var.shape.as_list(), var.dtype.base_dtype, size, _GROUP_KEY, key,
                    group_members=members, source_task=members[0])
            var._initializer_op = state_ops.assign(var._variable, value).op

    def _mean_gradients(self, grads_and_vars):
        """The gradients' mean over the replicas: one packed all-reduce per dtype,
        each after the previous one (every replica runs them in one order)."""
        pairs = list(grads_and_vars)
        if self._group()[0] == 1:
            return pairs
        by_dtype: dict = {}
        for i, (grad, _) in enumerate(pairs):
            if grad is not None:
                by_dtype.setdefault(grad.dtype.base_dtype, []).append(i)
        g = _ops.get_default_graph()
        previous = []
        for indices in by_dtype.values():
            grads = [pairs[i][0] for i in indices]
            with g.control_dependencies(previous), g.name_scope("allreduce"):
                flat = concat([reshape(t, [-1]) for t in grads], 0)
                mean = self._all_reduce(flat, "Div")
                sizes = [int(np.prod(t.shape.as_list())) for t in grads]
                parts = split(mean, sizes, 0) if len(sizes) > 1 else [mean]
            previous = [mean.op]
            for i, part, t in zip(indices, parts, grads):
                pairs[i] = (reshape(part, t.shape.as_list()), pairs[i][1])
        return pairs


class MultiWorkerMirroredStrategy:
    """Synchronous training on every chief/worker task with collective
    all-reduce (see the module docstring).

    ``cluster_resolver``: a ``ClusterResolver``, ``ClusterSpec`` or dict (None:
    ``TF_CONFIG``). ``communication`` and ``communication_options`` are
    accepted and ignored (nbdist has one ring implementation).
    """

    def __init__(self, communication=None, cluster_resolver=None,
                 communication_options=None):
        del communication, communication_options
        if cluster_resolver is None:
            cluster_resolver = TFConfigClusterResolver()
        elif isinstance(cluster_resolver, (ClusterSpec, dict)):
            cluster_resolver = SimpleClusterResolver(ClusterSpec(cluster_resolver))
        self._cluster_resolver = cluster_resolver
        self.extended = CollectiveAllReduceExtended(
            self, cluster_resolver.cluster_spec(), cluster_resolver.task_type,
            cluster_resolver.task_id)

    @property
    def cluster_resolver(self):
        return self._cluster_resolver

    @property
    def num_replicas_in_sync(self) -> int:
        """One replica per chief/worker task."""
        return max(1, len(self.extended._members))

    @contextlib.contextmanager
    def scope(self):
        """Variables created inside start from the first member's value, and
        ``apply_gradients`` inside applies the replicas' mean gradient."""
        graph = _ops.get_default_graph()
        before = {id(v) for v in graph.get_collection(GraphKeys.GLOBAL_VARIABLES)}
        with cross_replica.aggregating_gradients(self.extended._mean_gradients):
            yield self
        for var in graph.get_collection(GraphKeys.GLOBAL_VARIABLES):
            if id(var) not in before:
                self.extended._broadcast_initial_value(var)

    def run(self, fn, args=(), kwargs=None, options=None):
        """Calls ``fn(*args, **kwargs)`` as this task's replica: optimizers inside
        apply the replicas' mean gradient."""
        del options
        with cross_replica.aggregating_gradients(self.extended._mean_gradients):
            return fn(*args, **(kwargs or {}))

    def reduce(self, reduce_op, value, axis=None):
        """``value`` summed (``ReduceOp.SUM``) or averaged (``ReduceOp.MEAN``)
        over the replicas, and over ``axis`` of each replica's value if given."""
        op = getattr(reduce_op, "value", reduce_op)
        op = str(op).upper().rsplit(".", 1)[-1]
        if op not in (ReduceOp.SUM, ReduceOp.MEAN):
            raise ValueError(f"reduce_op must be ReduceOp.SUM or ReduceOp.MEAN, got "
                             f"{reduce_op!r}")
        value = _ops.convert_to_tensor(value)
        if axis is None:
            return self.extended._all_reduce(value, "Div" if op == "MEAN" else "Id")
        total = self.extended._all_reduce(reduce_sum(value, axis), "Id")
        if op == ReduceOp.SUM:
            return total
        count = self.extended._all_reduce(reduce_sum(ones_like(value), axis), "Id")
        return total / count

    def configure(self, session_config=None, cluster_spec=None, task_type=None,
                  task_id=None):
        """TF1: sets the task this copy of the strategy runs for."""
        self.extended.configure(session_config, cluster_spec, task_type, task_id)

    def __deepcopy__(self, memo):
        new = copy.copy(self)
        new.extended = copy.copy(self.extended)
        new.extended._strategy = new
        return new

    def __repr__(self) -> str:
        return (f"<MultiWorkerMirroredStrategy replicas={self.num_replicas_in_sync} "
                f"task={self.extended._task()}>")


CollectiveAllReduceStrategy = MultiWorkerMirroredStrategy
