"""What ``TimelineView`` draws, read from a traced step's ``StepStats``: each
op as a ``Span`` with its kind (compute, Send/Recv, collective, variable
update, queue/barrier wait, bookkeeping), each tensor that crossed from one
task to another as a ``Transfer`` (a partition's ``_send/X`` paired with its
``_recv/X``), and round axis ticks.

>>> op_kind("MatMul"), op_kind("_Recv"), op_kind("ApplyGradientDescent")
('compute', 'transfer', 'update')
>>> nice_ticks(1234)  # µs: 0, 200, ..., 1400 shown as ms
([0, 200, 400, 600, 800, 1000, 1200, 1400], 'ms')
>>> tick_label(1200, "ms"), tick_label(40, "µs")
('1.2', '40')
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from nbdist.notebook.live_view import short_task

__all__ = [
    "KINDS",
    "Span",
    "Transfer",
    "format_bytes",
    "nice_ticks",
    "op_kind",
    "spans_from_run_metadata",
    "step_origin_us",
    "task_key",
    "tick_label",
    "member_label",
    "transfers_from_run_metadata",
]

# kind: (colour, legend label), in legend order.
KINDS = {
    "compute": ("#0969da", "compute"),
    "transfer": ("#cf222e", "Send/Recv"),
    "collective": ("#bf3989", "collective"),
    "update": ("#8250df", "variable update"),
    "wait": ("#bf8700", "queue/barrier wait"),
    "other": ("#afb8c1", "feed/fetch/const"),
}

_TRANSFER_OPS = {"_Send", "_Recv", "_HostSend", "_HostRecv"}
_OTHER_OPS = {
    "_Fetch", "_Feed", "_Arg", "_Retval", "Const", "NoOp", "Identity", "VariableV2",
    "Variable", "VarHandleOp", "Placeholder", "PlaceholderWithDefault",
    "ReadVariableOp", "VarIsInitializedOp", "IsVariableInitialized",
}
_UPDATE = re.compile(
    r"^(Resource)?(Sparse)?Apply|^Assign|^(Resource)?Scatter(Add|Sub|Mul|Div|"
    r"Update|Min|Max|Nd)|^AccumulatorApplyGradient|^SparseAccumulatorApplyGradient|"
    r"^AccumulatorSetGlobalStep|^CountUpTo")
_WAIT = re.compile(
    r"^Queue(Dequeue|Enqueue)|^Barrier|^(Sparse)?AccumulatorTakeGradient|"
    r"^TakeGrad|Barrier$|^CoordinationBarrier")


def op_kind(op_type: str) -> str:
    """The kind of an op type, for its colour."""
    if op_type in _TRANSFER_OPS:
        return "transfer"
    if op_type.startswith(("Collective", "Nccl")):
        return "collective"
    if op_type in _OTHER_OPS:
        return "other"
    if _UPDATE.search(op_type):
        return "update"
    if _WAIT.search(op_type):
        return "wait"
    return "compute"


@dataclass
class Span:
    task: str
    device: str
    name: str
    op: str
    start_us: int  # relative to the step's first op
    end_us: int
    bytes: int
    kind: str = "compute"


@dataclass
class Transfer:
    """A tensor one task sent another in the step."""

    tensor: str  # the producing node (what the user named)
    source: str  # short task names
    destination: str
    bytes: int
    send_us: int  # the _Send's start, relative to the step's first op
    recv_us: int  # the _Recv's end: when the tensor was there
    edge: str  # the partition's edge name (edge_3_w)


def _op_of(n) -> str:
    return n.op_type or n.timeline_label.split("= ", 1)[-1].rstrip("()")


def _t0(step_stats) -> int:
    return min((n.all_start_micros for d in step_stats.dev_stats for n in d.node_stats),
               default=0)


def _task_of(dev) -> str:
    return short_task(dev.task or dev.device.split("/device:", 1)[0])


def step_origin_us(run_metadata) -> int:
    """The wall-clock microsecond of the step's first op (what times of spans
    and transfers are relative to)."""
    return _t0(run_metadata.step_stats)


def spans_from_run_metadata(run_metadata) -> list[Span]:
    """Every op of a traced step, with start and end relative to the first."""
    stats = run_metadata.step_stats
    t0 = _t0(stats)
    out = []
    for dev in stats.dev_stats:
        task = _task_of(dev)
        for n in dev.node_stats:
            start = n.all_start_micros
            end = start + max(n.all_end_rel_micros, n.op_end_rel_micros, 0)
            op = _op_of(n)
            out.append(Span(task, dev.device, n.node_name, op, start - t0, end - t0,
                            sum(o.tensor_description.allocated_bytes
                                for o in n.output), op_kind(op)))
    out.sort(key=lambda s: (s.start_us, s.name))
    return out


_EDGE = re.compile(r"^edge_\d+_(.*)$")


def transfers_from_run_metadata(run_metadata) -> list[Transfer]:
    """Each tensor that went from one task to another in the step: the
    ``_Send`` of a partition edge and its ``_Recv`` on another task (bytes:
    the received tensor's)."""
    stats = run_metadata.step_stats
    t0 = _t0(stats)
    sends: dict[str, tuple] = {}
    recvs: dict[str, tuple] = {}
    for dev in stats.dev_stats:
        task = _task_of(dev)
        for n in dev.node_stats:
            op = _op_of(n)
            if op == "_Send" and n.node_name.startswith("_send/"):
                sends[n.node_name[6:]] = (task, n)
            elif op == "_Recv" and n.node_name.startswith("_recv/"):
                recvs[n.node_name[6:]] = (task, n)
    out = []
    for edge, (dst, r) in recvs.items():
        sent = sends.get(edge)
        if sent is None or sent[0] == dst:
            continue
        src, s = sent
        m = _EDGE.match(edge)
        end = r.all_start_micros + max(r.all_end_rel_micros, r.op_end_rel_micros, 0)
        out.append(Transfer(
            m.group(1) if m else edge, src, dst,
            sum(o.tensor_description.allocated_bytes for o in r.output),
            s.all_start_micros - t0, end - t0, edge))
    out.sort(key=lambda t: (t.recv_us, t.edge))
    return out


def task_key(task: str):
    """Lane order: chief, workers, parameter servers, evaluator, others."""
    order = {"chief": 0, "worker": 1, "ps": 2, "evaluator": 3}
    job, _, index = task.rpartition(":")
    return (order.get(job, 9), job, int(index) if index.isdigit() else 0)


def member_label(task: str) -> str:
    """A task's short label (inside a ring member's circle, on a heat map's
    axes): "worker:0" -> "w0", "ps:1" -> "ps1", "chief:0" -> "c0"."""
    name = short_task(task)
    job, _, index = name.rpartition(":")
    short = {"worker": "w", "chief": "c", "ps": "ps", "evaluator": "ev"}.get(
        job, job[:2])
    return f"{short}{index}" if job else name


def nice_ticks(total_us: float, most: int = 8) -> tuple[list[int], str]:
    """Round tick values (µs) from 0 to at least ``total_us`` (1, 2 or 5 times
    a power of ten apart, at most ``most`` + 2 of them) and the unit to label
    them in ("ms" from 1 ms on, else "µs")."""
    total_us = max(float(total_us), 1.0)
    raw = total_us / most
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    step = max(1, round(step))
    ticks = list(range(0, math.ceil(total_us / step) * step + 1, step))
    return ticks, ("ms" if total_us >= 1000 else "µs")


def tick_label(value_us: int, unit: str) -> str:
    if unit == "µs":
        return str(int(value_us))
    return f"{value_us / 1000:.3f}".rstrip("0").rstrip(".")


def format_bytes(n: int) -> str:
    """1536 -> '1.5 KB' (powers of 1024, as TF's tools)."""
    if n < 1024:
        return f"{n} B"
    for unit in ("KB", "MB", "GB"):
        n /= 1024.0
        if n < 1024 or unit == "GB":
            return f"{n:.1f} {unit}" if n < 10 else f"{n:.0f} {unit}"
    return f"{n:.0f} GB"
