"""``ClusterCoordinator``: schedules functions on the workers of a
``ParameterServerStrategy`` cluster, as TF2's
``tf.distribute.experimental.coordinator.ClusterCoordinator``.

    >>> import nbdist as nd
    >>> from nbdist.distribute.strategies.parameter_server_strategy import (
    ...     ParameterServerStrategy)
    >>> with nd.LocalCluster(ps=1, workers=2, progress=False) as cluster:
    ...     strategy = ParameterServerStrategy(cluster.cluster_spec)
    ...     coordinator = ClusterCoordinator(strategy)
    ...     with strategy.scope():
    ...         v = nd.Variable(0, name="v")
    ...     @nd.function
    ...     def worker_fn():
    ...         return strategy.run(lambda: v.assign_add(1))
    ...     result = coordinator.schedule(worker_fn)
    ...     value = coordinator.fetch(result)
    ...     coordinator.close()
    >>> int(value)
    1

How it works. ``schedule`` traces the function once (on worker 0's slice of
its arguments) and queues a closure; the queue, the failure handling and the
fencing bookkeeping are the pure state machine of ``coordinator_state``
(events in, actions out); this module only feeds it events and carries out
its actions:

* one thread per worker (``WorkerClosureProcessingLoop-i``) runs what is
  dispatched to it with ``ConcreteFunction.run(worker_target, *args)``; when
  several closures of one function are queued, up to ``max_batch`` of them
  run as one step (``closure_batching``: the function graph imported once
  per closure into one graph, one RPC instead of several; functions that use
  iterators, queues, random ops or nested functions always run one per step);
* a heartbeat watcher (``ClusterCoordinator-Watcher``; it and the prober are
  in ``task_liveness``) polls the cluster's coordination service
  (``CoordinationClient.task_states()``) every 100 ms:
  a worker that stops heartbeating is failed and its closures run elsewhere;
  one that heartbeats again, or restarts, rejoins (its per-worker iterators
  rebuilt if it restarted); a ps that stops is an ``UnavailableError`` at the
  next ``schedule``/``join``/``done``;
* an RPC error of class Unavailable/Aborted/Cancelled/DeadlineExceeded
  puts the closure back at once and probes the worker (``GetStatus``) and
  then the ps tasks: dead ones are reported failed without waiting for the
  heartbeat timeout (no error message is parsed). A prober
  (``ClusterCoordinator-Prober``) retries failed tasks every 250 ms, and
  watches every task when the coordination service cannot be reached.

Fencing. Before a failed worker's closures run again elsewhere, its sessions
are deleted on every ps (``DeleteWorkerSession``): the ps aborts their
running steps and refuses later ones, so an attempt still in flight on a
worker that was only stopped or cut off cannot apply its updates once it
resumes. The same happens after a retryable RPC error on a worker (its
master may still be running the step) and when a worker restarts under us.
The worker's thread takes no dispatch made before the fence, makes its
master create a session before the first step in it (so a fence knows the
handle, read with ``Session.session_handle``), and closes fenced sessions
before its next step. Which worker to fence, its epochs and its open and
fenced sessions are ``CoordinatorState``'s (``Fence``, ``Admit`` ...); this
module deletes, opens and closes the sessions.

Semantics: at least once (a closure whose worker fails may have run, partly
or fully, before it runs again elsewhere), and nothing after: an attempt on a
worker declared failed either applied its updates on the ps before the
coordinator declared it failed, or never does; so once ``join()`` returns, no
scheduled function changes a ps variable any more (a ps that cannot be
reached for the fence is logged: it is down, or the guarantee lapses for the
steps it holds). A function's error is raised once
by the next ``schedule``/``join``/``done``, after the closures in flight have
finished, and the queued closures are cancelled (their ``RemoteValue`` is
ABORTED: ``fetch`` raises ``CancelledError``); closures batched in the same
step as the failing one count as in flight, are put back and so cancelled
(their side effects may have happened). A ps failure is raised at once, by
every call while a ps is down (its variables are lost: restore them).
Variables created in ``strategy.scope()`` are initialised on their ps (those
not initialised yet) at the next ``schedule``.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
import uuid
import weakref

import numpy as np

from nbdist import errors
from nbdist.distribute import recovery_events
from nbdist.distribute.coordinator import coordinator_state as cs
from nbdist.distribute.coordinator.closure_batching import (
    BatchedFunction,
    batchable,
    copy_index,
)
from nbdist.distribute.coordinator.task_liveness import TaskLiveness, task_name
from nbdist.distribute.coordinator.values import (
    PerWorkerResource,
    PerWorkerValues,
    RemoteValue,
)
from nbdist.distribute.data.data_ops import Dataset
from nbdist.distribute.tracing.function import ConcreteFunction, Function
from nbdist.distribute.tracing.function import function as _function
from nbdist.framework.nest import flatten, map_structure
from nbdist.framework.ops import Graph
from nbdist.ops.variables import is_variable_initialized
from nbdist.proto.config_pb2 import ConfigProto
from nbdist.runtime.coordination import leader_of
from nbdist.runtime.session import Session

__all__ = ["ClusterCoordinator", "PerWorkerDataset", "PerWorkerIterator"]

_log = logging.getLogger("nbdist.distribute.coordinator")

DEFAULT_MAX_BATCH = 16
_RETRYABLE = (errors.UnavailableError, errors.AbortedError, errors.CancelledError,
              errors.DeadlineExceededError)


def _session_config(*device_filters):
    return ConfigProto(device_filters=list(device_filters))


# -- payloads ---------------------------------------------------------------------------
class _Call:
    """What a closure runs: the traced function, its arguments, its future."""

    __slots__ = ("args", "concrete", "kwargs", "per_worker", "remote_value")

    def __init__(self, concrete, args, kwargs, per_worker, remote_value):
        self.concrete, self.args, self.kwargs = concrete, args, kwargs
        self.per_worker = per_worker
        self.remote_value = remote_value


class _IteratorResource:
    """A per-worker iterator: built on a worker by running its initializer
    there (the iterator op has no device: it lands on the session's task)."""

    def __init__(self, graph, iterator, values):
        self.graph = graph
        self.iterator = iterator
        self.values = values  # PerWorkerResource per worker


def _slice(structure, index: int):
    def pick(x):
        if isinstance(x, PerWorkerValues):
            x = x.values[index]
        if isinstance(x, PerWorkerResource):
            return x.handle
        return x

    return map_structure(pick, structure)


_SCALAR_TYPES = (bool, int, float, str, bytes, type(None))


def _signature_key(fn, args, kwargs):
    """A cheap cache key for ``fn``'s trace of these arguments when they are
    flat NumPy values, Python scalars or per-worker values (the same key
    ``Function`` would compute: dtype and shape, or the scalar's value);
    None otherwise (then ``Function.get_concrete_function`` decides)."""
    key = [id(fn)]
    for x in itertools.chain(args, kwargs.values()):
        t = type(x)
        if t is np.ndarray or isinstance(x, np.generic):
            key.append((x.dtype.str, x.shape))
        elif t in _SCALAR_TYPES:
            key.append((t, x))
        elif isinstance(x, PerWorkerValues):
            key.append(("per_worker", id(x)))
        else:
            return None
    if kwargs:
        key.append(tuple(kwargs))
    return tuple(key)


def _has_per_worker(structure) -> bool:
    for x in flatten(structure):
        if isinstance(x, PerWorkerValues):
            return True
        if isinstance(x, RemoteValue):
            raise ValueError(  # noqa: TRY004 - TF raises ValueError
                "ClusterCoordinator.schedule: a RemoteValue cannot be an argument of "
                "a scheduled function; fetch() it first")
    return False


class PerWorkerDataset(PerWorkerValues):
    """What ``create_per_worker_dataset`` returns: the dataset of every worker;
    ``iter()`` makes a ``PerWorkerValues`` of per-worker iterators (each a
    resource on its worker, found by shared name; rebuilt when its worker
    restarts)."""

    def __init__(self, coordinator, graph, dataset, num_workers):
        super().__init__([dataset] * num_workers)
        self._coordinator = coordinator
        self._graph = graph
        self._dataset = dataset

    def __iter__(self):
        return self._coordinator._make_per_worker_iterator(self)


class PerWorkerIterator(PerWorkerValues):
    """``iter()`` of a ``PerWorkerDataset``: one iterator per worker (a
    ``RemoteValue`` each: READY once built on its worker, ABORTED while the
    worker is down). Pass it to a scheduled function, which calls
    ``next()`` on it."""

    def __iter__(self):
        return self

    def __next__(self):
        raise TypeError("next() of a per-worker iterator works inside a scheduled "
                        "function: coordinator.schedule(fn, args=(iterator,))")


class ClusterCoordinator:
    """Schedules functions on the workers of ``strategy``'s cluster (see the
    module docstring). One coordinator per strategy (constructing another
    returns the same one until it is closed).

    ``max_batch``: how many queued closures of one function a worker may run
    as one step (1: one closure per step). ``coordination_target``: the
    coordination service to watch (default: the cluster's leader task).

    Guarantee: every scheduled function runs at least once, and none has an
    effect on the ps after ``join()`` returns: a step still in flight on a
    worker declared failed (stopped, cut off, restarted) is fenced off the ps
    before its closures run elsewhere (see "Fencing" in the module docstring).
    """

    def __new__(cls, strategy, *args, **kwargs):
        existing = getattr(strategy, "_cluster_coordinator", None)
        if existing is not None and not existing._closed:
            return existing
        return super().__new__(cls)

    def __init__(self, strategy, max_batch: int = DEFAULT_MAX_BATCH,
                 coordination_target: str | None = None):
        if getattr(self, "_initialized", False):
            return
        ext = getattr(strategy, "extended", None)
        spec = getattr(ext, "_cluster_spec", None)
        if spec is None or "worker" not in spec.jobs:
            raise ValueError("ClusterCoordinator needs a ParameterServerStrategy "
                             f"with a cluster, got {strategy!r}")
        self._strategy = strategy
        self._num_workers = spec.num_tasks("worker")
        self._num_ps = spec.num_tasks("ps") if "ps" in spec.jobs else 0
        self._worker_targets = [ext.task_target("worker", i)
                                for i in range(self._num_workers)]
        # As TF's strategy: a worker's sessions see only it and the ps tasks, so
        # creating one never waits for another (perhaps dead) worker.
        self._worker_configs = [_session_config(f"/job:worker/task:{i}", "/job:ps")
                                for i in range(self._num_workers)]
        ps_tasks = [task_name("ps", k) for k in range(self._num_ps)]
        addresses = {task_name(j, i): spec.task_address(j, i)
                     for j in ("worker", "ps") if j in spec.jobs
                     for i in range(spec.num_tasks(j))}
        if coordination_target is None:
            coordination_target = ext.task_target(*leader_of(spec))
        self._state = cs.CoordinatorState(self._num_workers, max_batch=max_batch)
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._waiters = 0
        self._closed = False
        self._ids = itertools.count(1)
        self._wrapped: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._traced: dict = {}  # _signature_key -> (concrete, batch key, ...)
        self._batched: dict = {}  # (id(concrete), k) -> BatchedFunction
        self._used: dict = {}  # id(concrete) -> concrete (sessions to release)
        self._vars_done = 0
        self._var_lock = threading.Lock()
        self._data_lock = threading.Lock()
        self._inboxes = [queue.SimpleQueue() for _ in range(self._num_workers)]
        # The failures and recoveries, as events the notebook views draw.
        self._story = recovery_events.CoordinatorStory(coordination_target)
        self._liveness = TaskLiveness(addresses, self._num_workers, ps_tasks,
                                      coordination_target, self._handle,
                                      self._failed_tasks)
        workers = [threading.Thread(target=self._worker_loop, args=(i,),
                                    name=f"WorkerClosureProcessingLoop-{i}",
                                    daemon=True)
                   for i in range(self._num_workers)]
        self._threads = workers + self._liveness.threads
        for t in workers:
            t.start()
        self._liveness.start()
        strategy._cluster_coordinator = self
        self._initialized = True

    # -- public API -----------------------------------------------------------------
    @property
    def strategy(self):
        return self._strategy

    @property
    def stats(self) -> dict:
        """Counters: scheduled, dispatched, steps, completed, failed,
        put_back, retried, cancelled, worker_failures, worker_recoveries,
        ps_failures."""
        with self._lock:
            return dict(self._state.stats)

    def schedule(self, fn, args=None, kwargs=None) -> RemoteValue:
        """Queues ``fn(*args, **kwargs)`` to run on some worker; returns its
        ``RemoteValue`` at once. ``fn`` is an ``nd.function`` (a plain Python
        function is wrapped in one); ``PerWorkerValues`` arguments are
        replaced by the running worker's value. Raises the pending error (a
        function's, once; or a ps failure's ``UnavailableError``). For example
        ``coordinator.schedule(step_fn, args=(per_worker_iterator,))``; see
        the module docstring for a runnable one.
        """
        if self._closed:
            raise RuntimeError("ClusterCoordinator is closed")
        args = tuple(args or ())
        kwargs = dict(kwargs or {})
        per_worker = _has_per_worker((args, kwargs))
        if not isinstance(fn, (Function, ConcreteFunction)):
            fn = self._wrap(fn)
        self._init_variables()
        sig = _signature_key(fn, args, kwargs)
        entry = self._traced.get(sig) if sig is not None else None
        if entry is None:
            if isinstance(fn, ConcreteFunction):
                concrete = fn
            elif per_worker:
                concrete = fn.get_concrete_function(*_slice(args, 0),
                                                    **_slice(kwargs, 0))
            else:
                concrete = fn.get_concrete_function(*args, **kwargs)
            entry = (concrete, id(concrete) if batchable(concrete) else None,
                     fn, args, kwargs)  # the objects keep the ids of sig alive
            self._used[id(concrete)] = concrete
            if sig is not None:
                self._traced[sig] = entry
        concrete, batch_key = entry[0], entry[1]
        rv = RemoteValue(concrete.name)
        closure = cs.Closure(next(self._ids), batch_key,
                             _Call(concrete, args, kwargs, per_worker, rv))
        self._call(cs.Schedule(closure))
        return rv

    def join(self):
        """Blocks until every scheduled function has run. Raises the first error
        of a function since the last raise (then cleared; queued functions are
        cancelled), or ``UnavailableError`` when a ps failed. Once it returns,
        no attempt of those functions changes a ps variable any more (fencing)."""
        self._call(cs.Join())

    def done(self) -> bool:
        """Whether every scheduled function has run (raises as ``join``)."""
        for a in self._call(cs.Done()):
            if isinstance(a, cs.DoneStatus):
                return a.done
        return False

    def fetch(self, val):
        """``val`` with every ``RemoteValue`` replaced by its fetched value
        (blocking), every ``PerWorkerValues`` by a tuple of them."""
        def one(x):
            if isinstance(x, PerWorkerValues):
                return tuple(one(v) for v in x.values)
            if isinstance(x, RemoteValue):
                return x.fetch()
            return x

        return map_structure(one, val)

    def create_per_worker_dataset(self, dataset_fn) -> PerWorkerDataset:
        """The dataset ``dataset_fn()`` (or a dataset given as is) on every
        worker; ``iter()`` of the result gives per-worker iterators, each
        created on its worker (by shared name) and rebuilt after the worker
        restarts. As TF advises, repeat the dataset and schedule a finite
        number of steps; variables cannot be created in ``dataset_fn``.
        """
        if isinstance(dataset_fn, PerWorkerDataset):
            return dataset_fn
        if isinstance(dataset_fn, Function):  # TF's docs decorate it: trace it here
            dataset_fn = dataset_fn._python_function
        if isinstance(dataset_fn, Dataset):
            ds = dataset_fn
            graph = ds._variant_tensor.graph
        else:
            graph = Graph()
            with graph.as_default():
                ds = dataset_fn()
            if not isinstance(ds, Dataset):
                raise TypeError("create_per_worker_dataset: dataset_fn must return an "
                                f"nd.data.Dataset, got {type(ds).__name__}")
            if graph.get_collection("variables") or graph.get_collection(
                    "local_variables"):
                raise ValueError("create_per_worker_dataset: dataset_fn must not "
                                 "create variables")
        return PerWorkerDataset(self, graph, ds, self._num_workers)

    def close(self):
        """Stops the coordinator's threads and closes its sessions (nbdist
        addition; TF's coordinator lives as long as its process)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._cond.notify_all()
        self._liveness.stop()
        for box in self._inboxes:
            box.put(None)
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout=0.5)
        for c in list(self._used.values()):
            for target in self._worker_targets:
                c.release(target)
        for b in list(self._batched.values()):
            b.release()
        self._liveness.close()
        if getattr(self._strategy, "_cluster_coordinator", None) is self:
            self._strategy._cluster_coordinator = None

    shutdown = close

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return (f"<ClusterCoordinator workers={self._num_workers} ps={self._num_ps}"
                f"{' closed' if self._closed else ''}>")

    # -- the state machine ------------------------------------------------------------
    def _apply(self, actions):
        """Carries out the non-blocking actions (called with the lock held)."""
        for a in actions:
            t = type(a)
            if t is cs.Dispatch:
                self._inboxes[a.worker].put(("run", a.closures, a.epoch))
            elif t is cs.Resolve:
                rv = a.closure.payload.remote_value
                if a.error is not None:
                    rv._set_error(a.error)
                else:
                    rv._set_value(a.value)
            elif t is cs.Cancel:
                a.closure.payload.remote_value._set_aborted(a.error)
            elif t is cs.BuildResources:
                self._inboxes[a.worker].put(("build", a.resources, None))
            elif t is cs.PutBack:
                _log.info("Put back %d closure(s) from worker %d (%s)",
                          len(a.closures), a.worker, a.reason)
            elif t is cs.AbortResources:
                err = errors.CancelledError(
                    None, None, f"Worker {a.worker} failed; its per-worker resource "
                    "will be rebuilt when it is back")
                for r in a.resources:
                    r.payload.values[a.worker]._set_aborted(err)
            elif t is cs.ResourcesReady:
                for r in a.resources:
                    rv = r.payload.values[a.worker]
                    rv._set_value(rv.handle)

    def _failed_tasks(self) -> tuple:
        """(failed worker indices, failed ps tasks), for the prober."""
        with self._lock:
            return self._state.failed_workers, sorted(self._state.failed_ps)

    def _handle(self, *events) -> list:
        # A worker about to be failed (or found restarted) is fenced first, and
        # takes no dispatch until the state machine has put its closures back.
        with self._lock:
            fenced = {w for w in map(self._state.must_fence, events) if w is not None}
        for w in fenced:
            self._fence(w, hold=True)
        out = []
        with self._lock:
            for w in fenced:
                self._state.handle(cs.FenceLifted(w))
            for ev in events:
                actions = self._state.handle(ev)
                self._apply(actions)
                out += actions
            if self._waiters:
                self._cond.notify_all()
        self._story.observe(events, out)
        return out

    # -- fencing (see the module docstring; the state is ``CoordinatorState``'s) -----
    def _fence(self, i: int, hold: bool = False):
        """Deletes worker i's sessions on the ps tasks; dispatches made before
        are refused, and (``hold``) any until the caller sends ``FenceLifted``."""
        with self._lock:
            actions = self._state.handle(cs.Fence(i))
        try:
            for a in actions:
                handles = [h for h in (s.session_handle for s in a.sessions) if h]
                if handles:
                    self._liveness.fence(handles)
        finally:
            if not hold:
                with self._lock:
                    self._state.handle(cs.FenceLifted(i))

    def _admit(self, i: int, epoch: int, session_of) -> bool:
        """Whether a dispatch of ``epoch`` may run on worker i (not if the worker
        was fenced since), in the session ``session_of()`` gives."""
        with self._lock:
            actions = self._state.handle(cs.ReleaseFenced(i))
        for a in actions:  # a closed session is replaced by its cache on get
            for s in a.sessions:
                s.close()
        sess = session_of()
        with self._lock:
            (answer,) = self._state.handle(cs.Admit(i, epoch, sess))
        if type(answer) is cs.OpenSession:
            if sess.session_handle is None:
                sess.run([])  # the master creates it now: a fence must know it
            with self._lock:
                (answer,) = self._state.handle(cs.SessionOpened(i, epoch, sess))
        return answer.ok

    def _call(self, event) -> list:
        """For schedule/join/done: handles ``event`` again after every change
        until it neither waits nor raises."""
        with self._lock:
            while True:
                if self._closed:
                    raise RuntimeError("ClusterCoordinator is closed")
                actions = self._state.handle(event)
                self._apply(actions)
                if self._waiters:
                    self._cond.notify_all()
                wait = False
                for a in actions:
                    if isinstance(a, cs.Raise):
                        raise a.error
                    if isinstance(a, cs.Wait):
                        wait = True
                if not wait:
                    return actions
                # Every change of the state (``_handle``) and ``close`` notify.
                self._waiters += 1
                try:
                    self._cond.wait()
                finally:
                    self._waiters -= 1

    # -- scheduling helpers -----------------------------------------------------------
    def _wrap(self, fn) -> Function:
        if not callable(fn):
            raise TypeError(f"ClusterCoordinator.schedule needs a callable, got {fn!r}")
        try:
            f = self._wrapped.get(fn)
        except TypeError:
            return _function(fn)
        if f is None:
            f = self._wrapped[fn] = _function(fn)
        return f

    def _init_variables(self):
        """Initialises, on their ps, the strategy's variables not yet initialised."""
        pending = getattr(self._strategy, "_variables", None)
        if not pending or len(pending) == self._vars_done:
            return
        with self._var_lock:
            new = pending[self._vars_done:]
            if not new:
                return
            by_graph: dict = {}
            for v in new:
                by_graph.setdefault(id(v.graph), (v.graph, []))[1].append(v)
            target = (self._strategy.extended.task_target("ps", 0) if self._num_ps
                      else self._worker_targets[0])
            config = _session_config("/job:ps") if self._num_ps else None
            for graph, vs in by_graph.values():
                with Session(target, graph=graph, config=config) as sess:
                    try:
                        with graph.as_default():
                            checks = [is_variable_initialized(v) for v in vs]
                        done = sess.run(checks)
                    except RuntimeError:  # a finalized graph: initialise all
                        done = [False] * len(vs)
                    todo = [v.initializer for v, d in zip(vs, done) if not d]
                    if todo:
                        sess.run(todo)
            self._vars_done += len(new)

    def _make_per_worker_iterator(self, pwd: PerWorkerDataset) -> PerWorkerIterator:
        with self._data_lock:
            name = f"nbdist_per_worker_{uuid.uuid4().hex[:8]}"
            with pwd._graph.as_default(), pwd._graph.device(None):
                it = pwd._dataset.make_initializable_iterator(shared_name=name,
                                                              name=name)
        values = [PerWorkerResource(it, f"{name} on worker {i}")
                  for i in range(self._num_workers)]
        res = cs.Resource(next(self._ids), _IteratorResource(pwd._graph, it, values))
        self._handle(cs.CreateResource(res))
        return PerWorkerIterator(values)

    # -- worker threads -----------------------------------------------------------------
    def _worker_loop(self, i: int):
        box = self._inboxes[i]
        while True:
            item = box.get()
            if item is None or self._closed:
                return
            kind, payload, epoch = item
            try:
                if kind == "run":
                    events = self._run_closures(i, payload, epoch)
                else:
                    events = self._build_resources(i, payload)
            except Exception as e:  # noqa: BLE001 - never let the loop die
                _log.exception("WorkerClosureProcessingLoop-%d failed", i)
                events = ([cs.ClosureFailed(c.id, i, e, False) for c in payload]
                          if kind == "run" else
                          [cs.ResourceBuildFailed(i, tuple(r.id for r in payload), e,
                                                  False)])
            if self._closed:
                return
            self._handle(*events, cs.WorkerReady(i))

    def _run_closures(self, i: int, closures, epoch: int) -> list:
        target = self._worker_targets[i]
        config = self._worker_configs[i]
        call = closures[0].payload
        try:
            if len(closures) == 1:
                args, kwargs = call.args, call.kwargs
                if call.per_worker:
                    args, kwargs = _slice(args, i), _slice(kwargs, i)
                if not self._admit(i, epoch, lambda: call.concrete.session(
                        target, config)):  # cached: made with config
                    return self._refused(i, closures)
                return [cs.ClosureDone(closures[0].id, i,
                                       call.concrete.run(target, *args, **kwargs))]
            concrete = call.concrete
            b = self._batched.get((id(concrete), len(closures)))
            if b is None or b.concrete is not concrete:
                b = self._batched[(id(concrete), len(closures))] = BatchedFunction(
                    concrete, len(closures))
            if not self._admit(i, epoch, lambda: b.session(target, config)):
                return self._refused(i, closures)
            values = []
            for c in closures:
                p = c.payload
                args, kwargs = p.args, p.kwargs
                if p.per_worker:
                    args, kwargs = _slice(args, i), _slice(kwargs, i)
                values.append(concrete._tensor_args(args, kwargs))
            outs = b.run(target, config, values)
            return [cs.ClosureDone(c.id, i, v) for c, v in zip(closures, outs)]
        except _RETRYABLE as e:
            # The worker's master may still be running the step: fenced before
            # the closures go elsewhere.
            self._fence(i)
            self._check(i, e, self._handle(
                *[cs.ClosureFailed(c.id, i, e, True) for c in closures]))
            return []
        except Exception as e:  # noqa: BLE001 - the function's own error
            j = copy_index(e, len(closures)) if isinstance(e, errors.OpError) else None
            j = 0 if j is None else j
            # The failing closure first (it becomes the pending error); the
            # others of its step are put back, and cancelled when it is raised.
            return ([cs.ClosureFailed(closures[j].id, i, e, False)]
                    + [cs.ClosureFailed(c.id, i, e, True)
                       for k, c in enumerate(closures) if k != j])

    def _check(self, i: int, error, actions):
        """Probes worker i after ``error`` when the state machine asks: not
        for a run it had taken back already (a worker declared failed, maybe
        restarted since: its old call's error says nothing of it now)."""
        if any(type(a) is cs.CheckWorker for a in actions):
            self._liveness.after_task_error(i, error)

    @staticmethod
    def _refused(i: int, closures) -> list:
        err = errors.AbortedError(None, None, f"Worker {i} was declared failed after "
                                  "this step was dispatched to it")
        return [cs.ClosureFailed(c.id, i, err, True) for c in closures]

    def _build_resources(self, i: int, resources) -> list:
        target = self._worker_targets[i]
        ids = tuple(r.id for r in resources)
        try:
            for r in resources:
                with Session(target, graph=r.payload.graph,
                             config=self._worker_configs[i]) as sess:
                    sess.run(r.payload.iterator.initializer)
        except _RETRYABLE as e:
            self._check(i, e, self._handle(cs.ResourceBuildFailed(i, ids, e, True)))
            return []
        except errors.OpError as e:
            return [cs.ResourceBuildFailed(i, ids, e, False)]
        return [cs.ResourcesBuilt(i, ids)]
