"""The master (``interfaces.MasterInterface``, in process): sessions over a
cluster's workers, placement, partitioning and running steps. ``Session("")``
uses it with one in-process worker; a server uses it with its own worker in
process and the others through its transport's worker clients.
"""

from __future__ import annotations

import concurrent.futures as futures
import itertools
import random
import threading
from typing import NamedTuple

import numpy as np

from nbdist import errors
from nbdist.executor.limits import array_nbytes, check_graph_def, check_tensor
from nbdist.framework.device import DeviceSpec
from nbdist.framework.importer import infer_specs, parse_input, topological_order
from nbdist.proto import config_pb2, server_def_pb2, step_stats_pb2
from nbdist.runtime.cost_graph import cost_model_due, fill_cost_graph
from nbdist.runtime.device_attributes import device_type_of
from nbdist.runtime.interfaces import WorkerInterface
from nbdist.runtime.partition import normalize_tensor_name, partition, prune, task_of
from nbdist.runtime.placement import colocation_names, place
from nbdist.runtime.reply_watch import ReplyWatch
from nbdist.runtime.service.feeds import FeedCheck, feed_checks
from nbdist.runtime.timeouts import seconds_from_ms, whole_ms
from nbdist.runtime.worker import propagated_addresses

_pool = futures.ThreadPoolExecutor(max_workers=64, thread_name_prefix="nbdist-step")
# Peers started at the same time may take a while on a busy machine (TF waits
# forever); a task still silent after this is named in the error.
_DISCOVERY_TIMEOUT_S = 60.0
_FAILED = object()  # a partition that could not even be started
_reply_watch = ReplyWatch()


def _matches_filter(task: str, filters) -> bool:
    if not filters:
        return True
    t = DeviceSpec.from_string(task)
    for f in filters:
        s = DeviceSpec.from_string(f)
        if (s.job is None or s.job == t.job) and (s.task is None or s.task == t.task):
            return True
    return False


class PlanPart(NamedTuple):
    """One task's share of a step: its partition, registered with its worker."""

    task: str
    worker: WorkerInterface
    graph_handle: str
    feeds: tuple[str, ...]  # feed names this partition takes
    fetches: tuple[str, ...]  # fetch keys it returns
    graph_def: object  # the partition's GraphDef (for RunMetadata)


class Plan(NamedTuple):
    """How to run one (feeds, fetches, targets) signature: a part per task."""

    parts: tuple[PlanPart, ...]
    checks: tuple[FeedCheck, ...] = ()  # what each fed value must be

    @property
    def single(self) -> bool:
        return len(self.parts) == 1


