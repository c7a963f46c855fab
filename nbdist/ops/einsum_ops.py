"""Einstein summation: ``Einsum`` (``nd.einsum``, with ``...`` broadcasting and
the implicit output form), and ``tensordot`` built on it.

The equation is stored in its explicit form (``"ij,jk->ik"``); its gradient
with respect to each input is another einsum of the incoming gradient and the
other inputs. The kernel is in ``nbdist/executor/kernels/einsum_kernels.py``.

>>> import nbdist as nd
>>> with nd.Session() as s:
...     s.run(nd.einsum("ij,jk->ik", [[1, 2]], [[3], [4]])).tolist()
[[11]]
"""

from __future__ import annotations

import string

from nbdist.framework.gradient_registry import register_gradient
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.op_util import op_scope
from nbdist.framework.ops import convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape, broadcast_shapes
from nbdist.ops import array_ops as A
from nbdist.ops.math_grad import _m, sum_to

__all__ = ["einsum", "tensordot"]

ELLIPSIS = "..."


def parse_equation(equation: str, n_inputs: int):
    """(input subscripts, output subscripts) of ``equation``, the output made
    explicit when it is implicit (the labels seen once, sorted)."""
    eq = equation.replace(" ", "")
    if "->" in eq:
        lhs, out = eq.split("->")
    else:
        lhs, out = eq, None
    ins = lhs.split(",")
    if len(ins) != n_inputs:
        raise ValueError(f"Expected {len(ins)} inputs for equation {equation!r}, "
                         f"got {n_inputs}")
    for sub in ins + ([out] if out is not None else []):
        letters = sub.replace(ELLIPSIS, "")
        if sub.count(ELLIPSIS) > 1 or not all(c in string.ascii_letters
                                                for c in letters):
            raise ValueError(f"Invalid einsum subscripts {sub!r} in {equation!r}")
    if out is None:
        counts = {}
        for c in lhs.replace(ELLIPSIS, "").replace(",", ""):
            counts[c] = counts.get(c, 0) + 1
        once = "".join(sorted(c for c, k in counts.items() if k == 1))
        out = (ELLIPSIS if ELLIPSIS in lhs else "") + once
    seen = set(lhs.replace(ELLIPSIS, ""))
    for c in out.replace(ELLIPSIS, ""):
        if c not in seen:
            raise ValueError(f"Output subscript {c!r} of {equation!r} is not in any "
                             "input")
    return ins, out


def _label_dims(sub, shape: TensorShape):
    """{label: dim} and the ellipsis' dims of one input of known rank."""
    letters = sub.replace(ELLIPSIS, "")
    rank = shape.rank
    if (ELLIPSIS not in sub and rank != len(letters)) or rank < len(letters):
        raise ValueError(f"Input of rank {rank} does not match subscripts {sub!r}")
    before = sub.split(ELLIPSIS)[0] if ELLIPSIS in sub else letters
    after = sub.split(ELLIPSIS)[1] if ELLIPSIS in sub else ""
    dims = {}
    for i, c in enumerate(before):
        dims.setdefault(c, []).append(shape[i])
    for i, c in enumerate(after):
        dims.setdefault(c, []).append(shape[rank - len(after) + i])
    ell = shape[len(before):rank - len(after)]
    return dims, ell


def _einsum_infer(c):
    d = c.check_same_dtypes()
    n = len(c.input_dtypes)
    ins, out = parse_equation(c.attr("equation"), n)
    if any(c.shape(i).rank is None for i in range(n)):
        return [(d, TensorShape(None))]
    sizes: dict = {}
    ell = TensorShape([])
    for i, sub in enumerate(ins):
        dims, e = _label_dims(sub, c.shape(i))
        ell = broadcast_shapes(ell, e)
        for label, ds in dims.items():
            for dim in ds:
                have = sizes.get(label)
                if have is not None and dim is not None and have != dim and (
                        1 not in (have, dim)):
                    raise ValueError(
                        f"Dimensions must be equal, but are {have} and {dim}")
                if have is None or have == 1:
                    sizes[label] = dim
    if ELLIPSIS in out:
        before, after = out.split(ELLIPSIS)
        return [(d, TensorShape([sizes.get(ch) for ch in before]).concatenate(
            ell).concatenate([sizes.get(ch) for ch in after]))]
    return [(d, TensorShape([sizes.get(ch) for ch in out]))]


register_op("Einsum", _einsum_infer,
            attrs={"equation": ("string", None), "N": ("int", None),
                   "T": ("type", None)}, min_inputs=1)


def einsum(equation, *inputs, **kwargs):
    """The Einstein summation ``equation`` of ``inputs``: labels in an input and
    absent from the output are summed over, ``...`` stands for broadcast
    dimensions, and without ``->`` the output is the labels seen once, sorted.

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     s.run(nd.einsum("ii", [[1, 2], [3, 4]])).tolist()
    5
    """
    name = kwargs.pop("name", None)
    if kwargs:
        raise TypeError(f"Invalid keyword arguments for this function: "
                        f"{', '.join(sorted(kwargs))}")
    ins, out = parse_equation(equation, len(inputs))
    explicit = ",".join(ins) + "->" + out
    with op_scope(name, "einsum", list(inputs)) as (g, scope):
        ts = [convert_to_tensor(x, name=f"inputs_{i}") for i, x in enumerate(inputs)]
        d = ts[0].dtype.base_dtype
        ts = [convert_to_tensor(t, dtype=d) for t in ts]
        return g.create_op("Einsum", ts, {"equation": explicit, "N": len(ts),
                                          "T": d}, name=scope).outputs[0]


