"""``run_distribute_coordinator``: runs a ``worker_fn`` once per task of a
cluster, as TensorFlow's ``distribute_coordinator.py`` does.

Modes (``CoordinatorMode``):

- ``STANDALONE_CLIENT`` (default): this process is the client. With a
  between-graph strategy it runs ``worker_fn`` in one thread per chief/worker
  task, each under its own worker context (``get_current_worker_context()``)
  whose ``master_target`` is that task's server; with an in-graph strategy it
  runs it once, against chief 0 (else worker 0). A process whose ``task_type``
  is a cluster task (not ``None``/"client") starts a standard server and joins.
- ``INDEPENDENT_WORKER``: every task runs this; each starts its standard
  server, then the chief and workers run ``worker_fn`` (in-graph: the chief
  only), the evaluator runs ``eval_fn`` and a ps serves until stopped.

An "evaluator" task runs ``eval_fn`` (default ``worker_fn``) with
``eval_strategy``, on its own: its server's cluster holds only itself, and the
other tasks' clusters drop it.

The cluster comes from ``cluster_spec`` or ``TF_CONFIG`` (``cluster``,
``task.type``, ``task.index``, ``rpc_layer``, ``environment``), read as
TensorFlow reads it: ``rpc_layer`` of ``TF_CONFIG`` overrides the argument, and
``task`` is used only when the cluster comes from ``TF_CONFIG``.

In a STANDALONE_CLIENT, ``wait_for_other_workers()`` is a barrier of the
cluster's coordination service (``/job:chief`` and ``/job:worker`` tasks) that
the task threads share; its arrivals and passes are events of the service. As
in TF, an INDEPENDENT_WORKER's context has no barrier (``has_barrier`` is False,
the call returns at once), and an evaluator's ``master_target`` is ``""``: it
evaluates in its own process (it starts no server). When one ``worker_fn`` of a STANDALONE_CLIENT fails,
the others are released from the barrier with ``CancelledError`` and the first
error is raised.

``strategy``: ``None`` (or an object without ``extended.experimental_between_graph``)
means between-graph replication where only the chief initialises, checkpoints
and writes summaries (``BetweenGraphStrategy``). Any object with
``extended.experimental_between_graph``, ``extended.experimental_should_init``,
``extended.should_checkpoint``, ``extended.should_save_summary`` and
``configure(session_config, cluster_spec, task_type, task_id)`` is used as
TensorFlow uses it: copied per task and configured.

>>> import nbdist as nd
>>> from nbdist.distribute.strategies.distribute_coordinator import (
...     run_distribute_coordinator)
>>> from nbdist.distribute.strategies.distribute_coordinator_context import (
...     get_current_worker_context)
>>> def worker_fn(strategy):
...     ctx = get_current_worker_context()
...     return ctx.master_target, ctx.is_chief, ctx.num_workers
>>> run_distribute_coordinator(worker_fn, None)  # no cluster: local training
('', True, 0)
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from nbdist.runtime import env
from nbdist.distribute.worker_context import BetweenGraphStrategy
from nbdist.distribute.worker_context import TaskType as _TaskType
from nbdist.distribute.worker_context import WorkerContext as _WorkerContext
from nbdist.distribute.worker_context import is_chief as _is_chief  # noqa: F401
from nbdist.proto import cluster_pb2, config_pb2
from nbdist.runtime import transports
from nbdist.runtime.cluster_spec import ClusterSpec, task_device
from nbdist.runtime.coordination import target_of
from nbdist.runtime.server_lib import Server
from nbdist.train.coordinator import Coordinator

__all__ = [
    "DEFAULT_BARRIER_TIMEOUT_S",
    "WORKER_BARRIER_ID",
    "BetweenGraphStrategy",
    "CoordinatorMode",
    "run_distribute_coordinator",
    "run_standard_server",
    "run_standard_tensorflow_server",
]

_log = logging.getLogger("nbdist.distribute")

DEFAULT_BARRIER_TIMEOUT_S = 3600.0
WORKER_BARRIER_ID = "distribute_coordinator/wait_for_other_workers"

_thread_local = threading.local()


class CoordinatorMode:
    """How ``run_distribute_coordinator`` runs."""

    # A standalone client drives remote standard servers (one thread per task
    # in between-graph replication).
    STANDALONE_CLIENT = "standalone_client"
    # Every task runs the coordinator: it starts a standard server and, on the
    # chief and workers, runs ``worker_fn`` against it.
    INDEPENDENT_WORKER = "independent_worker"


def _speaks_protocol(strategy) -> bool:
    extended = getattr(strategy, "extended", None)
    return extended is not None and hasattr(extended, "experimental_between_graph")


def _configured(strategy, session_config, cluster_spec, task_type, task_id):
    """(what ``worker_fn`` receives, the object whose flags the context reads)."""
    if strategy is None:
        if task_type == _TaskType.EVALUATOR:
            flags = BetweenGraphStrategy()
            flags.configure(session_config)
            return None, flags.extended
        strategy = BetweenGraphStrategy()
    if _speaks_protocol(strategy):
        strategy = copy.deepcopy(strategy)
        if task_type == _TaskType.EVALUATOR:
            strategy.configure(session_config)
        else:
            strategy.configure(session_config, cluster_spec, task_type, task_id)
        return strategy, strategy.extended
    flags = BetweenGraphStrategy()
    if task_type == _TaskType.EVALUATOR:
        flags.configure(session_config)
    else:
        flags.configure(session_config, cluster_spec, task_type, task_id)
    return strategy, flags.extended


def _between_graph(strategy) -> bool:
    if not _speaks_protocol(strategy):
        return True
    return bool(strategy.extended.experimental_between_graph)


# -- cluster helpers -----------------------------------------------------------------
def _normalize_cluster_spec(cluster_spec) -> ClusterSpec:
    """As TF's ``multi_worker_util.normalize_cluster_spec``."""
    if isinstance(cluster_spec, (dict, cluster_pb2.ClusterDef)):
        return ClusterSpec(cluster_spec)
    if not isinstance(cluster_spec, ClusterSpec):
        raise ValueError(  # noqa: TRY004 - TF raises ValueError here
            "`cluster_spec' should be dict or a `nd.train.ClusterSpec` "
            "or a `nd.train.ClusterDef` object")
    return cluster_spec


