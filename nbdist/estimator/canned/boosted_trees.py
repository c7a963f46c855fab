"""Gradient boosted trees as TF 1.15's ``canned/boosted_trees.py``:
``BoostedTreesClassifier`` (binary), ``BoostedTreesRegressor`` and
``BoostedTreesEstimator`` (any one-logit head).

Features are ``bucketized_column`` s (each source dimension one feature, its
buckets the split candidates) and ``indicator_column`` s (each category one
0/1 feature). Training follows TF's layer-by-layer scheme: each step adds the
batch's gradients and hessians of the loss (with respect to the logits) to
per-(feature, bucket, node) sums of the layer being grown; after
``n_batches_per_layer`` batches every node of that layer splits on the
(feature, bucket) of greatest gain, the leaf weights are Newton steps

    w = -sign(G) * max(|G| - l1, 0) / (H + l2)
    gain = GL'²/(HL+l2) + GR'²/(HR+l2) - G'²/(H+l2) - tree_complexity,
    G' = sign(G) * max(|G| - l1, 0)

(a split is taken only if its gain is positive and each child's hessian sum
is at least ``min_node_weight``), and a child's value is its parent's plus
``learning_rate * w``. A tree is finished at ``max_depth`` or when no node
of a layer splits; training stops after ``n_trees`` trees. Bucket ``b``
goes left at a split of threshold ``t`` when ``b <= t``. With
``center_bias`` the first ``n_batches_per_layer`` batches fit the bias
alone (one Newton step).

The ensemble lives in non-trainable variables under ``boosted_trees/``
(``tree_feature``, ``tree_threshold``, ``tree_value``, ``bias``, ``state``
and the layer's ``gradients``/``hessians`` sums), so checkpoints hold it and
a new estimator on the same ``model_dir`` predicts the same.

Differences from TF 1.15: the ensemble is a set of dense variables (TF
serializes a ``TreeEnsemble`` proto into one resource), so checkpoints are
not interchangeable with TF's; numeric columns (TF's quantile sketches),
``pruning_mode`` other than ``'none'``, ``train_in_memory`` and more than
one logit (multi-class, ``label_dimension`` > 1) are refused; bias
centering is one Newton step, not iterated to convergence; the update runs
as a ``py_func``, so the model trains in the client's process (a local
``Session``), not on a remote task, and the prediction is a ``py_func`` too:
``export_saved_model`` writes a SavedModel that neither TF nor another
process can run. Numbers are not bit-identical to TF's.

>>> import numpy as np
>>> import nbdist as nd
>>> x = np.array([[0.], [1.], [2.], [3.]], np.float32)
>>> y = np.array([[0], [0], [1], [1]], np.int64)
>>> col = nd.feature_column.bucketized_column(
...     nd.feature_column.numeric_column("x"), [0.5, 1.5, 2.5])
>>> est = nd.estimator.BoostedTreesClassifier(
...     [col], n_batches_per_layer=1, n_trees=2, max_depth=1,
...     learning_rate=1.0)
>>> def input_fn():
...     return nd.data.Dataset.from_tensors(({"x": x}, y))
>>> _ = est.train(input_fn, max_steps=10)
>>> [int(p["class_ids"][0]) for p in est.predict(input_fn)]
[0, 0, 1, 1]
"""

from __future__ import annotations

import numpy as np

import nbdist as nd
from nbdist.estimator.canned import head as head_lib
from nbdist.estimator.canned.dnn import check_features
from nbdist.estimator.estimator import Estimator
from nbdist.estimator.model_fn import ModeKeys

# state[...] indices: the tree being grown, its layer, batches summed into the
# layer, and whether the bias is still to be fitted (1) or done (0).
_TREE, _LAYER, _BATCHES, _BIAS_PENDING = range(4)
_SCOPE = "boosted_trees"


# --- The ensemble as NumPy arrays (pure functions, run inside py_funcs) ---


def _depth(nodes):
    """Depth of heap-numbered nodes (root 0, children 2n+1 and 2n+2)."""
    return np.floor(np.log2(nodes + 1.0)).astype(np.int64)


def _route(ids, feature, threshold):
    """The leaf of one tree each example reaches."""
    node = np.zeros(len(ids), np.int64)
    rows = np.arange(len(ids))
    for _ in range(_depth(np.array(len(feature) - 1)) + 1):
        f = feature[node]
        inner = f >= 0
        if not inner.any():
            break
        bucket = ids[rows, np.maximum(f, 0)]
        child = np.where(bucket <= threshold[node], 2 * node + 1, 2 * node + 2)
        node = np.where(inner, child, node)
    return node


def predict_logits(ids, feature, threshold, value, bias):
    """``[batch, 1]`` logits: the bias plus each tree's leaf value."""
    logits = np.full(len(ids), bias, np.float32)
    for t in range(len(feature)):
        logits += value[t][_route(ids, feature[t], threshold[t])]
    return logits.reshape(-1, 1).astype(np.float32)


