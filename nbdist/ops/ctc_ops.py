"""Connectionist temporal classification: the ops ``CTCLoss`` (loss and its
gradient in one pass, as TF), ``CTCGreedyDecoder`` and ``CTCBeamSearchDecoder``,
with TF1's ``ctc_loss``, ``ctc_loss_v2``, ``ctc_greedy_decoder``,
``ctc_beam_search_decoder(_v2)`` and ``collapse_repeated``. Inputs are time-major logits [max_time, batch, classes];
the blank is the last class (TF1's convention).
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import register_gradient
from nbdist.framework.op_def_registry import register_op
from nbdist.framework.ops import convert_to_tensor, get_default_graph
from nbdist.framework.sparse_tensor import SparseTensor
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops import array_ops as A
from nbdist.ops import math_ops as M
from nbdist.ops.cumulative_ops import cumsum
from nbdist.ops.image_ops import input_rank
from nbdist.ops.map_fn import map_fn
from nbdist.ops.sparse_ops import unique


def _ctc_loss_infer(c):
    x = input_rank(c, 0, 3, "inputs")
    input_rank(c, 1, 2, "labels_indices")
    input_rank(c, 2, 1, "labels_values")
    input_rank(c, 3, 1, "sequence_length")
    return [(c.dtype(0), TensorShape([x[1]])), (c.dtype(0), x)]


def _decoded(c, n_paths):
    x = input_rank(c, 0, 3, "inputs")
    input_rank(c, 1, 1, "sequence_length")
    idx = [(dtypes.int64, TensorShape([None, 2]))] * n_paths
    vals = [(dtypes.int64, TensorShape([None]))] * n_paths
    shapes = [(dtypes.int64, TensorShape([2]))] * n_paths
    return idx + vals + shapes + [(c.dtype(0), TensorShape([x[1], n_paths]))]


register_op("CTCLoss", _ctc_loss_infer,
            attrs={"preprocess_collapse_repeated": ("bool", False),
                   "ctc_merge_repeated": ("bool", True),
                   "ignore_longer_outputs_than_inputs": ("bool", False),
                   "T": ("type", dtypes.float32)}, num_inputs=4)
register_op("CTCGreedyDecoder", lambda c: _decoded(c, 1),
            attrs={"merge_repeated": ("bool", False), "blank_index": ("int", -1),
                   "T": ("type", dtypes.float32)}, num_inputs=2)
register_op("CTCBeamSearchDecoder", lambda c: _decoded(c, c.attr("top_paths")),
            attrs={"beam_width": ("int", 100), "top_paths": ("int", 1),
                   "merge_repeated": ("bool", True), "T": ("type", dtypes.float32)},
            num_inputs=2)


@register_gradient("CTCLoss")
def _ctc_loss_grad(op, grad_loss, _unused):
    # The op computed d loss / d inputs already (output 1).
    return [A.expand_dims(A.expand_dims(grad_loss, 0), -1) * op.outputs[1], None,
            None, None]


def _time_major(inputs, time_major):
    x = convert_to_tensor(inputs, name="inputs")
    return x if time_major else A.transpose(x, [1, 0, 2])


def ctc_loss(labels, inputs=None, sequence_length=None,
             preprocess_collapse_repeated=False, ctc_merge_repeated=True,
             ignore_longer_outputs_than_inputs=False, time_major=True, logits=None):
    """Per-example CTC loss ``-log p(labels | inputs)`` ([batch]); ``labels`` a
    SparseTensor of class ids (int32) below the blank ``num_classes - 1``.
    Differentiable in ``inputs``.

    >>> import numpy as np, nbdist as nd
    >>> with nd.Graph().as_default():
    ...     labels = nd.SparseTensor([[0, 0]], np.array([0], np.int32), [1, 1])
    ...     loss = nd.nn.ctc_loss(labels, np.zeros((2, 1, 2), np.float32), [2])
    ...     with nd.Session() as s:
    ...         round(float(s.run(loss)[0]), 4)      # 3 of 4 paths give "0"
    0.2877
    """
    inputs = logits if inputs is None else inputs
    if not isinstance(labels, SparseTensor):
        raise TypeError("Expected labels (first argument) to be a SparseTensor")
    x = _time_major(inputs, time_major)
    ins = [x, convert_to_tensor(labels.indices, dtype=dtypes.int64),
           convert_to_tensor(labels.values, dtype=dtypes.int32),
           convert_to_tensor(sequence_length, dtype=dtypes.int32,
                             name="sequence_length")]
    op = x.graph.create_op("CTCLoss", ins, {
        "preprocess_collapse_repeated": bool(preprocess_collapse_repeated),
        "ctc_merge_repeated": bool(ctc_merge_repeated),
        "ignore_longer_outputs_than_inputs": bool(ignore_longer_outputs_than_inputs),
        "T": x.dtype.base_dtype}, name="CTCLoss")
    return op.outputs[0]


def ctc_loss_v2(labels, logits, label_length, logit_length, logits_time_major=True,
                unique=None, blank_index=None, name=None):
    """TF2's ``ctc_loss`` with SparseTensor labels and the blank last
    (``blank_index`` None or ``num_classes - 1``)."""
    if not isinstance(labels, SparseTensor):
        raise ValueError("nbdist's ctc_loss_v2 takes SparseTensor labels")
    if blank_index not in (None, -1) and logits is not None:
        n = convert_to_tensor(logits).shape[-1]
        if n is None or blank_index % n != n - 1:
            raise ValueError("nbdist's ctc_loss_v2 needs the blank last")
    with get_default_graph().name_scope(name or "ctc_loss_dense"):
        return ctc_loss(labels, logits, logit_length, time_major=logits_time_major)


def _sparse_paths(op, n):
    outs = op.outputs
    return [SparseTensor(outs[i], outs[n + i], outs[2 * n + i]) for i in range(n)]


def ctc_greedy_decoder(inputs, sequence_length, merge_repeated=True,
                       blank_index=None):
    """([SparseTensor of the best path], [batch, 1] negative sum of the max
    logits): the most likely class per step, repeats merged, blanks dropped."""
    x = convert_to_tensor(inputs, name="inputs")
    attrs = {"merge_repeated": bool(merge_repeated),
             "blank_index": -1 if blank_index is None else int(blank_index),
             "T": x.dtype.base_dtype}
    op = x.graph.create_op("CTCGreedyDecoder", [x, convert_to_tensor(
        sequence_length, dtype=dtypes.int32)], attrs, name="CTCGreedyDecoder")
    return _sparse_paths(op, 1), op.outputs[3]


def ctc_beam_search_decoder(inputs, sequence_length, beam_width=100, top_paths=1,
                            merge_repeated=True):
    """(``top_paths`` SparseTensors of the best label sequences, [batch,
    top_paths] their log probabilities) by CTC prefix beam search."""
    x = convert_to_tensor(inputs, name="inputs")
    if top_paths > beam_width:
        raise ValueError("top_paths must be <= beam_width")
    attrs = {"beam_width": int(beam_width), "top_paths": int(top_paths),
             "merge_repeated": bool(merge_repeated), "T": x.dtype.base_dtype}
    op = x.graph.create_op("CTCBeamSearchDecoder", [x, convert_to_tensor(
        sequence_length, dtype=dtypes.int32)], attrs, name="CTCBeamSearchDecoder")
    return _sparse_paths(op, int(top_paths)), op.outputs[3 * int(top_paths)]


def ctc_beam_search_decoder_v2(inputs, sequence_length, beam_width=100,
                               top_paths=1):
    """TF2's form: ``merge_repeated`` False."""
    return ctc_beam_search_decoder(inputs, sequence_length, beam_width, top_paths,
                                   merge_repeated=False)


