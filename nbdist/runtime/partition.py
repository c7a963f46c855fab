"""Pruning a client graph for one (feeds, fetches, targets) and splitting it
into one partition per task, with ``_Send``/``_Recv`` on cross-task edges and
``_Feed``/``_Fetch`` for the client's tensors.

Each partition keeps the nodes in the client graph's global topological order
and puts a ``_Recv`` at its producer's position; since every task runs its
partition in that order, a ``_Recv`` never waits on a task that is itself
waiting on something later.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from nbdist import errors
from nbdist.framework import dtypes
from nbdist.framework.device import DeviceSpec
from nbdist.framework.importer import parse_input, python_to_attr_value
from nbdist.proto import graph_pb2


@functools.lru_cache(maxsize=4096)  # every remote _Recv asks, every step
def task_of(device: str) -> str:
    """The task of a full device name (InvalidArgumentError if it names none)."""
    try:
        s = DeviceSpec.from_string(device)
    except ValueError as e:
        raise errors.InvalidArgumentError(None, None, str(e)[:300]) from None
    if s.job is None or s.task is None:
        raise errors.InvalidArgumentError(
            None, None, f"Device {device[:200]!r} names no task")
    return f"/job:{s.job}/replica:{s.replica or 0}/task:{s.task}"


def normalize_tensor_name(name: str) -> str:
    return name if ":" in name else name + ":0"


# As TF's subgraph rewrite: a control edge from a fed placeholder is satisfied
# by its feed (the placeholder itself, which would demand a value, never runs).
_PLACEHOLDERS = frozenset({"Placeholder", "PlaceholderV2"})


def fed_placeholder(by_name: dict, src: str, feeds) -> str | None:
    """The fed tensor standing in for a control edge from node ``src``: its
    output 0 if ``src`` is a fed placeholder, else None."""
    key = f"{src}:0"
    if key in feeds and by_name[src].op in _PLACEHOLDERS:
        return key
    return None


def prune(by_name: dict, feeds: set, fetches: list, targets: list) -> set:
    """Names of the nodes needed to compute ``fetches`` and run ``targets``
    when ``feeds`` (tensor names) are given."""
    needed: set[str] = set()
    stack = [parse_input(f)[0] for f in fetches if f not in feeds] + list(targets)
    while stack:
        n = stack.pop()
        if n in needed:
            continue
        needed.add(n)
        for inp in by_name[n].input:
            src, idx = parse_input(inp)
            if idx >= 0 and f"{src}:{idx}" in feeds:
                continue
            if idx < 0 and fed_placeholder(by_name, src, feeds) is not None:
                continue
            if src not in needed:
                stack.append(src)
    return needed


@dataclass
class Partition:
    task: str
    graph_def: graph_pb2.GraphDef = field(default_factory=graph_pb2.GraphDef)
    feeds: list = field(default_factory=list)  # client tensor names fed here
    fetches: list = field(default_factory=list)  # client tensor names fetched here


def _attr(nd, name, value, kind=None):
    nd.attr[name].CopyFrom(python_to_attr_value(value, kind))


def partition(order: list, by_name: dict, placement: dict, specs: dict,
              feeds: list, fetches: list, targets: list, incarnations: dict,
              feed_task: str) -> dict[str, Partition]:
    """Splits the pruned graph. ``order`` is the client graph's node order;
    ``specs`` maps tensor names to (dtype, shape); ``feed_task`` hosts a fed
    tensor that nothing consumes but a fetch."""
    return _Partitioner(order, by_name, placement, specs, feeds, fetches, targets,
                        incarnations, feed_task).run()


class _Partitioner:
    """One ``partition()`` call: its inputs and the partitions it is building."""

    def __init__(self, order, by_name, placement, specs, feeds, fetches, targets,
                 incarnations, feed_task):
        self.by_name = by_name
        self.placement = placement
        self.specs = specs
        self.feed_set = set(feeds)
        self.fetches = fetches
        self.incarnations = incarnations
        self.feed_task = feed_task
        needed = prune(by_name, self.feed_set, fetches, targets)
        self.needed = needed
        self.nodes = [by_name[n] for n in order if n in needed]
        self.task = {n.name: task_of(placement[n.name]) for n in self.nodes}
        self.parts: dict[str, Partition] = {}
        self.feed_node: dict[tuple, str] = {}  # (tensor, task) -> its _Feed
        self.recv_name: dict[tuple, str] = {}  # (tensor or ^node, task) -> _Recv
        self.edge_id = 0

    def run(self) -> dict[str, Partition]:
        consumers, ctrl_consumers = self._cross_task_consumers()
        outputs_sent: dict[str, list] = {}
        for key in consumers:
            outputs_sent.setdefault(parse_input(key)[0], []).append(key)
        for n in self.nodes:
            src_part = self._copy_node(n)
            dev = self.placement[n.name]
            # Sends for this node's outputs and control signal, right after it.
            for key in outputs_sent.get(n.name, ()):
                for dst_t, dst_dev in consumers[key].items():
                    self._send(src_part, key, key, dev, dst_t, dst_dev,
                               self.specs[key][0].base_dtype, n.name)
            for dst_t, dst_dev in ctrl_consumers.get(n.name, {}).items():
                self._send_control(src_part, n.name, dev, dst_t, dst_dev)
        self._add_fetches()
        return self.parts

    def _part(self, t: str) -> Partition:
        if t not in self.parts:
            self.parts[t] = Partition(t)
        return self.parts[t]

    def _cross_task_consumers(self):
        """For each tensor (and each control signal) another task uses: which
        tasks, on which device."""
        consumers: dict[str, dict[str, str]] = {}
        ctrl_consumers: dict[str, dict[str, str]] = {}
        task, placement = self.task, self.placement
        for n in self.nodes:
            t = task[n.name]
            for inp in n.input:
                src, idx = parse_input(inp)
                if idx < 0:
                    if fed_placeholder(self.by_name, src, self.feed_set):
                        continue  # the feed stands in for it (see _copy_node)
                    if src in self.needed and task[src] != t:
                        ctrl_consumers.setdefault(src, {}).setdefault(
                            t, placement[n.name])
                    continue
                key = f"{src}:{idx}"
                if key in self.feed_set or task[src] == t:
                    continue
                consumers.setdefault(key, {}).setdefault(t, placement[n.name])
        return consumers, ctrl_consumers

    def _feed_in(self, name: str, t: str, device: str) -> str:
        """The ``_Feed`` of tensor ``name`` on task ``t`` (one per task)."""
        k = (name, t)
        if k not in self.feed_node:
            p = self._part(t)
            nd = p.graph_def.node.add()
            nd.name = f"_feed/{name.replace(':', '_')}"
            nd.op = "_Feed"
            nd.device = device
            dt, sh = self.specs[name]
            _attr(nd, "key", name, "string")
            _attr(nd, "dtype", dt.base_dtype, "type")
            _attr(nd, "shape", sh, "shape")
            p.feeds.append(name)
            self.feed_node[k] = nd.name
        return self.feed_node[k]

    def _copy_node(self, n) -> Partition:
        """Copies ``n`` into its task's partition, its inputs rewired to feeds and
        receives; returns that partition."""
        t = self.task[n.name]
        dev = self.placement[n.name]
        p = self._part(t)
        nd = p.graph_def.node.add()
        nd.CopyFrom(n)
        nd.device = dev
        del nd.input[:]
        for inp in n.input:
            src, idx = parse_input(inp)
            if idx < 0:
                fed = fed_placeholder(self.by_name, src, self.feed_set)
                if fed is not None:  # the feed, on this task, stands in for it
                    nd.input.append("^" + self._feed_in(fed, t, dev))
                    continue
                same = self.task[src] == t
                nd.input.append(inp if same else "^" + self.recv_name[(src, t)])
                continue
            key = f"{src}:{idx}"
            if key in self.feed_set:
                nd.input.append(self._feed_in(key, t, dev))
            elif self.task[src] == t:
                nd.input.append(inp)
            else:
                nd.input.append(self.recv_name[(key, t)])
        return p

    def _send(self, src_part, tensor, recv_key, src_dev, dst_task, dst_dev, dtype,
              node_name):
        self.edge_id += 1
        self.recv_name[(recv_key, dst_task)] = _send_recv(
            self._part, src_part, dst_task, tensor, src_dev, dst_dev, dtype,
            f"edge_{self.edge_id}_{node_name}", self.incarnations)

    def _send_control(self, src_part, node_name, dev, dst_task, dst_dev):
        """A control edge across tasks: an empty constant after the node, sent."""
        c = src_part.graph_def.node.add()
        c.name = f"_ctrl/{node_name}/{self.edge_id + 1}"
        c.op = "Const"
        c.device = dev
        c.input.append("^" + node_name)
        _attr(c, "value", np.zeros((0,), np.float32), "tensor")
        _attr(c, "dtype", dtypes.float32, "type")
        self._send(src_part, c.name + ":0", node_name, dev, dst_task, dst_dev,
                   dtypes.float32, node_name)

    def _add_fetches(self):
        """A ``_Fetch`` next to each fetched tensor's producer (or its feed)."""
        for f in self.fetches:
            src, idx = parse_input(f)
            key = f"{src}:{idx}"
            if key in self.feed_set:
                t = self.task.get(src, self.feed_task)
                dev = self.placement.get(src, self.feed_task + "/device:CPU:0")
                inp = self._feed_in(key, t, dev)
            else:
                t, dev = self.task[src], self.placement[src]
                inp = key if idx else src
            p = self._part(t)
            if key in p.fetches:
                continue
            nd = p.graph_def.node.add()
            nd.name = f"_fetch/{key.replace(':', '_')}"
            nd.op = "_Fetch"
            nd.device = dev
            nd.input.append(inp)
            _attr(nd, "key", key, "string")
            p.fetches.append(key)