def _l1(g, l1):
    return np.sign(g) * np.maximum(np.abs(g) - l1, 0.0)


def _weight(g, h, l1, l2):
    with np.errstate(divide="ignore", invalid="ignore"):
        w = -_l1(g, l1) / (h + l2)
    return np.where(h + l2 > 0, w, 0.0)


def _score(g, h, l1, l2):
    return -_weight(g, h, l1, l2) * _l1(g, l1)


def best_splits(grads, hess, l1, l2, tree_complexity, min_node_weight):
    """For sums ``[feature, bucket, node]``: per node, ``(gain, feature,
    threshold, left weight, right weight)`` of its best split; gain <= 0 when
    none is allowed. Ties go to the lowest feature, then the lowest bucket."""
    gl, hl = np.cumsum(grads, 1)[:, :-1], np.cumsum(hess, 1)[:, :-1]
    g, h = grads.sum(1, keepdims=True), hess.sum(1, keepdims=True)
    gr, hr = g - gl, h - hl
    gain = (_score(gl, hl, l1, l2) + _score(gr, hr, l1, l2) - _score(g, h, l1, l2)
            - tree_complexity)
    allowed = (hl >= min_node_weight) & (hr >= min_node_weight) & (hl > 0) & (hr > 0)
    gain = np.where(allowed, gain, -np.inf)
    n_nodes = grads.shape[2]
    flat = gain.transpose(2, 0, 1).reshape(n_nodes, -1)
    best = flat.argmax(1)  # first maximum: lowest feature, then bucket
    f, b = np.unravel_index(best, gain.shape[:2])
    nodes = np.arange(n_nodes)
    return (flat[nodes, best], f, b, _weight(gl[f, b, nodes], hl[f, b, nodes], l1, l2),
            _weight(gr[f, b, nodes], hr[f, b, nodes], l1, l2))


def train_step(params, ids, grads, hess, feature, threshold, value, bias, state,
               grad_sums, hess_sums):
    """One batch: the new ``(feature, threshold, value, bias, state,
    grad_sums, hess_sums)``."""
    feature, threshold, value = feature.copy(), threshold.copy(), value.copy()
    state, grad_sums, hess_sums = state.copy(), grad_sums.copy(), hess_sums.copy()
    grads, hess = grads.reshape(-1), hess.reshape(-1)
    tree, layer = state[_TREE], state[_LAYER]
    out = [feature, threshold, value, bias, state, grad_sums, hess_sums]
    if tree >= len(feature):
        return out
    if state[_BIAS_PENDING]:
        grad_sums[0, 0, 0] += grads.sum()
        hess_sums[0, 0, 0] += hess.sum()
    else:
        node = _route(ids, feature[tree], threshold[tree])
        here = _depth(node) == layer
        slot = node[here] - (2 ** layer - 1)
        n_features = ids.shape[1]
        for f in range(n_features):
            np.add.at(grad_sums, (f, ids[here, f], slot), grads[here])
            np.add.at(hess_sums, (f, ids[here, f], slot), hess[here])
    state[_BATCHES] += 1
    if state[_BATCHES] < params["n_batches_per_layer"]:
        return out
    if state[_BIAS_PENDING]:
        out[3] = np.float32(bias + _weight(grad_sums[0, 0, 0], hess_sums[0, 0, 0],
                                           params["l1"], params["l2"]))
        state[_BIAS_PENDING] = 0
    else:
        _grow_layer(params, feature[tree], threshold[tree], value[tree], layer,
                    grad_sums[:, :, :2 ** layer], hess_sums[:, :, :2 ** layer], state)
    state[_BATCHES] = 0
    grad_sums[...] = 0
    hess_sums[...] = 0
    return out


def _grow_layer(params, feature, threshold, value, layer, grad_sums, hess_sums,
                state):
    """Split the nodes of ``layer`` of one tree (in place) and move ``state``
    on to the next layer, or the next tree."""
    gain, f, b, left, right = best_splits(
        grad_sums, hess_sums, params["l1"], params["l2"], params["tree_complexity"],
        params["min_node_weight"])
    split = np.flatnonzero(gain > 0)
    nodes = split + 2 ** layer - 1
    feature[nodes], threshold[nodes] = f[split], b[split]
    rate = params["learning_rate"]
    value[2 * nodes + 1] = value[nodes] + rate * left[split]
    value[2 * nodes + 2] = value[nodes] + rate * right[split]
    if len(split) and layer + 1 < params["max_depth"]:
        state[_LAYER] += 1
    else:
        state[_TREE] += 1
        state[_LAYER] = 0


# --- The graph ---


