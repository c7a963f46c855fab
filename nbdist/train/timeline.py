"""``Timeline``: a traced step as a Chrome trace, as TF's ``client/timeline.py``.

``Timeline(run_metadata.step_stats, graph)`` turns the ``StepStats`` of a
run with ``RunOptions(trace_level=FULL_TRACE)`` into the Trace Event Format
that ``chrome://tracing`` and Perfetto open: a JSON object whose
``traceEvents`` list holds

* ``"M"`` metadata events naming the processes: ``Allocators``, then for each
  device ``<device> Compute`` and ``<device> Tensors``;
* one ``"X"`` (complete) event per op: ``ts``/``dur`` in microseconds, ``tid``
  a lane of the device (ops that overlap in time get different lanes),
  ``name`` the op type, ``args`` ``{"name": node, "op": type, "input0": ...}``;
* with ``show_dataflow``, an ``"s"``/``"t"`` flow pair (category
  ``DataFlow``, one ``id`` per edge) from the end of the op producing a
  tensor to the start of each op using it on another device or lane, and
  one from each partition's ``_send/X`` to its ``_recv/X`` (a tensor sent
  from one task to another);
* with ``show_memory``, object (``"N"``/``"O"``/``"D"``) events per tensor and
  ``"C"`` counters of the bytes alive per allocator.

nbdist's step stats carry no op inputs in ``timeline_label`` (``add =
Add()``); pass the executed ``graph`` and the inputs are read from it, so
the dataflow arrows appear. ``ProfilerHook`` does that.

>>> import json
>>> import nbdist as nd
>>> with nd.Graph().as_default() as g:
...     c = nd.constant(1.0, name="c") + 2.0
...     md = nd.RunMetadata()
...     with nd.Session() as sess:
...         _ = sess.run(c, options=nd.RunOptions(trace_level=nd.RunOptions.FULL_TRACE),
...                      run_metadata=md)
>>> trace = json.loads(Timeline(md.step_stats, g).generate_chrome_trace_format())
>>> sorted({e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "X"})[:2]
['_fetch/add_0', 'add']
"""

from __future__ import annotations

import collections
import json
import re

from nbdist.proto import step_stats_pb2

AllocationMaximum = collections.namedtuple(
    "AllocationMaximum", ("timestamp", "num_bytes", "tensors"))
AllocationMaximum.__doc__ = "An allocator's peak: when, how many bytes, which tensors."

StepStatsAnalysis = collections.namedtuple(
    "StepStatsAnalysis", ("chrome_trace", "allocator_maximums"))
StepStatsAnalysis.__doc__ = "A ``ChromeTrace`` and the peak of each allocator."

_LABEL = re.compile(r"(.*) = (.*)\((.*)\)")
_OP_TIMES = ("schedule", "gpu", "all")


