"""``PlacementView``: which ops and variables live on which device, and how
many bytes of parameters each parameter server holds (one bar per ps).

From a graph (placed here exactly as the master places it, with the
runtime's placer) and, live, from the coordination service's events:
``graph_registered`` (every node of a partition with its device) and
``variable_created`` (name, device, shape, dtype, bytes).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import NamedTuple

from nbdist.notebook.live_view import LiveView, esc, short_task

__all__ = ["PlacementView", "human_bytes"]

_VARIABLE_OPS = {"VariableV2", "Variable", "VarHandleOp"}
_PALETTE = ("#0969da", "#8250df", "#1a7f37", "#bf3989", "#9a6700", "#0a7ea4")


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000.0
    return f"{n:.1f} GB"


@dataclass
class DeviceRow:
    device: str
    ops: dict = field(default_factory=dict)  # node name -> op type
    variables: dict = field(default_factory=dict)  # name -> (shape, dtype, bytes)

    @property
    def task(self) -> str:
        return self.device.split("/device:", 1)[0]

    @property
    def bytes(self) -> int:
        return sum(v[2] for v in self.variables.values())


def _device_name(device: str, default_task: str) -> str:
    """A full device name (``/job:ps/replica:0/task:0/device:CPU:0``)."""
    from nbdist.framework.device import DeviceSpec

    s = DeviceSpec.from_string(device or "")
    d = DeviceSpec.from_string(default_task)
    job = s.job or d.job
    task = s.task if s.task is not None else (d.task or 0)
    kind = (s.device_type or "CPU").upper()
    return f"/job:{job}/replica:0/task:{task}/device:{kind}:{s.device_index or 0}"


class PlacementState:
    """Ops and variables per device; changed by ``add_graph`` and ``apply``."""

    def __init__(self, ps_tasks=(), one_device_per_name: bool = False):
        self.devices: dict[str, DeviceRow] = {}
        self.ps_tasks = list(ps_tasks)  # each gets a bar, even with 0 bytes
        # A view of one graph: each of its nodes is on one device (the last
        # the master put it on), however often a graph of those names ran.
        self.one_device_per_name = one_device_per_name
        self._device_of: dict[str, str] = {}  # node name -> its device

    def _row(self, device: str) -> DeviceRow:
        row = self.devices.get(device)
        if row is None:
            row = self.devices[device] = DeviceRow(device)
        return row

    def add_node(self, name: str, op: str, device: str, variable=None) -> bool:
        if op.startswith("_") or name.startswith("_"):
            return False  # _Send/_Recv/_ctrl/... that the master inserts
        changed = False
        if self.one_device_per_name:
            old = self._device_of.get(name)
            if old is not None and old != device and old in self.devices:
                moved = self._move_from(old, name)
                variable = variable if variable is not None else moved
                changed = True
            self._device_of[name] = device
        row = self._row(device)
        changed |= row.ops.get(name) != op
        row.ops[name] = op
        if variable is not None and row.variables.get(name) != variable:
            row.variables[name] = variable
            changed = True
        return changed

    def add_graph(self, graph, cluster_spec=None, default_task=None) -> bool:
        """Places ``graph`` as the master would on ``cluster_spec`` (ops without
        a device go to ``default_task``) and records it."""
        from nbdist.runtime.placement import place

        nodes = list(graph.as_graph_def().node)
        default_task = default_task or "/job:localhost/replica:0/task:0"
        placement = None
        if cluster_spec is not None:
            devices = [f"{t}/device:CPU:0" for t in cluster_spec.task_names()]
            try:
                placement = place(
                    nodes, devices, default_task, allow_soft_placement=True
                )
            except Exception:  # noqa: BLE001 - show the requested devices instead
                placement = None
        changed = False
        for n in nodes:
            device = (placement or {}).get(n.name) or _device_name(
                n.device, default_task
            )
            variable = None
            if n.op in _VARIABLE_OPS:
                op = graph.get_operation_by_name(n.name)
                variable = _variable_info(op)
            changed |= self.add_node(n.name, n.op, device, variable)
        return changed

    def _move_from(self, device: str, name: str):
        """Takes ``name`` off ``device``; returns its variable info, if any."""
        row = self.devices[device]
        row.ops.pop(name, None)
        variable = row.variables.pop(name, None)
        if not row.ops and not row.variables:
            del self.devices[device]
        return variable

    def tasks(self) -> set[str]:
        return {row.task for row in self.devices.values()}

    def apply(self, event) -> bool:
        p = event.payload
        if event.kind == "graph_registered":
            changed = False
            for name, op, device in p.get("nodes", ()):
                changed |= self.add_node(name, op, device)
            return changed
        if event.kind == "variable_created":
            device = p.get("device") or event.task
            if "/device:" not in device:
                device = _device_name(device, device)
            shape = tuple(p.get("shape", ()))
            info = (shape, str(p.get("dtype", "")), int(p.get("bytes", 0)))
            name = p.get("name")
            row = self.devices.get(device)
            if row is not None and row.variables.get(name) == info:
                return False
            op = (row.ops.get(name) if row is not None else None) or "VariableV2"
            return self.add_node(name, op, device, info)
        return False

    # -- summaries -------------------------------------------------------------------
    def by_task(self) -> dict[str, list[DeviceRow]]:
        out: dict[str, list[DeviceRow]] = {}
        for d in sorted(self.devices, key=_device_key):
            out.setdefault(self.devices[d].task, []).append(self.devices[d])
        return out

    def ps_bytes(self) -> list[tuple[str, int, int]]:
        """(ps task, bytes of variables, number of variables) for every ps."""
        tasks = {t: [0, 0] for t in self.ps_tasks}
        for row in self.devices.values():
            if "/job:ps/" in row.device + "/":
                acc = tasks.setdefault(row.task, [0, 0])
                acc[0] += row.bytes
                acc[1] += len(row.variables)
        return [
            (t, b, n)
            for t, (b, n) in sorted(tasks.items(), key=lambda kv: _device_key(kv[0]))
        ]

    def totals(self) -> tuple[int, int, int]:
        ops = sum(len(r.ops) for r in self.devices.values())
        variables = sum(len(r.variables) for r in self.devices.values())
        return ops, variables, len(self.devices)


def _device_key(device: str):
    order = {"chief": 0, "worker": 1, "ps": 2, "evaluator": 3}
    job = device[5:].split("/", 1)[0] if device.startswith("/job:") else device
    digits = [int(x) for x in device.replace("/", ":").split(":") if x.isdigit()]
    return (order.get(job, 9), job, digits)


def _variable_info(op):
    shape = tuple(op.get_attr("shape"))
    dtype = op.get_attr("dtype")
    dims = [d if d is not None and d >= 0 else 0 for d in shape]
    size = getattr(dtype, "size", 4)
    return (
        tuple(shape),
        getattr(dtype, "name", str(dtype)),
        int(math.prod(dims) * size) if dims else int(size),
    )


class PlacementView(LiveView):
    """Ops and variables per device, and bytes per parameter server as bars.

    ``graph`` (default: the default graph) is placed as the master places it on
    ``cluster`` (a ``LocalCluster``, ``Server`` or ``ClusterSpec``; ops with no
    device go to ``default_task``, by default the chief or worker 0). With a
    running cluster the view also follows its event stream: the partitions the
    servers register and the variables they create, as the master really
    placed them. Only ops named as in ``graph`` (or in graphs added with
    ``add_graph``) and registered after the view was made are shown, unless
    ``follow_all``: then every graph that ran or runs on the cluster is.
    A job of more than 4 tasks gets one card (its ops per task, op types and
    largest variables) rather than a card per task.

    >>> import nbdist as nd
    >>> g = nd.Graph()
    >>> with g.as_default(), nd.device("/job:ps/task:0"):
    ...     w = nd.Variable(nd.zeros([256, 10]), name="w")
    >>> spec = nd.ClusterSpec({"ps": ["localhost:2222"], "worker": ["localhost:2223"]})
    >>> print(nd.notebook.PlacementView(g, spec, live=False))  # doctest: +ELLIPSIS
    PlacementView: 6 ops, 1 variable on 1 device
      ps:0     10.2 KB  ##############################  1 variable
      /job:ps/replica:0/task:0/device:CPU:0: 6 ops
        w  (256, 10) float32  10.2 KB
    """

    kinds = ("graph_registered", "variable_created")

    def __init__(
        self,
        graph=None,
        cluster=None,
        *,
        default_task: str | None = None,
        source=None,
        follower=None,
        target=None,
        live: bool = True,
        follow_all: bool = False,
    ):
        from nbdist.framework.ops import get_default_graph

        spec = getattr(cluster, "cluster_spec", cluster)
        self.cluster_spec = spec
        ps = (
            [f"/job:ps/replica:0/task:{i}" for i in spec.task_indices("ps")]
            if (spec is not None and "ps" in spec.jobs)
            else []
        )
        self._state = PlacementState(ps, one_device_per_name=not follow_all)
        if default_task is None:
            default_task = _default_task(spec)
        self.default_task = default_task
        self.graph = graph if graph is not None else get_default_graph()
        self._names = None if follow_all else set()
        self._since_us = int(time.time() * 1e6)
        self._state.add_graph(self.graph, spec, default_task)
        self._remember(self.graph)
        followable = (
            source is not None
            or follower is not None
            or target is not None
            or (cluster is not None and not _is_spec(cluster))
        )
        super().__init__(
            cluster,
            source=source,
            follower=follower,
            target=target,
            live=live and followable,
        )

    @property
    def state(self) -> PlacementState:
        return self._state

    def add_graph(self, graph):
        """Adds the ops of another graph (another replica's, say)."""
        with self._lock:
            changed = self._state.add_graph(graph, self.cluster_spec, self.default_task)
            self._remember(graph)
        if changed:
            self._changed()

    def _remember(self, graph):
        if self._names is not None:
            self._names.update(op.name for op in graph.get_operations())

    def _apply(self, event) -> bool:
        names = self._names
        if names is not None:
            if event.wall_time_us and event.wall_time_us < self._since_us:
                return False  # an older graph's, maybe with the same names
            p = event.payload
            if event.kind == "graph_registered":
                # This graph's nodes, on the tasks it is placed on: another
                # replica's graph has the same names on its own worker.
                tasks = self._state.tasks()
                nodes = [n for n in p.get("nodes", ())
                         if n[0] in names and _device_name(n[2], "").split(
                             "/device:", 1)[0] in tasks]
                if not nodes:
                    return False
                event = type(event)(
                    event.seq,
                    event.wall_time_us,
                    event.kind,
                    event.task,
                    dict(p, nodes=nodes),
                )
            elif p.get("name") not in names:
                return False
        return self._state.apply(event)

    # -- drawing --------------------------------------------------------------------------
    def _text(self) -> str:
        s = self._state
        ops, nvars, ndev = s.totals()
        lines = [
            (
                f"PlacementView: {ops} op{_s(ops)}, {nvars} variable{_s(nvars)} on "
                f"{ndev} device{_s(ndev)}"
            )
        ]
        bars = s.ps_bytes()
        top = max([b for _, b, _ in bars] + [1])
        for task, b, n in bars:
            bar = "#" * max(1 if b else 0, round(30 * b / top))
            lines.append(
                f"  {short_task(task):<6}  {human_bytes(b):>8}  {bar:<30}  "
                f"{n} variable{_s(n)}"
            )
        for rows in s.by_task().values():
            for row in rows:
                lines.append(f"  {row.device}: {len(row.ops)} op{_s(len(row.ops))}")
                for name, (shape, dtype, nbytes) in sorted(row.variables.items()):
                    lines.append(f"    {name}  {shape} {dtype}  {human_bytes(nbytes)}")
        return "\n".join(lines)

    def _html(self) -> str:
        s = self._state
        ops, nvars, ndev = s.totals()
        head = (
            f"<h4>Placement <span class='muted'>· {ops} op{_s(ops)}, {nvars} "
            f"variable{_s(nvars)} on {ndev} device{_s(ndev)}</span></h4>"
        )
        return head + _bars_svg(s.ps_bytes()) + _cards_html(s)


def _s(n: int) -> str:
    return "" if n == 1 else "s"


def _is_spec(cluster) -> bool:
    return type(cluster).__name__ == "ClusterSpec"


def _default_task(spec) -> str:
    if spec is None:
        return "/job:localhost/replica:0/task:0"
    for job in ("chief", "worker", "localhost"):
        if job in spec.jobs:
            return f"/job:{job}/replica:0/task:{min(spec.task_indices(job))}"
    job = spec.jobs[0]
    return f"/job:{job}/replica:0/task:{min(spec.task_indices(job))}"


def _bars_svg(bars) -> str:
    if not bars:
        return ""
    top = max([b for _, b, _ in bars] + [1])
    width, label_w, bar_h, gap = 460, 60, 18, 6
    height = len(bars) * (bar_h + gap) + 22
    parts = [
        (
            f"<svg class='nbdist-ps-bars' width='{width + 150}' height='{height}' "
            "xmlns='http://www.w3.org/2000/svg' font-size='12' "
            "font-family='system-ui,sans-serif'>"
        ),
        (
            "<text x='0' y='12' fill='#59636e'>bytes of variables per parameter "
            "server</text>"
        ),
    ]
    for i, (task, b, n) in enumerate(bars):
        y = 20 + i * (bar_h + gap)
        w = 0 if not b else max(2, round((width - label_w) * b / top))
        color = _PALETTE[i % len(_PALETTE)]
        parts.append(
            f"<g class='nbdist-ps-bar' data-task='{esc(short_task(task))}'>"
            f"<text x='0' y='{y + 13}'>{esc(short_task(task))}</text>"
            f"<rect x='{label_w}' y='{y}' width='{width - label_w}' height='{bar_h}' "
            f"fill='#eaeef2' rx='3'/>"
            f"<rect x='{label_w}' y='{y}' width='{w}' height='{bar_h}' fill='{color}' "
            f"rx='3'><title>{esc(task)}: {b} bytes in {n} variable{_s(n)}</title></rect>"
            f"<text x='{width + 8}' y='{y + 13}'>{human_bytes(b)} · {n} "
            f"var{_s(n)}</text></g>"
        )
    parts.append("</svg>")
    return "".join(parts)


_CARDS_PER_JOB = 4  # a job of more tasks gets one card for all of them
_VARIABLES_LISTED = 6  # in a job's card: the largest, the rest counted


class _Variable(NamedTuple):
    name: str
    shape: tuple
    dtype: str
    nbytes: int


def _job_of(task: str) -> str:
    return task[5:].split("/", 1)[0] if task.startswith("/job:") else task


def _type_chips(ops) -> str:
    """The six commonest op types of ``ops`` (op types), counted."""
    kinds: dict[str, int] = {}
    for op in ops:
        kinds[op] = kinds.get(op, 0) + 1
    top = sorted(kinds.items(), key=lambda kv: (-kv[1], kv[0]))[:6]
    chips = "".join(f"<span class='chip'>{esc(k)} ×{n}</span>" for k, n in top)
    more = len(kinds) - len(top)
    if more > 0:
        chips += f"<span class='muted'>+{more} more types</span>"
    return chips


def _variables_table(variables) -> str:
    rows = "".join(
        f"<tr><td><code>{esc(name)}</code></td><td>{esc(shape)}</td>"
        f"<td>{esc(dtype)}</td><td>{human_bytes(nbytes)}</td></tr>"
        for name, shape, dtype, nbytes in variables
    )
    return f"<table>{rows}</table>" if rows else ""


def _card(color: str, title: str, body: str, job: str = "") -> str:
    cls = f" class='nbdist-placement-job' data-job='{esc(job)}'" if job else ""
    return (
        f"<div{cls} style='border:1px solid #d0d7de;border-left:4px solid {color};"
        "border-radius:6px;padding:6px 10px;margin:6px 8px 0 0;min-width:260px;"
        f"flex:1 1 300px'><b>{title}</b>{body}</div>"
    )


def _job_card(job: str, color: str, tasks: dict) -> str:
    """One card for the many tasks of a job: their ops per task (fewest to
    most), op types and variables together."""
    rows = [row for task_rows in tasks.values() for row in task_rows]
    per_task = sorted(sum(len(r.ops) for r in rs) for rs in tasks.values())
    ops = sum(per_task)
    variables = sorted(
        (_Variable(f"{short_task(r.task)}/{n}", *v) for r in rows
         for n, v in r.variables.items()), key=lambda v: (-v.nbytes, v.name))
    rest = variables[_VARIABLES_LISTED:]
    more = (f"<div class='muted'>+{len(rest)} more variables, "
            f"{human_bytes(sum(v.nbytes for v in rest))}</div>" if rest else "")
    nvars = len(variables)
    body = (
        f"<div class='muted'>{ops} op{_s(ops)} on {len(tasks)} tasks "
        f"({per_task[0]}–{per_task[-1]} per task, {len(rows)} device{_s(len(rows))})"
        + (f", {nvars} variable{_s(nvars)} "
           f"{human_bytes(sum(v.nbytes for v in variables))}" if nvars else "")
        + f"</div><div>{_type_chips(op for r in rows for op in r.ops.values())}</div>"
        f"{_variables_table(variables[:_VARIABLES_LISTED])}{more}"
    )
    return _card(color, f"{esc(job)} ×{len(tasks)}", body, job)


def _cards_html(s: PlacementState) -> str:
    cards = []
    by_job: dict[str, dict] = {}
    for task, rows in s.by_task().items():
        by_job.setdefault(_job_of(task), {})[task] = rows
    for job, tasks in by_job.items():
        color = {"ps": "#8250df", "worker": "#0969da", "chief": "#1a7f37"}.get(
            job, "#59636e"
        )
        if len(tasks) > _CARDS_PER_JOB:
            cards.append(_job_card(job, color, tasks))
            continue
        for task, rows in tasks.items():
            body = [
                f"<div class='nbdist-device' data-device='{esc(row.device)}'>"
                f"<code>{esc(row.device)}</code> <span class='muted'>· "
                f"{len(row.ops)} op{_s(len(row.ops))}</span>"
                f"<div>{_type_chips(row.ops.values())}</div>"
                f"{_variables_table((n, *v) for n, v in sorted(row.variables.items()))}"
                "</div>"
                for row in rows
            ]
            cards.append(_card(color, esc(short_task(task)), "".join(body)))
    return f"<div style='display:flex;flex-wrap:wrap'>{''.join(cards)}</div>"
