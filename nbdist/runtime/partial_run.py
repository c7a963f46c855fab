"""``Session.partial_run``: one step run in pieces, on the client.

``partial_run_setup(fetches, feeds)`` names everything the pieces will fetch and
feed; each ``partial_run(handle, fetches, feed_dict)`` feeds some of the feeds and
fetches some of the fetches. As in TF, each op of the step runs at most once:
a piece runs only the ops it needs that no earlier piece ran, fed with the
values earlier pieces produced (each piece is a ``run_step`` of the master, which
also fetches the values later pieces will need). Checks and messages are TF's
(``DirectSession::PRun``): a feed or fetch not named at setup, fed or fetched
twice, or a fetch that needs a feed not yet given, is an ``InvalidArgumentError``.

Limit: an op reached only through a control dependency on an op an earlier
piece ran cannot be fed, so it runs again; ops with no inputs that make a
variable's or resource's handle (``VariableV2``, ``VarHandleOp``) run again
whenever a piece needs them (which changes nothing).
"""

from __future__ import annotations

import threading

from nbdist import errors
from nbdist.framework import dtypes
from nbdist.framework.ops import Graph, Operation, Tensor
from nbdist.runtime.session_fetch import FetchMapper, feed_tensor


def _is_handle(t: Tensor) -> bool:
    return t.dtype.is_ref_dtype or t.dtype.base_dtype is dtypes.resource


def _reruns(op: Operation) -> bool:
    """A handle-making source op: run again rather than fed."""
    return not op.inputs and any(_is_handle(t) for t in op.outputs)


def _ops_needed(tensors, ops, available: set[str]) -> list[Operation]:
    """The ops that compute ``tensors`` and run ``ops`` when the tensors named
    in ``available`` are given (TF's pruning), in no particular order."""
    seen: dict[int, Operation] = {}
    stack = [t.op for t in tensors if t.name not in available] + list(ops)
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen[id(op)] = op
        for t in op.inputs:
            if t.name not in available:
                stack.append(t.op)
        stack.extend(op.control_inputs)
    return list(seen.values())


class PartialRun:
    """The state of one ``partial_run_setup`` handle."""

    def __init__(self, graph: Graph, fetches, feeds):
        self.graph = graph
        mapper = FetchMapper(graph, fetches)
        if not mapper.elements:
            raise errors.InvalidArgumentError(
                None, None, "Must specify at least one target to fetch or execute.")
        self.fetch_names = set(mapper.tensors) | set(mapper.targets)
        self.feeds = {feed_tensor(graph, f).name for f in (feeds or [])}
        self.fed: set[str] = set()
        self.fetched: set[str] = set()
        self.ran: set[int] = set()  # ids of ops that ran (not re-runnable ones)
        self.values: dict[str, object] = {}  # outputs of ran ops later ops need
        self.lock = threading.Lock()
        # Every op any piece may run, and its consumers among them.
        setup_tensors = [e for e in mapper.elements if isinstance(e, Tensor)]
        setup_ops = [e for e in mapper.elements if isinstance(e, Operation)]
        self.closure = {id(op) for op in _ops_needed(setup_tensors, setup_ops,
                                                     self.feeds)}
        self.consumers: dict[str, list[Operation]] = {}
        for op in graph.get_operations():
            if id(op) in self.closure:
                for t in op.inputs:
                    self.consumers.setdefault(t.name, []).append(op)

    def check(self, mapper: FetchMapper, feeds: dict):
        """TF's checks of one piece's feeds and fetches."""
        for name in feeds:
            if name not in self.feeds:
                raise errors.InvalidArgumentError(
                    None, None, f"The feed {name} was not specified in "
                    "partial_run_setup.")
            if name in self.fed:
                raise errors.InvalidArgumentError(
                    None, None, f"The feed {name} has already been fed.")
        for name in mapper.tensors + mapper.targets:
            if name not in self.fetch_names:
                raise errors.InvalidArgumentError(
                    None, None, f"The fetch {name} was not specified in "
                    "partial_run_setup.")
            if name in self.fetched:
                raise errors.InvalidArgumentError(
                    None, None, f"The fetch {name} has already been fetched.")

    def plan(self, mapper: FetchMapper, feeds: dict):
        """``(feeds, fetch names, target names, ops to run)`` of one piece:
        earlier values fed, the fetches not known yet plus what later pieces
        will need."""
        available = set(self.values) | set(feeds)
        tensors = [e for e in mapper.elements if isinstance(e, Tensor)]
        ops = [e for e in mapper.elements if isinstance(e, Operation)]
        to_run = _ops_needed(tensors, ops, available)
        unfed = self.feeds - self.fed - set(feeds)
        for op in to_run:
            for t in op.outputs:
                if t.name in unfed:
                    raise errors.InvalidArgumentError(
                        None, None, f"Fetch {mapper.elements[0].name} can't be "
                        "computed from the feeds that have been fed so far: "
                        f"{t.name} is not fed yet.")
        done = self.ran | {id(op) for op in to_run}
        pending = self.fetch_names - self.fetched - set(mapper.tensors)
        fetch_names = [n for n in mapper.tensors if n not in available]
        for op in to_run:
            if _reruns(op):
                continue
            for t in op.outputs:
                later = self.consumers.get(t.name, ())
                if (t.name in pending or any(id(c) not in done for c in later)) \
                        and t.name not in fetch_names:
                    fetch_names.append(t.name)
        step_feeds = dict(self.values)
        step_feeds.update(feeds)
        return step_feeds, fetch_names, list(mapper.targets), to_run

    def record(self, mapper: FetchMapper, feeds: dict, to_run, fetch_names,
               values) -> list:
        """Keeps what a piece that ran leaves for the next ones; returns the
        values of the piece's own fetches, in ``mapper.tensors`` order."""
        known = dict(self.values)
        known.update(feeds)
        known.update(zip(fetch_names, values))
        result = [known[n] for n in mapper.tensors]
        self.fed |= set(feeds)
        self.fetched |= set(mapper.tensors) | set(mapper.targets)
        self.ran |= {id(op) for op in to_run if not _reruns(op)}
        pending = self.fetch_names - self.fetched
        # Kept: values a later fetch or an op left to run needs.
        self.values = {
            n: v for n, v in known.items()
            if n in pending or any(id(c) not in self.ran
                                   for c in self.consumers.get(n, ()))}
        return result
