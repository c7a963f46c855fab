"""``ParameterServerStrategy``: variables on the ps tasks, functions on workers.

As TF2's ``tf.distribute.experimental.ParameterServerStrategy`` (the
``ClusterCoordinator`` schedules functions on the workers) and, through
``extended`` and ``configure``, TF1's between-graph strategy that
``run_distribute_coordinator`` drives.

    >>> import nbdist as nd
    >>> from nbdist.distribute.cluster_resolver import SimpleClusterResolver
    >>> spec = nd.train.ClusterSpec({"ps": ["localhost:1", "localhost:2"],
    ...                              "worker": ["localhost:3"]})
    >>> strategy = ParameterServerStrategy(SimpleClusterResolver(spec))
    >>> with nd.Graph().as_default():
    ...     with strategy.scope():
    ...         a = nd.Variable(1.0, name="a")
    ...         b = nd.Variable(2.0, name="b")
    ...         c = a + b
    >>> a.device, b.device, c.device
    ('/job:ps/task:0', '/job:ps/task:1', '')

Inside ``scope()`` variables go round robin over the ps tasks (as
``replica_device_setter`` does for variable ops only; the round robin goes on
across scopes); other ops keep no device, so they run on the worker that runs
the function (after ``configure(..., task_type, task_id)``, as TF1, on that
task). A ``ClusterCoordinator`` initialises the variables created in the
scope on their ps before it runs functions (at its next ``schedule``); TF2
does it when they are created.
"""

from __future__ import annotations

import contextlib
import copy
import threading

from nbdist.cluster.resolvers import (
    ClusterResolver,
    SimpleClusterResolver,
    TFConfigClusterResolver,
)
from nbdist.distribute.data.data_ops import Dataset
from nbdist.distribute.strategies.input_context import InputContext
from nbdist.framework import ops as _ops
from nbdist.framework.ops import GraphKeys
from nbdist.ops.partitioned_variables import (
    SaveSliceInfo,
    ShardedVariable,
    iter_slices,
)
from nbdist.ops.variables import variable_creator_scope
from nbdist.runtime.cluster_spec import ClusterSpec
from nbdist.train.device_setter import STANDARD_PS_OPS, replica_device_setter

__all__ = ["ParameterServerStrategy", "ParameterServerStrategyExtended"]


def _is_chief(spec: ClusterSpec | None, task_type, task_id) -> bool:
    if not spec or task_type is None:
        return True
    if task_type in ("chief", "evaluator"):
        return True
    return "chief" not in spec.jobs and task_type == "worker" and task_id == 0


class _RoundRobin:
    def __init__(self, n: int):
        self.n, self.next = n, 0

    def __call__(self, op):
        task, self.next = self.next, (self.next + 1) % self.n
        return task