def _split_cluster_for_evaluator(cluster_spec, task_type) -> ClusterSpec:
    """The evaluator's cluster is itself only; the others' clusters drop it, so
    unplaced evaluator ops never land on training tasks."""
    new = _normalize_cluster_spec(cluster_spec).as_dict()
    if task_type == _TaskType.EVALUATOR:
        assert _TaskType.EVALUATOR in new
        new = {_TaskType.EVALUATOR: new[_TaskType.EVALUATOR]}
    else:
        new.pop(_TaskType.EVALUATOR, None)
    return _normalize_cluster_spec(new)


def _worker_tasks(cluster_spec) -> list[str]:
    """The canonical names of the chief and worker tasks (barrier participants)."""
    out = []
    for job in (_TaskType.CHIEF, _TaskType.WORKER):
        if job in cluster_spec.jobs:
            out += [task_device(job, i) for i in cluster_spec.task_indices(job)]
    return out


def _coordination_client(cluster_spec, session_config, target=None):
    """A client of the coordination service of the training cluster."""
    if target is None:
        target = target_of(_split_cluster_for_evaluator(cluster_spec, _TaskType.CHIEF))
    return transports.connect_coordination(target, config=session_config)


class _WorkerBarrier:
    """``wait_for_other_workers``: a barrier of the coordination service shared by
    every chief/worker task (threads of one client, or separate processes)."""

    def __init__(self, client, participants, barrier_id=WORKER_BARRIER_ID,
                 should_cancel=None, timeout_s: float = DEFAULT_BARRIER_TIMEOUT_S):
        self.client = client
        self.participants = list(participants)
        self.barrier_id = barrier_id
        self._should_cancel = should_cancel
        self.timeout_s = timeout_s

    def wait(self, task: str, timeout_s: float | None = None) -> int:
        return self.client.barrier(
            self.barrier_id, self.timeout_s if timeout_s is None else timeout_s,
            self.participants, source_task=task, should_cancel=self._should_cancel)


