"""``Session`` and ``InteractiveSession``: the client side of running a graph.

``Session("")`` has its own in-process master and worker; any other target is
resolved by ``runtime.transports`` (a ``grpc://`` target served by a ``Server`` of
this process is used in-process, with no RPC, like TF's local master).

As TF's: ``run`` on an empty graph and entering a session's ``with`` twice are
``RuntimeError``; an ``OpError`` from a run has the failing ``Operation`` of the
session's graph as ``op``; ``partial_run`` (client-side, see ``partial_run``),
``make_callable`` and ``_make_callable_from_options`` run over the same master
calls as ``run``. ``ConfigProto`` options nbdist has no use for (optimizer,
rewriter, thread pools, RPC, experimental) are accepted and ignored.
"""

from __future__ import annotations

import itertools
import logging
import threading

from nbdist import errors
from nbdist.executor import blas_threads
from nbdist.framework import op_site
from nbdist.framework.default_session import default_session
from nbdist.framework.ops import (
    Graph,
    Operation,
    Tensor,
    _default_graph_stack,
    get_default_graph,
)
from nbdist.proto import config_pb2
from nbdist.runtime import env, transports
from nbdist.runtime.device_attributes import device_counts
from nbdist.runtime.master import Master, tensor_value_for_client
from nbdist.runtime.partial_run import PartialRun
from nbdist.runtime.service import LocalMaster, MasterHandler
from nbdist.runtime.session_fetch import (  # noqa: F401 - FeedError re-exported
    FeedError,
    FetchError,
    FetchMapper,
    convert_feeds,
)
from nbdist.runtime.timeouts import ms_as_seconds
from nbdist.runtime.worker import Worker

_log = logging.getLogger("nbdist")

LOCAL_TASK = "/job:localhost/replica:0/task:0"
# The RunMetadata of the last step this process traced (any session): what a
# bare ``%cluster timeline`` shows.
_last_traced: list = [None]


def last_traced_step() -> config_pb2.RunMetadata | None:
    """A copy of the ``RunMetadata`` of the last step any session of this
    process ran with tracing (``RunOptions.trace_level``), or None."""
    return _last_traced[0]
_CLOSE_WAIT_S = 5.0  # how long close() lets cancelled steps report


class UnknownTargetError(errors.NotFoundError, ValueError):
    """A target no transport serves (TF: "No session factory registered"; also a
    ValueError, which an unsupported protocol has always been here)."""


# -- targets ------------------------------------------------------------------------
def _master_for(target: str, config):
    """``(master, owned)``: a private in-process master for ``""`` (through its
    ``MasterHandler``, as every master is served), else what the
    target's transport gives (a server of this process is reached without RPC)."""
    if not target:
        # As a server's tasks: OpenBLAS's pool of one thread per core spins after
        # every small matmul (an LSTM step's 128x156 @ 156x512: 8 ms of CPU with
        # two threads on a busy 2-core host, 0.4 ms with one).
        if not env.blas_threads_chosen():
            blas_threads.set_threads(config.intra_op_parallelism_threads or 1)
        worker = Worker(LOCAL_TASK, **device_counts(config))
        # Served as a server's master is: through its handler (validation,
        # timeouts, admission), minus the encoding.
        return LocalMaster(MasterHandler(Master(LOCAL_TASK, worker))), True
    if "://" not in target and not target.rpartition(":")[2].isdigit():
        raise UnknownTargetError(
            None, None, f"No session factory registered for the target {target!r}: "
            "use '' (in process), 'grpc://host:port' or 'host:port'")
    try:
        return transports.connect_master(target, config)
    except ValueError as e:  # an unsupported protocol
        raise UnknownTargetError(None, None, str(e)) from None


