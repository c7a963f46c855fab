"""A task's worker logic: devices, resources, registered graphs, steps.

The same object serves an in-process ``Session("")`` directly and a gRPC
server's WorkerService; nothing here knows about RPCs.
"""

from __future__ import annotations

import collections
import copy
import itertools
import random
import re
import threading
import time
from collections.abc import Callable
from typing import NamedTuple

from nbdist import errors
from nbdist.executor.executor import Executor, StepContext
from nbdist.executor.limits import Limits, check_graph_def
from nbdist.executor.rendezvous import Rendezvous, make_key, parse_key
from nbdist.executor.resources import ResourceMgr
from nbdist.framework.device import DeviceSpec
from nbdist.runtime.collective import CollectiveExecutor
from nbdist.runtime.device_attributes import task_devices
from nbdist.runtime.interfaces import TensorTransport
from nbdist.runtime.partition import task_of
from nbdist.runtime.tensor_store import ParkedTensors, PushedTensors
from nbdist.runtime.timeouts import seconds_as_ms
from nbdist.runtime.worker_feeds import check_partition_feeds, partition_feed_checks

_STEP_EXPIRY_S = 600.0
_ABORTED_EARLY_KEPT = 1024  # aborts of steps not started (yet), remembered
SIBLING_LINGER_S = 0.02
_LINGER_BACKOFF = 100
MAX_SIBLINGS = 4096


def new_incarnation() -> int:
    """A random nonzero 63-bit id: a restarted task gets a new one."""
    return random.SystemRandom().getrandbits(63) | 1


def _ignore(kind: str, payload: dict) -> None:
    """Events of a worker nobody watches (``Session("")``)."""


_NO_SIBLINGS: dict = {}


def recv_siblings(graph_def, own_task: str) -> dict[str, tuple[str, ...]]:
    """{key: every key of the partition's ``_Recv`` nodes from the same other
    task}: what a transport may fetch in one exchange when the first is asked."""
    by_task: dict[str, list[str]] = {}
    for n in graph_def.node:
        if n.op != "_Recv":
            continue
        a = n.attr
        src = a["send_device"].s.decode()
        task = task_of(src)
        if task == own_task or ("client_terminated" in a and
                                a["client_terminated"].b):
            continue
        by_task.setdefault(task, []).append(make_key(
            src, a["send_device_incarnation"].i, a["recv_device"].s.decode(),
            a["tensor_name"].s.decode()))
    return {k: tuple(keys) for keys in by_task.values() if len(keys) > 1
            for k in keys}


def kept_error(error: errors.OpError) -> errors.OpError:
    """A copy of ``error`` to keep after its step: same class, op and message,
    without the traceback and context whose frames would hold the failed step's
    whole session (its plan, graphs and executors) for as long as it is kept
    (1024 remembered aborts of a worker held a MasterSession each)."""
    return copy.copy(error)


def cpu_device(task_name: str, index: int = 0) -> str:
    """The name of CPU device ``index`` of a task (``.../device:CPU:0``)."""
    return f"{task_name}/device:CPU:{index}"