def _send_recv(part, src_part, dst_task, tensor, src_dev, dst_dev, dtype,
               tensor_name, incarnations) -> str:
    """A ``_Send`` of ``tensor`` in ``src_part`` and its ``_Recv`` on
    ``dst_task``; returns the ``_Recv``'s name."""
    inc = incarnations.get(src_dev, 0)
    s = src_part.graph_def.node.add()
    s.name = f"_send/{tensor_name}"
    s.op = "_Send"
    s.device = src_dev
    s.input.append(tensor)
    for k, v, kind in (("tensor_name", tensor_name, "string"),
                       ("send_device", src_dev, "string"),
                       ("send_device_incarnation", inc, "int"),
                       ("recv_device", dst_dev, "string"),
                       ("client_terminated", False, "bool")):
        _attr(s, k, v, kind)
    r = part(dst_task).graph_def.node.add()
    r.name = f"_recv/{tensor_name}"
    r.op = "_Recv"
    r.device = dst_dev
    for k, v, kind in (("tensor_name", tensor_name, "string"),
                       ("send_device", src_dev, "string"),
                       ("send_device_incarnation", inc, "int"),
                       ("recv_device", dst_dev, "string"),
                       ("client_terminated", False, "bool"),
                       ("tensor_type", dtype, "type")):
        _attr(r, k, v, kind)
    return r.name


__all__ = ["Partition", "fed_placeholder", "normalize_tensor_name", "partition", "prune", "task_of"]