class MasterSession:
    def __init__(self, master: Master, handle: str, config: config_pb2.ConfigProto,
                 workers: dict, devices: list[str], incarnations: dict,
                 task_name: str | None = None):
        self.master = master
        self.handle = handle
        # The master's task as this session names it (a propagated cluster
        # may name it differently from its server).
        self.task_name = task_name or master.task_name
        self.config = config
        self.workers = workers  # task -> worker interface
        self.devices = devices
        self.incarnations = incarnations
        self.lock = threading.Lock()
        self.order: list[str] = []
        self.by_name: dict = {}
        self.specs: dict = {}
        self.consts: dict = {}
        self.placement: dict[str, str] = {}
        self.version = 0
        self.plans: dict = {}
        self.runs_of: dict = {}  # signature -> steps run (for build_cost_model)
        self.registered: list[tuple] = []
        self.closed = False
        self.running: dict[int, Plan] = {}

    def extend(self, graph_def):
        nodes = list(graph_def.node)
        for n in nodes:
            if n.name in self.by_name:
                raise errors.InvalidArgumentError(
                    None, n.name, f"Node '{n.name}' already exists in the session's "
                    "graph (ExtendSession may only add nodes)")
        merged = dict(self.by_name)
        for n in nodes:
            merged[n.name] = n
            colocation_names(n)  # text, or InvalidArgument naming the node
        try:
            ordered = topological_order(nodes if not self.by_name else
                                        [merged[k] for k in self.order] + nodes)
            new = [n for n in ordered if n.name not in self.by_name]
            specs = infer_specs(new, dict(self.specs), self.consts)
        except ValueError as e:
            raise errors.InvalidArgumentError(None, None, str(e)) from None
        cfg = self.config
        if cfg.graph_options.place_pruned_graph:
            # As TF: each step places the nodes it needs (see _place_pruned).
            placement = dict(self.placement)
        else:
            placement = place([merged[n.name] for n in ordered], self.devices,
                              self.task_name,
                              allow_soft_placement=cfg.allow_soft_placement,
                              log_device_placement=False)
            # Existing assignments are kept (a new colocated node joins them).
            for name, dev in self.placement.items():
                placement[name] = dev
            if cfg.log_device_placement:
                for n in new:
                    print(f"{n.name}: ({n.op}): {placement[n.name]}", flush=True)
        self.by_name = merged
        self.order = [n.name for n in ordered]
        self.specs = specs
        self.placement = placement
        self.version += len(nodes)
        return self.version

    def plan(self, feeds: tuple, fetches: tuple, targets: tuple) -> Plan:
        key = (feeds, fetches, targets)
        p = self.plans.get(key)
        if p is not None:
            return p
        with self.lock:
            p = self.plans.get(key)
            if p is not None:
                return p
            for name in feeds + fetches:
                src, idx = parse_input(name)
                if src not in self.by_name or f"{src}:{idx}" not in self.specs:
                    raise errors.NotFoundError(
                        None, src, f"Tensor {name} is not in the session's graph")
            for t in targets:
                if t not in self.by_name:
                    raise errors.NotFoundError(
                        None, t, f"Operation {t} is not in the session's graph")
            if self.config.graph_options.place_pruned_graph:
                self._place_pruned(feeds, fetches, targets)
            parts = partition(self.order, self.by_name, self.placement, self.specs,
                              list(feeds), list(fetches), list(targets),
                              self.incarnations, self.task_name)
            plan_parts = []
            for task, part in parts.items():
                worker = self.workers[task]
                handle = worker.register_graph(self.handle, part.graph_def,
                                               self.config)
                self.registered.append((worker, handle))
                plan_parts.append(PlanPart(task, worker, handle, tuple(part.feeds),
                                           tuple(part.fetches), part.graph_def))
            p = Plan(tuple(plan_parts), feed_checks(feeds, self.by_name, self.specs))
            self.plans[key] = p
            return p

    def _place_pruned(self, feeds, fetches, targets):
        """Places the nodes a step needs that no earlier step placed, so a node
        that cannot be placed fails only the steps that need it
        (``GraphOptions.place_pruned_graph``, as InteractiveSession sets)."""
        needed = prune(self.by_name, set(feeds), list(fetches), list(targets))
        todo = [n for n in self.order if n in needed and n not in self.placement]
        if not todo:
            return
        nodes = [self.by_name[n] for n in self.order if n in needed]
        placement = place(nodes, self.devices, self.task_name,
                          allow_soft_placement=self.config.allow_soft_placement,
                          log_device_placement=False)
        for name in todo:
            self.placement[name] = placement[name]
            if self.config.log_device_placement:
                print(f"{name}: ({self.by_name[name].op}): {placement[name]}",
                      flush=True)

    def run(self, feeds: dict, fetches: list, targets: list, options, metadata,
            on_step=None):
        if self.closed:
            raise errors.CancelledError(None, None, "Session has been closed.")
        feed_names = tuple(sorted(feeds))
        fetch_names = tuple(dict.fromkeys(fetches))
        key = (feed_names, fetch_names, tuple(sorted(set(targets))))
        plan = self.plan(*key)
        for check in plan.checks:
            check.check(feeds[check.name])
        cost_model = False
        if self.config.graph_options.build_cost_model > 0:
            with self.lock:
                run = self.runs_of[key] = self.runs_of.get(key, -1) + 1
            cost_model = cost_model_due(self.config.graph_options, run)
        # A step that builds the cost model is traced (TF also returns its
        # step_stats).
        trace = cost_model or bool(options is not None and options.trace_level ==
                                   config_pb2.RunOptions.FULL_TRACE)
        timeout_ms = (options.timeout_in_ms if options is not None and
                      options.timeout_in_ms else 0) or \
            self.config.operation_timeout_in_ms
        timeout_s = seconds_from_ms(timeout_ms)
        op_timeout_s = seconds_from_ms(self.config.operation_timeout_in_ms)
        step_id = random.getrandbits(62)
        results: dict = {}
        stats = []
        self.running[step_id] = plan
        try:
            if on_step is not None:
                on_step(step_id)  # may raise: the step does not start
            self._run(plan, step_id, feeds, trace, timeout_s, op_timeout_s, results,
                      stats)
        finally:
            self.running.pop(step_id, None)
        if metadata is not None:
            if trace:
                _fill_step_stats(metadata.step_stats, stats)
            if cost_model:
                fill_cost_graph(metadata.cost_graph,
                                [p.graph_def for p in plan.parts], stats)
            if options is not None and options.output_partition_graphs:
                for part in plan.parts:
                    metadata.partition_graphs.add().CopyFrom(part.graph_def)
        return [results[normalize_tensor_name(f)] for f in fetches]

    def _run(self, plan, step_id, feeds, trace, timeout_s, op_timeout_s, results,
             stats):
        if plan.single:
            part = plan.parts[0]
            out, st = part.worker.run_graph(
                self.handle, part.graph_handle, step_id,
                {k: feeds[k] for k in part.feeds}, part.fetches, trace, timeout_s,
                op_timeout_s)
            results.update(out)
            if st:
                stats.append((part.task, st))
        else:
            self._run_parallel(plan, step_id, feeds, trace, timeout_s, op_timeout_s,
                               results, stats)

    def _run_parallel(self, plan, step_id, feeds, trace, timeout_s, op_timeout_s,
                      results, stats):
        lock = threading.Lock()
        first_error: list = []

        def fail(e):
            if not isinstance(e, errors.OpError):
                e = errors.InternalError(None, None, f"{type(e).__name__}: {e}")
            with lock:
                first = not first_error
                if first:
                    first_error.append(e)
                elif (isinstance(first_error[0], errors.CancelledError) and
                      not isinstance(e, errors.CancelledError) and not self.closed):
                    # A cancel is usually another failure's echo; the session
                    # closing is itself the cause (what its graphs' removal
                    # then fails with is the echo).
                    first_error[0] = e
            if first:  # the first error cancels every other partition
                for part in plan.parts:
                    try:
                        part.worker.abort_step(step_id, e)
                    except Exception:  # noqa: BLE001 - best effort
                        pass

        def run_part(part: PlanPart, finish=None):
            try:
                if finish is not None:
                    out, st = finish()
                else:
                    out, st = part.worker.run_graph(
                        self.handle, part.graph_handle, step_id,
                        {k: feeds[k] for k in part.feeds}, part.fetches, trace,
                        timeout_s, op_timeout_s)
            except Exception as e:  # noqa: BLE001 - reported once, below
                fail(e)
                return
            with lock:
                results.update(out)
                if st:
                    stats.append((part.task, st))

        def start(part: PlanPart):
            """A worker that can send RunGraph without waiting (the same-host
            channel) is started from this thread: no handoff to the pool."""
            try:
                return part.worker.start_run_graph(
                    self.handle, part.graph_handle, step_id,
                    {k: feeds[k] for k in part.feeds}, part.fetches, trace,
                    timeout_s, op_timeout_s)
            except Exception as e:  # noqa: BLE001 - reported once, below
                fail(e)
                return _FAILED

        # This thread runs one partition itself (the local one if any): one
        # thread handoff less per step.
        if not plan.parts:
            return
        inline = plan.parts[-1]
        for part in plan.parts:
            if part.worker is self.master.local_worker:
                inline = part
        futs, unread = [], []
        for part in plan.parts:
            if part is not inline:
                finish = start(part)
                if finish is None:  # no channel: the pool calls and waits
                    futs.append(_pool.submit(run_part, part, None))
                elif finish is not _FAILED:
                    unread.append((part, finish))
        # Replies sent without waiting are read here after the inline
        # partition; a slow step's go to the pool (reply_watch), so that a
        # failing peer still cancels the inline partition promptly.
        pending = None
        if unread:
            pending = _reply_watch.watch(
                unread, lambda p, f: _pool.submit(run_part, p, f))
        try:
            run_part(inline)
        finally:
            if pending is not None:
                _reply_watch.done(pending)
        if pending is not None:
            for part, finish in pending.claim():
                run_part(part, finish)
            futs.extend(pending.futures)
        for f in futs:
            f.result()  # run_part reports its errors through fail()
        if first_error:
            raise first_error[0]

    def cancel_step(self, step_id: int, error: errors.OpError):
        """Cancels a running step of this session on every task it runs on."""
        plan = self.running.get(step_id)
        for part in plan.parts if plan is not None else ():
            try:
                part.worker.abort_step(step_id, error)
            except Exception:  # noqa: BLE001 - best effort
                pass

    def close(self):
        self.closed = True
        cancelled = errors.CancelledError(
            None, None, "Step was cancelled by an explicit call to `Session::Close()`.")
        for step_id, plan in list(self.running.items()):
            for part in plan.parts:
                try:
                    part.worker.abort_step(step_id, cancelled)
                except Exception:  # noqa: BLE001 - best effort
                    pass
        for worker, handle in self.registered:
            try:
                worker.deregister_graph(self.handle, handle)
            except Exception:  # noqa: BLE001 - the task may be gone
                pass
        for w in set(self.workers.values()):
            try:
                w.delete_worker_session(self.handle)
            except Exception:  # noqa: BLE001
                pass