class Worker:
    """One task: ``/job:J/replica:0/task:T`` with ``num_cpus`` CPU devices (and
    ``num_gpus`` virtual GPU devices, CPU-backed: see ``device_attributes``)."""

    def __init__(self, task_name: str = "/job:localhost/replica:0/task:0",
                 num_cpus: int = 1, *, num_gpus: int = 0,
                 incarnation: int | None = None,
                 transport: TensorTransport | None = None,
                 publish: Callable[[str, dict], None] | None = None,
                 task_states: Callable[[list[str]], list] | None = None,
                 limits: Limits | None = None,
                 address_transport: TensorTransport | None = None,
                 parked: ParkedTensors | None = None):
        """``transport`` brings tensors from other tasks (None: this task is the
        whole cluster); ``publish(kind, payload)`` reports runtime events;
        ``task_states(tasks)`` reads the coordination service's task records
        (what collectives check their peers' liveness with); ``limits`` bound
        what requests may cost (a server's; None: unchecked, in process);
        ``address_transport`` brings tensors from a task named by its address
        (``src_task`` is an address: the tasks of a propagated cluster);
        ``parked``: where the task parks values for others to pull, when its
        server made it first (for its peer clients); its rendezvous is then
        the worker's."""
        self.task_name = task_name
        self.incarnation = incarnation or new_incarnation()
        self.devices = task_devices(task_name, num_cpus, num_gpus)
        # As TF's devices: resources without a container live in the job's.
        self.default_container = DeviceSpec.from_string(task_name).job or "localhost"
        self._resources = {d: ResourceMgr(self.default_container)
                           for d in self.devices}
        self._device_by_short: dict[str, str] = {}
        # isolate_session_state sessions: handle -> their own device -> ResourceMgr
        self._session_resources: dict[str, dict[str, ResourceMgr]] = {}
        # Every session: handle -> device -> the ResourceMgr of its unshared
        # stateful ops (queues, readers with no shared_name), per session as
        # TF's OpSegment keeps their kernels.
        self._session_scoped: dict[str, dict[str, ResourceMgr]] = {}
        if parked is not None and (parked.device, parked.incarnation) != (
                self.devices[0], self.incarnation):
            raise ValueError(f"Worker {task_name}: parked tensors of "
                             f"{parked.device} ({parked.incarnation:x}) are not its own")
        self.rendezvous = parked.rendezvous if parked is not None else Rendezvous()
        self._lock = threading.Lock()
        self._sessions: set[str] = set()
        self._graphs: dict[str, tuple[str, Executor]] = {}
        self._steps: dict[int, StepContext] = {}
        # Steps aborted before their RunGraph registered them (an abort racing
        # the step's start): cancelled as they register.
        self._aborted_early: collections.OrderedDict[int, errors.OpError] = (
            collections.OrderedDict())
        self._step_sessions: dict[int, str] = {}  # running step -> its session
        self._graph_siblings: dict[str, dict] = {}  # graph -> recv_siblings
        # graph -> (its session, partition_feed_checks)
        self._graph_feeds: dict[str, tuple[str, dict]] = {}
        self._linger_skips: dict[tuple, int] = {}  # take_siblings' backoff
        self._step_siblings: dict[int, dict] = {}  # running step -> its graph's
        self._graph_ids = itertools.count(1)
        self._runs = 0
        self._transport = transport
        self._address_transport = address_transport
        # ClusterSpec propagation: handle -> the session's view of the cluster.
        self._propagated: dict[str, PropagatedCluster] = {}
        self.collectives = CollectiveExecutor(task_name, self.incarnation,
                                              self.rendezvous, transport, task_states)
        self._publish = publish or _ignore
        self.limits = limits
        self.parked = parked or ParkedTensors(self.devices[0], self.incarnation,
                                              self.rendezvous, limits=limits)
        self.pushed = PushedTensors(self, limits=limits)
        self.steps_served = 0

    # -- executor environment ---------------------------------------------------
    def device_for(self, device: str) -> str:
        """The full name of this task's device ``device`` (which may be partial)."""
        if device in self._resources:
            return device
        full = self._device_by_short.get(device)
        if full is not None:
            return full
        idx = 0
        if device:
            try:
                idx = DeviceSpec.from_string(device).device_index or 0
            except ValueError:
                idx = 0
        full = self.devices[min(idx, len(self.devices) - 1)]
        self._device_by_short[device] = full
        return full

    def resources_for(self, device: str) -> ResourceMgr:
        return self._resources[self.device_for(device)]

    def session_resources_for(self, device: str) -> ResourceMgr:
        """Where unshared stateful ops keep their state: the task's own
        resources when a graph runs on the worker directly (no session)."""
        return self.resources_for(device)

    def all_resources(self):
        return list(self._resources.items())

    def recv(self, step: StepContext, src_device: str, key: str):
        if src_device.startswith(self.task_name + "/"):
            return self.rendezvous.recv(step, key)
        if self._transport is None:
            raise errors.InternalError(None, None, f"No route to {src_device}")
        siblings = self._step_siblings.get(step.step_id, _NO_SIBLINGS).get(key, ())
        try:
            return self._transport.recv(step, task_of(src_device), key, siblings)
        except errors.OpError:
            if step.cancelled:  # its cancel is the error, not what a peer then said
                step.check()  # (a closed session's peer answers "session deleted")
            raise

    def pull(self, ref, timeout_s: float, on_cancel=None):
        """A tensor another task parked for this one (a large feed by reference)."""
        if self._transport is None or ref.src_device.startswith(self.task_name + "/"):
            raise errors.InvalidArgumentError(
                None, None, f"{self.task_name} cannot pull the tensor reference "
                f"{ref.key[:200]!r}")
        return self._transport.pull(ref, timeout_s, on_cancel)

    def publish(self, kind: str, payload: dict) -> None:
        """Reports a runtime event of this task (kernels report variables)."""
        self._publish(kind, payload)

    def session_of(self, step_id: int) -> str:
        """The session handle of a running step ("" if unknown): what names the
        worker behind a push to an accumulator (its graphs' handles hold it)."""
        return self._step_sessions.get(step_id, "")

    # -- worker service ----------------------------------------------------------
    def get_status(self, timeout_s: float | None = None) -> list[tuple[str, int]]:
        """This task's devices and incarnation (in process: ``timeout_s`` has
        nothing to wait for)."""
        return [(d, self.incarnation) for d in self.devices]

    def start_run_graph(self, *args):
        """None: an in-process worker runs its partition on the caller's
        thread (``WorkerInterface.start_run_graph``)."""
        return None

    def create_worker_session(self, session_handle: str, server_def=None,
                              master_task: str = "", master_incarnation: int = 0,
                              isolate_session_state: bool = False):
        """Starts a session. With ``server_def`` naming a cluster (ClusterSpec
        propagation), this task is ``server_def``'s job and task for that
        session only, and reaches the others at their addresses there (with
        resources of its own if ``isolate_session_state``); the sessions of an
        older incarnation of the same ``master_task`` go."""
        view = None
        if server_def is not None and server_def.cluster.job:
            view = PropagatedCluster.from_server_def(
                server_def, master_task, master_incarnation, isolate_session_state)
        with self._lock:
            stale = [h for h, v in self._propagated.items()
                     if view is not None and v.superseded_by(view)]
            self._sessions.add(session_handle)
            if view is not None:
                self._propagated[session_handle] = view
        for h in stale:  # as TF: that master restarted, its sessions are gone
            self.delete_worker_session(h)

    def delete_worker_session(self, session_handle: str):
        """Forgets a session: its graphs go, its running steps are aborted and
        later ones refused (how a ``ClusterCoordinator`` fences a worker it
        declared failed: that worker's steps never apply here late)."""
        with self._lock:
            self._sessions.discard(session_handle)
            self._propagated.pop(session_handle, None)
            for h in [h for h, (s, _) in self._graphs.items() if s == session_handle]:
                del self._graphs[h]
                self._graph_siblings.pop(h, None)
                self._graph_feeds.pop(h, None)
            private = self._session_resources.pop(session_handle, {})
            scoped = self._session_scoped.pop(session_handle, {})
            running = [i for i, h in self._step_sessions.items()
                       if h == session_handle]
        for step_id in running:
            self.abort_step(step_id, errors.AbortedError(
                None, None, f"Session {session_handle} was deleted on "
                f"{self.task_name} while its step ran"))
        for rm in private.values():
            rm.cleanup(None)  # wakes ops still blocked on its queues
        # The session's own queues go with it (their blocked steps were aborted
        # above, with TF's Session::Close wording).
        del scoped

    def _env_for(self, session_handle: str, config):
        """What a session's partitions run against: this worker, or a view of it
        with the session's own resources (``isolate_session_state``) and task
        name (a propagated cluster)."""
        view = self._propagated.get(session_handle)
        isolated = ((config is not None and config.isolate_session_state) or
                    (view is not None and view.isolated))
        rms = self._resources
        with self._lock:
            if isolated:
                rms = self._session_resources.get(session_handle)
                if rms is None:
                    rms = self._session_resources[session_handle] = {
                        d: ResourceMgr(self.default_container) for d in self.devices}
            scoped = self._session_scoped.get(session_handle)
            if scoped is None:
                scoped = self._session_scoped[session_handle] = {
                    d: ResourceMgr(self.default_container) for d in self.devices}
        return _IsolatedSessionEnv(self, rms, view, scoped)

    def _check_session(self, session_handle: str):
        if session_handle not in self._sessions:
            raise errors.AbortedError(
                None, None, f"Session handle is not found: {session_handle}. "
                f"Possibly this worker ({self.task_name}) just restarted.")

    def register_graph(self, session_handle: str, graph_def, config=None) -> str:
        self._check_session(session_handle)
        check_graph_def(graph_def, self.limits, f"RegisterGraph on {self.task_name}")
        executor = Executor(graph_def, self._env_for(session_handle, config),
                            name=f"partition for {self.task_name}")
        handle = f"{session_handle}/g{next(self._graph_ids)}"
        siblings = (recv_siblings(graph_def, self.task_name)
                    if session_handle not in self._propagated else None)
        feeds = partition_feed_checks(graph_def)
        with self._lock:
            self._graphs[handle] = (session_handle, executor)
            if siblings:
                self._graph_siblings[handle] = siblings
            if feeds:
                self._graph_feeds[handle] = (session_handle, feeds)
        self._publish("graph_registered", {
            "task": self.task_name, "graph_handle": handle,
            "nodes": [(n.name, n.op, n.device) for n in graph_def.node]})
        return handle

    def deregister_graph(self, session_handle: str, graph_handle: str):
        with self._lock:
            self._graphs.pop(graph_handle, None)
            self._graph_siblings.pop(graph_handle, None)
            self._graph_feeds.pop(graph_handle, None)

    def run_graph(self, session_handle: str, graph_handle: str, step_id: int,
                  feeds: dict, fetch_keys, trace: bool = False,
                  timeout_s: float | None = None,
                  op_timeout_s: float | None = None):
        """Runs a registered graph once; returns ({fetch key: value}, stats).
        Every fed value must fit its ``_Feed`` (a ``RunGraph`` may come from
        anyone, not only from a master that checked it)."""
        if feeds:
            checks = self._graph_feeds.get(graph_handle)
            if checks is not None and checks[0] == session_handle:
                check_partition_feeds(checks[1], feeds, self.task_name)
        deadline = time.monotonic() + timeout_s if timeout_s else None
        step = StepContext(step_id, feeds, deadline, trace, op_timeout_s)
        # Looked up and registered at once: a session deleted meanwhile (a
        # fenced one) either refuses the step or aborts it.
        with self._lock:
            entry = self._graphs.get(graph_handle)
            if entry is not None and entry[0] == session_handle:
                self._steps[step_id] = step
                early = self._aborted_early.pop(step_id, None)
                self._step_sessions[step_id] = session_handle
                siblings = self._graph_siblings.get(graph_handle)
                if siblings is not None:
                    self._step_siblings[step_id] = siblings
        if entry is None or entry[0] != session_handle:
            self._check_session(session_handle)
            raise errors.AbortedError(
                None, None, f"Graph handle is not found: {graph_handle}. Possibly "
                f"this worker ({self.task_name}) just restarted.")
        if early is not None:
            step.cancel(early)
        start = time.time() if self._publish is not _ignore else 0.0
        try:
            entry[1].run(step)
        except errors.OpError as e:
            self._publish("error", {"task": self.task_name, "step_id": step_id,
                                    "code": e.error_code, "message": e.message,
                                    "op": str(getattr(e.op, "name", e.op) or "")})
            raise
        finally:
            self._steps.pop(step_id, None)
            self._step_sessions.pop(step_id, None)
            self._step_siblings.pop(step_id, None)
            self.steps_served += 1
            self._runs += 1
            if self._runs % 1000 == 0:
                self.rendezvous.expire(_STEP_EXPIRY_S)
        if self._publish is not _ignore:  # the step event is not built for nobody
            self._publish("step", {"task": self.task_name, "step_id": step_id,
                                   "graph_handle": graph_handle,
                                   "duration_ms": seconds_as_ms(time.time() - start)})
        out = step.fetches
        missing = [k for k in fetch_keys if k not in out]
        if missing:
            raise errors.InvalidArgumentError(
                None, None, f"Fetches {missing} were not produced on "
                f"{self.task_name}")
        return {k: out[k] for k in fetch_keys}, step.stats

    def abort_step(self, step_id: int, error: errors.OpError | None = None):
        """Cancels a running step (its blocked ops wake up) and frees its tensors."""
        error = kept_error(error) if error is not None else errors.CancelledError(
            None, None, "Step was cancelled")
        with self._lock:
            step = self._steps.get(step_id)
            if step is None:  # not started yet (or done): its start sees this
                self._aborted_early[step_id] = error
                while len(self._aborted_early) > _ABORTED_EARLY_KEPT:
                    self._aborted_early.popitem(last=False)
        if step is not None:
            step.cancel(error)
        self.rendezvous.abort_step(step_id, error)

    def abort_all_steps(self, error: errors.OpError):
        """Cancels every running step (the task is stopping)."""
        for step_id in list(self._steps):
            self.abort_step(step_id, error)

    def cleanup_graph(self, step_id: int):
        step = self._steps.get(step_id)
        if step is not None:
            step.cancel()
            self.rendezvous.abort_step(step_id, errors.CancelledError(
                None, None, "Step was cleaned up"))
        else:
            self.rendezvous.cleanup(step_id)

    def cleanup_all(self, containers=None):
        """Drops the given resource containers (all of them when empty)."""
        for rm in self._resources.values():
            if containers:
                for c in containers:
                    rm.cleanup(c)
            else:
                rm.cleanup(None)

    def recv_tensor(self, step_id: int, key: str, timeout_s: float, is_cancelled,
                    siblings=()):
        """Serves a remote task's pull of a tensor this task sends. With
        ``siblings`` (what ``take_siblings`` is asked for next), waits for
        them together with ``key``: one wake when the last is sent."""
        self._check_pull(key)
        rest, group = self._sibling_group(key, siblings)
        if rest and not self._linger_skips.get(group):
            start = time.monotonic()
            whole = self.rendezvous.wait_with_siblings(
                step_id, key, rest, timeout_s, SIBLING_LINGER_S, is_cancelled)
            if not whole and self.rendezvous.holds(step_id, key):
                self._linger_missed(group)  # (so take_siblings lingers no more)
            timeout_s = max(0.0, timeout_s - (time.monotonic() - start))
        return self.rendezvous.recv_blocking(step_id, key, timeout_s, is_cancelled)

    def answer_pull(self, step_id: int, key: str, siblings, timeout_s: float,
                    is_cancelled, answer) -> bool:
        """Serves a remote pull of ``key`` that brings ``siblings`` along by
        ``answer(value, {sibling: value})``, called in the thread that sends
        the last of them (``Rendezvous.answer_when_sent``): the serving thread
        sleeps meanwhile and is not woken on the step's path. True once
        answered so (raising what ``answer`` raised); False when the caller
        is to serve it as before (``recv_tensor``, ``take_siblings``): all
        were sent already, the step was aborted, the siblings lag behind
        ``key``, ``timeout_s`` passed or ``is_cancelled()``."""
        self._check_pull(key)
        rest, group_name = self._sibling_group(key, siblings)
        if not rest or self._linger_skips.get(group_name):
            return False
        rendezvous = self.rendezvous

        def deliver():
            taken = rendezvous.take_with(step_id, key, rest)
            if taken is None:
                raise errors.AbortedError(None, None, f"step {step_id:x} ended "
                                          "while its tensors were being sent")
            answer(*taken)

        group = rendezvous.answer_when_sent(step_id, [key, *rest], deliver)
        if group is None:
            return False
        rendezvous.wait_lingering(group, step_id, key, timeout_s, SIBLING_LINGER_S,
                                  is_cancelled)
        if rendezvous.claim(group):  # this thread answers, as before
            if not rendezvous.aborted(step_id) and rendezvous.holds(step_id, key):
                self._linger_missed(group_name)
            return False
        group.event.wait()  # the sender is answering
        if group.error is not None:
            raise group.error
        return True

    def _check_pull(self, key: str) -> None:
        """Refuses a pull of a key this task (this incarnation) does not send."""
        src, incarnation, _dst, _name = parse_key(key)
        if not src.startswith(self.task_name + "/") and not self._is_alias(src):
            raise errors.InvalidArgumentError(
                None, None, f"RecvTensor for {src} sent to {self.task_name}")
        if incarnation != self.incarnation:
            raise errors.AbortedError(
                None, None, f"Task {self.task_name} restarted: the step expected "
                f"incarnation {incarnation:x}, this task is {self.incarnation:x}")

    def _is_alias(self, device: str) -> bool:
        """Whether ``device`` is this task's under a propagated session's name."""
        return any(device.startswith(v.task + "/")
                   for v in list(self._propagated.values()))

    def recv_propagated(self, step, view: PropagatedCluster, src_device: str,
                        key: str):
        """A tensor from another task of a propagated cluster, by address."""
        address = view.addresses.get(task_of(src_device))
        if address is None or self._address_transport is None:
            raise errors.InternalError(
                None, None, f"No route to {src_device} from {view.task} "
                f"({self.task_name})")
        return self._address_transport.recv(step, address, key)

    def take_siblings(self, step_id: int, key: str, siblings,
                      linger_s: float = SIBLING_LINGER_S) -> dict:
        """{key: value} of ``siblings`` (keys this task sends in ``step_id``)
        already sent, or sent within ``linger_s``: what a remote pull of ``key``
        brings along. A step's tensors for one consumer are usually produced
        within a node or two of each other; where one waits on something else
        (another worker, a queue), lingering only delays: a group whose linger
        ran out skips it for its next ``_LINGER_BACKOFF`` pulls."""
        rest, group = self._sibling_group(key, siblings)
        skip = self._linger_skips.get(group, 0)
        if skip:
            self._linger_skips[group] = skip - 1
            linger_s = 0.0
        if not rest:
            return {}
        # One wait for the group (a wake per sibling would take the GIL from
        # the step producing them, once per tensor).
        if not self.rendezvous.wait_sent_all(step_id, rest, linger_s) and linger_s:
            self._linger_missed(group)
        return self.rendezvous.take_ready(step_id, rest)

    def _sibling_group(self, key: str, siblings) -> tuple[list, tuple]:
        """(the siblings this task sends, other than ``key``; the group's name
        in the linger backoff)."""
        own = self.task_name + "/"
        rest = [k for k in itertools.islice(siblings, MAX_SIBLINGS)
                if isinstance(k, str) and k != key and k.startswith(own)]
        return rest, (key, len(rest))

    def _linger_missed(self, group: tuple) -> None:
        """The group's siblings did not come within the linger: its next
        ``_LINGER_BACKOFF`` pulls do not wait for them."""
        if len(self._linger_skips) > 4096:
            self._linger_skips.clear()
        self._linger_skips[group] = _LINGER_BACKOFF

    def variables(self):
        """(device, container, name, VariableResource) for every variable here."""
        out = []
        for dev, rm in self._resources.items():
            for container, kind, name, res in rm.resources("var"):
                out.append((dev, container, name, res))
        return out


