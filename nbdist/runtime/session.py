"""``Session`` and ``InteractiveSession``: the client side of running a graph.

``Session("")`` has its own in-process master and worker; any other target is
resolved by ``runtime.transports`` (a ``grpc://`` target served by a ``Server`` of
this process is used in-process, with no RPC, like TF's local master).
"""

from __future__ import annotations

import collections
import threading

import numpy as np

from nbdist import errors
from nbdist.graph import dtypes, op_site
from nbdist.graph.default_session import default_session
from nbdist.graph.ops import Graph, Operation, Tensor, get_default_graph
from nbdist.proto import config_pb2
from nbdist.runtime import transports
from nbdist.runtime.master import Master, tensor_value_for_client
from nbdist.runtime.worker import Worker

LOCAL_TASK = "/job:localhost/replica:0/task:0"
_CLOSE_WAIT_S = 5.0  # how long close() lets cancelled steps report


class FeedError(errors.InvalidArgumentError, ValueError):
    """A bad ``feed_dict`` entry (also a ValueError, which TF raised)."""


class FetchError(errors.InvalidArgumentError, ValueError):
    """A fetch that cannot be interpreted (also a ValueError, as in TF)."""


class UnknownTargetError(errors.NotFoundError, ValueError):
    """A target no transport serves (TF: "No session factory registered"; also a
    ValueError, which an unsupported protocol has always been here)."""


# -- targets ------------------------------------------------------------------------
def _master_for(target: str, config):
    """``(master, owned)``: a private in-process master for ``""``, else what the
    target's transport gives (a server of this process is reached without RPC)."""
    if not target:
        n = int(config.device_count.get("CPU", 1)) if config is not None else 1
        worker = Worker(LOCAL_TASK, num_cpus=n)
        return Master(LOCAL_TASK, worker), True
    if "://" not in target and not target.rpartition(":")[2].isdigit():
        raise UnknownTargetError(
            None, None, f"No session factory registered for the target {target!r}: "
            "use '' (in process), 'grpc://host:port' or 'host:port'")
    try:
        return transports.connect_master(target, config)
    except ValueError as e:  # an unsupported protocol
        raise UnknownTargetError(None, None, str(e)) from None


# -- fetch structures -----------------------------------------------------------
def _is_namedtuple(x) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