# -- running -------------------------------------------------------------------------
def _run_single_worker(worker_fn, strategy, cluster_spec, task_type, task_id,
                       session_config, rpc_layer="", worker_barrier=None, coord=None):
    """Calls ``worker_fn(strategy)`` under the task's worker context."""
    session_config = copy.deepcopy(session_config)
    strategy, extended = _configured(strategy, session_config, cluster_spec,
                                     task_type, task_id)
    context = _WorkerContext(strategy, cluster_spec, task_type, task_id,
                             session_config=session_config, rpc_layer=rpc_layer,
                             worker_barrier=worker_barrier, extended=extended)
    with context:
        if coord:
            with coord.stop_on_exception():
                return worker_fn(strategy)
            return None  # the error went to coord; join raises it
        return worker_fn(strategy)


class _FakeServer:
    """``environment == "google"``: a remote session starts the server."""

    def __init__(self, target, session_config):
        self.target = target
        self._config = session_config
        self._stopped = threading.Event()

    def start(self):
        from nbdist.runtime.session import Session

        _log.info("Creating a remote session to start a server, target = %r", self.target)
        Session(target=self.target, config=self._config)

    def join(self):
        """Blocks until ``stop()`` (the server itself lives in another process)."""
        # In slices: Ctrl-C may reach another thread first, and Python raises
        # KeyboardInterrupt only when the main thread next wakes.
        while not self._stopped.wait(0.25):
            pass

    def stop(self):
        self._stopped.set()


def _run_std_server(cluster_spec=None, task_type=None, task_id=None,
                    session_config=None, rpc_layer=None, environment=None):
    """Starts (once per thread) the standard server of this task."""
    if getattr(_thread_local, "server", None) is not None:
        assert _thread_local.cluster_spec == cluster_spec
        assert _thread_local.task_type == task_type
        assert _thread_local.task_id == task_id
        assert _thread_local.session_config_str == repr(session_config)
        assert _thread_local.rpc_layer == rpc_layer
        assert _thread_local.environment == environment
        return _thread_local.server
    _thread_local.server_started = True
    _thread_local.cluster_spec = cluster_spec
    _thread_local.task_type = task_type
    _thread_local.task_id = task_id
    _thread_local.session_config_str = repr(session_config)
    _thread_local.rpc_layer = rpc_layer
    _thread_local.environment = environment

    assert cluster_spec
    target = cluster_spec.task_address(task_type, task_id)
    if rpc_layer:
        target = rpc_layer + "://" + target
    if environment == "google":
        server = _FakeServer(target, session_config)
    else:
        _log.info("Starting standard server, target = %r", target)
        cluster_spec = _split_cluster_for_evaluator(cluster_spec, task_type)
        server = Server(cluster_spec, job_name=task_type, task_index=task_id,
                        config=session_config, protocol=rpc_layer)
    server.start()
    _thread_local.server = server
    return server