_JOB_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*\Z")
_HOST = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)\Z")
_MAX_PROPAGATED_TASKS = 4096


def propagated_addresses(cluster_def) -> dict[str, str]:
    """{task name: address} of a session's ``cluster_def`` (ClusterSpec
    propagation), checked: it names servers this task will connect to."""
    addresses: dict[str, str] = {}
    for job in cluster_def.job:
        if not _JOB_NAME.match(job.name):
            raise errors.InvalidArgumentError(
                None, None, f"cluster_def: job name {job.name[:100]!r} is not "
                "letters, digits and '_' starting with a letter")
        for index, address in sorted(job.tasks.items()):
            task = f"/job:{job.name}/replica:0/task:{index}"
            host, sep, port = address.rpartition(":")
            if (index < 0 or not sep or not _HOST.match(host) or
                    not port.isdigit() or not 0 < int(port) < 65536):
                raise errors.InvalidArgumentError(
                    None, None, f"cluster_def: {address[:100]!r} of task {task} "
                    "is not a host:port address")
            addresses[task] = address
    if not addresses or len(addresses) > _MAX_PROPAGATED_TASKS:
        raise errors.InvalidArgumentError(
            None, None, f"cluster_def names {len(addresses)} tasks (1 to "
            f"{_MAX_PROPAGATED_TASKS} expected)")
    return addresses