class ParameterServerStrategyExtended:
    """``strategy.extended``: the flags ``run_distribute_coordinator`` reads and
    the devices of the strategy."""

    experimental_between_graph = True

    def __init__(self, strategy, cluster_spec: ClusterSpec, task_type=None,
                 task_id=None, rpc_layer: str = "grpc"):
        self._strategy = strategy
        self._rpc_layer = rpc_layer or "grpc"
        self._set_cluster(cluster_spec, task_type, task_id)

    def _set_cluster(self, spec: ClusterSpec, task_type, task_id):
        self._cluster_spec = spec
        self._task_type, self._task_id = task_type, task_id
        self._is_chief = _is_chief(spec, task_type, task_id)
        self._num_ps = spec.num_tasks("ps") if "ps" in spec.jobs else 0
        self._num_workers = spec.num_tasks("worker") if "worker" in spec.jobs else 0
        self._ps_chooser = _RoundRobin(max(1, self._num_ps))

    # -- TF1 protocol ---------------------------------------------------------------
    @property
    def experimental_should_init(self) -> bool:
        return self._is_chief

    should_init = experimental_should_init

    @property
    def should_checkpoint(self) -> bool:
        return self._is_chief

    @property
    def should_save_summary(self) -> bool:
        return self._is_chief

    @property
    def parameter_devices(self) -> tuple:
        return tuple(f"/job:ps/replica:0/task:{i}/device:CPU:0"
                     for i in range(self._num_ps))

    @property
    def worker_devices(self) -> tuple:
        if self._task_type in ("chief", "worker"):
            device = (f"/job:{self._task_type}/replica:0/task:{self._task_id}"
                      "/device:CPU:0")
            return (device,)
        return tuple(f"/job:worker/replica:0/task:{i}/device:CPU:0"
                     for i in range(self._num_workers))

    def _worker_device(self) -> str:
        if self._task_type in ("chief", "worker") and self._task_id is not None:
            return f"/job:{self._task_type}/task:{self._task_id}"
        return ""

    def _device_function(self, record):
        chooser = replica_device_setter(
            ps_tasks=self._num_ps, worker_device=self._worker_device(),
            ps_strategy=self._ps_chooser)
        if chooser is None:
            return None

        def device_fn(op):
            if getattr(op, "type", None) in STANDARD_PS_OPS:
                record(op)
            return chooser(op)

        return device_fn

    def _update_config_proto(self, config):
        """TF's device filters: a worker sees the ps tasks and itself."""
        if not self._cluster_spec or self._task_type is None:
            return
        del config.device_filters[:]
        if self._task_type in ("chief", "worker"):
            config.device_filters.extend(
                [f"/job:{self._task_type}/task:{self._task_id}", "/job:ps"])
        elif self._task_type == "evaluator":
            config.device_filters.append(f"/job:{self._task_type}/task:{self._task_id}")

    def configure(self, session_config=None, cluster_spec=None, task_type=None,
                  task_id=None):
        """See ``ParameterServerStrategy.configure``."""
        if cluster_spec is not None:
            spec = (cluster_spec if isinstance(cluster_spec, ClusterSpec)
                    else ClusterSpec(cluster_spec))
            self._set_cluster(spec, task_type, task_id)
        if session_config is not None:
            self._update_config_proto(session_config)

    _configure = configure

    def call_for_each_replica(self, fn, args=(), kwargs=None):
        return fn(*args, **(kwargs or {}))

    def task_target(self, job: str, index: int) -> str:
        return f"{self._rpc_layer}://{self._cluster_spec.task_address(job, index)}"