def _bucket_ids(features, feature_columns):
    """``([batch, n_features]`` int32 bucket ids, buckets per feature)``:
    columns sorted by name, as TF orders them."""
    fc = nd.feature_column
    ids, sizes = [], []
    for col in sorted(feature_columns, key=lambda c: c.name):
        dense = fc.input_layer(features, [col])
        if type(col).__name__ == "_BucketizedColumn":
            k = len(col.boundaries) + 1
            dim = int(np.prod(col.source_column.shape))
            ids.append(nd.argmax(nd.reshape(dense, [-1, dim, k]), axis=2,
                                 output_type=nd.int32))
            sizes += [k] * dim
        elif type(col).__name__ == "_IndicatorColumn":
            width = col._variable_shape[-1]
            ids.append(nd.cast(nd.greater(dense, 0.0), nd.int32))
            sizes += [2] * width
        else:
            raise ValueError(
                f"For now, only bucketized_column and indicator_column is "
                f"supported but got: {col}")
    return nd.concat(ids, 1), sizes


def _ensemble_variables(n_trees, max_depth, n_features, max_buckets, center_bias):
    nodes = 2 ** (max_depth + 1) - 1
    layer_nodes = 2 ** (max_depth - 1)

    def var(name, shape, dtype, init=0):
        return nd.get_variable(name, shape, dtype, trainable=False,
                               initializer=nd.constant_initializer(init))

    with nd.variable_scope(_SCOPE):
        return [var("tree_feature", [n_trees, nodes], nd.int32, -1),
                var("tree_threshold", [n_trees, nodes], nd.int32),
                var("tree_value", [n_trees, nodes], nd.float32),
                var("bias", [], nd.float32),
                var("state", [4], nd.int32, [0, 0, 0, int(center_bias)]),
                var("gradients", [n_features, max_buckets, layer_nodes], nd.float32),
                var("hessians", [n_features, max_buckets, layer_nodes], nd.float32)]


class _StopAfterNTreesHook(nd.train.SessionRunHook):
    """Stops training once the last tree is finished (TF's estimator stops
    there too, whatever ``steps`` asked). ``state`` is the update's output,
    so the step that finishes the last tree is the last step."""

    def __init__(self, state, n_trees):
        self._state, self._n_trees = state, n_trees

    def before_run(self, run_context):
        return nd.train.SessionRunArgs(self._state)

    def after_run(self, run_context, run_values):
        if run_values.results[_TREE] >= self._n_trees:
            run_context.request_stop()


def _bt_model_fn(features, labels, mode, head, feature_columns, params, config):
    """Logits of the ensemble; in ``TRAIN`` a train op that folds the batch's
    gradients and hessians into the ensemble."""
    del config
    check_features(features)
    ids, sizes = _bucket_ids(features, feature_columns)
    variables = _ensemble_variables(params["n_trees"], params["max_depth"], len(sizes),
                                    max(sizes), params["center_bias"])
    feature, threshold, value, bias = variables[:4]
    updated = {}
    logits = nd.py_func(predict_logits, [ids, feature, threshold, value, bias],
                        nd.float32, stateful=False, name="boosted_trees_predict")
    logits.set_shape([None, 1])

    def train_op_fn(loss):
        grads = nd.gradients(loss, logits)[0]
        # Each example's loss depends on its own logit only: the gradient of
        # the summed gradients is the hessian's diagonal.
        hess = nd.gradients(nd.reduce_sum(grads), logits)[0]
        new = nd.py_func(
            lambda *a: train_step(params, *a), [ids, grads, hess, *variables],
            [v.dtype.base_dtype for v in variables], name="boosted_trees_update")
        updates = []
        updated["state"] = new[4]
        for v, n in zip(variables, new):
            n.set_shape(v.shape)
            updates.append(nd.assign(v, n))
        with nd.control_dependencies(updates):
            return nd.assign_add(nd.train.get_global_step(), 1).op

    spec = head.create_estimator_spec(features=features, mode=mode, labels=labels,
                                      train_op_fn=train_op_fn, logits=logits)
    if mode == ModeKeys.TRAIN:
        hooks = (*spec.training_hooks,
                 _StopAfterNTreesHook(updated["state"], params["n_trees"]))
        spec = spec._replace(training_hooks=hooks)
    return spec


