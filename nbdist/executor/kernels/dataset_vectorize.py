"""A dataset ``map`` function rewritten to run once on a batch of elements
(tf.data's ``map_and_batch_fusion``): ``batch(n)`` after ``map(parse)`` parses
the n serialized records with one ``ParseExampleV2`` on a vector instead of n
parses of a scalar.

``vectorized_function_def(fdef, n, arg_rank)`` returns the rewritten
``FunctionDef`` whose outputs are the per-element outputs stacked on a new
first dimension of size ``n``, or None when any node of the function is not
known to commute with stacking (then the pipeline runs unfused). The rules are
deliberately narrow: pure ops whose kernel, given inputs with a leading batch
dimension, computes each row as it would compute that element alone:

- ``ParseExampleV2`` of a scalar (``parse_single_example``): on the vector of
  records its dense outputs gain the batch dimension. Its sparse outputs and
  ``FixedLenSequenceFeature`` outputs (padded per batch, not per element) make
  the function unfusable if anything reads them.
- ``DecodeRaw``, ``Cast``, ``Identity`` and elementwise unary ops.
- Elementwise binary ops of two batched operands of the same rank, or of a
  batched operand and a ``Const`` of no higher rank (NumPy broadcasting then
  lines the constant up with the element's trailing dimensions, as before).
- ``Reshape`` by a ``Const`` shape, which becomes ``[n] + shape``.

Anything else (variables, random ops, other ops) leaves the function as it is.
An error in the fused run is not reported from it: the caller runs the batch's
elements through the original function one by one, so values and errors are
exactly the unfused pipeline's.
"""

from __future__ import annotations

from nbdist.framework.tensor_util import make_ndarray, make_tensor_proto
from nbdist.proto import function_pb2

_UNARY = frozenset({
    "Cast", "Identity", "StopGradient", "Neg", "Abs", "Sign", "Square", "Sqrt",
    "Rsqrt", "Reciprocal", "Exp", "Expm1", "Log", "Log1p", "Sigmoid", "Tanh",
    "Relu", "Relu6", "Floor", "Ceil", "Round", "Rint", "Sin", "Cos", "LogicalNot",
})
_BINARY = frozenset({
    "Add", "AddV2", "Sub", "Mul", "RealDiv", "Div", "DivNoNan", "FloorDiv",
    "FloorMod", "TruncateDiv", "Maximum", "Minimum", "Pow", "SquaredDifference",
    "Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual",
    "LogicalAnd", "LogicalOr",
})
# A tensor the fused function must not read (see the module docstring).
_UNUSABLE = "unusable"


def _ref(name: str) -> str:
    """A FunctionDef input reference as ``node:k`` (``node`` means ``node:0``)."""
    return name if ":" in name else f"{name}:0"


class _Analysis:
    """Which tensors of the function carry the batch dimension: ``batched``
    maps a reference to the element's rank (or ``_UNUSABLE``); ``consts`` maps a
    Const node's name to its value."""

    def __init__(self, arg_names, arg_rank):
        self.batched = {_ref(a): arg_rank for a in arg_names}
        self.consts = {}
        self.computed = set()

    def rank(self, ref):
        return self.batched.get(_ref(ref))

    def node_outputs(self, node):
        """The element ranks of ``node``'s batched outputs ({index: rank}), {}
        when it has no batched input, or None when it cannot be fused."""
        data = [i for i in node.input if not i.startswith("^")]
        ranks = [self.rank(i) for i in data]
        if _UNUSABLE in ranks:
            return None
        if node.op == "Const":
            self.consts[node.name] = make_ndarray(node.attr["value"].tensor)
            return {}
        if all(r is None for r in ranks):
            # Computed from constants alone: the same for every element.
            return {} if node.op in _UNARY | _BINARY | {"Reshape"} else None
        if node.op in _UNARY or node.op == "DecodeRaw":
            return {0: ranks[0] + (node.op == "DecodeRaw")}
        if node.op in _BINARY:
            return self._binary(data, ranks)
        if node.op == "Reshape":
            shape = self.consts.get(data[1].split(":")[0])
            if ranks[1] is not None or shape is None or shape.ndim != 1:
                return None
            return {0: int(shape.size)}
        if node.op == "ParseExampleV2":
            return self._parse(node, ranks)
        return None

    def _binary(self, data, ranks):
        a, b = ranks
        if a is not None and b is not None:
            return {0: a} if a == b else None
        rank, other = (a, data[1]) if a is not None else (b, data[0])
        value = self.consts.get(other.split(":")[0])
        if value is None or value.ndim > rank:
            return None
        return {0: rank}

    @staticmethod
    def _parse(node, ranks):
        if ranks[0] != 0 or any(r is not None for r in ranks[1:]):
            return None
        a = node.attr
        if a["ragged_value_types"].list.type or a["ragged_split_types"].list.type:
            return None
        ns = a["num_sparse"].i
        out = {k: _UNUSABLE for k in range(3 * ns)}
        for d, shape in enumerate(a["dense_shapes"].list.shape):
            dims = [x.size for x in shape.dim]
            variable = shape.unknown_rank or (dims and dims[0] < 0)
            out[3 * ns + d] = _UNUSABLE if variable else len(dims)
        return out