class _TaskThreads:
    """The threads a standalone client runs its tasks in, under one
    ``Coordinator``: ``join`` wakes when the last one ends or one fails."""

    def __init__(self, coord):
        self.coord = coord
        self.threads: list[threading.Thread] = []
        self._ended = threading.Condition()
        self._running = 0

    def start(self, name, *args, **kwargs):
        """``_run_single_worker(*args, **kwargs, coord=...)`` in a new thread."""
        t = threading.Thread(target=self._run, name=name, args=args,
                             kwargs={**kwargs, "coord": self.coord}, daemon=True)
        with self._ended:
            self._running += 1
        self.threads.append(t)
        t.start()

    def start_evaluator(self, cluster_spec, eval_fn, eval_strategy, session_config,
                        rpc_layer):
        """The evaluator's thread, when the cluster has one."""
        if _TaskType.EVALUATOR in cluster_spec.jobs:
            self.start("distribute_coordinator-evaluator-0", eval_fn, eval_strategy,
                       cluster_spec, _TaskType.EVALUATOR, 0, session_config,
                       rpc_layer=rpc_layer)

    def _run(self, *args, **kwargs):
        try:
            _run_single_worker(*args, **kwargs)
        finally:
            with self._ended:
                self._running -= 1
                self._ended.notify_all()

    def join(self):
        """Waits for every thread, or for the first failure (a failing thread
        requests a stop before it ends); then ``coord.join`` gives the others
        its grace period and raises the first error."""
        with self._ended:
            self._ended.wait_for(
                lambda: not self._running or self.coord.should_stop())
        if not self.coord.should_stop():
            for t in self.threads:  # all past their last line: no wait
                t.join()
        self.coord.join(self.threads)


def _run_between_graph_client(worker_fn, strategy, eval_fn, eval_strategy,
                              cluster_spec, session_config, rpc_layer):
    """One thread per chief/worker task (and one for the evaluator)."""
    tasks = _TaskThreads(Coordinator())
    tasks.start_evaluator(cluster_spec, eval_fn, eval_strategy, session_config,
                          rpc_layer)
    client = _coordination_client(cluster_spec, session_config)
    barrier = _WorkerBarrier(client, _worker_tasks(cluster_spec),
                             should_cancel=tasks.coord.should_stop)
    try:
        for task_type in (_TaskType.CHIEF, _TaskType.WORKER):
            for task_id in range(len(cluster_spec.as_dict().get(task_type, []))):
                tasks.start(f"distribute_coordinator-{task_type}-{task_id}",
                            worker_fn, strategy, cluster_spec, task_type, task_id,
                            session_config, rpc_layer=rpc_layer,
                            worker_barrier=barrier)
        tasks.join()
    finally:
        client.close()


def _run_in_graph_client(worker_fn, strategy, eval_fn, eval_strategy, cluster_spec,
                         session_config, rpc_layer):
    """One call of ``worker_fn`` against chief 0 (else worker 0)."""
    tasks = _TaskThreads(Coordinator())
    tasks.start_evaluator(cluster_spec, eval_fn, eval_strategy, session_config,
                          rpc_layer)
    result = _run_single_worker(worker_fn, strategy, cluster_spec, None, None,
                                session_config, rpc_layer=rpc_layer,
                                coord=tasks.coord)
    if tasks.threads:
        tasks.join()
    return result


def _configure_session_config_for_std_servers(strategy, eval_strategy, session_config,
                                              cluster_spec, task_type, task_id):
    """Lets the strategy configure the server's default session config, then
    strips ``device_filters`` so servers can serve any strategy."""
    if task_type == _TaskType.EVALUATOR:
        if eval_strategy is not None and hasattr(eval_strategy, "configure"):
            eval_strategy.configure(session_config=session_config)
    elif strategy is not None and _speaks_protocol(strategy):
        strategy = copy.deepcopy(strategy)
        strategy.configure(session_config=session_config, cluster_spec=cluster_spec,
                           task_type=task_type, task_id=task_id)
    del session_config.device_filters[:]


def run_standard_tensorflow_server(session_config=None):
    """Starts this task's standard server from ``TF_CONFIG`` (``cluster``,
    ``task.type``, ``task.index``, ``rpc_layer`` default "grpc") and returns it,
    started.

    Raises:
      ValueError: if ``TF_CONFIG`` lacks ``cluster``, ``task`` or ``task.type``,
        or the cluster has neither a chief nor a worker job.
    """
    tf_config = env.tf_config()
    if "cluster" not in tf_config:
        raise ValueError('"cluster" is not found in TF_CONFIG.')
    cluster_spec = _normalize_cluster_spec(tf_config["cluster"])
    if "task" not in tf_config:
        raise ValueError('"task" is not found in TF_CONFIG.')
    task_env = tf_config["task"]
    if "type" not in task_env:
        raise ValueError('"task_type" is not found in the `task` part of TF_CONFIG.')
    task_type = task_env["type"]
    task_id = int(task_env.get("index", 0))
    rpc_layer = tf_config.get("rpc_layer", "grpc")
    session_config = session_config or config_pb2.ConfigProto()
    # TF sets experimental.collective_group_leader here; nbdist has no
    # collectives yet, but the cluster must still have a chief or a worker.
    if "chief" not in cluster_spec.jobs and "worker" not in cluster_spec.jobs:
        raise ValueError("You must have `chief` or `worker` jobs in the `cluster_spec`.")
    server = _run_std_server(cluster_spec=cluster_spec, task_type=task_type,
                             task_id=task_id, session_config=session_config,
                             rpc_layer=rpc_layer)
    server.start()
    return server


