"""``nd.contrib.seq2seq``: TF 1.15's ``tf.contrib.seq2seq.sequence_loss``, the
weighted cross-entropy of a batch of logit sequences that char-RNN programs
minimise. (The decoder and attention classes are not here.)

>>> import nbdist as nd
>>> with nd.Graph().as_default():
...     logits = nd.zeros([2, 3, 4])
...     loss = nd.contrib.seq2seq.sequence_loss(
...         logits, nd.zeros([2, 3], nd.int32), nd.ones([2, 3]))
...     with nd.Session() as s:
...         round(float(s.run(loss)), 4)  # log(4): uniform over 4 classes
1.3863
"""

from __future__ import annotations

import nbdist as _nd

__all__ = ["sequence_loss"]


def sequence_loss(logits, targets, weights, average_across_timesteps=True,
                  average_across_batch=True, softmax_loss_function=None,
                  name=None, sum_over_timesteps=False, sum_over_batch=False):
    """Weighted cross-entropy of ``logits`` [batch, time, classes] against
    int ``targets`` [batch, time], with ``weights`` [batch, time].

    Averaged (divided by the sum of the weights) or summed (divided by the
    number of non-zero weights) over the time and/or batch axes: a scalar
    when both axes are reduced, else a [batch] or [time] vector, or the
    [batch, time] losses when neither is.
    """
    logits = _nd.convert_to_tensor(logits)
    targets = _nd.convert_to_tensor(targets)
    weights = _nd.convert_to_tensor(weights)
    for what, t, rank, form in (
            ("Logits", logits, 3, "[batch_size x sequence_length x logits]"),
            ("Targets", targets, 2, "[batch_size x sequence_length]"),
            ("Weights", weights, 2, "[batch_size x sequence_length]")):
        if t.shape.ndims is not None and t.shape.ndims != rank:
            raise ValueError(f"sequence_loss: {what} must be a {form} tensor, "
                             f"got shape {t.shape}")
    if average_across_timesteps and sum_over_timesteps:
        raise ValueError("average_across_timesteps and sum_over_timesteps cannot "
                         "be set to True at same time.")
    if average_across_batch and sum_over_batch:
        raise ValueError("average_across_batch and sum_over_batch cannot be set "
                         "to True at same time.")
    with _nd.name_scope(name, "sequence_loss", [logits, targets, weights]):
        num_classes = _nd.shape(logits)[2]
        flat_logits = _nd.reshape(logits, [-1, num_classes])
        flat_targets = _nd.reshape(targets, [-1])
        if softmax_loss_function is None:
            crossent = _nd.nn.sparse_softmax_cross_entropy_with_logits(
                labels=flat_targets, logits=flat_logits)
        else:
            crossent = softmax_loss_function(labels=flat_targets, logits=flat_logits)
        crossent = crossent * _nd.reshape(weights, [-1])
        if average_across_timesteps and average_across_batch:
            return _nd.div_no_nan(_nd.reduce_sum(crossent), _nd.reduce_sum(weights))
        if sum_over_timesteps and sum_over_batch:
            count = _nd.count_nonzero(weights, dtype=crossent.dtype)
            return _nd.div_no_nan(_nd.reduce_sum(crossent), count)
        crossent = _nd.reshape(crossent, _nd.shape(logits)[0:2])
        if average_across_timesteps or average_across_batch:
            axis = [0] if average_across_batch else [1]
            return _nd.div_no_nan(_nd.reduce_sum(crossent, axis=axis),
                                  _nd.reduce_sum(weights, axis=axis))
        if sum_over_timesteps or sum_over_batch:
            axis = [0] if sum_over_batch else [1]
            count = _nd.count_nonzero(weights, axis=axis, dtype=crossent.dtype)
            return _nd.div_no_nan(_nd.reduce_sum(crossent, axis=axis), count)
        return crossent
