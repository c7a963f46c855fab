"""Switching a running cluster's traffic recording (``%cluster traffic
on|off``): a ``"tap_control"`` event on its coordination service, which every
task's ``runtime.tap_record.TapSwitch`` follows and answers
(``"tap_switched"``) once its tap publishes, or stops publishing."""

from __future__ import annotations

import time
import uuid

from nbdist.notebook.control import ClusterCommandError
from nbdist.notebook.events import ServiceEventSource, event_source_for
from nbdist.notebook.live_view import short_task
from nbdist.runtime.tap_record import TAP_CONTROL_KIND, TAP_SWITCHED_KIND

__all__ = ["switch_traffic"]


def switch_traffic(cluster, on: bool, timeout: float = 10.0) -> str:
    """Makes every task of ``cluster`` publish its tap's records (``on``) or
    stop; waits up to ``timeout`` s for their answers and says how many
    answered."""
    source = event_source_for(cluster)
    if source is None:
        raise ClusterCommandError("this cluster has no coordination service to "
                                  "switch its traffic recording through")
    tasks = {short_task(t) for t in cluster.cluster_spec.task_names()}
    ident = uuid.uuid4().hex
    payload = {"on": bool(on), "id": ident}
    try:
        if isinstance(source, ServiceEventSource):
            source.service.publish(TAP_CONTROL_KIND, "notebook", payload)
        else:
            source.publish_events(
                [(TAP_CONTROL_KIND, "notebook", payload, int(time.time() * 1e6))])
        answered = _answers(source, ident, tasks, timeout)
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()
    word = "on" if on else "off"
    line = f"traffic recording {word} on {len(answered)} of {len(tasks)} tasks"
    silent = sorted(tasks - answered)
    return line + (f" (no answer from {', '.join(silent)})" if silent else "")


def _answers(source, ident: str, tasks: set, timeout: float) -> set:
    answered: set = set()
    watch = source.watch(0, kinds=[TAP_SWITCHED_KIND])
    try:
        deadline = time.monotonic() + timeout
        while answered < tasks:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            event = watch.next(timeout=left)
            if event is not None and event.payload.get("id") == ident:
                answered.add(short_task(event.task))
    finally:
        watch.stop()
    return answered
