"""``%load_ext nbdist``: the ``%cluster`` line and cell magics.

One thin ``Magics`` class over the public API (``LocalCluster``, ``Server``,
the widgets, ``nbdist.notebook.control``); the docstring of ``cluster`` is the
help ``%cluster?`` shows. A command that cannot be done is one line
(``UsageError``), never a traceback.
"""

from __future__ import annotations

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments, parse_argstring

from nbdist.notebook import attach, control

__all__ = [
    "ClusterMagics",
    "active_cluster",
    "load_ipython_extension",
    "unload_ipython_extension",
]

COMMANDS = (
    "local",
    "start",
    "status",
    "stop",
    "kill",
    "restart",
    "placement",
    "timeline",
    "connect",
    "disconnect",
    "traffic",
    "slow",
    "partition",
    "heal",
)
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
                return self._run_cell(cell, args)
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
            return getattr(self, "_" + args.command)(args)
        except UsageError:
            raise
        except Exception as e:  # noqa: BLE001 - one clear line, never a traceback
            raise UsageError(_one_line(e)) from None

    # -- commands -------------------------------------------------------------------------
    def _need_cluster(self):
        if self.running is None:
            raise UsageError(
                "no cluster is running: start one with %cluster start or %cluster local"
            )
        return self.running

    def _no_args(self, args, command):
        if args.args:
            raise UsageError(
                f"%cluster {command} takes no task or expression; got "
                f"'{' '.join(args.args)}'"
            )

    def _started(self, cluster, target):
        from nbdist.notebook.events import EventFollower, cluster_gone, event_source_for
        from nbdist.notebook.widget_cluster import ClusterView

        self.running = cluster
        source = event_source_for(cluster)
        if source is not None:
            self.follower = EventFollower(
                source,
                name="nbdist-events-%cluster",
                until=lambda: cluster_gone(cluster),
            )
        # The view subscribes first, then starts the follower: it sees every event.
        self.view = self._keep(ClusterView(cluster, follower=self.follower))
        self._push(cluster=cluster, target=target)
        return self.view

    def _local(self, args):
        """An in-process server, made the notebook's `target`."""
        self._no_args(args, "local")
        self._check_free()
        from nbdist.runtime.server_lib import Server

        server = Server.create_local_server()
        return self._started(server, server.target)

    def _start(self, args):
        self._no_args(args, "start")
        self._check_free()
        if args.slurm is not None:
            try:
                return self._started(*attach.start_slurm(args))
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
        return self._started(cluster, cluster.target(job, 0))

    def _connect(self, args):
        self._check_free()
        cluster, silent = attach.connect_from_args(args, self.shell.user_ns)
        view = self._started(cluster, cluster.target(*cluster.default_task()))
        view.message = f"kill and restart are {cluster.not_owned_reason}"
        view.sync(timeout=3.0)
        if silent:
            print(f"not answering (yet): {', '.join(silent)}")
        return view

    def _disconnect(self, args):
        self._no_args(args, "disconnect")
        cluster = self._need_cluster()
        if getattr(cluster, "owned", True):
            raise UsageError(
                "this notebook started the cluster: %cluster stop stops it "
                "(disconnect is for clusters attached with %cluster connect)"
            )
        self.close()
        n = len(control.task_names(cluster))
        print(
            f"disconnected from {cluster.source}; its {n} task"
            f"{'s keep' if n != 1 else ' keeps'} running"
        )

    def _check_free(self):
        if self.running is not None and not getattr(self.running, "owned", True):
            raise UsageError(
                f"a cluster is attached ({self.running.source}): %cluster "
                "disconnect first"
            )
        if self.running is not None:
            raise UsageError("a cluster is already running: %cluster stop it first")

    def _status(self, args):
        self._no_args(args, "status")
        self._need_cluster()
        self.view.sync(timeout=1.0)
        return self.view.snapshot()

    def _stop(self, args):
        self._no_args(args, "stop")
        cluster = self._need_cluster()
        if not getattr(cluster, "owned", True):
            raise UsageError(
                f"stop is {cluster.not_owned_reason}; %cluster disconnect detaches "
                "and leaves it running"
            )
        self.close()
        n = len(control.task_names(cluster))
        print(f"stopped {n} task{'s' if n != 1 else ''}")

    def _task_arg(self, args, command):
        if len(args.args) != 1:
            raise UsageError(
                f"%cluster {command} needs one task, e.g. %cluster {command} worker:1"
            )
        return args.args[0]

    def _kill(self, args):
        task = self._task_arg(args, "kill")
        print(
            self.view.kill(task)
            if self.view
            else control.kill(self._need_cluster(), task)
        )

    def _restart(self, args):
        task = self._task_arg(args, "restart")
        print(
            self.view.restart(task)
            if self.view
            else control.restart(self._need_cluster(), task)
        )

    def _slow(self, args):
        from nbdist.notebook import fault_magics

        return fault_magics.slow(self, args.args)

    def _partition(self, args):
        from nbdist.notebook import fault_magics

        return fault_magics.partition(self, args.args)

    def _heal(self, args):
        from nbdist.notebook import fault_magics

        return fault_magics.heal(self, args.args)

    def _eval(self, args):
        expr = " ".join(args.args)
        try:
            return eval(expr, self.shell.user_ns)
        except Exception as e:  # noqa: BLE001
            raise UsageError(f"cannot evaluate '{expr}': {_one_line(e)}") from None

    def _placement(self, args):
        from nbdist.notebook.widget_placement import PlacementView

        cluster = self._need_cluster()
        graph = self._eval(args) if args.args else None
        if graph is not None and not hasattr(graph, "as_graph_def"):
            raise UsageError(f"'{' '.join(args.args)}' is not a graph")
        return self._keep(PlacementView(graph, cluster, follower=self.follower))

    def _timeline(self, args):
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
        value = self._eval(args)
        if isinstance(value, RunMetadata):
            return TimelineView(value)
        self._need_cluster()
        target = self._pushed.get("target")
        session = get_default_session()
        if session is not None:
            return TimelineView.trace(session, value, title=" ".join(args.args))
        with Session(target) as sess:
            return TimelineView.trace(sess, value, title=" ".join(args.args))

    def _traffic(self, args):
        from nbdist.notebook.widget_traffic import TrafficView

        cluster = self._need_cluster()
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
            return self._keep(TrafficView(cluster))
        if self.follower is None:
            raise UsageError("%cluster traffic needs the cluster's event stream")
        return self._keep(TrafficView(cluster, follower=self.follower))

    # -- %%cluster ------------------------------------------------------------------------
    def _run_cell(self, cell, args):
        from nbdist.notebook.live_view import in_kernel
        from nbdist.notebook.cell_runner import TaskRun, run_cell_on_tasks, select_tasks
        from nbdist.notebook.widget_cell import CellRunView

        cluster = self._need_cluster()
        spec = cluster.cluster_spec
        selected = select_tasks(spec, args.tasks)
        targets = {key: "grpc://" + spec.task_address(*key) for key in selected}
        if args.timeout is not None and args.timeout <= 0:
            raise UsageError("--timeout must be a positive number of seconds")
        source = self.shell.transform_cell(cell)
        try:
            compile(source, "<%%cluster>", "exec")
        except SyntaxError as e:
            raise UsageError(
                f"the cell does not compile: {e.msg} (line {e.lineno})"
            ) from None
        view = CellRunView([TaskRun(j, i, targets[(j, i)]) for j, i in selected])
        live = in_kernel()
        if live:
            from IPython.display import display

            # While it runs: the widget (tabs filling live) under a display id,
            # with one line that stays when the widget goes at the end (the view
            # is shown again below, every task's output in its text forms). Never
            # an update that changes text (nbval sees only the first display of
            # an output, nbclient and Jupyter the updated one), nor one that
            # leaves an empty output.
            names = ", ".join(r.name for r in view.runs)
            line = f"%%cluster on {names} (each task's output below)"
            lines = {"text/plain": line,
                     "text/html": f"<div class='muted'>{line}</div>"}
            widget = {
                k: v
                for k, v in view.widget._repr_mimebundle_().items()
                if k.startswith("application/vnd.jupyter.widget")
            }
            handle = display({**widget, **lines}, raw=True, display_id=True)

        def changed(run):
            for i, r in enumerate(view.runs):
                if r.name == run.name:
                    view.runs[i] = run
            view.changed(run)

        runs = run_cell_on_tasks(
            source,
            spec,
            targets,
            self.shell.user_ns,
            tasks=args.tasks,
            timeout=args.timeout,
            on_change=changed,
        )
        view.runs = runs
        view.refresh()
        view.close()
        if live:
            handle.update(lines, raw=True)
            display(view)
        if not live:
            for r in runs:
                text = r.text + r.traceback
                if text:
                    print(f"[{r.name}]")
                    print("  " + text.rstrip("\n").replace("\n", "\n  "))
        results = {r.name: r.result for r in runs if r.status == "done"}
        self.results = results
        failed = [r for r in runs if r.status != "done"]
        if failed:
            parts = "; ".join(
                f"{r.name} timed out after {args.timeout:g} s"
                if r.status == "timed out"
                else f"{r.name}: {type(r.error).__name__}: {_one_line(r.error)}"
                for r in failed
            )
            where = "in its tab" if live else "above"
            raise UsageError(
                f"%%cluster: {len(failed)} of {len(runs)} tasks failed: "
                f"{parts} (traceback {where})"
            )
        if any(v is not None for v in results.values()):
            return results
        return None

    # -- housekeeping ---------------------------------------------------------------------
    def _keep(self, view):
        self._views.append(view)
        return view

    def _push(self, **names):
        self.shell.user_ns.update(names)
        self._pushed = dict(names)

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


def _one_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]


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
