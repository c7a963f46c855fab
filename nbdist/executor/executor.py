"""Runs one registered graph (a whole client graph or one task's partition).

The graph is checked and compiled once: nodes in topological order, each a
kernel closure with its input slots. A step walks that list, so a repeated
run costs its kernels plus a few list operations per node. Nodes run one
after another; the master orders partitions so Send/Recv never deadlock.
"""

from __future__ import annotations

import operator
import threading
import time
from typing import Any, Callable, Protocol

import numpy as np

from nbdist import errors
from nbdist.executor.kernel import KernelNode, get_kernel_factory
from nbdist.executor.step import StepContext
from nbdist.framework import op_def_registry
from nbdist.framework.importer import node_def_attrs, parse_input, topological_order
from nbdist.framework.tensor_shape import TensorShape

_thread_ids = threading.local()


class _Deref:
    """Marks inputs fed by a ref (a variable) into an op that wants its value."""

    __slots__ = ("fn", "positions")

    def __init__(self, fn, positions):
        self.fn = fn
        self.positions = positions

    def __call__(self, step, *args):
        args = list(args)
        for p in self.positions:
            a = args[p]
            if hasattr(a, "read"):
                args[p] = a.read()
        return self.fn(step, *args)


def _infer_node(odef, name, input_specs, attrs, const_values):
    ctx = op_def_registry.InferContext(
        odef.type, name, [d for d, _ in input_specs], [s for _, s in input_specs],
        attrs, lambda i: const_values[i])
    return odef.infer(ctx)


class ExecutorEnv(Protocol):
    """What an ``Executor`` and its kernels need of the task they run on (the
    runtime's ``Worker`` is one; an in-process session's worker too).

    ``collectives`` (a ``CollectiveExecutor``), ``publish(kind, payload)``
    (runtime events) and ``limits`` (an ``executor.limits.Limits``) may be
    None: a kernel that needs one says so when it runs."""

    task_name: str
    rendezvous: Any  # executor.rendezvous.Rendezvous
    collectives: Any
    publish: Callable[[str, dict], None] | None
    limits: Any

    def resources_for(self, device: str) -> Any:
        """The ``ResourceMgr`` of ``device`` (variables, queues, tables)."""
        ...

    def session_resources_for(self, device: str) -> Any:
        """The ``ResourceMgr`` of ``device`` for stateful ops with no
        ``shared_name`` (queues, readers): one per session, as TF's."""
        ...

    def recv(self, step: StepContext, src_device: str, key: str) -> Any:
        """The value another task sends as ``key`` in ``step``."""
        ...