def _fill_step_stats(step_stats: step_stats_pb2.StepStats, stats):
    by_device: dict[str, step_stats_pb2.DeviceStepStats] = {}
    for task, entries in stats:
        for name, op_type, device, start, end, out_bytes, tid in entries:
            ds = by_device.get(device)
            if ds is None:
                ds = by_device[device] = step_stats.dev_stats.add()
                ds.device = device
                ds.task = task
            ns = ds.node_stats.add()
            ns.node_name = name
            ns.op_type = op_type
            ns.all_start_micros = start
            ns.op_start_rel_micros = 0
            ns.op_end_rel_micros = end - start
            ns.all_end_rel_micros = end - start
            ns.timeline_label = f"{name} = {op_type}()"
            ns.thread_id = tid
            for slot, b in enumerate(out_bytes):
                o = ns.output.add()
                o.slot = slot
                o.tensor_description.allocated_bytes = b


class Master:
    """Sessions for one target task. ``worker_for(task)`` gives a worker interface
    (the local one in-process, gRPC clients for the others); ``cluster_tasks()``
    lists every task of the cluster; ``worker_at(address)`` a worker interface
    of the task at ``address`` (ClusterSpec propagation; None: unsupported)."""

    def __init__(self, task_name: str, local_worker, worker_for=None,
                 cluster_tasks=None, default_config=None, worker_at=None):
        self.task_name = task_name
        self.local_worker = local_worker
        self._worker_for = worker_for or (lambda t: local_worker)
        self._cluster_tasks = cluster_tasks or (lambda: [task_name])
        self._worker_at = worker_at
        self.default_config = default_config or config_pb2.ConfigProto()
        self._sessions: dict[str, MasterSession] = {}
        self._ids = itertools.count(1)
        self._prefix = f"{random.getrandbits(40):010x}"
        self._lock = threading.Lock()

    def _discover(self, config):
        """``(workers, devices, incarnations, own task)`` of a session with
        ``config``: its server's cluster, or ``config.cluster_def``."""
        if config.cluster_def.job:
            return self._discover_propagated(config)
        tasks = [t for t in self._cluster_tasks()
                 if t == self.task_name or _matches_filter(t, config.device_filters)]

        def status(task, timeout):
            w = self._worker_for(task)
            return task, w, w.get_status(timeout_s=timeout)

        return self._status_of(tasks, status, config) + (self.task_name,)

    def _discover_propagated(self, config):
        """ClusterSpec propagation: the tasks at ``config.cluster_def``'s
        addresses, their devices renamed to the names the cluster gives them.
        This server is the task whose incarnation is its worker's."""
        if self._worker_at is None:
            raise errors.UnimplementedError(
                None, None, "config.cluster_def (ClusterSpec propagation) needs a "
                "session on a gRPC server (nd.Server); this master "
                f"({self.task_name}) cannot reach tasks by address")
        addresses = propagated_addresses(config.cluster_def)

        def status(task, timeout):
            w = self._worker_at(addresses[task])
            renamed = []
            for name, inc in w.get_status(timeout_s=timeout):
                suffix = name[name.index("/device:"):] if "/device:" in name else ""
                renamed.append((task + suffix, inc))
            return task, w, renamed

        workers, devices, incarnations = self._status_of(
            list(addresses), status, config)
        own_incarnation = self.local_worker.incarnation
        own = [t for t in workers
               if incarnations.get(t + "/device:CPU:0") == own_incarnation]
        if not own:
            raise errors.InvalidArgumentError(
                None, None, f"config.cluster_def does not name this server "
                f"({self.task_name}): a session's cluster must include the task "
                "of its target")
        task = own[0]
        keep = {t for t in workers
                if t == task or _matches_filter(t, config.device_filters)}
        workers = {t: w for t, w in workers.items() if t in keep}
        devices = [d for d in devices if task_of(d) in keep]
        return workers, devices, incarnations, task

    def _status_of(self, tasks, status, config):
        """Asks ``tasks`` for their devices at once: ``(workers, devices,
        incarnations)``; a task that does not answer fails the discovery."""
        workers, devices, incarnations = {}, [], {}
        timeout = (seconds_from_ms(config.operation_timeout_in_ms)
                   or _DISCOVERY_TIMEOUT_S)

        futs = [_pool.submit(status, t, timeout) for t in tasks]
        done, not_done = futures.wait(futs, timeout=timeout + 1.0)
        failed = []
        for t, f in zip(tasks, futs):
            if f not in done:
                failed.append((t, "did not answer within "
                                  f"{timeout:.1f} s"))
                continue
            e = f.exception()
            if e is not None:
                failed.append((t, str(e).splitlines()[0] if str(e) else
                               type(e).__name__))
                continue
            task, w, devs = f.result()
            workers[task] = w
            for name, inc in devs:
                devices.append(name)
                incarnations[name] = inc
        if failed:
            names = "; ".join(f"{t} ({why})" for t, why in failed)
            raise errors.UnavailableError(
                None, None, f"CreateSession: could not reach task(s) {names}. "
                "Check that they are running, or set device_filters to the tasks "
                "this session needs.")
        return workers, devices, incarnations

    def create_session(self, graph_def, config=None) -> tuple[str, int]:
        self._check_request(graph_def, None, "CreateSession")
        cfg = config_pb2.ConfigProto()
        cfg.CopyFrom(self.default_config)
        if config is not None:
            cfg.MergeFrom(config)
        workers, devices, incarnations, task = self._discover(cfg)
        handle = f"{self._prefix}-{next(self._ids)}"
        for t, w in workers.items():
            if cfg.cluster_def.job:  # each worker takes on its name there
                spec = DeviceSpec.from_string(t)
                server_def = server_def_pb2.ServerDef(
                    cluster=cfg.cluster_def, job_name=spec.job,
                    task_index=spec.task, protocol="grpc")
                # As TF: such sessions keep their own state unless told to share.
                isolate = (cfg.isolate_session_state or not cfg.experimental.
                           share_session_state_in_clusterspec_propagation)
                w.create_worker_session(
                    handle, server_def=server_def, master_task=task,
                    master_incarnation=self.local_worker.incarnation,
                    isolate_session_state=isolate)
            else:
                w.create_worker_session(handle)
        ms = MasterSession(self, handle, cfg, workers, devices, incarnations, task)
        ms.extend(graph_def)
        with self._lock:
            self._sessions[handle] = ms
        return handle, ms.version

    def _session(self, handle) -> MasterSession:
        ms = self._sessions.get(handle)
        if ms is None:
            raise errors.AbortedError(
                None, None, f"Session {handle} is not found. Possibly, this master "
                f"({self.task_name}) has restarted.")
        return ms

    def extend_session(self, handle: str, graph_def, current_version: int) -> int:
        self._check_request(graph_def, None, "ExtendSession")
        ms = self._session(handle)
        with ms.lock:
            if current_version != ms.version:
                raise errors.AbortedError(
                    None, None, f"Current graph version {current_version} does not "
                    f"match the session's {ms.version}")
            return ms.extend(graph_def)

    def run_step(self, handle: str, feeds: dict, fetches: list, targets: list,
                 options=None, metadata=None, on_step=None):
        """Runs one step. ``on_step(step_id)``, if given, is called before the
        step starts (raising there cancels it) so that the caller can
        ``cancel_step`` it later (e.g. when an RPC's client goes away)."""
        self._check_request(None, feeds, "RunStep")
        return self._session(handle).run(feeds, fetches, targets, options, metadata,
                                         on_step)

    def _check_request(self, graph_def, feeds, where: str):
        """What a request brings (a graph's constants, sized before they are
        materialised; fed values) against this task's limits."""
        limits = self.local_worker.limits
        if limits is None:
            return
        if graph_def is not None:
            check_graph_def(graph_def, limits, where)
        for name, value in (feeds or {}).items():
            v = np.asarray(value)
            check_tensor(limits, array_nbytes(v.dtype, v.size),
                         f"{where}: the value fed to {name}")

    def cancel_step(self, handle: str, step_id: int, error=None):
        """Cancels ``step_id`` of session ``handle`` if it is still running."""
        ms = self._sessions.get(handle)
        if ms is not None:
            ms.cancel_step(step_id, error or errors.CancelledError(
                None, None, "The step was cancelled"))

    def close_session(self, handle: str):
        with self._lock:
            ms = self._sessions.pop(handle, None)
        if ms is not None:
            ms.close()

    def list_devices(self, config=None, session_handle: str = ""):
        """``(name, type, incarnation)`` of the devices a session with
        ``config`` (or the open session ``session_handle``) may use."""
        ms = self._sessions.get(session_handle) if session_handle else None
        if ms is not None:
            return [(d, device_type_of(d), ms.incarnations[d]) for d in ms.devices]
        cfg = config or self.default_config
        _, devices, incarnations, _ = self._discover(cfg)
        return [(d, device_type_of(d), incarnations[d]) for d in devices]

    def reset(self, containers=None, device_filters=None, timeout_s=None):
        """Closes every session here and clears containers on the workers (all
        of them when ``containers`` is empty; an unknown one is no error)."""
        with self._lock:
            sessions = list(self._sessions.values())
            self._sessions.clear()
        for ms in sessions:
            ms.close()
        cfg = config_pb2.ConfigProto(device_filters=list(device_filters or []))
        if timeout_s:
            cfg.operation_timeout_in_ms = whole_ms(timeout_s)
        workers, _, _, _ = self._discover(cfg)
        for w in workers.values():
            w.cleanup_all(list(containers or []))

    def close(self):
        with self._lock:
            sessions = list(self._sessions.values())
            self._sessions.clear()
        for ms in sessions:
            ms.close()


def tensor_value_for_client(v):
    """Fetched values as users get them: writable arrays, scalars for 0-d."""
    if isinstance(v, np.ndarray):
        if v.ndim == 0:
            return v[()]
        if not v.flags.writeable:
            return v.copy()
        return v
    return v


__all__ = ["Master", "MasterSession", "Plan", "PlanPart"]