run_standard_server = run_standard_tensorflow_server


# -- the steps of run_distribute_coordinator -----------------------------------------
@dataclasses.dataclass
class _Run:
    """What ``run_distribute_coordinator`` runs, its cluster resolved."""

    worker_fn: Callable
    strategy: Any
    eval_fn: Callable | None
    eval_strategy: Any
    cluster_spec: ClusterSpec | None
    task_type: str | None
    task_id: int | None
    session_config: config_pb2.ConfigProto
    rpc_layer: str
    environment: str | None


def _resolve_cluster(strategy, cluster_spec, task_type, task_id, rpc_layer):
    """``(cluster_spec, task_type, task_id, rpc_layer, environment)`` from the
    arguments, ``TF_CONFIG`` or the strategy's cluster resolver, as TF reads them."""
    tf_config = env.tf_config()
    rpc_layer = tf_config.get("rpc_layer", rpc_layer)
    environment = tf_config.get("environment", None)
    if not cluster_spec:
        cluster_spec = tf_config.get("cluster", {})
        task_env = tf_config.get("task", {})
        if task_env:
            task_type = task_env.get("type", task_type)
            index = task_env.get("index", task_id)
            task_id = int(index) if index is not None else None
    extended = getattr(strategy, "extended", None)
    if cluster_spec:
        cluster_spec = _normalize_cluster_spec(cluster_spec)
    elif hasattr(extended, "_cluster_resolver"):
        resolver = extended._cluster_resolver
        task_type = resolver.task_type
        task_id = resolver.task_id
        rpc_layer = resolver.rpc_layer or rpc_layer
        environment = resolver.environment
        cluster_spec = resolver.cluster_spec()
    return cluster_spec, task_type, task_id, rpc_layer, environment


def _run_local(run: _Run):
    """No cluster: ``worker_fn`` (then ``eval_fn``) in this process."""
    result = _run_single_worker(run.worker_fn, run.strategy, None, None, None,
                                run.session_config, run.rpc_layer)
    if run.eval_fn:
        _run_single_worker(run.eval_fn, run.eval_strategy, None, None, None,
                           run.session_config, run.rpc_layer)
    return result


def _start_std_server(run: _Run):
    """This task's standard server, its session config set by the strategy."""
    _configure_session_config_for_std_servers(run.strategy, run.eval_strategy,
                                              run.session_config, run.cluster_spec,
                                              run.task_type, run.task_id)
    return _run_std_server(cluster_spec=run.cluster_spec, task_type=run.task_type,
                           task_id=run.task_id, session_config=run.session_config,
                           rpc_layer=run.rpc_layer, environment=run.environment)


def _run_standalone_client(run: _Run):
    """A client drives the tasks' servers; a cluster task serves until stopped."""
    if run.task_type in (_TaskType.CLIENT, None):
        client = (_run_between_graph_client if _between_graph(run.strategy)
                  else _run_in_graph_client)
        return client(run.worker_fn, run.strategy, run.eval_fn, run.eval_strategy,
                      run.cluster_spec, run.session_config, run.rpc_layer)
    _start_std_server(run).join()
    return None


