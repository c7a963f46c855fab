"""``Print`` (``tf.compat.v1.Print``): the identity of its input that, each
time it runs, writes ``message`` and a summary of each of ``data`` to the
standard error of the process that runs it (the task it is placed on), as
TF's ``PrintOp``: ``message[v1][v2]...`` where a tensor shows its first
``summarize`` (3) values nested by dimension, ``...`` marking the rest, e.g.
``x is: [[1.5 2][0.333333343...]...]``. ``first_n`` > 0 prints only the first
``first_n`` runs. Its gradient is its input's.

>>> import nbdist as nd
>>> x = nd.constant([1.0, 2.0])
>>> y = nd.Print(x, [x], "x: ")
>>> with nd.Session() as s:
...     s.run(y).tolist()   # and "x: [1 2]" on stderr
[1.0, 2.0]
"""

from __future__ import annotations

from nbdist.framework.gradient_registry import register_gradient
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.ops import convert_to_tensor, get_default_graph


def _print_infer(c):
    return [(c.dtype(0), c.shape(0))]


register_op("Print", _print_infer,
            attrs={"T": ("type", None), "U": ("list(type)", []),
                   "message": ("string", ""), "first_n": ("int", -1),
                   "summarize": ("int", 3)},
            min_inputs=1, stateful=True)


@register_gradient("Print")
def _print_grad(op, *grads):
    return list(grads) + [None] * (len(op.inputs) - 1)


def Print(input_, data, message=None, first_n=None, summarize=None,  # noqa: N802
          name=None):
    """``input_`` unchanged; prints ``message`` and ``data`` when it runs."""
    g = get_default_graph()
    with g.name_scope(name or "Print") as scope:
        input_ = convert_to_tensor(input_)
        data = [convert_to_tensor(d) for d in (data or [])]
        op = g.create_op(
            "Print", [input_] + data,
            {"T": input_.dtype.base_dtype, "U": [d.dtype.base_dtype for d in data],
             "message": message or "",
             "first_n": -1 if first_n is None else int(first_n),
             "summarize": 3 if summarize is None else int(summarize)}, name=scope)
    return op.outputs[0]


__all__ = ["Print"]