class PropagatedCluster(NamedTuple):
    """A session's cluster from its master (``ConfigProto.cluster_def``): this
    task's name in it, every task's address, and the master's identity."""

    task: str
    addresses: dict  # task name -> address
    master_task: str
    master_incarnation: int
    isolated: bool  # resources of its own, not the task's

    @classmethod
    def from_server_def(cls, server_def, master_task: str, master_incarnation: int,
                        isolated: bool) -> PropagatedCluster:
        addresses = propagated_addresses(server_def.cluster)
        own = f"/job:{server_def.job_name}/replica:0/task:{server_def.task_index}"
        if own not in addresses:
            raise errors.InvalidArgumentError(
                None, None, f"CreateWorkerSession: {own[:200]} is not in the "
                "session's cluster")
        return cls(own, addresses, master_task, master_incarnation, isolated)

    def superseded_by(self, newer: PropagatedCluster) -> bool:
        """Whether ``newer`` comes from a restart of this session's master."""
        return bool(self.master_task and self.master_task == newer.master_task and
                    self.master_incarnation != newer.master_incarnation)


class _IsolatedSessionEnv:
    """A worker as one session's partitions see it: the same devices,
    rendezvous and transport, but the session's own resource managers
    (``isolate_session_state``) and task name (``view``: a propagated
    cluster)."""

    def __init__(self, worker: Worker, resources: dict[str, ResourceMgr],
                 view: PropagatedCluster | None = None,
                 session_scoped: dict[str, ResourceMgr] | None = None):
        self._worker = worker
        self._resources = resources
        self._view = view
        self._session_scoped = session_scoped or resources

    def resources_for(self, device: str) -> ResourceMgr:
        return self._resources[self._worker.device_for(device)]

    def session_resources_for(self, device: str) -> ResourceMgr:
        return self._session_scoped[self._worker.device_for(device)]

    def session_of(self, step_id: int) -> str:
        return self._worker.session_of(step_id)

    # The rest of ``executor.ExecutorEnv``: the worker's own.
    @property
    def task_name(self) -> str:
        return self._view.task if self._view is not None else self._worker.task_name

    @property
    def rendezvous(self):
        return self._worker.rendezvous

    @property
    def collectives(self):
        return self._worker.collectives

    @property
    def publish(self):
        return self._worker.publish

    @property
    def limits(self):
        return self._worker.limits

    def recv(self, step, src_device: str, key: str):
        view = self._view
        if view is None:
            return self._worker.recv(step, src_device, key)
        if src_device.startswith(view.task + "/"):
            return self._worker.rendezvous.recv(step, key)
        return self._worker.recv_propagated(step, view, src_device, key)

    def device_for(self, device: str) -> str:
        return self._worker.device_for(device)