class Executor:
    """Compiles ``graph_def`` for ``env`` (an ``ExecutorEnv``: a task's devices
    and resources)."""

    def __init__(self, graph_def, env: ExecutorEnv, name: str = "graph"):
        self.env = env
        self.name = name
        get_kernel_factory("NoOp")  # loads every kernel (and the executor's op defs)
        try:
            nodes = topological_order(list(graph_def.node), where=name)
        except ValueError as e:
            raise errors.InvalidArgumentError(None, None, str(e)) from None
        self._nodes = nodes
        # The graph's function library (name -> FunctionDef); kernels of ops with
        # a func attr (_FunctionCall, MapDataset) get it as the attr "_library".
        self.library = {f.name: f for f in graph_def.library.function}
        slots: dict[str, int] = {}
        specs: dict[str, tuple] = {}
        consts: dict[str, object] = {}
        plan = []
        nslots = 0
        quiet = False
        for nd in nodes:
            where = f"Node '{nd.name}' (op '{nd.op}')"
            odef = op_def_registry.get_op_def(nd.op)
            if odef is None:
                raise errors.InvalidArgumentError(
                    None, nd.name, f"{where}: unknown op '{nd.op}' (not registered "
                    f"in nbdist) on task {env.task_name}")
            try:
                attrs = node_def_attrs(nd, odef, where)
            except (ValueError, TypeError) as e:
                raise errors.InvalidArgumentError(None, nd.name, str(e)) from None
            in_slots, in_specs, in_consts, deref = [], [], [], []
            for inp in nd.input:
                src, idx = parse_input(inp)
                if idx < 0:
                    continue
                key = f"{src}:{idx}"
                if key not in slots:
                    raise errors.InvalidArgumentError(
                        None, nd.name, f"{where}: input '{inp}' does not exist")
                pos = len(in_slots)
                in_slots.append(slots[key])
                dt, sh = specs[key]
                if dt.is_ref_dtype and pos not in odef.ref_inputs:
                    deref.append(pos)
                    dt = dt.base_dtype
                in_specs.append((dt, sh))
                in_consts.append(consts.get(key))
            n_in = len(in_slots)
            if (odef.num_inputs is not None and n_in != odef.num_inputs) or (
                    n_in < odef.min_inputs):
                raise errors.InvalidArgumentError(
                    None, nd.name, f"{where}: wrong number of inputs ({n_in})")
            try:
                outs = _infer_node(odef, nd.name, in_specs, attrs, in_consts)
            except (ValueError, TypeError) as e:
                raise errors.InvalidArgumentError(None, nd.name,
                                                  f"{where}: {e}") from None
            factory = get_kernel_factory(nd.op)
            if factory is None:
                raise errors.UnimplementedError(
                    None, nd.name, f"{where}: no kernel registered for op '{nd.op}'")
            device = nd.device
            if self.library and any(k == "func" for k, _ in odef.attrs.values()):
                attrs = dict(attrs, _library=self.library)
            knode = KernelNode(nd.name, nd.op, attrs, device,
                               env.resources_for(device), env,
                               tuple(d for d, _ in in_specs))
            try:
                fn = factory(knode)
            except errors.OpError:
                raise
            except (ValueError, TypeError, KeyError) as e:
                raise errors.InvalidArgumentError(None, nd.name,
                                                  f"{where}: {e}") from None
            inner = getattr(fn, "fp_quiet", None)
            if inner is not None:  # one errstate per step, not one per node
                fn = inner
                quiet = True
            if deref:
                fn = _Deref(fn, tuple(deref))
            out_start = nslots
            for i, (dt, sh) in enumerate(outs):
                key = f"{nd.name}:{i}"
                slots[key] = nslots
                specs[key] = (dt, sh if isinstance(sh, TensorShape)
                              else TensorShape(sh))
                nslots += 1
            if nd.op == "Const":
                consts[f"{nd.name}:0"] = attrs["value"]
            plan.append((fn, tuple(in_slots), out_start, len(outs), nd.name, nd.op,
                         device))
        # Free each value after its last consumer (unused outputs at once): big
        # intermediates leave memory early, as the refcounts of a NumPy program.
        last_use = {}
        for k, (_fn, ins, out, n, *_rest) in enumerate(plan):
            for j in range(out, out + n):
                last_use[j] = k
            for j in ins:
                last_use[j] = k
        frees: list[list[int]] = [[] for _ in plan]
        for j, k in last_use.items():
            frees[k].append(j)
        self._plan = [p + (tuple(f),) for p, f in zip(plan, frees)]
        # What a step walks: each node's inputs as one slot (a single input) or
        # an itemgetter (several), so no list is built per node. Constants start
        # in their slots and input-less NoOps have nothing to do: neither is walked.
        self._initial = [None] * nslots
        self._steps = []
        for fn, ins, out, n, node, op, _device, frees in self._plan:
            if op == "Const":
                self._initial[out] = fn(None)
            elif not (op == "NoOp" and not ins):
                self._steps.append(
                    (fn, len(ins), ins[0] if len(ins) == 1 else
                     operator.itemgetter(*ins) if ins else None, out, n, frees,
                     node, op))
        self.output_specs = specs
        self._fp_quiet = quiet

    @property
    def node_names(self) -> list[str]:
        return [p[4] for p in self._plan]

    def run(self, step: StepContext):
        """Runs every node once; results of ``_Fetch`` nodes land in step.fetches."""
        vals = self._initial.copy()
        if self._fp_quiet:  # kernels marked ignore_fp_errors: as TF, 1/0 is inf
            with np.errstate(all="ignore"):
                return self._run(step, vals)
        return self._run(step, vals)

    def _run(self, step, vals):
        if step.trace:
            return self._run_traced(step, vals)
        deadline = step.deadline
        for fn, nin, arg, out, n, frees, name, op_type in self._steps:
            # cancel() sets _cancel_error first: an attribute read, not a call.
            if step._cancel_error is not None or (deadline is not None and
                                                  time.monotonic() > deadline):
                step.node_name = name
                step.check()
            try:  # no local keeps a result: only vals refers to it
                if n == 1:
                    vals[out] = (fn(step, vals[arg]) if nin == 1 else
                                 fn(step, *arg(vals)) if nin else fn(step))
                elif n == 0:
                    fn(step, vals[arg]) if nin == 1 else (
                        fn(step, *arg(vals)) if nin else fn(step))
                else:
                    vals[out:out + n] = fn(step, *arg(vals)) if nin > 1 else (
                        fn(step, vals[arg]) if nin else fn(step))
            except Exception as e:  # noqa: BLE001 - every failure names its node
                raise self._node_error(e, name, op_type) from None
            for j in frees:
                vals[j] = None

    def _run_traced(self, step, vals):
        stats = step.stats
        tid = threading.get_ident() & 0xFFFFFFFF
        for fn, ins, out, n, name, op_type, device, frees in self._plan:
            step.node_name = name
            step.check()
            start = time.time()
            try:
                if n == 1:
                    vals[out] = fn(step, *[vals[i] for i in ins])
                elif n == 0:
                    fn(step, *[vals[i] for i in ins])
                else:
                    vals[out:out + n] = fn(step, *[vals[i] for i in ins])
            except Exception as e:  # noqa: BLE001
                raise self._node_error(e, name, op_type) from None
            end = time.time()
            out_bytes = []
            for v in vals[out:out + n]:
                out_bytes.append(int(v.nbytes) if isinstance(v, np.ndarray) else 0)
            stats.append((name, op_type, device, int(start * 1e6), int(end * 1e6),
                          out_bytes, tid))
            for j in frees:
                vals[j] = None

    def _node_error(self, e: Exception, name: str, op_type: str) -> errors.OpError:
        task = self.env.task_name
        if isinstance(e, errors.OpError):
            if getattr(e, "_nbdist_located", False):
                return e
            msg = e.message
            if name not in msg:
                msg = f"{msg}\n\t [[node {name} (op {op_type}) on {task}]]"
            else:
                msg = f"{msg}\n\t [[on {task}]]"
            err = type(e)(None, name, msg)
        elif isinstance(e, (ValueError, TypeError, IndexError)):
            err = errors.InvalidArgumentError(
                None, name, f"{type(e).__name__}: {e}\n\t [[node {name} "
                f"(op {op_type}) on {task}]]")
        elif isinstance(e, MemoryError):
            err = errors.ResourceExhaustedError(
                None, name, f"Out of memory running node {name} (op {op_type}) on "
                f"{task}")
        else:
            err = errors.InternalError(
                None, name, f"{type(e).__name__}: {e}\n\t [[node {name} "
                f"(op {op_type}) on {task}]]")
        err._nbdist_located = True
        return err


def output_bytes(value) -> int:
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            return int(sum(len(v) for v in value.ravel()))
        return int(value.nbytes)
    return 0


__all__ = ["Executor", "StepContext", "output_bytes"]