def _check_params(n_batches_per_layer, n_trees, max_depth, learning_rate,
                  l1_regularization, l2_regularization, tree_complexity,
                  min_node_weight, pruning_mode, train_in_memory):
    for name, v in (("n_batches_per_layer", n_batches_per_layer),
                    ("n_trees", n_trees), ("max_depth", max_depth)):
        if not isinstance(v, int) or v <= 0:
            raise ValueError(f"{name} must be a positive int, got {v!r}.")
    if learning_rate <= 0:
        raise ValueError(f"learning_rate must be positive, got {learning_rate}.")
    for name, v in (("l1_regularization", l1_regularization),
                    ("l2_regularization", l2_regularization),
                    ("tree_complexity", tree_complexity),
                    ("min_node_weight", min_node_weight)):
        if v < 0:
            raise ValueError(f"{name} must be non-negative, got {v}.")
    if pruning_mode not in ("none", "pre", "post"):
        raise ValueError(f"pruning_mode must be one of 'none', 'pre' or 'post', "
                         f"got {pruning_mode!r}.")
    if pruning_mode != "none" or train_in_memory:
        raise NotImplementedError(
            "nbdist's boosted trees support pruning_mode='none' and "
            "train_in_memory=False only.")


class BoostedTreesEstimator(Estimator):
    """Boosted trees whose loss, predictions and metrics are ``head``'s (a
    head of one logit)."""

    def __init__(self, feature_columns, n_batches_per_layer, head, model_dir=None,
                 weight_column=None, n_trees=100, max_depth=6, learning_rate=0.1,
                 l1_regularization=0.0, l2_regularization=0.0, tree_complexity=0.0,
                 min_node_weight=0.0, config=None, center_bias=False,
                 pruning_mode="none", quantile_sketch_epsilon=0.01,
                 train_in_memory=False):
        del weight_column, quantile_sketch_epsilon  # the head weighs; no sketches
        _check_params(n_batches_per_layer, n_trees, max_depth, learning_rate,
                      l1_regularization, l2_regularization, tree_complexity,
                      min_node_weight, pruning_mode, train_in_memory)
        if head.logits_dimension != 1:
            raise ValueError(f"nbdist's boosted trees support heads of one logit, "
                             f"got logits_dimension={head.logits_dimension}.")
        columns = tuple(feature_columns or [])
        if not columns:
            raise ValueError("feature_columns must not be empty.")
        params = {"n_batches_per_layer": n_batches_per_layer, "n_trees": n_trees,
                  "max_depth": max_depth, "learning_rate": float(learning_rate),
                  "l1": float(l1_regularization), "l2": float(l2_regularization),
                  "tree_complexity": float(tree_complexity),
                  "min_node_weight": float(min_node_weight),
                  "center_bias": bool(center_bias)}

        def _model_fn(features, labels, mode, config):
            return _bt_model_fn(features, labels, mode, head, columns, params, config)

        super().__init__(model_fn=_model_fn, model_dir=model_dir, config=config)


# The arguments the classifier and the regressor pass on unchanged.
_TREE_ARGUMENTS = ("n_trees", "max_depth", "learning_rate", "l1_regularization",
                   "l2_regularization", "tree_complexity", "min_node_weight",
                   "config", "center_bias", "pruning_mode", "quantile_sketch_epsilon",
                   "train_in_memory")


def _tree_arguments(arguments):
    return {name: arguments[name] for name in _TREE_ARGUMENTS}


class BoostedTreesClassifier(BoostedTreesEstimator):
    """Binary classification by boosted trees (sigmoid cross entropy)."""

    def __init__(self, feature_columns, n_batches_per_layer, model_dir=None,
                 n_classes=2, weight_column=None, label_vocabulary=None,
                 n_trees=100, max_depth=6, learning_rate=0.1, l1_regularization=0.0,
                 l2_regularization=0.0, tree_complexity=0.0, min_node_weight=0.0,
                 config=None, center_bias=False, pruning_mode="none",
                 quantile_sketch_epsilon=0.01, train_in_memory=False):
        if n_classes != 2:
            raise ValueError(f"For now only binary classification is supported."
                             f"n_classes given as {n_classes}")
        head = head_lib._binary_logistic_head_with_sigmoid_cross_entropy_loss(
            weight_column=weight_column, label_vocabulary=label_vocabulary,
            loss_reduction=nd.losses.Reduction.SUM_OVER_BATCH_SIZE)
        super().__init__(feature_columns, n_batches_per_layer, head, model_dir,
                         weight_column, **_tree_arguments(locals()))


class BoostedTreesRegressor(BoostedTreesEstimator):
    """Regression by boosted trees (squared error)."""

    def __init__(self, feature_columns, n_batches_per_layer, model_dir=None,
                 label_dimension=1, weight_column=None, n_trees=100, max_depth=6,
                 learning_rate=0.1, l1_regularization=0.0, l2_regularization=0.0,
                 tree_complexity=0.0, min_node_weight=0.0, config=None,
                 center_bias=False, pruning_mode="none",
                 quantile_sketch_epsilon=0.01, train_in_memory=False):
        head = head_lib._regression_head(
            weight_column=weight_column, label_dimension=label_dimension,
            loss_reduction=nd.losses.Reduction.SUM_OVER_BATCH_SIZE)
        super().__init__(feature_columns, n_batches_per_layer, head, model_dir,
                         weight_column, **_tree_arguments(locals()))