# -- sessions -------------------------------------------------------------------
class BaseSession:
    def __init__(self, target: str = "", graph: Graph | None = None, config=None):
        if graph is None:
            graph = get_default_graph()
        if not isinstance(graph, Graph):
            raise TypeError(f"graph must be a nd.Graph, but got {type(graph)}")
        if config is not None and not isinstance(config, config_pb2.ConfigProto):
            raise TypeError(f"config must be a nd.ConfigProto, but got {type(config)}")
        if target and not isinstance(target, str):
            raise TypeError(f"target must be a string, but got {type(target)}")
        self._graph = graph
        self._target = target or ""
        self._config = config or config_pb2.ConfigProto()
        self._master, self._owns_master = _master_for(self._target, self._config)
        self._handle = None
        self._extended = 0
        self._closed = False
        self._lock = threading.Lock()
        self._fetch_cache: dict = {}
        self._feed_cache: dict = {}
        self._default_ctx = None
        self._graph_ctx = None
        self._partial_runs: dict[str, PartialRun] = {}
        self._partial_ids = itertools.count(1)
        # One entry per run in progress (list append/pop are atomic in CPython: no
        # lock on the hot path); close() waits on the event for the last to end.
        self._active_runs: list = []
        self._closing = False
        self._runs_done = threading.Event()

    graph = property(lambda self: self._graph)
    sess_str = property(lambda self: self._target)

    @property
    def session_handle(self) -> str | None:
        """The master's handle of this session (None until the first run creates
        it there): what ``ClusterCoordinator``'s fencing deletes on the ps tasks."""
        return self._handle

    @property
    def graph_def(self):
        return self._graph.as_graph_def()

    def as_default(self):
        """A context manager making this the default session (not closing it)."""
        return default_session(self)

    def __enter__(self):
        if self._graph_ctx is not None:
            raise RuntimeError("Session context managers are not re-entrant. Use "
                               "`Session.as_default()` if you want to enter a "
                               "session multiple times.")
        # As TF: the graph first, then the session; they exit in reverse.
        self._graph_ctx = self._graph.as_default()
        self._default_ctx = self.as_default()
        self._graph_ctx.__enter__()
        self._default_ctx.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb):
        graph_ctx, default_ctx = self._graph_ctx, self._default_ctx
        self._graph_ctx = self._default_ctx = None
        try:
            default_ctx.__exit__(exc_type, exc, tb)
            graph_ctx.__exit__(exc_type, exc, tb)
        finally:
            self.close()

    def close(self):
        if self._closed:
            return
        self._closed = True
        if self._handle is not None:
            try:
                self._master.close_session(self._handle)
            except errors.OpError:
                pass
        # Steps cancelled by the close get their error (TF's "Session::Close")
        # before an owned master's channel goes.
        self._closing = True
        if self._active_runs:
            self._runs_done.wait(_CLOSE_WAIT_S)
        if self._owns_master:
            self._master.close()

    def __del__(self):
        try:
            if not self._closed and self._owns_master and self._target == "":
                self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    def list_devices(self):
        """The devices this session can place ops on."""
        from nbdist.runtime.device_attributes import DeviceAttributes

        if self._config.cluster_def.job:
            # ClusterSpec propagation: the devices of this session's cluster,
            # which its master session knows (as TF, made on first use here).
            self._extend()
            listed = self._master.list_devices(self._config,
                                               session_handle=self._handle)
        else:
            listed = self._master.list_devices(self._config)
        return [DeviceAttributes(n, t, inc) for n, t, inc in listed]

    def _extend(self):
        g = self._graph
        with self._lock:
            version = g.version
            if self._handle is not None and version == self._extended:
                return
            gd = g.as_graph_def(from_version=self._extended)
            # Another thread may have added ops since ``version`` was read: they
            # go with the next extension, not this one (sent twice otherwise).
            del gd.node[version - self._extended:]
            if self._handle is None:
                self._handle, _ = self._master.create_session(gd, self._config)
                self._remote_version = len(gd.node)
            else:
                self._remote_version = self._master.extend_session(
                    self._handle, gd, self._remote_version)
            self._extended = version

    def _feeds(self, feed_dict) -> dict:
        return convert_feeds(self._graph, feed_dict)

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Runs the ops and evaluates the tensors in ``fetches``.

        ``fetches`` may be a tensor, op, name (``str`` or ``bytes``), Variable,
        or any nesting of lists, tuples, namedtuples, dicts and ``@attr.s``
        classes; the result has the same structure.
        """
        self._check_usable()
        cacheable = isinstance(fetches, (Tensor, Operation))
        mapper = self._fetch_cache.get(fetches) if cacheable else None
        if mapper is None:
            mapper = FetchMapper(self._graph, fetches, session=self)
            if cacheable:
                if len(self._fetch_cache) > 4096:
                    self._fetch_cache.clear()
                self._fetch_cache[fetches] = mapper
        feeds = self._feeds(feed_dict) if feed_dict else {}
        values = self._run_step(feeds, mapper.tensors, mapper.targets, options,
                                run_metadata)
        return mapper.build(values)

    def _check_usable(self):
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        if self._graph.version == 0:
            raise RuntimeError("The Session graph is empty. Add operations to the "
                               "graph before calling run().")

    def _run_step(self, feeds: dict, fetches: list, targets: list, options=None,
                  run_metadata=None) -> list:
        """One step on the master: the graph extended first, errors explained."""
        if self._graph.version != self._extended or self._handle is None:
            try:
                self._extend()
            except errors.OpError as e:
                _explain(e, self._graph, graph_rejected=True)
                raise
        self._active_runs.append(None)
        try:
            values = self._master.run_step(self._handle, feeds, fetches, targets,
                                           options, run_metadata)
            if run_metadata is not None and run_metadata.step_stats.dev_stats:
                kept = config_pb2.RunMetadata()
                kept.CopyFrom(run_metadata)
                _last_traced[0] = kept
        except errors.OpError as e:
            _explain(e, self._graph, graph_rejected=False)
            raise
        finally:
            self._active_runs.pop()
            if self._closing and not self._active_runs:
                self._runs_done.set()
        return [tensor_value_for_client(v) for v in values]

    def make_callable(self, fetches, feed_list=None, accept_options=False):
        """A function that runs ``fetches`` feeding ``feed_list`` positionally.

        With ``accept_options=True`` it also takes ``options=`` (a
        ``RunOptions``) and ``run_metadata=`` (a ``RunMetadata`` to fill).

        >>> import nbdist as nd
        >>> x = nd.placeholder(nd.float32, [])
        >>> with nd.Session() as sess:
        ...     double = sess.make_callable(x * 2, feed_list=[x])
        ...     float(double(21.0))
        42.0
        """
        if feed_list is not None and not isinstance(feed_list, (list, tuple)):
            raise TypeError("`feed_list` must be a list or tuple.")
        feed_list = list(feed_list or [])
        mapper = FetchMapper(self._graph, fetches, session=self)

        def run(args, options=None, run_metadata=None):
            if len(args) != len(feed_list):
                raise TypeError(f"Expected {len(feed_list)} arguments, got "
                                f"{len(args)}")
            self._check_usable()
            feeds = self._feeds(dict(zip(feed_list, args))) if feed_list else {}
            return mapper.build(self._run_step(feeds, mapper.tensors,
                                               mapper.targets, options,
                                               run_metadata))

        if accept_options or feed_list:
            # As TF: a callable with feeds passes options on to the run.
            def call(*args, options=None, run_metadata=None):
                return run(args, options, run_metadata)
        else:
            def call(*args):
                return run(args)
        return call

    def _make_callable_from_options(self, callable_options):
        """A callable from a ``CallableOptions`` (feeds, fetches and targets by
        name; its ``run_options`` used on every call). Called with the feeds'
        values in order (and ``run_metadata=``), it returns the list of the
        fetches' values."""
        if not isinstance(callable_options, config_pb2.CallableOptions):
            raise TypeError("callable_options must be a nd.CallableOptions, got "
                            f"{type(callable_options)}")
        if callable_options.tensor_connection:
            raise errors.UnimplementedError(
                None, None, "CallableOptions.tensor_connection is not supported")
        opts = config_pb2.CallableOptions()
        opts.CopyFrom(callable_options)
        feed_list = list(opts.feed)
        mapper = FetchMapper(self._graph, list(opts.fetch) + list(opts.target))
        run_options = opts.run_options if opts.HasField("run_options") else None

        def call(*args, run_metadata=None):
            if len(args) != len(feed_list):
                raise errors.InvalidArgumentError(
                    None, None, f"Invalid number of feed values: expected "
                    f"{len(feed_list)}, got {len(args)}")
            self._check_usable()
            feeds = self._feeds(dict(zip(feed_list, args))) if feed_list else {}
            values = self._run_step(feeds, mapper.tensors, mapper.targets,
                                    run_options, run_metadata)
            return mapper.build(values)[:len(opts.fetch)]

        return call

    def partial_run_setup(self, fetches, feeds=None):
        """Starts a step run in pieces: ``fetches`` and ``feeds`` are all that
        the ``partial_run`` calls of the returned handle will fetch and feed.

        >>> import nbdist as nd
        >>> a = nd.placeholder(nd.float32, [])
        >>> b = nd.placeholder(nd.float32, [])
        >>> total = a + b
        >>> doubled = total * 2
        >>> with nd.Session() as sess:
        ...     h = sess.partial_run_setup([total, doubled], [a, b])
        ...     first = sess.partial_run(h, total, feed_dict={a: 1.0, b: 2.0})
        ...     float(first), float(sess.partial_run(h, doubled))
        (3.0, 6.0)
        """
        self._check_usable()
        if feeds is not None and not isinstance(feeds, (list, tuple)):
            feeds = [feeds]
        state = PartialRun(self._graph, fetches, feeds)
        handle = f"partial-run-{next(self._partial_ids)}"
        self._partial_runs[handle] = state
        return handle

    def partial_run(self, handle, fetches, feed_dict=None):
        """Runs one piece of the step ``handle`` (see ``partial_run_setup``):
        ops that an earlier piece ran are not run again."""
        self._check_usable()
        state = self._partial_runs.get(handle)
        if state is None:
            raise errors.InvalidArgumentError(
                None, None, f"The partial run handle {handle!r} is not valid "
                "(not from partial_run_setup of this session).")
        mapper = FetchMapper(self._graph, fetches, session=self)
        feeds = self._feeds(feed_dict) if feed_dict else {}
        with state.lock:
            state.check(mapper, feeds)
            step_feeds, names, targets, to_run = state.plan(mapper, feeds)
            values = self._run_step(step_feeds, names, targets) if (
                names or targets) else []
            return mapper.build(state.record(mapper, feeds, to_run, names, values))

    @staticmethod
    def reset(target: str, containers=None, config=None):
        """Closes every session on ``target``'s master and clears the containers
        (all of them when ``containers`` is None) on its tasks; a container that
        does not exist is no error. ``config.operation_timeout_in_ms`` bounds the
        wait (``DeadlineExceededError``). An unknown target is a
        ``NotFoundError``; sessions of the target fail with ``AbortedError``.

        >>> import nbdist as nd
        >>> server = nd.Server.create_local_server()
        >>> with nd.container("experiment"):
        ...     v = nd.Variable(1.0, name="v")
        >>> with nd.Session(server.target) as sess:
        ...     sess.run(v.initializer)
        >>> nd.Session.reset(server.target, ["experiment"])
        >>> with nd.Session(server.target) as sess:
        ...     bool(sess.run(nd.is_variable_initialized(v)))
        False
        >>> server.stop()
        """
        master, owned = _master_for(target, config)
        ms = config.operation_timeout_in_ms if config is not None else 0
        try:
            master.reset(list(containers or []),
                         timeout_s=ms_as_seconds(ms) if ms > 0 else None)
        finally:
            if owned:
                master.close()


