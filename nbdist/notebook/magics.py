"""``%load_ext nbdist``: the ``%cluster`` line and cell magics.

One thin ``Magics`` class over the public API (``LocalCluster``, ``Server``,
the widgets, ``nbdist.notebook.control``); the docstring of ``cluster`` is the
help ``%cluster?`` shows. It parses and checks the arguments, then hands each
command to its verb module: ``magics_start`` (local, start, connect,
disconnect, stop), ``magics_status`` (status, kill, restart and the views),
``fault_magics`` (slow, partition, heal) and ``magics_run`` (the ``%%cluster``
cell); ``%tensorboard`` is ``tensorboard_magic``. A command that cannot be
done is one line (``UsageError``, ``magics_usage``), never a traceback.
"""

from __future__ import annotations

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from nbdist.notebook import (
    attach,
    fault_magics,
    magics_run,
    magics_start,
    magics_status,
)
from nbdist.notebook.magics_usage import one_line

__all__ = [
    "ClusterMagics",
    "active_cluster",
    "load_ipython_extension",
    "unload_ipython_extension",
]

# Each command of ``%cluster`` and the function (of the magics and the parsed
# arguments) that does it, grouped by verb in their modules.
_VERBS = {
    "local": magics_start.local,
    "start": magics_start.start,
    "status": magics_status.status,
    "stop": magics_start.stop,
    "kill": magics_status.kill,
    "restart": magics_status.restart,
    "placement": magics_status.placement,
    "timeline": magics_status.timeline,
    "connect": magics_start.connect,
    "disconnect": magics_start.disconnect,
    "traffic": magics_status.traffic,
    "slow": lambda magics, args: fault_magics.slow(magics, args.args),
    "partition": lambda magics, args: fault_magics.partition(magics, args.args),
    "heal": lambda magics, args: fault_magics.heal(magics, args.args),
}
COMMANDS = tuple(_VERBS)
_active: list = []  # the Magics instance of the shell that loaded the extension


def active_cluster():
    """The cluster of ``%cluster`` (``LocalCluster``, ``SlurmCluster``,
    ``Server``, or the ``AttachedCluster`` of ``%cluster connect``), or None."""
    return _active[0].running if _active else None


