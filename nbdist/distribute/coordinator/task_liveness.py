"""Which tasks of a ``ClusterCoordinator``'s cluster are up, fed to its state
machine as events (``WorkerFailed``/``WorkerRecovered``, ``PsFailed``/
``PsRecovered`` of ``coordinator_state``).

* A heartbeat watcher (``ClusterCoordinator-Watcher``) reads the task states
  of the cluster's coordination service every 100 ms: a worker that stops
  heartbeating is failed; one that heartbeats again, or restarts, rejoins; a
  ps that stops, or restarts, is failed (its variables are lost).
* A prober (``ClusterCoordinator-Prober``) asks failed tasks for their status
  (``GetStatus``) every 250 ms, the tasks the service does not know (not
  registered again since its leader restarted), and every task while the
  coordination service cannot be reached.
* ``after_task_error`` tells, after an RPC-class error on a worker, whether the
  worker or a ps is down, with probes (no error message is parsed).
"""

from __future__ import annotations

import collections
import logging
import threading
import time

from nbdist import errors
from nbdist.distribute.coordinator import coordinator_state as cs
from nbdist.framework.device import DeviceSpec
from nbdist.runtime import transports

__all__ = ["TaskLiveness", "first_line", "task_name"]

_log = logging.getLogger("nbdist.distribute.coordinator")

POLL_INTERVAL_S = 0.1  # heartbeat watcher: task_states() every ...
PROBE_INTERVAL_S = 0.25  # prober: failed tasks (and all, without the service)
PROBE_TIMEOUT_S = 0.5


def first_line(e: BaseException) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"


def task_name(job: str, index: int) -> str:
    return f"/job:{job}/replica:0/task:{index}"