class ChromeTrace:
    """Collects trace events; ``format_to_string`` gives the JSON document."""

    def __init__(self):
        self._metadata: list[dict] = []
        self._events: list[dict] = []

    @staticmethod
    def _event(ph, category, name, pid, tid, timestamp) -> dict:
        return {"ph": ph, "cat": category, "name": name, "pid": pid, "tid": tid,
                "ts": timestamp}

    def emit_pid(self, name, pid):
        self._metadata.append({"name": "process_name", "ph": "M", "pid": pid,
                               "args": {"name": name}})

    def emit_tid(self, name, pid, tid):
        self._metadata.append({"name": "thread_name", "ph": "M", "pid": pid,
                               "tid": tid, "args": {"name": name}})

    def emit_region(self, timestamp, duration, pid, tid, category, name, args):
        event = self._event("X", category, name, pid, tid, timestamp)
        event["dur"] = duration
        event["args"] = args
        self._events.append(event)

    def _emit_object(self, ph, category, name, timestamp, pid, tid, object_id):
        event = self._event(ph, category, name, pid, tid, timestamp)
        event["id"] = object_id
        self._events.append(event)
        return event

    def emit_obj_create(self, category, name, timestamp, pid, tid, object_id):
        self._emit_object("N", category, name, timestamp, pid, tid, object_id)

    def emit_obj_delete(self, category, name, timestamp, pid, tid, object_id):
        self._emit_object("D", category, name, timestamp, pid, tid, object_id)

    def emit_obj_snapshot(self, category, name, timestamp, pid, tid, object_id,
                          snapshot):
        event = self._emit_object("O", category, name, timestamp, pid, tid, object_id)
        event["args"] = {"snapshot": snapshot}

    def emit_flow_start(self, name, timestamp, pid, tid, flow_id):
        self._emit_object("s", "DataFlow", name, timestamp, pid, tid, flow_id)

    def emit_flow_end(self, name, timestamp, pid, tid, flow_id):
        self._emit_object("t", "DataFlow", name, timestamp, pid, tid, flow_id)

    def emit_counter(self, category, name, pid, timestamp, counter, value):
        event = self._event("C", category, name, pid, 0, timestamp)
        event["args"] = {counter: value}
        self._events.append(event)

    def trace(self) -> dict:
        """The document: ``{"traceEvents": [metadata..., events...]}``."""
        return {"traceEvents": self._metadata + self._events}

    def format_to_string(self, pretty=False) -> str:
        if pretty:
            return json.dumps(self.trace(), indent=4, separators=(",", ": "))
        return json.dumps(self.trace(), separators=(",", ":"))


class _Tensor:
    """One output of one op: where it lives and when it was used."""

    def __init__(self, name, object_id, create_time, pid, allocator, num_bytes):
        self.name = name
        self.object_id = object_id
        self.create_time = create_time
        self.pid = pid
        self.allocator = allocator
        self.num_bytes = num_bytes
        self.last_unref = create_time

    def unref(self, timestamp):
        self.last_unref = max(self.last_unref, timestamp)


def _parse_label(label: str):
    """``"name = Op(a, b:1)"`` as (name, op, [inputs])."""
    match = _LABEL.match(label)
    if match is None:
        return "unknown", "unknown", []
    name, op, inputs = match.groups()
    return name, op, inputs.split(", ") if inputs else []