def collapse_repeated(labels, seq_length, name=None):
    """(labels with each run of repeats merged, left-aligned and zero-padded to
    the longest result [batch, new_max_len], the new lengths). Only the first
    ``seq_length[b]`` entries of row ``b`` count.

    >>> import nbdist as nd
    >>> with nd.Graph().as_default():
    ...     out, n = nd.nn.collapse_repeated([[1, 1, 2, 2, 1]], [5])
    ...     with nd.Session() as s:
    ...         s.run(out).tolist(), s.run(n).tolist()
    ([[1, 2, 1]], [3])
    """
    with get_default_graph().name_scope(name or "collapse_repeated_labels") as scope:
        labels = convert_to_tensor(labels, name="labels")
        seq_length = convert_to_tensor(seq_length, name="seq_length")
        first = A.ones_like(labels[:, :1], dtype=dtypes.bool)
        changed = M.not_equal(labels[:, 1:], labels[:, :-1])
        keep = A.concat([first, changed], 1)
        steps = A.expand_dims(A.range(A.shape(labels)[1]), 0)
        in_seq = M.less(steps, A.expand_dims(M.cast(seq_length, dtypes.int32), 1))
        keep = M.logical_and(keep, in_seq)
        keep_i = M.cast(keep, dtypes.int32)
        new_len = M.reduce_sum(keep_i, 1)
        slot = cumsum(keep_i, axis=1, exclusive=True)        # where each one goes
        width = M.reduce_max(new_len)
        place = M.multiply(A.one_hot(slot, width, dtype=labels.dtype.base_dtype),
                           A.expand_dims(M.cast(keep, labels.dtype.base_dtype), -1))
        out = M.reduce_sum(M.multiply(A.expand_dims(labels, -1), place), 1,
                           name=scope)
        return out, M.cast(new_len, seq_length.dtype.base_dtype)


__all__ = [
    "collapse_repeated", "ctc_beam_search_decoder", "ctc_beam_search_decoder_v2", "ctc_greedy_decoder",
    "ctc_loss", "ctc_loss_v2",
]


def ctc_unique_labels(labels, name=None):
    """Per row of ``labels`` [batch, max_len]: its distinct labels in order of
    first appearance, zero-padded to ``max_len``, and each label's index in
    that list (int32), as TF's ``ctc_unique_labels`` (for ``ctc_loss_v2``'s
    ``unique`` argument).

    >>> import nbdist as nd
    >>> u, i = nd.nn.ctc_unique_labels(nd.constant([[3, 4, 4, 3, 0]], nd.int64))
    >>> with nd.Session() as s:
    ...     [v.tolist() for v in s.run([u, i])]
    [[[3, 4, 0, 0, 0]], [[0, 1, 1, 0, 2]]]
    """
    with get_default_graph().name_scope(name or "ctc_unique_labels"):
        labels = convert_to_tensor(labels, name="labels")

        def row(x):
            found, index = unique(x)
            padded = A.pad(found, [[0, A.size(x) - A.size(found)]])
            return padded, index

        return tuple(map_fn(row, labels, dtype=(labels.dtype, dtypes.int32)))


__all__ += ["ctc_unique_labels"]
