"""``CriticalSection`` (TF's ``tf.CriticalSection``) in graph mode: the ops
``execute(fn)`` builds run while the section's mutex is held, so two session
runs (threads, or tasks sharing it by ``shared_name``) never interleave them.

As in TF, ``execute`` builds ``MutexLock`` (waits for the mutex and yields a
lock), ``fn``'s ops under a control dependency on the lock, and
``ConsumeMutexLock`` after ``fn``'s results; the mutex is free again when the
lock is consumed or, if the run fails first, dropped with the run's values.

>>> import nbdist as nd
>>> counter = nd.Variable(0)
>>> cs = nd.CriticalSection()
>>> bump = cs.execute(lambda: counter.assign_add(1))
>>> with nd.Session() as s:
...     s.run(counter.initializer)
...     [int(s.run(bump)) for _ in range(3)]
[1, 2, 3]
"""

from __future__ import annotations

from nbdist.framework import dtypes, nest
from nbdist.framework.constant_op import identity
from nbdist.framework.gradient_registry import NotDifferentiable
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.ops import Operation, Tensor, get_default_graph
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops.control_flow_ops import group

register_op("MutexV2", lambda c: [(dtypes.resource, TensorShape([]))],
            attrs={"container": ("string", ""), "shared_name": ("string", "")},
            num_inputs=0, stateful=True)
register_op("MutexLock", lambda c: [(dtypes.variant, TensorShape([]))],
            num_inputs=1, stateful=True)
register_op("ConsumeMutexLock", lambda c: [], num_inputs=1, stateful=True)
for _t in ("MutexV2", "MutexLock", "ConsumeMutexLock"):
    NotDifferentiable(_t)


def _after(x, deps):
    """``x`` (a tensor or an op) again, once ``deps`` have run."""
    with get_default_graph().control_dependencies(deps):
        return group(x) if isinstance(x, Operation) else identity(x)


class CriticalSection:
    """A mutex for graph computations (TF's class): ``execute(fn)`` returns
    ``fn()``'s results, computed while the mutex is held."""

    def __init__(self, name=None, shared_name=None, critical_section_def=None,
                 import_scope=None):
        if critical_section_def is not None:
            raise ValueError("CriticalSection: critical_section_def (a proto) is "
                             "not supported; pass name and shared_name")
        del import_scope
        g = get_default_graph()
        with g.name_scope(name or "CriticalSection") as scope:
            self._handle = g.create_op(
                "MutexV2", [], {"container": "",
                                "shared_name": shared_name or scope.rstrip("/")},
                name=scope).outputs[0]

    @property
    def name(self) -> str:
        return self._handle.op.name

    def execute(self, fn, exclusive_resource_access=True, name=None):
        """Builds ``fn()`` so that its ops run inside the critical section;
        returns its results (tensors, ops or a nest of them)."""
        del exclusive_resource_access  # TF's check of resources shared across
        g = get_default_graph()
        with g.name_scope(name or "critical_section_execute"):
            with g.colocate_with(self._handle.op):
                lock = g.create_op("MutexLock", [self._handle],
                                   name="MutexLock").outputs[0]
            with g.control_dependencies([lock]):
                result = fn()
            flat = [x for x in nest.flatten(result)
                    if isinstance(x, (Tensor, Operation))]
            with g.control_dependencies(flat), g.colocate_with(self._handle.op):
                consume = g.create_op("ConsumeMutexLock", [lock],
                                      name="ConsumeMutexLock")
            return nest.map_structure(
                lambda x: _after(x, [consume]) if isinstance(x, (Tensor, Operation))
                else x, result)


__all__ = ["CriticalSection"]
