"""Several queued closures of one traced function run as one step: the function
graph imported once per closure (``c0/``, ``c1/`` ...) into one graph, so a
worker makes one RPC instead of several (``ClusterCoordinator``'s ``max_batch``).

Only functions whose ops may run side by side are batched (``batchable``): no
nested functions, no resource handles (iterators, queues) and no stateful ops
other than variable updates.
"""

from __future__ import annotations

from nbdist import errors
from nbdist.distribute.tracing.session_cache import SessionCache
from nbdist.framework import dtypes, op_def_registry
from nbdist.framework.importer import import_graph_def
from nbdist.framework.ops import Graph, Tensor

__all__ = ["BatchedFunction", "batchable", "copy_index"]

# Stateful ops that a batch of closures may run side by side in one step.
_BATCH_SAFE_STATEFUL = {"VariableV2", "Assign", "AssignAdd", "AssignSub",
                        "ScatterAdd", "ScatterSub", "ScatterUpdate",
                        "IsVariableInitialized"}


def batchable(concrete) -> bool:
    """Whether closures of ``concrete`` may run side by side in one step."""
    for op in concrete.graph.get_operations():
        if op.type == "_FunctionCall":
            return False
        od = op_def_registry.get_op_def(op.type)
        if od is None or (od.stateful and op.type not in _BATCH_SAFE_STATEFUL):
            return False
        if any(t.dtype.base_dtype is dtypes.resource for t in op.outputs) or any(
                t.dtype.base_dtype is dtypes.resource for t in op.inputs):
            return False
    return True


class BatchedFunction:
    """``k`` copies of a traced function in one graph (``c0/``, ``c1/`` ...),
    run as one step: variables keep their resource (shared name = the name
    in the function), constants are shared, each copy has its own inputs."""

    def __init__(self, concrete, k: int):
        self.concrete, self.k = concrete, k
        gd = concrete.graph.as_graph_def()
        for n in gd.node:
            if n.op == "VariableV2" and not n.attr["shared_name"].s:
                n.attr["shared_name"].s = n.name.encode()
        shared = [n.name for n in gd.node
                  if n.op == "Const" and not any(i.startswith("^") for i in n.input)]
        g = Graph()
        self._feeds, self._fetches = [], []
        with g.as_default():
            consts = {}
            for j in range(k):
                im = {f"{name}:0": consts[name] for name in shared} if j else None
                import_graph_def(gd, name=f"c{j}", input_map=im)
                if j == 0:
                    consts = {name: g.get_tensor_by_name(f"c0/{name}:0")
                              for name in shared}
                self._feeds.append([g.get_tensor_by_name(f"c{j}/{t.name}")
                                    for t in concrete.inputs])
                self._fetches.append([
                    g.get_tensor_by_name(f"c{j}/{t.name}") if isinstance(t, Tensor)
                    else g.get_operation_by_name(f"c{j}/{t.name}")
                    for t in concrete._fetches])
        g.finalize()
        self.graph = g
        self._flat_fetches = [t for f in self._fetches for t in f]
        self._n = len(concrete._fetches)
        self._sessions = SessionCache(g)

    def run(self, target: str, config, values_per_copy) -> list:
        feeds = {}
        for phs, values in zip(self._feeds, values_per_copy):
            feeds.update(zip(phs, values))
        sess = self.session(target, config)
        try:
            out = sess.run(self._flat_fetches, feeds)
        except (errors.AbortedError, errors.UnavailableError):
            self.release(target)
            raise
        n = self._n
        return [self.concrete._pack(out[j * n:(j + 1) * n]) for j in range(self.k)]

    def session(self, target: str, config=None):
        """The session the batch runs in on ``target`` (created once)."""
        return self._sessions.get(target, config)

    def release(self, target=None):
        self._sessions.release(target)


def copy_index(error: errors.OpError, k: int) -> int | None:
    """Which copy of a batch an op error names (``c3/...`` -> 3)."""
    name = error.op if isinstance(error.op, str) else getattr(error.op, "name", None)
    if not name or not name.startswith("c"):
        return None
    head = name[1:].split("/", 1)[0]
    return int(head) if head.isdigit() and int(head) < k else None