def _explain(e: errors.OpError, graph: Graph, graph_rejected: bool):
    """Adds to ``e``'s message where the op it names was built (the runtime knows
    node names only) and, when the master rejected the graph, that every run of
    this graph will fail the same way, and how to start over."""
    if isinstance(e.op, Operation):
        op, name = e.op, e.op.name
        if op.graph is not graph:
            return
    else:
        name = e.op
        try:
            op = graph.get_operation_by_name(name)
        except (KeyError, TypeError):
            return
    # As TF: ``op`` is the Operation, ``node_def`` its NodeDef.
    e._op = op
    if e._node_def is None:
        e._node_def = op.node_def
    if op_site.TRACE_HEADING in e.message:
        return
    message = op_site.with_creation_site(e.message, op)
    if graph_rejected:
        message += (f"\n\nThe graph keeps '{name}', so every run of it fails the "
                    "same way: start over with nd.reset_default_graph() (or build "
                    "in a fresh nd.Graph()).")
    e._message = message
    e.args = (message,)


class Session(BaseSession):
    """Runs a graph against ``target`` ("" in-process, or ``grpc://host:port``).

    >>> import nbdist as nd
    >>> c = nd.constant("Hello, distributed!")
    >>> with nd.Session() as sess:
    ...     sess.run(c)
    b'Hello, distributed!'
    """


