"""The ``_FunctionCall`` kernel, and compiling a ``FunctionDef`` into a nested
``Executor`` (also used by ``MapDataset``).

A node with a ``func`` attr finds its FunctionDef in the function library of
the GraphDef its executor was built from (the executor hands it to the kernel
as the private attr ``_library``) or, when the master's partitioning dropped
the library, in the node's own ``_fdef`` attr (the serialized FunctionDef).

The body is compiled once, when the calling graph is registered: the
arguments become ``_Feed`` nodes (named after the arguments), the outputs
``_Fetch`` nodes, and every body node runs on the call's device. A body node
placed on another task (a variable of a parameter server, say) is an error at
registration: a call runs on one task. Running a function with
``ConcreteFunction.run(target)`` instead lets the master place and partition
its graph across tasks.
"""

from __future__ import annotations

from nbdist import errors
from nbdist.executor.kernel import register_kernel
from nbdist.framework import dtypes
from nbdist.framework.device import DeviceSpec
from nbdist.framework.importer import python_to_attr_value
from nbdist.framework.tensor_shape import TensorShape
from nbdist.proto import function_pb2, graph_pb2


def function_def_for(node, attr: str = "f"):
    """(FunctionDef, library dict) for the function named by ``node.attrs[attr]``."""
    name = node.attrs[attr]
    if isinstance(name, bytes):
        name = name.decode()
    library = node.attrs.get("_library") or {}
    fdef = library.get(name)
    if fdef is None:
        blob = node.attrs.get("_fdef" if attr == "f" else f"_{attr}_fdef")
        if blob:
            fdef = function_pb2.FunctionDef.FromString(bytes(blob))
    if fdef is None:
        raise errors.NotFoundError(
            None, node.name, f"Function '{name}' (attr '{attr}' of node "
            f"'{node.name}') is not in the graph's function library")
    return fdef, library


def _task_spec(env):
    try:
        return DeviceSpec.from_string(getattr(env, "task_name", "") or "")
    except ValueError:
        return DeviceSpec()


class CompiledFunction:
    """A FunctionDef compiled for one node's task: ``run(step, args)`` -> tuple."""

    def __init__(self, fdef, node, library=None):
        from nbdist.executor.executor import Executor

        self.name = fdef.name
        self.node_name = node.name
        self.arg_names = list(fdef.input_arg)
        self.num_outputs = len(fdef.output)
        env = node.env
        task = _task_spec(env)
        gd = graph_pb2.GraphDef()
        for arg, t in zip(fdef.input_arg, fdef.input_type):
            n = gd.node.add(name=arg, op="_Feed", device=node.device)
            n.attr["key"].CopyFrom(python_to_attr_value(arg, "string"))
            n.attr["dtype"].CopyFrom(python_to_attr_value(dtypes.as_dtype(t),
                                                          "type"))
            n.attr["shape"].CopyFrom(python_to_attr_value(TensorShape(None),
                                                          "shape"))
        for body in fdef.node_def:
            n = gd.node.add()
            n.CopyFrom(body)
            n.device = self._device_for(body, node, task)
        for i, out in enumerate(fdef.output):
            n = gd.node.add(name=f"_fetch/{i}", op="_Fetch", device=node.device)
            n.input.append(out)
            n.attr["key"].CopyFrom(python_to_attr_value(str(i), "string"))
        for f in (library or {}).values():
            gd.library.function.add().CopyFrom(f)
        self.keys = [str(i) for i in range(self.num_outputs)]
        self.executor = Executor(gd, env, name=f"function '{fdef.name}' of node "
                                             f"'{node.name}'")

    def _device_for(self, body, node, task: DeviceSpec) -> str:
        if not body.device:
            return node.device
        try:
            spec = DeviceSpec.from_string(body.device)
        except ValueError:
            return node.device
        for field in ("job", "replica", "task"):
            want, have = getattr(spec, field), getattr(task, field)
            if want is not None and have is not None and want != have:
                raise errors.InvalidArgumentError(
                    None, node.name,
                    f"Function '{self.name}' called by node '{node.name}' has node "
                    f"'{body.name}' ({body.op}) on {body.device}, but the call runs "
                    f"on {getattr(node.env, 'task_name', '?')}: a function called "
                    "inside a graph runs on one task. Run it with "
                    "ConcreteFunction.run(target) to let the master place it, or "
                    "place the call on that task.")
        if spec.device_index is not None and task.job is not None:
            kind = spec.device_type or "CPU"
            return f"{task.task_name()}/device:{kind.upper()}:{spec.device_index}"
        return node.device

    def run(self, step, args):
        """Runs the body once within ``step`` (sharing its cancellation, deadline
        and trace); returns the outputs as a tuple."""
        if len(args) != len(self.arg_names):
            raise errors.InvalidArgumentError(
                None, self.node_name, f"Function '{self.name}' takes "
                f"{len(self.arg_names)} argument(s), got {len(args)}")
        saved = step.feeds, step.fetches
        step.feeds = dict(zip(self.arg_names, args))
        step.fetches = {}
        try:
            self.executor.run(step)
            out = step.fetches
        except errors.OpError as e:
            err = type(e)(None, self.node_name,
                          f"{e.message}\n\t [[in function '{self.name}' called by "
                          f"node {self.node_name}]]")
            err._nbdist_located = True  # the body's error already names the task
            raise err from None
        finally:
            step.feeds, step.fetches = saved
        return tuple(out[k] for k in self.keys)


@register_kernel("_FunctionCall")
def function_call_kernel(node):
    fdef, library = function_def_for(node)
    fn = CompiledFunction(fdef, node, library)
    n_out = fn.num_outputs

    def compute(step, *args):
        outs = fn.run(step, args)
        if n_out == 1:
            return outs[0]
        return outs if n_out else None

    return compute