class TaskLiveness:
    """The watcher and prober threads of one coordinator (see the module
    docstring).

    ``addresses``: task name -> ``host:port`` of every worker and ps;
    ``handle(*events)`` feeds the coordinator's state machine;
    ``failed_tasks()`` returns ``(failed worker indices, failed ps tasks)``.
    """

    def __init__(self, addresses: dict, num_workers: int, ps_tasks: list,
                 coordination_target: str, handle, failed_tasks):
        self._addresses = addresses
        self._num_workers = num_workers
        self._ps_tasks = ps_tasks
        self._coordination_target = coordination_target
        self._handle = handle
        self._failed_tasks = failed_tasks
        self._clients: dict = {}
        self._client_locks = collections.defaultdict(threading.Lock)
        self._ps_incarnations: dict = {}
        self._stop = threading.Event()
        self._service_up = True
        # Tasks the service's last answer had not registered: it cannot tell
        # whether they are up, so the prober asks them.
        self._unregistered: frozenset = frozenset()
        self.threads = [
            threading.Thread(target=self._watch, daemon=True,
                             name="ClusterCoordinator-Watcher"),
            threading.Thread(target=self._probe_loop, daemon=True,
                             name="ClusterCoordinator-Prober"),
        ]

    def start(self):
        for t in self.threads:
            t.start()

    def stop(self):
        """Asks the threads to end (they are joined by the coordinator)."""
        self._stop.set()

    def close(self):
        """Closes the worker clients of the probes."""
        for c in list(self._clients.values()):
            try:
                c.close()
            except Exception:  # noqa: BLE001, S110
                pass

    # -- probes ---------------------------------------------------------------------
    def after_task_error(self, i: int, error: BaseException):
        """After an RPC-class error on worker i: is it the worker, a ps, or
        neither? Asked with GetStatus probes, not by reading the message."""
        inc = self.probe(task_name("worker", i))
        if inc is None:
            _log.warning("Worker %d does not answer after %s", i, first_line(error))
            self._handle(cs.WorkerFailed(i, first_line(error)))
            return
        self._handle(cs.WorkerRecovered(i, inc))
        for task in self._ps_tasks:
            inc = self.probe(task)
            known = self._ps_incarnations.get(task)
            if inc is None:
                self._ps_failed(task, f"it does not answer ({first_line(error)})")
            elif known is not None and inc != known:
                self._ps_failed(task, "it restarted (its variables are lost)")
                self._ps_incarnations[task] = inc
                self._handle(cs.PsRecovered(task))

    def fence(self, session_handles):
        """Deletes these worker sessions on every ps: their running steps are
        aborted there and later ones refused (a failed worker's late steps
        never apply). A ps that does not answer is logged and skipped."""
        for task in self._ps_tasks:
            with self._client_locks[task]:
                try:
                    c = self._client(task)
                    for h in session_handles:
                        c.delete_worker_session(h)
                except Exception as e:  # noqa: BLE001 - an OpError, or a closed channel
                    _log.warning("Could not fence %d session(s) on %s: %s",
                                 len(session_handles), task, first_line(e))

    def _ps_failed(self, task: str, why: str):
        _log.warning("Parameter server %s failed: %s", task, why)
        self._handle(cs.PsFailed(task, errors.UnavailableError(
            None, None, f"Parameter server {task} is unavailable: {why}. Its "
            "variables are lost: create the coordinator's variables again or "
            "restore them from a checkpoint")))

    def _client(self, task: str):
        c = self._clients.get(task)
        if c is None:
            c = self._clients[task] = transports.connect_worker(
                task, self._addresses[task])
        return c

    def probe(self, task: str, timeout_s: float = PROBE_TIMEOUT_S) -> int | None:
        """The task's incarnation, or None when it does not answer in time."""
        with self._client_locks[task]:
            try:
                c = self._client(task)
                c.get_status(timeout_s=timeout_s)
                return c.incarnation
            except Exception:  # noqa: BLE001 - an OpError, or a closed channel
                return None

    # -- the threads ----------------------------------------------------------------
    def _watch(self):
        """Heartbeat watcher: task states from the coordination service."""
        client = None
        last: dict = {}
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                if client is None:
                    client = transports.connect_coordination(
                        self._coordination_target)
                records = client.task_states(timeout_s=1.0)
                self._unregistered = frozenset(
                    r.task for r in records if r.task in self._addresses
                    and r.state not in ("CONNECTED", "DISCONNECTED", "ERROR"))
                if not self._service_up:
                    _log.info("Coordination service at %s is back",
                              self._coordination_target)
                self._service_up = True
            except Exception as e:  # noqa: BLE001 - fall back to probing
                if self._service_up:
                    _log.warning("Coordination service at %s unavailable (%s); "
                                 "probing tasks directly", self._coordination_target,
                                 first_line(e))
                self._service_up = False
                last.clear()
                records = None
            if records is not None:
                try:
                    self._observe({r.task: (r.state, r.incarnation)
                                   for r in records}, last, "heartbeats")
                except Exception:  # noqa: BLE001 - the watcher must not die
                    _log.exception("ClusterCoordinator-Watcher")
            # Polled, not followed: a snapshot re-syncs after a service restart or
            # dropped events, and a failed call is how the service's loss shows.
            self._stop.wait(max(0.0, POLL_INTERVAL_S - (time.monotonic() - started)))
        if client is not None:
            client.close()

    def _observe(self, seen: dict, last: dict, how: str):
        """Feeds task transitions (state, incarnation) as events."""
        events = []
        for task, (state, inc) in seen.items():
            if state not in ("CONNECTED", "DISCONNECTED", "ERROR"):
                continue  # not registered yet
            up = state == "CONNECTED"
            prev = last.get(task)
            last[task] = (up, inc)
            spec = DeviceSpec.from_string(task)
            if spec.job == "worker" and spec.task is not None and (
                    spec.task < self._num_workers):
                i = spec.task
                if up and (prev is None or not prev[0] or prev[1] != inc):
                    events.append(cs.WorkerRecovered(i, inc))
                elif not up and (prev is None or prev[0]):
                    events.append(cs.WorkerFailed(i, f"{state} ({how})"))
            elif spec.job == "ps" and task in self._ps_tasks:
                known = self._ps_incarnations.get(task)
                if up:
                    if known is not None and inc != known:
                        self._ps_failed(task, "it restarted (its variables are lost)")
                    self._ps_incarnations[task] = inc
                    if prev is None or not prev[0] or prev[1] != inc:
                        events.append(cs.PsRecovered(task))
                elif prev is None or prev[0]:
                    self._ps_failed(task, f"{state}: no heartbeat within the "
                                    f"coordination service's timeout ({how})")
        if events:
            self._handle(*events)

    def _probe_loop(self):
        """Failed tasks are probed until they answer, and the tasks the service
        does not know; without the coordination service every task is."""
        last: dict = {}
        # A task that is down pushes nothing: it is asked again at each interval.
        while not self._stop.wait(PROBE_INTERVAL_S):
            try:
                self._probe_round(last)
            except Exception:  # noqa: BLE001 - the prober must not die
                _log.exception("ClusterCoordinator-Prober")

    def _probe_round(self, last: dict):
        """One round of the prober."""
        failed, failed_ps = self._failed_tasks()
        service_up = self._service_up
        if service_up:
            last.clear()
            for i in failed:
                inc = self.probe(task_name("worker", i))
                if inc is not None and not self._stop.is_set():
                    self._handle(cs.WorkerRecovered(i, inc))
            for task in failed_ps:
                inc = self.probe(task)
                if inc is not None and not self._stop.is_set():
                    self._observe({task: ("CONNECTED", inc)}, {}, "probe")
            # A task the service does not know (e.g. a worker stopped before it
            # registered with a restarted leader) misses no heartbeat: one alive
            # to the coordinator fails when it does not answer (against the
            # coordinator's state, which other threads change too).
            down = {task_name("worker", i) for i in failed} | set(failed_ps)
            tasks = sorted(self._unregistered - down)
        else:
            tasks = list(self._addresses)
        if not tasks:
            return
        seen = {}
        for task in tasks:
            inc = self.probe(task)
            seen[task] = ("CONNECTED", inc) if inc is not None else (
                "DISCONNECTED", None)
        if service_up:
            last = {t: (True, inc) for t, (_, inc) in seen.items()}
        if not self._stop.is_set():
            self._observe(seen, last, "probes")
