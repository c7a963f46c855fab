"""``%cluster local | start | connect | disconnect | stop``: the verbs that
give the notebook a cluster and take it away. Each is a function of the
``ClusterMagics`` instance (which holds the running cluster, its view and
event follower) and the parsed arguments."""

from __future__ import annotations

from IPython.core.error import UsageError

from nbdist.notebook import attach, control
from nbdist.notebook.magics_usage import need_cluster, no_args

__all__ = ["connect", "disconnect", "local", "start", "started", "stop"]


def started(magics, cluster, target):
    """Makes ``cluster`` the running one: its event follower, a live
    ``ClusterView`` (returned), and ``cluster``/``target`` in the namespace."""
    from nbdist.notebook.events import EventFollower, cluster_gone, event_source_for
    from nbdist.notebook.widget_cluster import ClusterView

    magics.running = cluster
    source = event_source_for(cluster)
    if source is not None:
        magics.follower = EventFollower(
            source,
            name="nbdist-events-%cluster",
            until=lambda: cluster_gone(cluster),
        )
    # The view subscribes first, then starts the follower: it sees every event.
    magics.view = magics.keep(ClusterView(cluster, follower=magics.follower))
    magics.push(cluster=cluster, target=target)
    return magics.view


def _check_free(magics):
    running = magics.running
    if running is not None and not getattr(running, "owned", True):
        raise UsageError(
            f"a cluster is attached ({running.source}): %cluster disconnect first"
        )
    if running is not None:
        raise UsageError("a cluster is already running: %cluster stop it first")


def local(magics, args):
    """An in-process server, made the notebook's `target`."""
    no_args(args, "local")
    _check_free(magics)
    from nbdist.runtime.server_lib import Server

    server = Server.create_local_server()
    return started(magics, server, server.target)


def start(magics, args):
    """A LocalCluster (or a SLURM job with ``--slurm``) of one process per task."""
    no_args(args, "start")
    _check_free(magics)
    if args.slurm is not None:
        try:
            return started(magics, *attach.start_slurm(args))
        except attach.SlurmStartError as e:  # its state and the tail of its log
            raise UsageError(str(e).strip()) from None
    if args.partition is not None or args.time is not None:
        raise UsageError("--partition and --time are for %cluster start --slurm")
    from nbdist.cluster.local_cluster import LocalCluster

    args.ps = 1 if args.ps is None else args.ps
    args.workers = 2 if args.workers is None else args.workers
    _record_traffic(args.traffic)
    cluster = LocalCluster(
        ps=args.ps,
        workers=args.workers,
        chief=int(args.chief),
        evaluator=int(args.evaluator),
        progress=False,
        gpus_per_task=args.gpus,
    )
    job = (
        "chief"
        if args.chief
        else ("worker" if args.workers else cluster.cluster_spec.jobs[0])
    )
    return started(magics, cluster, cluster.target(job, 0))


def connect(magics, args):
    """Attaches to a running cluster this notebook did not start."""
    _check_free(magics)
    cluster, silent = attach.connect_from_args(args, magics.shell.user_ns)
    view = started(magics, cluster, cluster.target(*cluster.default_task()))
    view.message = f"kill and restart are {cluster.not_owned_reason}"
    view.sync(timeout=3.0)
    if silent:
        print(f"not answering (yet): {', '.join(silent)}")
    return view


def disconnect(magics, args):
    """Detaches from an attached cluster; its tasks keep running."""
    no_args(args, "disconnect")
    cluster = need_cluster(magics)
    if getattr(cluster, "owned", True):
        raise UsageError(
            "this notebook started the cluster: %cluster stop stops it "
            "(disconnect is for clusters attached with %cluster connect)"
        )
    magics.close()
    n = len(control.task_names(cluster))
    print(
        f"disconnected from {cluster.source}; its {n} task"
        f"{'s keep' if n != 1 else ' keeps'} running"
    )


def stop(magics, args):
    """Stops every task of the cluster this notebook started."""
    no_args(args, "stop")
    cluster = need_cluster(magics)
    if not getattr(cluster, "owned", True):
        raise UsageError(
            f"stop is {cluster.not_owned_reason}; %cluster disconnect detaches "
            "and leaves it running"
        )
    magics.close()
    n = len(control.task_names(cluster))
    print(f"stopped {n} task{'s' if n != 1 else ''}")


def _record_traffic(choice: str | None) -> None:
    """Whether the tasks ``%cluster start`` makes publish their taps (their
    environment is the kernel's): on unless ``--traffic off``, or switched
    off before (``NBDIST_TAP_EVENTS=0``, ``TrafficView.record_new_clusters(False)``).
    Cost: ``benchmarks/bench_tap_events.py``."""
    from nbdist.notebook.widget_traffic import TrafficView
    from nbdist.runtime.tap_record import tap_events_on

    if choice is None:
        choice = "on" if tap_events_on(default=True) else "off"
    TrafficView.record_new_clusters(choice == "on")
