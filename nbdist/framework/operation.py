"""``Operation``: a node of a graph (its type, inputs, attrs, outputs and device),
kept apart from ``ops`` so that the graph module stays small; ``from
nbdist.framework.ops import Operation`` keeps working."""

from __future__ import annotations

from nbdist.framework import op_def_registry as op_def, op_site
from nbdist.framework.default_session import run_with_default_session
from nbdist.framework.node_def import operation_to_node_def
from nbdist.framework.tensor import Tensor


class Operation:
    """A node of the graph: ``name``, ``type``, ``inputs``, ``outputs``, ``device``."""

    def __init__(self, graph, op_type: str, name: str, inputs, attrs,
                 output_specs, control_inputs, device: str):
        self._graph = graph
        self._type = op_type
        self._name = name
        self._inputs = list(inputs)
        self._attrs = attrs
        self._control_inputs = list(control_inputs)
        self._device = device
        self._outputs = [Tensor(self, i, d, s) for i, (d, s) in enumerate(output_specs)]
        self._id = len(graph._ops_list)
        self._site = op_site.creation_site()  # for errors naming this op

    name = property(lambda self: self._name)
    type = property(lambda self: self._type)
    graph = property(lambda self: self._graph)
    outputs = property(lambda self: list(self._outputs))
    inputs = property(lambda self: list(self._inputs))
    control_inputs = property(lambda self: list(self._control_inputs))
    device = property(lambda self: self._device)
    # TF's: [(filename, lineno, name, line)], here only the user frame that built it
    traceback = property(lambda self: op_site.as_traceback(self._site))

    @property
    def node_def(self):
        return operation_to_node_def(self)

    @property
    def op_def(self):
        return op_def.get_op_def(self._type)

    def get_attr(self, name: str):
        if name not in self._attrs:
            raise ValueError(f"Operation '{self._name}' has no attr named '{name}'.")
        return self._attrs[name]

    @property
    def attrs(self) -> dict:
        return dict(self._attrs)

    def _set_device(self, device):
        self._device = _device_string(device)

    def set_device(self, device):
        """Places the op on ``device`` (a string or ``DeviceSpec``), as a
        ``with graph.device(...)`` around its creation would have."""
        self._set_device(device)

    def _set_attr(self, name, value):
        self._attrs[name] = value

    def _add_control_input(self, op: Operation):
        if op not in self._control_inputs:
            self._control_inputs.append(op)

    def colocation_groups(self) -> list[bytes]:
        cls = self._attrs.get("_class")
        if cls:
            return [c if isinstance(c, bytes) else c.encode() for c in cls]
        return [b"loc:@" + self._name.encode()]

    def values(self):
        return tuple(self._outputs)

    def run(self, feed_dict=None, session=None):
        """Runs this op in ``session`` (default: the default session)."""
        run_with_default_session(self, feed_dict, session)

    def __repr__(self) -> str:
        return f"<nd.Operation '{self._name}' type={self._type}>"

    def __hash__(self) -> int:
        return id(self)


def _device_string(device) -> str:
    if device is None:
        return ""
    if hasattr(device, "to_string"):
        return device.to_string()
    return str(device)
