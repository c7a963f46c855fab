"""The notebook layer: ``%load_ext nbdist`` (the ``%cluster`` magics) and the
live widgets, usable on their own::

    import nbdist as nd
    cluster = nd.LocalCluster(ps=1, workers=2)
    nd.notebook.ClusterView(cluster)          # tasks, pids, state, kill/restart
    nd.notebook.PlacementView(graph, cluster)  # ops and variables per device
    nd.notebook.BarrierView(cluster)           # barriers and SyncReplicas rounds
    nd.notebook.TimelineView.trace(sess, train_op)  # one step's ops over time
    nd.notebook.TrainingView(cluster, logdir=logdir)  # loss and steps/s per worker
    nd.notebook.TrafficView(cluster)           # calls and bytes between tasks
    nd.notebook.FailureStoryView(cluster)      # kill -> detected -> restored -> redone
    nd.notebook.StalenessView({"worker:0": [(0, 1)]})  # async gradients' staleness

ipywidgets is imported only when a widget is drawn in a kernel; elsewhere each
view is text/html and text/plain.
"""

from __future__ import annotations

from nbdist.notebook.events import EventFollower, ServiceEventSource, event_source_for
from nbdist.notebook.widget_barrier import BarrierView
from nbdist.notebook.widget_cluster import ClusterView
from nbdist.notebook.widget_collective import CollectiveView
from nbdist.notebook.widget_placement import PlacementView
from nbdist.notebook.widget_story import FailureStoryView
from nbdist.notebook.widget_staleness import StalenessView
from nbdist.notebook.widget_timeline import TimelineView
from nbdist.notebook.widget_traffic import TrafficView
from nbdist.notebook.widget_training import TrainingView

__all__ = [
    "BarrierView",
    "ClusterView",
    "CollectiveView",
    "EventFollower",
    "FailureStoryView",
    "PlacementView",
    "ServiceEventSource",
    "StalenessView",
    "TimelineView",
    "TrafficView",
    "TrainingView",
    "active_cluster",
    "event_source_for",
    "last_cell_results",
    "load_ipython_extension",
    "unload_ipython_extension",
]


def active_cluster():
    """The cluster ``%cluster start`` or ``%cluster local`` started (None if
    none runs): a ``LocalCluster`` or an in-process ``Server``."""
    from nbdist.notebook import magics

    return magics.active_cluster()


def last_cell_results() -> dict:
    """{task: value} of the last ``%%cluster`` cell's tasks that finished (also
    when another task failed and the cell reported an error)."""
    from nbdist.notebook import magics

    return dict(magics._active[0].results) if magics._active else {}


def load_ipython_extension(ipython):
    """``%load_ext nbdist``: registers the ``%cluster`` magics, and shows an
    ``nd.errors.OpError`` as its message and the cell that built its op (``%tb``
    for the full traceback)."""
    from nbdist.notebook import error_display
    from nbdist.notebook.magics import load_ipython_extension as load

    load(ipython)
    error_display.register(ipython)


def unload_ipython_extension(ipython):
    from nbdist.notebook import error_display
    from nbdist.notebook.magics import unload_ipython_extension as unload

    unload(ipython)
    error_display.unregister(ipython)
