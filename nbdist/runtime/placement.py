"""Placement: every node of a client graph gets a full device name.

Rules, as TF's placer: explicit (partial) specs are honoured; nodes joined by
ref or resource edges, and ``loc:@`` colocation groups, share one device; a
node with no job/task goes to the default task (the session target's);
``allow_soft_placement`` relaxes an impossible spec instead of failing.
"""

from __future__ import annotations

from nbdist import errors
from nbdist.framework import op_def_registry
from nbdist.framework.device import DeviceSpec
from nbdist.framework.importer import parse_input


class _UnionFind:
    def __init__(self):
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        p = self.parent.setdefault(x, x)
        while p != self.parent.setdefault(p, p):
            self.parent[p] = self.parent[self.parent[p]]
            p = self.parent[p]
        self.parent[x] = p
        return p

    def union(self, a: str, b: str):
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def _spec(s: str, node: str) -> DeviceSpec:
    try:
        return DeviceSpec.from_string(s or "")
    except ValueError as e:
        raise errors.InvalidArgumentError(
            None, node, f"Malformed device specification '{s}' for node '{node}': "
                        f"{e}") from None


def colocation_names(node) -> list[str]:
    """The nodes ``node`` asks to share a device with (its ``_class`` attr's
    ``loc:@name`` entries). A constraint that is not UTF-8 text (a request's
    bytes, not a name) is ``InvalidArgumentError`` naming the node.

    >>> from nbdist.proto import node_def_pb2
    >>> n = node_def_pb2.NodeDef(name="b", op="Identity")
    >>> n.attr["_class"].list.s.extend([b"loc:@a", b"other"])
    >>> colocation_names(n)
    ['a']
    >>> n.attr["_class"].list.s.append(b"loc:@\\xff")
    >>> colocation_names(n)
    Traceback (most recent call last):
    ...
    nbdist.errors.InvalidArgumentError: Node 'b': its colocation constraint \
b'loc:@\\xff' is not UTF-8 text
    """
    if "_class" not in node.attr:
        return []
    names = []
    for c in node.attr["_class"].list.s:
        try:
            text = c.decode()
        except UnicodeDecodeError:
            raise errors.InvalidArgumentError(
                None, node.name, f"Node '{node.name}': its colocation constraint "
                f"{c[:60]!r} is not UTF-8 text") from None
        if text.startswith("loc:@"):
            names.append(text[5:])
    return names


def _matches(spec: DeviceSpec, dev: DeviceSpec) -> bool:
    for f in ("job", "replica", "task", "device_type", "device_index"):
        want = getattr(spec, f)
        if want is not None:
            have = getattr(dev, f)
            if f == "device_type":
                want, have = want.upper(), (have or "").upper()
            if want != have:
                return False
    return True


def _merge_requests(specs: list[tuple[str, DeviceSpec]], soft: bool):
    """One spec for a colocation group; a conflict is an error unless ``soft``."""
    merged = DeviceSpec()
    for node, s in specs:
        for f in ("job", "replica", "task", "device_type", "device_index"):
            v = getattr(s, f)
            if v is None:
                continue
            cur = getattr(merged, f)
            if cur is None:
                setattr(merged, f, v)
            elif cur != v and not soft:
                others = ", ".join(f"'{n}' ({x.to_string()})" for n, x in specs
                                   if x.to_string())
                raise errors.InvalidArgumentError(
                    None, node, f"Cannot colocate nodes {others}: their device "
                    f"specifications conflict ({f} {cur!r} vs {v!r})")
    return merged


def place(nodes, devices: list[str], default_task: str, allow_soft_placement=False,
          log_device_placement=False, log=print) -> dict[str, str]:
    """Returns node name -> full device name for ``nodes`` (NodeDefs).

    ``devices`` are full names such as ``/job:ps/replica:0/task:0/device:CPU:0``;
    ``default_task`` such as ``/job:worker/replica:0/task:0``.
    """
    dev_specs = [(d, DeviceSpec.from_string(d)) for d in devices]
    default = DeviceSpec.from_string(default_task)
    uf = _UnionFind()
    by_name = {n.name: n for n in nodes}
    for n in nodes:
        uf.find(n.name)
        odef = op_def_registry.get_op_def(n.op)
        ref_inputs = odef.ref_inputs if odef else ()
        pos = 0
        for inp in n.input:
            src, idx = parse_input(inp)
            if idx < 0:
                continue
            if pos in ref_inputs and src in by_name:
                uf.union(src, n.name)
            pos += 1
        for other in colocation_names(n):
            if other in by_name:
                uf.union(other, n.name)
    groups: dict[str, list] = {}
    for n in nodes:
        groups.setdefault(uf.find(n.name), []).append(n)
    result: dict[str, str] = {}
    for members in groups.values():
        requests = [(m.name, _spec(m.device, m.name)) for m in members]
        owners = [r for r, m in zip(requests, members) if _owns_resource(m)]
        if owners:
            # As TF: a ref/resource consumer goes where its variable or queue is,
            # whatever device its own scope asked for.
            merged = _merge_requests(owners, allow_soft_placement)
        else:
            merged = _merge_requests(requests, allow_soft_placement)
        device = _choose(merged, dev_specs, default, allow_soft_placement)
        if device is None:
            node = next((n for n, s in requests if s.to_string()), members[0].name)
            avail = ", ".join(d for d, _ in dev_specs)
            raise errors.InvalidArgumentError(
                None, node, f"Cannot assign a device for operation {node}: Operation "
                f"was explicitly assigned to {merged.to_string()} but available "
                f"devices are [ {avail} ]. Make sure the device specification "
                f"refers to a valid device.\n\t [[node {node}]]")
        for m in members:
            result[m.name] = device
    if log_device_placement:
        for n in nodes:
            log(f"{n.name}: ({n.op}): {result[n.name]}")
    return result


def _owns_resource(node) -> bool:
    """Variables, queues, accumulators, iterators: ops that create the state
    their consumers are colocated with."""
    odef = op_def_registry.get_op_def(node.op)
    return bool(odef is not None and odef.stateful and not odef.ref_inputs and
                odef.num_inputs == 0)


def _choose(spec: DeviceSpec, dev_specs, default: DeviceSpec, soft: bool):
    if spec.job is None and spec.task is None and spec.replica is None:
        spec = spec.replace(job=default.job, replica=default.replica,
                            task=default.task)
    elif spec.job is not None and spec.task is None:
        # Partial job spec: prefer the default task when it is of that job.
        if default.job == spec.job:
            spec = spec.replace(task=default.task)
    cands = [d for d, s in dev_specs if _matches(spec, s)]
    if cands:
        return _first_cpu0(cands)
    if not soft:
        return None
    for drop in (("device_index",), ("device_index", "device_type"),
                 ("device_index", "device_type", "task", "replica"),
                 ("device_index", "device_type", "task", "replica", "job")):
        relaxed = spec.replace(**{f: None for f in drop})
        if relaxed.job is None:
            relaxed = relaxed.replace(job=default.job, replica=default.replica,
                                      task=default.task)
        cands = [d for d, s in dev_specs if _matches(relaxed, s)]
        if cands:
            return _first_cpu0(cands)
    return None


def _first_cpu0(cands: list[str]) -> str:
    def key(d):
        s = DeviceSpec.from_string(d)
        return (s.job or "", s.task or 0, s.device_index or 0)

    return min(cands, key=key)