class _FetchMapper:
    """Flattens nested fetches to unique graph elements and rebuilds results."""

    def __init__(self, graph: Graph, fetches):
        self.tensors: list[str] = []
        self.targets: list[str] = []
        self._index: dict[str, int] = {}
        self._graph = graph
        self._build = self._parse(fetches)

    def _element(self, f):
        if f is None:
            raise TypeError(f"Fetch argument {f!r} has invalid type {type(f)}")
        try:
            el = self._graph.as_graph_element(f, allow_tensor=True,
                                              allow_operation=True)
        except TypeError as e:
            raise TypeError(f"Fetch argument {f!r} has invalid type {type(f)}, must "
                            f"be a string or Tensor. ({e})") from None
        except (ValueError, KeyError) as e:
            msg = e.args[0] if e.args else str(e)
            raise FetchError(None, None, f"Fetch argument {f!r} cannot be "
                             f"interpreted as a Tensor. ({msg})") from None
        if not self._graph.is_fetchable(el):
            raise FetchError(None, None, f"Operation {el.name!r} has been marked as "
                             "not fetchable.")
        return el

    def _parse(self, f):
        if isinstance(f, (list,)) or (isinstance(f, tuple) and not _is_namedtuple(f)):
            subs = [self._parse(x) for x in f]
            kind = type(f)
            return lambda vals: kind(s(vals) for s in subs)
        if _is_namedtuple(f):
            subs = [self._parse(x) for x in f]
            kind = type(f)
            return lambda vals: kind(*[s(vals) for s in subs])
        if isinstance(f, collections.abc.Mapping):
            items = [(k, self._parse(v)) for k, v in f.items()]
            kind = type(f)
            if kind is collections.defaultdict:
                factory = f.default_factory
                return lambda vals: collections.defaultdict(
                    factory, {k: s(vals) for k, s in items})
            return lambda vals: kind({k: s(vals) for k, s in items}) if kind is not \
                dict else {k: s(vals) for k, s in items}
        if hasattr(f, "_session_fetch_components"):
            # A composite (SparseTensor, IndexedSlices): its parts, then its value.
            subs = [self._parse(x) for x in f._session_fetch_components()]
            return lambda vals: f._session_fetch_value([s(vals) for s in subs])
        el = self._element(f)
        if isinstance(el, Operation):
            if el.name not in self.targets:
                self.targets.append(el.name)
            return lambda vals: None
        name = el.name
        if name not in self._index:
            self._index[name] = len(self.tensors)
            self.tensors.append(name)
        i = self._index[name]
        return lambda vals: vals[i]

    def build(self, values):
        return self._build(values)


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
        # One entry per run in progress (list append/pop are atomic in CPython: no
        # lock on the hot path); close() waits on the event for the last to end.
        self._active_runs: list = []
        self._closing = False
        self._runs_done = threading.Event()

    graph = property(lambda self: self._graph)
    sess_str = property(lambda self: self._target)

    @property
    def graph_def(self):
        return self._graph.as_graph_def()

    def as_default(self):
        """A context manager making this the default session (not closing it)."""
        return default_session(self)

    def __enter__(self):
        self._default_ctx = self.as_default()
        self._default_ctx.__enter__()
        self._graph_ctx = self._graph.as_default()
        self._graph_ctx.__enter__()
        return self

    def __exit__(self, exc_type, exc, tb):
        try:
            self._graph_ctx.__exit__(exc_type, exc, tb)
            self._default_ctx.__exit__(exc_type, exc, tb)
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
        if self._owns_master and hasattr(self._master, "close"):
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

        return [DeviceAttributes(n, t, inc)
                for n, t, inc in self._master.list_devices(self._config)]

    def _extend(self):
        g = self._graph
        with self._lock:
            version = g.version
            if self._handle is not None and version == self._extended:
                return
            gd = g.as_graph_def(from_version=self._extended)
            if self._handle is None:
                self._handle, _ = self._master.create_session(gd, self._config)
                self._remote_version = len(gd.node)
            else:
                self._remote_version = self._master.extend_session(
                    self._handle, gd, self._remote_version)
            self._extended = version

    def _feeds(self, feed_dict) -> dict:
        out = {}
        g = self._graph
        items = []
        for key, value in feed_dict.items():
            # A composite key (a sparse placeholder) feeds each of its parts.
            parts = getattr(key, "_session_feed_components", None)
            items.extend(parts(value) if parts else [(key, value)])
        for key, value in items:
            if isinstance(key, tuple) and not _is_namedtuple(key):
                raise TypeError("Feeding tuples (sparse tensors) is not supported")
            try:
                t = g.as_graph_element(key, allow_tensor=True, allow_operation=False)
            except (TypeError, ValueError, KeyError) as e:
                msg = e.args[0] if e.args else str(e)
                raise TypeError(f"Cannot interpret feed_dict key as Tensor: {msg}") \
                    from None
            if not g.is_feedable(t):
                raise FeedError(None, t.op.name, f"Tensor {t.name} may not be fed.")
            if isinstance(value, (Tensor, Operation)):
                raise TypeError("The value of a feed cannot be a nd.Tensor object. "
                                "Acceptable feed values include Python scalars, "
                                "strings, lists, numpy ndarrays.")
            out[t.name] = _convert_feed(t, value)
        return out

    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Runs the ops and evaluates the tensors in ``fetches``.

        ``fetches`` may be a tensor, op, name, Variable, or any nesting of lists,
        tuples, namedtuples and dicts; the result has the same structure.
        """
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        cacheable = isinstance(fetches, (Tensor, Operation))
        mapper = self._fetch_cache.get(fetches) if cacheable else None
        if mapper is None:
            mapper = _FetchMapper(self._graph, fetches)
            if cacheable:
                if len(self._fetch_cache) > 4096:
                    self._fetch_cache.clear()
                self._fetch_cache[fetches] = mapper
        feeds = self._feeds(feed_dict) if feed_dict else {}
        if self._graph.version != self._extended or self._handle is None:
            try:
                self._extend()
            except errors.OpError as e:
                _explain(e, self._graph, graph_rejected=True)
                raise
        self._active_runs.append(None)
        try:
            values = self._master.run_step(self._handle, feeds, mapper.tensors,
                                           mapper.targets, options, run_metadata)
        except errors.OpError as e:
            _explain(e, self._graph, graph_rejected=False)
            raise
        finally:
            self._active_runs.pop()
            if self._closing and not self._active_runs:
                self._runs_done.set()
        return mapper.build([tensor_value_for_client(v) for v in values])

    def make_callable(self, fetches, feed_list=None, accept_options=False):
        """A function that runs ``fetches`` feeding ``feed_list`` positionally."""
        feed_list = list(feed_list or [])

        def call(*args, **kwargs):
            if len(args) != len(feed_list):
                raise TypeError(f"Expected {len(feed_list)} arguments, got "
                                f"{len(args)}")
            return self.run(fetches, dict(zip(feed_list, args)),
                            kwargs.get("options"), kwargs.get("run_metadata"))

        return call

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
                         timeout_s=ms / 1000.0 if ms > 0 else None)
        finally:
            if owned and hasattr(master, "close"):
                master.close()


def _explain(e: errors.OpError, graph: Graph, graph_rejected: bool):
    """Adds to ``e``'s message where the op it names was built (the runtime knows
    node names only) and, when the master rejected the graph, that every run of
    this graph will fail the same way, and how to start over."""
    name = getattr(e.op, "name", e.op)
    try:
        op = graph.get_operation_by_name(name)
    except (KeyError, TypeError):
        return
    if op_site.TRACE_HEADING in e.message:
        return
    message = op_site.with_creation_site(e.message, op)
    if graph_rejected:
        message += (f"\n\nThe graph keeps '{name}', so every run of it fails the "
                    "same way: start over with nd.reset_default_graph() (or build "
                    "in a fresh nd.Graph()).")
    e._message = message
    e.args = (message,)


def _convert_feed(t: Tensor, value) -> np.ndarray:
    dtype = t.dtype.base_dtype
    where = t.op.name
    try:
        if dtype is dtypes.string:
            from nbdist.graph.array_ops import to_numpy

            arr = to_numpy(value, dtypes.string)
        else:
            arr = np.asarray(value)
            if arr.dtype == object or arr.dtype.kind in "SU":
                raise TypeError("not a number")
            target = np.dtype(dtype.as_numpy_dtype)
            if arr.dtype != target:
                if arr.dtype.kind == "f" and target.kind in "iub" and arr.size and (
                        not np.all(np.mod(arr, 1) == 0)):
                    raise TypeError("fractional values")
                if arr.dtype.kind == "b" and target.kind != "b":
                    raise TypeError("bool values")
                arr = arr.astype(target)
    except (TypeError, ValueError) as e:
        raise FeedError(None, where, f"Cannot feed value {value!r:.60} to "
                        f"'{t.name}' (placeholder '{where}'), which has dtype "
                        f"{dtype.name}: {e}") from None
    if not t.shape.is_compatible_with(arr.shape):
        raise FeedError(None, where, f"Cannot feed value of shape {arr.shape} for "
                        f"Tensor '{t.name}' (placeholder '{where}'), which has "
                        f"shape '{t.shape}'")
    return arr


class Session(BaseSession):
    """Runs a graph against ``target`` ("" in-process, or ``grpc://host:port``).

    >>> import nbdist as nd
    >>> c = nd.constant("Hello, distributed!")
    >>> with nd.Session() as sess:
    ...     sess.run(c)
    b'Hello, distributed!'
    """


class InteractiveSession(BaseSession):
    """A session that installs itself as the default on creation (for shells)."""

    def __init__(self, target="", graph=None, config=None):
        super().__init__(target, graph, config)
        self._default_ctx = self.as_default()
        self._default_ctx.__enter__()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        super().close()
        ctx, self._default_ctx = self._default_ctx, None
        if ctx is not None:
            try:
                ctx.__exit__(None, None, None)
            except (IndexError, ValueError):
                pass