class ParameterServerStrategy:
    """Parameter-server training: ``scope()`` puts variables on the ps tasks;
    a ``ClusterCoordinator`` runs functions on the workers; ``run`` calls the
    replica function (one replica per worker).

    ``cluster_resolver``: a ``ClusterResolver`` (a ``ClusterSpec`` or dict is
    wrapped; None reads ``TF_CONFIG``) whose cluster has a ``ps`` and a
    ``worker`` job. ``variable_partitioner`` (``fn(shape, dtype)`` -> shards per
    axis, only the first > 1, e.g. ``nd.fixed_size_partitioner(2)``): a
    variable of rank >= 1 created in ``scope()`` becomes a ``ShardedVariable``
    whose shards (``<name>/part_<i>``) go round robin over the ps tasks.
    """

    def __init__(self, cluster_resolver=None, variable_partitioner=None):
        if variable_partitioner is not None and not callable(variable_partitioner):
            raise TypeError("ParameterServerStrategy: variable_partitioner must be "
                            f"callable, got {variable_partitioner!r}")
        if cluster_resolver is None:
            cluster_resolver = TFConfigClusterResolver()
        elif isinstance(cluster_resolver, (ClusterSpec, dict)):
            spec = (cluster_resolver if isinstance(cluster_resolver, ClusterSpec)
                    else ClusterSpec(cluster_resolver))
            cluster_resolver = SimpleClusterResolver(spec, rpc_layer="grpc")
        if not isinstance(cluster_resolver, ClusterResolver):
            raise TypeError("ParameterServerStrategy needs a ClusterResolver, got "
                            f"{type(cluster_resolver).__name__}")
        spec = cluster_resolver.cluster_spec()
        for job in ("ps", "worker"):
            if job not in spec.jobs or not spec.num_tasks(job):
                raise ValueError(f"ParameterServerStrategy: the cluster needs at least "
                                 f"one '{job}' task, got jobs {spec.jobs}")
        self._cluster_resolver = cluster_resolver
        self._variable_partitioner = variable_partitioner
        self.extended = ParameterServerStrategyExtended(
            self, spec, cluster_resolver.task_type, cluster_resolver.task_id,
            cluster_resolver.rpc_layer or "grpc")
        self._variables: list = []  # created in scope(), in creation order
        self._lock = threading.Lock()
        self._scope_depth = 0
        self._cluster_coordinator = None  # set by ClusterCoordinator

    # -- properties -------------------------------------------------------------------
    @property
    def cluster_resolver(self):
        return self._cluster_resolver

    @property
    def num_replicas_in_sync(self) -> int:
        """One replica (CPU) per worker; the workers are asynchronous."""
        return 1

    @property
    def variables(self) -> list:
        """The variables created in ``scope()`` so far."""
        return list(self._variables)

    # -- scope --------------------------------------------------------------------------
    @contextlib.contextmanager
    def scope(self):
        """Variables created inside go round robin over the ps tasks."""
        graph = _ops.get_default_graph()
        recorded: list = []
        fn = self.extended._device_function(recorded.append)
        with self._lock:
            self._scope_depth += 1
        try:
            with graph.device(fn), variable_creator_scope(self._create_variable):
                yield self
        finally:
            with self._lock:
                self._scope_depth -= 1
            ops = {id(op) for op in recorded}
            if ops:
                found = [v for key in (GraphKeys.GLOBAL_VARIABLES,
                                       GraphKeys.LOCAL_VARIABLES)
                         for v in graph.get_collection(key) if id(v.op) in ops]
                with self._lock:
                    have = {id(v) for v in self._variables}
                    self._variables.extend(v for v in found if id(v) not in have)

    def _create_variable(self, next_creator, **kwargs):
        # TF2: with a partitioner, a variable of rank >= 1 split on its first
        # axis into more than one shard becomes a ShardedVariable.
        if self._variable_partitioner is None:
            return next_creator(**kwargs)
        value = kwargs.get("initial_value")
        if value is None:
            return next_creator(**kwargs)
        name = kwargs.get("name") or "Variable"
        graph = _ops.get_default_graph()
        with graph.name_scope(name) as scope, graph.device(None):
            value = _ops.convert_to_tensor(value() if callable(value) else value,
                                           dtype=kwargs.get("dtype"),
                                           name="initial_value")
        # Unsharded, the variable takes the name scope its initial value opened.
        whole = dict(kwargs, initial_value=value, name=scope)
        shape = value.shape
        if shape.rank == 0:
            return next_creator(**whole)
        if not shape.is_fully_defined():
            raise ValueError(f"ParameterServerStrategy: sharded variable {name} needs "
                             f"a fully defined shape, got {shape}")
        num = self._variable_partitioner(shape=shape, dtype=value.dtype.base_dtype)
        if not num or num[0] == 0 or any(n != 1 for n in num[1:]):
            raise ValueError("variable_partitioner must return a list/tuple whose "
                             "elements are 1 besides the first element (non-zero), "
                             f"got: {num!r}")
        num = min(int(num[0]), shape[0])
        if num == 1:
            return next_creator(**whole)
        full = shape.as_list()
        shards = []
        for i, (offset, part_shape) in enumerate(iter_slices(full, num, 0)):
            with graph.name_scope(scope), graph.device(None):
                part_value = value[offset[0]:offset[0] + part_shape[0]]
            kw = dict(kwargs, initial_value=part_value, name=f"{scope}part_{i}/")
            kw.pop("shape", None)
            shard = next_creator(**kw)
            shard._set_save_slice_info(SaveSliceInfo(scope[:-1], full, offset,
                                                     part_shape))
            shards.append(shard)
        return ShardedVariable(shards, name=scope[:-1])

    # -- running --------------------------------------------------------------------------
    def run(self, fn, args=(), kwargs=None, options=None):
        """Calls ``fn(*args, **kwargs)`` (inside a scheduled function: the one
        replica of the worker that runs it) and returns its result."""
        del options
        return fn(*args, **(kwargs or {}))

    def reduce(self, reduce_op, value, axis=None):
        """With one replica per step, the value itself."""
        del reduce_op, axis
        return value

    # -- datasets -------------------------------------------------------------------------
    def distribute_datasets_from_function(self, dataset_fn, options=None):
        """The dataset ``dataset_fn(input_context)`` for
        ``ClusterCoordinator.create_per_worker_dataset``, which puts a copy on
        every worker (as TF2's, one input pipeline per worker:
        ``input_context`` is ``InputContext(1, 0, 1)``; shard by worker inside
        ``dataset_fn`` if you want disjoint data).

        As TF's first ``ClusterCoordinator`` example::

            def per_worker_dataset_fn():
                return strategy.distribute_datasets_from_function(
                    lambda input_context: nd.data.Dataset.range(4).repeat())

            it = iter(coordinator.create_per_worker_dataset(per_worker_dataset_fn))
            coordinator.schedule(worker_fn, args=(it,))

        nbdist difference: the result is the ``nd.data.Dataset`` itself, built
        in the current graph (TF returns a ``DistributedDataset`` that is
        built once it reaches ``create_per_worker_dataset``); the coordinator
        runs it on the workers either way. ``options`` is accepted and unused.
        """
        del options
        if not callable(dataset_fn):
            raise TypeError("ParameterServerStrategy.distribute_datasets_from_function:"
                            " dataset_fn must be a callable taking an InputContext, "
                            f"got {type(dataset_fn).__name__}")
        context = InputContext(num_input_pipelines=1, input_pipeline_id=0,
                               num_replicas_in_sync=self.num_replicas_in_sync)
        dataset = dataset_fn(context)
        return _checked_dataset(dataset, "distribute_datasets_from_function: "
                                         "dataset_fn must return")

    experimental_distribute_datasets_from_function = distribute_datasets_from_function

    def experimental_distribute_dataset(self, dataset, options=None):
        """``dataset`` for ``ClusterCoordinator.create_per_worker_dataset``:
        every worker reads all of it (as TF2's ``ParameterServerStrategy``,
        with one input pipeline per worker). Returned as is (see
        ``distribute_datasets_from_function``); ``options`` is unused."""
        del options
        return _checked_dataset(dataset, "experimental_distribute_dataset: expected")

    def configure(self, session_config=None, cluster_spec=None, task_type=None,
                  task_id=None):
        """TF1: sets the task this strategy runs for (ops then default to its
        device) and narrows ``session_config.device_filters`` to it and the ps."""
        self.extended.configure(session_config, cluster_spec, task_type, task_id)

    def __deepcopy__(self, memo):
        # run_distribute_coordinator copies the strategy per task: share the
        # resolver, copy the configuration, not the variables' graphs.
        new = copy.copy(self)
        new._lock = threading.Lock()
        new._variables = []
        new._scope_depth = 0
        new._cluster_coordinator = None
        ext = copy.copy(self.extended)
        ext._strategy = new
        ext._ps_chooser = _RoundRobin(max(1, ext._num_ps))
        new.extended = ext
        return new

    def __repr__(self) -> str:
        e = self.extended
        return f"<ParameterServerStrategy ps={e._num_ps} workers={e._num_workers}>"


def _checked_dataset(dataset, what: str) -> Dataset:
    if not isinstance(dataset, Dataset):
        raise TypeError(f"ParameterServerStrategy.{what} an nd.data.Dataset, got "
                        f"{type(dataset).__name__}")
    return dataset


ParameterServerStrategyV2 = ParameterServerStrategy
