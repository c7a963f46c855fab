"""The ops that call branches and loop bodies as graph functions: ``If``,
``While`` and ``_WhileGrad``. The branches are traced by ``func_graph.trace``
(beside ``nd.function``'s ``FuncGraph``), made FunctionDefs by
``function_def`` (as ``nd.function``'s are) and flattened with ``nest``.

A branch is traced in the graph being built (so every wrapper picks the
right graph, as in TF1's control-flow contexts): its arguments are
placeholders, the ops it adds are then cut out of the graph and become the
body of a ``FunctionDef``. An outside tensor a branch uses is captured: it
becomes an argument of the function and an input of the calling op, so the
master moves it across tasks like any other edge (a variable on a parameter
server is read once, before the loop). An outside variable whose reference
the branch needs (``assign_add``, a read under a control dependency) is
re-bound in the body by name, device, container and shared name, so the body
reads and updates the very variable each iteration; that variable must live
on the task that runs the loop. A plain ``read_value()`` of an outside
variable is left outside, so it may live on any task. A variable the branch
creates stays in the outer graph with its initializer (TF1 builds variables
outside control flow too) and the branch uses it like an outside variable.

The functions travel as serialized ``FunctionDef``s in private attrs
(``_cond_fdef``, ``_body_fdef``...), which survive the master's partitioning.
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.tensor_shape import TensorShape


def common_shape(a: TensorShape, b: TensorShape) -> TensorShape:
    """The most specific shape compatible with both."""
    if a.rank is None or b.rank is None or a.rank != b.rank:
        return TensorShape(None)
    return TensorShape([x if x == y else None for x, y in zip(a.as_list(),
                                                           b.as_list())])


# -- the ops ---------------------------------------------------------------------
def _outputs_from_attrs(types_attr):
    def infer(c):
        types = c.attr(types_attr)
        shapes = list(c.attr("output_shapes") or [])
        if shapes and len(shapes) != len(types):
            raise ValueError("output_shapes and the output types differ in length")
        return [(t, shapes[i] if shapes else TensorShape(None))
                for i, t in enumerate(types)]

    return infer


def _if_infer(c):
    if c.dtype(0) is not dtypes.bool:
        raise TypeError(f"pred must be a bool tensor, got {c.dtype(0).name}")
    if c.shape(0).rank not in (None, 0):
        raise ValueError(f"pred must be a scalar, got shape {c.shape(0)}")
    return _outputs_from_attrs("Tout")(c)


register_op("If", _if_infer,
            attrs={"then_branch": ("func", REQUIRED), "else_branch": ("func", REQUIRED),
                   "Tout": ("list(type)", []), "output_shapes": ("list(shape)", [])},
            min_inputs=1, stateful=True)
register_op("While", _outputs_from_attrs("T"),
            attrs={"cond": ("func", REQUIRED), "body": ("func", REQUIRED),
                   "T": ("list(type)", []), "output_shapes": ("list(shape)", []),
                   "parallel_iterations": ("int", 10), "back_prop": ("bool", True)},
            min_inputs=1, stateful=True)
# Gradient of a While: its inputs (loop vars, captures) and the gradients of its
# float outputs in; the gradients of its float loop vars and captures out.
register_op("_WhileGrad", _outputs_from_attrs("Tout"),
            attrs={"cond": ("func", REQUIRED), "body": ("func", REQUIRED),
                   "grad_body": ("func", REQUIRED), "num_loop_vars": ("int", REQUIRED),
                   "float_x": ("list(int)", []), "float_c": ("list(int)", []),
                   "Tout": ("list(type)", []), "output_shapes": ("list(shape)", [])},
            min_inputs=1, stateful=True)

__all__ = ["common_shape"]