def _placed(arg_refs, nodes, analysis, on_node=None):
    """Runs ``analysis`` over ``nodes`` in an order where inputs come first
    (calling ``on_node(node, ranks)``); False when a node cannot be fused or
    an input is not among ``arg_refs`` and ``nodes``."""
    pending = list(nodes)
    known = {r.split(":")[0] for r in arg_refs}  # nodes (and args) placed
    for _ in range(len(pending) + 1):  # any order: bounded passes
        if not pending:
            return True
        later = []
        for node in pending:
            if any(i.lstrip("^").split(":")[0] not in known for i in node.input):
                later.append(node)
                continue
            ranks = analysis.node_outputs(node)
            if ranks is None:
                return False
            for k, r in ranks.items():
                analysis.batched[f"{node.name}:{k}"] = r
            known.add(node.name)
            if on_node is not None:
                on_node(node, ranks)
        if len(later) == len(pending):
            return False  # a cycle or an input from elsewhere: leave it alone
        pending = later
    return not pending


def vectorizable_ranks(arg_refs, nodes, output_refs):
    """{tensor reference: element rank} of the batched tensors when ``nodes``
    (NodeDefs) fed the scalars ``arg_refs`` stacked compute ``output_refs``
    stacked, else None (module docstring)."""
    an = _Analysis(arg_refs, 0)
    if not _placed(arg_refs, nodes, an):
        return None
    if any(not isinstance(an.rank(o), int) for o in output_refs):
        return None  # an output is not per element (a constant) or unusable
    return an.batched


def vectorized_function_def(fdef, n: int, arg_rank: int):
    """``fdef`` rewritten to take its one argument stacked ``n`` times (each
    element of rank ``arg_rank``), or None when it cannot be (module
    docstring)."""
    if len(fdef.input_arg) != 1:
        return None
    an = _Analysis(fdef.input_arg, arg_rank)
    out = function_pb2.FunctionDef()
    out.CopyFrom(fdef)
    del out.node_def[:]

    def place(node, ranks):
        out.node_def.add().CopyFrom(node)
        if node.op == "Reshape" and ranks:
            _batch_reshape(out, an, n)

    if not _placed(list(fdef.input_arg), fdef.node_def, an, place):
        return None
    if any(not isinstance(an.rank(o), int) for o in fdef.output):
        return None  # an output is not per element (a constant) or unusable
    return out


def _batch_reshape(out, an, n):
    """The last node (a Reshape of a batched tensor) gets its own shape
    constant ``[n] + shape``."""
    node = out.node_def[-1]
    shape_ref = node.input[1]
    value = an.consts[shape_ref.split(":")[0]]
    const = out.node_def.add(name=f"{node.name}/_batched_shape", op="Const")
    const.attr["dtype"].type = node.attr["Tshape"].type
    const.attr["value"].tensor.CopyFrom(
        make_tensor_proto([n, *value.tolist()], dtype=value.dtype))
    node.input[1] = const.name


def argument_outputs(fdef) -> list[int]:
    """The positions of ``fdef``'s outputs that are its argument itself (or
    an ``Identity`` of it): the batch takes those from the elements as they
    came, as the unfused batch does."""
    nodes = {n.name: n for n in fdef.node_def}
    out = []
    for k, ref in enumerate(fdef.output):
        for _ in range(len(nodes) + 1):
            name = ref.split(":")[0]
            if ref in fdef.input_arg or name not in nodes or \
                    nodes[name].op not in ("Identity", "StopGradient"):
                break
            ref = nodes[name].input[0]
        if ref in fdef.input_arg:
            out.append(k)
    return out