class InteractiveSession(BaseSession):
    """A session that installs itself as the default on creation (for shells).

    As TF's, it places only the ops each run needs (an op that cannot be placed
    fails only the runs that need it), and creating a second one while another
    is open logs an error.
    """

    _count_lock = threading.Lock()
    _active_session_count = 0

    def __init__(self, target="", graph=None, config=None):
        cfg = config_pb2.ConfigProto()
        if config is not None:
            if not isinstance(config, config_pb2.ConfigProto):
                raise TypeError("config must be a nd.ConfigProto, but got "
                                f"{type(config)}")
            cfg.CopyFrom(config)
        else:
            cfg.gpu_options.allow_growth = True
        cfg.graph_options.place_pruned_graph = True
        super().__init__(target, graph, cfg)
        with InteractiveSession._count_lock:
            if InteractiveSession._active_session_count > 0:
                _log.error(
                    "An interactive session is already active. This can cause "
                    "out-of-memory errors or some other unexpected errors (due to "
                    "the unpredictable timing of garbage collection) in some "
                    "cases. You must explicitly call `InteractiveSession.close()` "
                    "to release resources held by the other session(s). Please "
                    "use `nd.Session()` if you intend to productively use this "
                    "session.")
            InteractiveSession._active_session_count += 1
        self._explicitly_closed = False
        self._default_ctx = default_session(self, enforce_nesting=False)
        self._default_ctx.__enter__()
        self._explicit_graph_ctx = None
        if graph is not None:
            self._explicit_graph_ctx = _default_graph_stack.get_controller(
                graph, enforce_nesting=False)
            self._explicit_graph_ctx.__enter__()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        super().close()
        with InteractiveSession._count_lock:
            if self._explicitly_closed:
                return
            InteractiveSession._active_session_count -= 1
            self._explicitly_closed = True
        for ctx in (self._explicit_graph_ctx, self._default_ctx):
            if ctx is not None:
                try:
                    ctx.__exit__(None, None, None)
                except AssertionError:  # closed in another thread or out of order
                    pass
        self._explicit_graph_ctx = self._default_ctx = None