@magics_class
class ClusterMagics(Magics):
    """Start, watch and break a cluster from a notebook."""

    def __init__(self, shell=None):
        super().__init__(shell)
        self.running = None
        self.follower = None
        self.view = None
        self._views: list = []
        self._pushed: dict = {}
        self.results: dict = {}  # of the last %%cluster cell, failed tasks left out

    # -- the magic ----------------------------------------------------------------------
    @magic_arguments()
    @argument(
        "command",
        nargs="?",
        default=None,
        metavar="COMMAND",
        help="local | start | status | stop | kill TASK | restart TASK | "
        "placement [GRAPH] | timeline [FETCHES_OR_RUN_METADATA] | connect SPEC | "
        "disconnect",
    )
    @argument(
        "args",
        nargs="*",
        metavar="ARG",
        help="the task (worker:1) for kill/restart; a Python expression for "
        "placement/timeline; the cluster spec (string, dict or name) for connect",
    )
    @argument("--ps", type=int, default=None, help="start: parameter servers (1)")
    @argument("--workers", type=int, default=None, help="start: workers (2)")
    @argument("--chief", action="store_true", help="start: add a chief task")
    @argument("--evaluator", action="store_true", help="start: add an evaluator task")
    @argument("--gpus", type=int, default=0,
              help="start: virtual GPU devices per task, run on the CPU (0)")
    @argument(
        "--tasks",
        nargs="+",
        default=None,
        metavar="TASK",
        help="%%%%cluster: jobs or tasks to run the cell on, e.g. worker or "
        "worker:0 ps:0 (default: chief and workers)",
    )
    @argument(
        "--timeout",
        type=float,
        default=None,
        metavar="S",
        help="%%%%cluster: give up on tasks still running after S seconds; "
        "connect: on tasks that do not answer within S seconds (default 10)",
    )
    @argument(
        "--slurm",
        nargs="?",
        const=True,
        default=None,
        metavar="JOBID",
        help="start: in a SLURM job (SlurmCluster); connect: to SLURM job JOBID",
    )
    @argument(
        "--traffic",
        choices=("on", "off"),
        default=None,
        help="start: whether the tasks record their traffic for TrafficView "
        "(default on; off also with NBDIST_TAP_EVENTS=0 or "
        "TrafficView.record_new_clusters(False))",
    )
    @argument("--partition", default=None, help="start --slurm: the SLURM partition")
    @argument("--time", default=None, help="start --slurm: the job's time limit")
    @argument(
        "--tf_config",
        nargs="?",
        const=True,
        default=None,
        metavar="JSON",
        help="connect: to the cluster of TF_CONFIG (the environment's, or JSON)",
    )
    @line_cell_magic
    def cluster(self, line, cell=None):
        """Start, inspect and break an nbdist cluster from the notebook.

        Line magic::

            %cluster local                      an in-process server; `target`
            %cluster start --ps 1 --workers 2   a LocalCluster (one process per
                            [--chief] [--evaluator]   task); shows a live ClusterView
                            [--gpus N]          N virtual GPUs per task (/gpu:i)
            %cluster status                     the ClusterView as it is now,
                                                with each task's history
            %cluster kill worker:1              SIGKILL a task
            %cluster restart worker:1           start it again at its address
            %cluster placement [GRAPH]          PlacementView of GRAPH (default:
                                                the default graph) on the cluster
            %cluster timeline [FETCHES]         trace one step of FETCHES (or show
                                                a RunMetadata) as a TimelineView;
                                                bare: the last step traced here
            %cluster traffic                    TrafficView: calls and bytes
                                                between tasks, live (the tasks
                                                of %cluster start record them
                                                unless started --traffic off)
            %cluster traffic on|off             switch the running tasks'
                                                recording
            %cluster stop                       stop every task
            %cluster slow worker:1 20ms         each call worker:1 makes (and
                                                each step it serves) waits 20 ms
            %cluster slow worker:1 ps:0 5ms     only the messages on that link
            %cluster partition worker:1 ps:0    cut the link: calls across it
                                                fail (UnavailableError)
            %cluster heal                       remove every injected fault
            %cluster start --slurm [--partition P] [--time T] --ps 1 --workers 4
                                                the tasks as one SLURM job
                                                (SlurmCluster); stop cancels it
            %cluster connect SPEC               attach to a running cluster this
                                                notebook did not start: SPEC is
                                                ps|h:2222,worker|h:2223;h:2224,
                                                a dict (literal or name),
                            --tf_config[=JSON]  TF_CONFIG's cluster, or
                            --slurm JOBID [--ps N --workers M]   a SLURM job's;
                            [--timeout S]       gives up on silent tasks after S s
            %cluster disconnect                 detach; the tasks keep running

        `local`, `start` and `connect` set `cluster` (the LocalCluster,
        SlurmCluster, Server or AttachedCluster) and `target` (the session
        target of the chief or worker 0) in the notebook's namespace. An
        attached cluster's tasks are not this notebook's processes: kill,
        restart and stop are unavailable (disconnect instead).

        Cell magic::

            %%cluster [--tasks worker] [--timeout S]
            ctx = nd.distribute.get_current_worker_context()
            ...

        runs the cell once per selected task (by default the chief and the
        workers), each in its own thread with its own default graph and
        worker context (task_type, task_id, master_target, is_chief,
        num_workers, wait_for_other_workers()); shows each task's output in
        its own tab, live, and returns {task: value of the last expression};
        once done, the cell's output also holds each task's output, result and
        error line as text and html (what nbval and a static render see).
        When a task raises (or runs past --timeout), its tab shows the
        traceback and the cell fails with one line naming it;
        `nd.notebook.last_cell_results()` has the other tasks' values.
        """
        try:
            line, tf_config = attach.take_tf_config(line)
            args = parse_argstring(self.cluster, line)
            if tf_config is not None:
                args.tf_config = tf_config
            if cell is not None:
                if args.command is not None or args.args:
                    raise UsageError(
                        "%%cluster takes only --tasks and --timeout; "
                        f"got '{line.strip()}'"
                    )
                return magics_run.run_cell(self, cell, args)
            if args.command is None:
                raise UsageError(
                    f"give a command: %cluster {'|'.join(COMMANDS)} (see %cluster?)"
                )
            if args.command not in COMMANDS:
                raise UsageError(
                    f"unknown command '{args.command}': use one of "
                    f"{', '.join(COMMANDS)}"
                )
            if args.tasks is not None:
                raise UsageError("--tasks is for the %%cluster cell magic")
            if args.timeout is not None and args.command != "connect":
                raise UsageError(
                    "--timeout is for the %%cluster cell magic and %cluster connect"
                )
            if args.tf_config is not None and args.command != "connect":
                raise UsageError("--tf_config is for %cluster connect")
            if args.command not in ("start", "connect") and args.slurm is not None:
                raise UsageError("--slurm is for %cluster start and %cluster connect")
            return _VERBS[args.command](self, args)
        except UsageError:
            raise
        except Exception as e:  # noqa: BLE001 - one clear line, never a traceback
            raise UsageError(one_line(e)) from None

    # -- state the verbs share --------------------------------------------------------
    def keep(self, view):
        """Keeps ``view`` to close with the cluster; returns it."""
        self._views.append(view)
        return view

    def push(self, **names):
        """Puts ``names`` in the notebook's namespace (removed on close)."""
        self.shell.user_ns.update(names)
        self._pushed = dict(names)

    @property
    def target(self):
        """The session target pushed with the running cluster, or None."""
        return self._pushed.get("target")

    def close(self):
        """Stops the cluster (detaches from an attached one), then the views
        (which draw it stopped) and the event follower."""
        cluster, self.running = self.running, None
        if cluster is not None:
            if not getattr(cluster, "owned", True):
                cluster.disconnect()  # not ours: its tasks keep running
            elif hasattr(cluster, "shutdown"):
                cluster.shutdown()  # returns once each process has exited (Popen.wait)
            else:
                cluster.stop()
        for v in self._views:
            v.close()
        self._views = []
        if cluster is not None:
            from nbdist.notebook.live_view import freeze_views

            freeze_views(cluster)
        if self.follower is not None:
            self.follower.stop()
            self.follower = None
        ns = self.shell.user_ns if self.shell is not None else {}
        for k, v in self._pushed.items():
            if ns.get(k) is v:
                del ns[k]
        self._pushed = {}
        self.view = None


def load_ipython_extension(ipython):
    """Registers ``%cluster`` / ``%%cluster`` (``%load_ext nbdist``)."""
    from nbdist.notebook import tensorboard_magic

    magics = ClusterMagics(ipython)
    ipython.register_magics(magics)
    tensorboard_magic.register(ipython)
    _active[:] = [magics]


def unload_ipython_extension(ipython):
    """Stops the cluster the magics started."""
    for m in _active:
        m.close()
    _active.clear()