@register_gradient("Einsum")
def _einsum_grad(op, grad):
    equation = op.get_attr("equation")
    equation = equation.decode() if isinstance(equation, bytes) else equation
    ins, out = parse_equation(equation, len(op.inputs))
    grads = []
    for i, x in enumerate(op.inputs):
        sub = ins[i]
        letters = sub.replace(ELLIPSIS, "")
        if len(set(letters)) != len(letters):
            raise NotImplementedError(
                f"The gradient of einsum {equation!r} with a label repeated in one "
                "input (a diagonal) is not implemented")
        others = [s for j, s in enumerate(ins) if j != i]
        tensors = [t for j, t in enumerate(op.inputs) if j != i]
        available = set((out + "".join(others)).replace(ELLIPSIS, ""))
        has_ellipsis = ELLIPSIS in out or any(ELLIPSIS in s for s in others)
        target = "".join(c for c in letters if c in available)
        if ELLIPSIS in sub and has_ellipsis:
            before, after = sub.split(ELLIPSIS)
            target = ("".join(c for c in before if c in available) + ELLIPSIS
                      + "".join(c for c in after if c in available))
        # x without "..." where the others broadcast one: the einsum keeps the
        # "..." (an equation may not drop it) and those axes are summed here.
        lead = ELLIPSIS not in sub and has_ellipsis
        part = einsum(",".join([out] + others) + "->" + (ELLIPSIS if lead else "")
                      + target, grad, *tensors)
        if lead:
            if part.shape.rank is None:
                raise NotImplementedError("einsum's gradient needs inputs of known rank")
            part = _m().reduce_sum(part, axis=list(range(part.shape.rank - len(target))))
        if target.replace(ELLIPSIS, "") != letters or (
                ELLIPSIS in sub and not has_ellipsis):
            part = _restore_axes(part, x, sub, target, available)
        grads.append(sum_to(part, x) if ELLIPSIS in sub else part)
    return grads


def _restore_axes(part, x, sub, target, available):
    """``part`` (labels ``target``) broadcast back to ``x`` (labels ``sub``):
    the labels summed inside ``x`` alone come back as broadcast axes."""
    rank = x.shape.rank
    if rank is None:
        raise NotImplementedError("einsum's gradient needs inputs of known rank")
    before, after = (sub.split(ELLIPSIS) if ELLIPSIS in sub else (sub, ""))
    n_ell = rank - len(before) - len(after)
    keep_ell = ELLIPSIS in target
    shape = []
    for c in before:
        shape.append(-1 if c in available else 1)
    shape += [-1 if keep_ell else 1] * n_ell
    for c in after:
        shape.append(-1 if c in available else 1)
    kept = [A.shape(part)[k] for k in range(part.shape.rank)]
    full, k = [], 0
    for s in shape:
        if s == -1:
            full.append(kept[k])
            k += 1
        else:
            full.append(1)
    reshaped = A.reshape(part, A.stack(full) if full else [])
    return A.broadcast_to(reshaped, A.shape(x))


def _tensordot_axes(axes, ra, rb):
    if isinstance(axes, int) or getattr(axes, "ndim", None) == 0:
        n = int(axes)
        if n < 0 or n > min(ra, rb):
            raise ValueError(f"'axes' must be at most the rank of a and b, and "
                             f"non-negative, got {n}")
        return list(range(ra - n, ra)), list(range(n))
    if len(axes) != 2:
        raise ValueError(f"'axes' must be an integer or have length 2, got {axes}")
    a_axes, b_axes = axes
    a_axes = [a_axes] if isinstance(a_axes, int) else list(a_axes)
    b_axes = [b_axes] if isinstance(b_axes, int) else list(b_axes)
    if len(a_axes) != len(b_axes):
        raise ValueError(f"Different number of contraction axes 'a' and 'b', "
                         f"{len(a_axes)} != {len(b_axes)}.")
    return [int(a) % ra for a in a_axes], [int(b) % rb for b in b_axes]


def tensordot(a, b, axes, name=None):
    """The sum of products of ``a`` and ``b`` over ``axes`` (an int N: the last
    N of a with the first N of b; or a pair of axis lists); the free axes of
    ``a`` then of ``b`` remain.

    >>> import nbdist as nd
    >>> with nd.Session() as s:
    ...     s.run(nd.tensordot([[1, 2], [3, 4]], [1, 1], 1)).tolist()
    [3, 7]
    """
    with op_scope(name, "Tensordot", [a, b]) as (_g, scope):
        x = convert_to_tensor(a, name="a")
        y = convert_to_tensor(b, dtype=x.dtype.base_dtype, name="b")
        ra, rb = x.shape.rank, y.shape.rank
        if ra is None or rb is None:
            raise ValueError("tensordot needs a and b of known rank")
        a_axes, b_axes = _tensordot_axes(axes, ra, rb)
        letters = iter(string.ascii_letters)
        sa = [next(letters) for _ in range(ra)]
        sb = [next(letters) for _ in range(rb)]
        for i, j in zip(a_axes, b_axes):
            sb[j] = sa[i]
        out = [c for k, c in enumerate(sa) if k not in a_axes] + [
            c for k, c in enumerate(sb) if k not in b_axes]
        return einsum("".join(sa) + "," + "".join(sb) + "->" + "".join(out), x, y,
                      name=scope)