class Timeline:
    """The execution timeline of one step, from its ``StepStats``.

    ``graph`` (optional) is the graph that ran; op inputs missing from the
    step stats' labels are read from it.
    """

    def __init__(self, step_stats, graph=None):
        if not isinstance(step_stats, step_stats_pb2.StepStats):
            raise TypeError("Timeline expects a StepStats (RunMetadata.step_stats), "
                            f"got {type(step_stats).__name__}")
        self._origin_step_stats = step_stats
        self._graph = graph

    # -- the analysis -------------------------------------------------------------
    def _inputs(self, node_stats) -> tuple[str, list[str]]:
        _, op, inputs = _parse_label(node_stats.timeline_label)
        if op == "unknown" and node_stats.op_type:
            op = node_stats.op_type
        if not inputs and self._graph is not None:
            try:
                graph_op = self._graph.get_operation_by_name(node_stats.node_name)
            except (KeyError, ValueError):
                graph_op = None
            if graph_op is not None:
                inputs = [t.name.removesuffix(":0")
                          for t in graph_op.inputs]
                inputs += ["^" + c.name for c in graph_op.control_inputs]
        return op, inputs

    def _reset(self):
        self._step_stats = step_stats_pb2.StepStats()
        self._step_stats.CopyFrom(self._origin_step_stats)
        self._chrome_trace = ChromeTrace()
        self._next_pid = 0
        self._next_flow_id = 0
        self._device_pids: dict[str, int] = {}
        self._tensor_pids: dict[str, int] = {}
        self._tensors: dict[str, _Tensor] = {}
        self._flow_starts: dict[str, tuple] = {}
        self._sends: dict[str, tuple] = {}  # partition edge: (start, pid, tid)
        self._allocator_maximums: dict[str, AllocationMaximum] = {}

    def _alloc_pid(self) -> int:
        self._next_pid += 1
        return self._next_pid - 1

    def _allocate_pids(self):
        self._allocators_pid = self._alloc_pid()
        self._chrome_trace.emit_pid("Allocators", self._allocators_pid)
        for dev_stats in self._step_stats.dev_stats:
            if dev_stats.device in self._device_pids:
                continue
            self._device_pids[dev_stats.device] = compute = self._alloc_pid()
            self._tensor_pids[dev_stats.device] = tensors = self._alloc_pid()
            self._chrome_trace.emit_pid(dev_stats.device + " Compute", compute)
            self._chrome_trace.emit_pid(dev_stats.device + " Tensors", tensors)

    def _assign_lanes(self):
        """Gives each op of a device the first lane free at its start (as TF:
        real thread ids would scatter a device over many rows)."""
        for dev_stats in self._step_stats.dev_stats:
            lane_ends: list[int] = []
            for ns in sorted(dev_stats.node_stats, key=lambda n: n.all_start_micros):
                end = ns.all_start_micros + ns.all_end_rel_micros
                for lane, lane_end in enumerate(lane_ends):
                    if ns.all_start_micros > lane_end:
                        lane_ends[lane] = end
                        break
                else:
                    lane = len(lane_ends)
                    lane_ends.append(end)
                ns.thread_id = lane

    def _analyze_tensors(self, show_memory):
        for dev_stats in self._step_stats.dev_stats:
            device_pid = self._device_pids[dev_stats.device]
            tensors_pid = self._tensor_pids[dev_stats.device]
            for ns in dev_stats.node_stats:
                start = ns.all_start_micros
                end = start + ns.all_end_rel_micros
                if ns.node_name.startswith("_send/"):
                    self._sends[ns.node_name[len("_send/"):]] = (
                        start, device_pid, ns.thread_id)
                for index, output in enumerate(ns.output):
                    name = f"{ns.node_name}:{index}" if index else ns.node_name
                    tensor = _Tensor(name, len(self._tensors), start, tensors_pid,
                                     dev_stats.device,
                                     output.tensor_description.allocated_bytes)
                    tensor.unref(end)
                    self._tensors[name] = tensor
                    self._flow_starts[name] = (end, device_pid, ns.thread_id)
                    if show_memory:
                        self._chrome_trace.emit_obj_create(
                            "Tensor", name, start, tensors_pid, ns.thread_id,
                            tensor.object_id)
                        description = str(output.tensor_description).replace('"', "")
                        self._chrome_trace.emit_obj_snapshot(
                            "Tensor", name, end - 1, tensors_pid, ns.thread_id,
                            tensor.object_id, {"tensor_description": description})

    def _show_compute(self, show_dataflow):
        for dev_stats in self._step_stats.dev_stats:
            device_pid = self._device_pids[dev_stats.device]
            for ns in dev_stats.node_stats:
                tid = ns.thread_id
                start = ns.all_start_micros
                end = start + ns.all_end_rel_micros
                op, inputs = self._inputs(ns)
                args = {"name": ns.node_name, "op": op}
                for i, input_name in enumerate(inputs):
                    args[f"input{i}"] = input_name
                self._chrome_trace.emit_region(start, ns.all_end_rel_micros,
                                               device_pid, tid, "Op", op, args)
                if show_dataflow:
                    self._show_transfer(ns, device_pid, tid)
                for input_name in inputs:
                    if input_name not in self._tensors:
                        # A partition's Send/Recv: show the flow from the original.
                        cut = input_name.rfind("/_")
                        if cut > 0:
                            input_name = input_name[:cut]
                    tensor = self._tensors.get(input_name)
                    if tensor is None:
                        continue
                    tensor.unref(end - 1)
                    if not show_dataflow:
                        continue
                    created, create_pid, create_tid = self._flow_starts[input_name]
                    # Arrows within one lane of one device only clutter the view.
                    if create_pid != device_pid or create_tid != tid:
                        flow_id = self._next_flow_id
                        self._next_flow_id += 1
                        self._chrome_trace.emit_flow_start(
                            input_name, created, create_pid, create_tid, flow_id)
                        self._chrome_trace.emit_flow_end(
                            input_name, start, device_pid, tid, flow_id)

    def _show_transfer(self, ns, pid, tid):
        """A flow from a partition's ``_send/X`` to its ``_recv/X`` (a tensor
        that went from one task or device to another)."""
        if not ns.node_name.startswith("_recv/"):
            return
        sent = self._sends.get(ns.node_name[len("_recv/"):])
        if sent is None:
            return
        flow_id = self._next_flow_id
        self._next_flow_id += 1
        name = ns.node_name[len("_recv/"):]
        self._chrome_trace.emit_flow_start(name, sent[0], sent[1], sent[2], flow_id)
        # The _Recv waits for the tensor: it arrives at the _Recv's end (a
        # timestamp inside its slice, so the arrow binds to it).
        arrived = ns.all_start_micros + max(ns.all_end_rel_micros - 1, 0)
        self._chrome_trace.emit_flow_end(name, arrived, pid, tid, flow_id)

    def _show_memory_counters(self):
        changes: dict[str, list] = {}
        for name, tensor in self._tensors.items():
            self._chrome_trace.emit_obj_delete("Tensor", name, tensor.last_unref,
                                               tensor.pid, 0, tensor.object_id)
            per_allocator = changes.setdefault(tensor.allocator, [])
            per_allocator.append((tensor.create_time, tensor.num_bytes, name))
            per_allocator.append((tensor.last_unref, -tensor.num_bytes, name))
        for allocator, items in changes.items():
            total, alive = 0, set()
            peak = AllocationMaximum(timestamp=0, num_bytes=0, tensors=set())
            for timestamp, num_bytes, name in sorted(items, key=lambda c: c[0]):
                total += num_bytes
                if num_bytes < 0:
                    alive.discard(name)
                else:
                    alive.add(name)
                if total > peak.num_bytes:
                    peak = AllocationMaximum(timestamp, total, set(alive))
                self._chrome_trace.emit_counter("Memory", allocator,
                                                self._allocators_pid, timestamp,
                                                allocator, total)
            self._allocator_maximums[allocator] = peak

    # -- the public methods -------------------------------------------------------
    def analyze_step_stats(self, show_dataflow=True, show_memory=True,
                           op_time="schedule") -> StepStatsAnalysis:
        """The ``ChromeTrace`` and the peak bytes of each allocator (here: each
        device). ``op_time`` is accepted for TF's sake; nbdist has no GPU
        kernels, so every choice shows the op's own run time."""
        if op_time not in _OP_TIMES:
            raise ValueError(f"op_time must be one of {_OP_TIMES}, got {op_time!r}")
        self._reset()
        self._allocate_pids()
        self._assign_lanes()
        self._analyze_tensors(show_memory)
        self._show_compute(show_dataflow)
        if show_memory:
            self._show_memory_counters()
        return StepStatsAnalysis(self._chrome_trace, self._allocator_maximums)

    def generate_chrome_trace_format(self, show_dataflow=True, show_memory=False,
                                     op_time="schedule") -> str:
        """The step as a Chrome trace (indented JSON text)."""
        analysis = self.analyze_step_stats(show_dataflow=show_dataflow,
                                           show_memory=show_memory, op_time=op_time)
        return analysis.chrome_trace.format_to_string(pretty=True)


__all__ = ["AllocationMaximum", "ChromeTrace", "StepStatsAnalysis", "Timeline"]