def _run_independent_worker(run: _Run):
    """This task starts its server, then runs its part: ``worker_fn`` on the
    chief and workers (in-graph: the chief only), ``eval_fn`` on the evaluator;
    the others serve until stopped."""
    task_type, task_id, cluster_spec = run.task_type, run.task_id, run.cluster_spec
    extended = getattr(run.strategy, "extended", None)
    if task_type != _TaskType.EVALUATOR and not getattr(
            extended, "_std_server_started", False):
        server = _start_std_server(run)
    else:
        server = None
        _configure_session_config_for_std_servers(
            run.strategy, run.eval_strategy, run.session_config, cluster_spec,
            task_type, task_id)
    if task_type in (_TaskType.CHIEF, _TaskType.WORKER):
        if _between_graph(run.strategy):  # as TF: no barrier between processes
            return _run_single_worker(run.worker_fn, run.strategy, cluster_spec,
                                      task_type, task_id, run.session_config,
                                      run.rpc_layer)
        context = _WorkerContext(run.strategy, cluster_spec, task_type, task_id)
        if context.is_chief:
            return _run_single_worker(run.worker_fn, run.strategy, cluster_spec, None,
                                      None, run.session_config, run.rpc_layer)
    elif task_type == _TaskType.EVALUATOR:
        return _run_single_worker(run.eval_fn, run.eval_strategy, cluster_spec,
                                  task_type, task_id, run.session_config,
                                  run.rpc_layer)
    elif task_type != _TaskType.PS:
        raise ValueError(f"Unexpected task_type: {task_type!r}")
    if server is not None:
        server.join()
    return None


def run_distribute_coordinator(worker_fn, strategy, eval_fn=None, eval_strategy=None,
                               mode=CoordinatorMode.STANDALONE_CLIENT,
                               cluster_spec=None, task_type=None, task_id=None,
                               session_config=None, rpc_layer="grpc"):
    """Runs ``worker_fn(strategy)`` for the tasks of a cluster (see the module
    docstring).

    Args:
      worker_fn: called with the (copied, configured) strategy under a worker
        context (``get_current_worker_context()``).
      strategy: a strategy (see the module docstring), or None for
        between-graph replication.
      eval_fn: run by the "evaluator" task; default ``worker_fn``.
      eval_strategy: the evaluator's strategy (None: none).
      mode: ``CoordinatorMode.STANDALONE_CLIENT`` or ``INDEPENDENT_WORKER``.
      cluster_spec: a dict, ``ClusterDef`` or ``ClusterSpec``; default
        ``TF_CONFIG``'s ``cluster``; empty: local training.
      task_type, task_id: this process's task (None for a standalone client).
      session_config: a ``ConfigProto``; default ``allow_soft_placement=True``.
      rpc_layer: the protocol of master targets ("grpc").

    Returns:
      ``worker_fn``'s result in in-graph replication and INDEPENDENT_WORKER
      mode; None for a between-graph standalone client.

    Raises:
      ValueError: for a bad ``cluster_spec``, ``mode`` or ``task_type``.
    """
    cluster_spec, task_type, task_id, rpc_layer, environment = _resolve_cluster(
        strategy, cluster_spec, task_type, task_id, rpc_layer)
    run = _Run(worker_fn, strategy, eval_fn, eval_strategy, cluster_spec, task_type,
               task_id, session_config or config_pb2.ConfigProto(
                   allow_soft_placement=True), rpc_layer, environment)
    if not cluster_spec:
        _log.info("Running local Distribute Coordinator.")
        return _run_local(run)
    _log.info("Running Distribute Coordinator with mode = %r, cluster_spec = %s, "
              "task_type = %r, task_id = %r, environment = %r, rpc_layer = %r",
              mode, json.dumps(cluster_spec.as_dict()), task_type, task_id,
              environment, rpc_layer)
    run.eval_fn = eval_fn or worker_fn
    if mode == CoordinatorMode.STANDALONE_CLIENT:
        return _run_standalone_client(run)
    if mode != CoordinatorMode.INDEPENDENT_WORKER:
        raise ValueError(f"Unexpected coordinator mode: {mode!r}")
    return _run_independent_worker(run)
