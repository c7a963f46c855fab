"""``nce_loss`` and ``sampled_softmax_loss``: training losses over a large
number of classes that look at the true classes and ``num_sampled`` sampled
ones only (TF 1.15's ``nn_impl``).

Both compute logits ``inputs . weights[k] + biases[k]`` for the true and the
sampled classes ``k``, minus ``log(expected count)`` of each (so the sampler's
bias cancels), then NCE takes a sigmoid cross-entropy per class (true
classes labelled ``1 / num_true``) summed per row, and sampled softmax a
softmax cross-entropy. The weights may be one tensor, a list of shards or a
``PartitionedVariable`` (``partition_strategy`` "mod" or "div" as
``embedding_lookup``): only the rows looked up get a gradient, as
``IndexedSlices``, so each shard on its parameter server is updated sparsely.

>>> import nbdist as nd
>>> w = nd.get_variable("w", [50, 8])
>>> b = nd.get_variable("b", [50], initializer=nd.zeros_initializer())
>>> x = nd.ones([4, 8])
>>> loss = nd.nn.nce_loss(w, b, labels=[[1], [2], [3], [4]], inputs=x,
...                       num_sampled=5, num_classes=50)
>>> loss.shape.as_list()
[4]
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.constant_op import stop_gradient
from nbdist.framework.ops import convert_to_tensor, get_default_graph
from nbdist.ops import array_ops, math_ops, nn_ops, sparse_ops
from nbdist.ops.candidate_sampling_ops import (compute_accidental_hits,
                                               log_uniform_candidate_sampler)
from nbdist.ops.embedding_ops import embedding_lookup
from nbdist.ops.partitioned_variables import PartitionedVariable


def _sum_rows(x):
    # A matmul with ones, as TF (its gradient is cheaper than reduce_sum's there).
    ones = array_ops.ones(array_ops.stack([array_ops.shape(x)[1], 1]), x.dtype)
    return array_ops.reshape(math_ops.matmul(x, ones), [-1])


def _compute_sampled_logits(weights, biases, labels, inputs, num_sampled, num_classes,
                            num_true=1, sampled_values=None, subtract_log_q=True,
                            remove_accidental_hits=False, partition_strategy="mod",
                            name=None, seed=None):
    """(logits, labels) of shape ``[batch, num_true + num_sampled]``: the true
    classes first, then the sampled ones."""
    if isinstance(weights, PartitionedVariable):
        weights = list(weights)
    if not isinstance(weights, list):
        weights = [weights]
    g = get_default_graph()
    with g.name_scope(name or "compute_sampled_logits"):
        inputs = convert_to_tensor(inputs, name="inputs")
        labels = convert_to_tensor(labels, name="labels")
        if labels.dtype.base_dtype is not dtypes.int64:
            labels = math_ops.cast(labels, dtypes.int64)
        if labels.shape.rank not in (None, 2):
            raise ValueError(f"labels must be [batch_size, num_true], got shape "
                             f"{labels.shape}")
        labels_flat = array_ops.reshape(labels, [-1])
        if sampled_values is None:
            sampled_values = log_uniform_candidate_sampler(
                true_classes=labels, num_true=num_true, num_sampled=num_sampled,
                unique=True, range_max=num_classes, seed=seed)
        sampled, true_expected, sampled_expected = (stop_gradient(s)
                                                    for s in sampled_values)
        sampled = math_ops.cast(sampled, dtypes.int64)
        all_ids = array_ops.concat([labels_flat, sampled], 0)
        all_w = embedding_lookup(weights, all_ids,
                                 partition_strategy=partition_strategy)
        if all_w.dtype.base_dtype is not inputs.dtype.base_dtype:
            all_w = math_ops.cast(all_w, inputs.dtype)
        n_true = array_ops.shape(labels_flat)[0]
        true_w = array_ops.slice(all_w, [0, 0], array_ops.stack([n_true, -1]))
        sampled_w = array_ops.slice(all_w, array_ops.stack([n_true, 0]), [-1, -1])
        sampled_logits = math_ops.matmul(inputs, sampled_w, transpose_b=True)
        all_b = embedding_lookup(biases, all_ids, partition_strategy=partition_strategy)
        if all_b.dtype.base_dtype is not inputs.dtype.base_dtype:
            all_b = math_ops.cast(all_b, inputs.dtype)
        true_b = array_ops.slice(all_b, [0], array_ops.shape(labels_flat))
        sampled_b = array_ops.slice(all_b, array_ops.shape(labels_flat), [-1])
        dim = array_ops.shape(true_w)[1:2]
        row_dots = math_ops.multiply(
            array_ops.expand_dims(inputs, 1),
            array_ops.reshape(true_w, array_ops.concat([[-1, num_true], dim], 0)))
        true_logits = array_ops.reshape(
            _sum_rows(array_ops.reshape(row_dots, array_ops.concat([[-1], dim], 0))),
            [-1, num_true])
        true_logits += array_ops.reshape(true_b, [-1, num_true])
        sampled_logits += sampled_b
        if remove_accidental_hits:
            rows, ids, acc_weights = compute_accidental_hits(labels, sampled,
                                                             num_true=num_true)
            sparse_indices = array_ops.concat(
                [array_ops.reshape(rows, [-1, 1]),
                 array_ops.reshape(math_ops.cast(ids, dtypes.int32), [-1, 1])], 1)
            shape = array_ops.concat([array_ops.shape(labels)[:1], [num_sampled]], 0)
            hits = sparse_ops.sparse_to_dense(
                sparse_indices, shape,
                math_ops.cast(acc_weights, sampled_logits.dtype),
                default_value=0.0, validate_indices=False)
            sampled_logits += stop_gradient(hits)
        if subtract_log_q:
            true_logits -= math_ops.log(math_ops.cast(true_expected,
                                                      true_logits.dtype))
            sampled_logits -= math_ops.log(math_ops.cast(sampled_expected,
                                                         sampled_logits.dtype))
        out_logits = array_ops.concat([true_logits, sampled_logits], 1)
        out_labels = array_ops.concat([array_ops.ones_like(true_logits) / num_true,
                                       array_ops.zeros_like(sampled_logits)], 1)
        return out_logits, out_labels


def nce_loss(weights, biases, labels, inputs, num_sampled, num_classes, num_true=1,
             sampled_values=None, remove_accidental_hits=False,
             partition_strategy="mod", name="nce_loss"):
    """The noise-contrastive estimation loss per example (``[batch]``), as
    ``tf.nn.nce_loss``: ``weights`` ``[num_classes, dim]`` (or its shards),
    ``biases`` ``[num_classes]``, ``labels`` ``[batch, num_true]`` ints,
    ``inputs`` ``[batch, dim]``. Sampled ids come from the log-uniform sampler
    unless ``sampled_values`` gives a sampler's triple."""
    logits, labels = _compute_sampled_logits(
        weights, biases, labels, inputs, num_sampled, num_classes, num_true,
        sampled_values, True, remove_accidental_hits, partition_strategy, name)
    losses = nn_ops.sigmoid_cross_entropy_with_logits(labels=labels, logits=logits,
                                                      name="sampled_losses")
    return _sum_rows(losses)


def sampled_softmax_loss(weights, biases, labels, inputs, num_sampled, num_classes,
                         num_true=1, sampled_values=None, remove_accidental_hits=True,
                         partition_strategy="mod", name="sampled_softmax_loss",
                         seed=None):
    """The sampled softmax cross-entropy per example (``[batch]``), as
    ``tf.nn.sampled_softmax_loss``; arguments as :func:`nce_loss`. Sampled
    ids that equal a true class are removed (``remove_accidental_hits``)."""
    logits, labels = _compute_sampled_logits(
        weights, biases, labels, inputs, num_sampled, num_classes, num_true,
        sampled_values, True, remove_accidental_hits, partition_strategy, name, seed)
    labels = stop_gradient(labels, name="labels_stop_gradient")
    return nn_ops.softmax_cross_entropy_with_logits_v2(labels=labels, logits=logits)


__all__ = ["nce_loss", "sampled_softmax_loss"]
