"""``%cluster status | kill | restart | placement | timeline | traffic``: the
verbs that look at the running cluster (its views) and act on one task. Each
is a function of the ``ClusterMagics`` instance and the parsed arguments."""

from __future__ import annotations

from IPython.core.error import UsageError

from nbdist.notebook import control
from nbdist.notebook.magics_usage import need_cluster, no_args, one_line, task_arg

__all__ = ["kill", "placement", "restart", "status", "timeline", "traffic"]


def status(magics, args):
    """The ClusterView as it is now, with each task's history."""
    no_args(args, "status")
    need_cluster(magics)
    magics.view.sync(timeout=1.0)
    return magics.view.snapshot()


def kill(magics, args):
    """SIGKILLs a task."""
    _on_task(magics, args, "kill")


def restart(magics, args):
    """Starts a killed task again at its address."""
    _on_task(magics, args, "restart")


def _on_task(magics, args, command):
    # Through the live view when there is one, so that it shows in its history.
    task = task_arg(args, command)
    if magics.view:
        print(getattr(magics.view, command)(task))
    else:
        print(getattr(control, command)(need_cluster(magics), task))


def _eval(magics, args):
    expr = " ".join(args.args)
    try:
        return eval(expr, magics.shell.user_ns)
    except Exception as e:  # noqa: BLE001
        raise UsageError(f"cannot evaluate '{expr}': {one_line(e)}") from None


def placement(magics, args):
    """A PlacementView of the graph the arguments name (default graph if none)."""
    from nbdist.notebook.widget_placement import PlacementView

    cluster = need_cluster(magics)
    graph = _eval(magics, args) if args.args else None
    if graph is not None and not hasattr(graph, "as_graph_def"):
        raise UsageError(f"'{' '.join(args.args)}' is not a graph")
    return magics.keep(PlacementView(graph, cluster, follower=magics.follower))


def timeline(magics, args):
    """One step of the fetches the arguments name traced as a TimelineView (or a
    RunMetadata shown); bare, the last step traced in this kernel."""
    from nbdist.framework.default_session import get_default_session
    from nbdist.notebook.widget_timeline import TimelineView
    from nbdist.proto.config_pb2 import RunMetadata
    from nbdist.runtime.session import Session, last_traced_step

    if not args.args:
        last = last_traced_step()
        if last is None:  # said, not raised: Run All goes on
            print("%cluster timeline: no step traced yet in this kernel; trace "
                  "one with %cluster timeline FETCHES, e.g. %cluster timeline "
                  "train_op")
            return None
        return TimelineView(last, title="the last traced step")
    value = _eval(magics, args)
    if isinstance(value, RunMetadata):
        return TimelineView(value)
    need_cluster(magics)
    session = get_default_session()
    if session is not None:
        return TimelineView.trace(session, value, title=" ".join(args.args))
    with Session(magics.target) as sess:
        return TimelineView.trace(sess, value, title=" ".join(args.args))


def traffic(magics, args):
    """A TrafficView of the calls and bytes between tasks; ``on|off`` switches
    the running tasks' recording."""
    from nbdist.notebook.widget_traffic import TrafficView

    cluster = need_cluster(magics)
    if args.args:  # on|off: switch the running tasks' recording
        if args.args not in (["on"], ["off"]):
            raise UsageError("%cluster traffic takes on or off (or nothing: "
                             f"the view); got '{' '.join(args.args)}'")
        if hasattr(cluster, "tap"):
            print("an in-process server's traffic is always seen: its tap is "
                  "this kernel's")
            return None
        from nbdist.notebook.traffic_control import switch_traffic

        print(switch_traffic(cluster, args.args == ["on"]))
        return None
    if hasattr(cluster, "tap"):  # an in-process server: its own tap
        return magics.keep(TrafficView(cluster))
    if magics.follower is None:
        raise UsageError("%cluster traffic needs the cluster's event stream")
    return magics.keep(TrafficView(cluster, follower=magics.follower))
