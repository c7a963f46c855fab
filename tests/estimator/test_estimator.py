"""``Estimator``, the behaviours of TF 1.15's ``estimator_test.py``, on a linear
model whose every number has a NumPy oracle (gradient descent over the same
batches):

* ``train(max_steps=N)`` stops at global step N with the oracle's weights and
  a checkpoint ``model.ckpt-N``; a second ``train(max_steps=N)`` returns at once
  (no hook runs); ``train(steps=k)`` adds k steps; ``input_fn`` may return a
  ``Dataset`` or ``(features, labels)`` tensors;
* ``evaluate`` returns the ``eval_metric_ops`` values, ``loss`` (the mean of the
  batch losses) and ``global_step``, and writes them to ``eval``/``eval_<name>``;
* ``predict`` yields one dict per example (or per batch), ``predict_keys`` picks;
* ``export_saved_model`` writes a SavedModel that ``nd.saved_model.loader``
  loads and serves with the trained weights;
* warm starts copy variables by regex, rename them and remap vocabulary rows;
* TF's errors for bad ``model_fn`` arguments, steps, and missing checkpoints.
"""

from __future__ import annotations

import glob
import os

import numpy as np
import pytest

import nbdist as nd
from nbdist.estimator import Estimator, EstimatorSpec, ModeKeys, RunConfig

LR = 0.1
RNG = np.random.default_rng(3)
X = RNG.normal(size=(16, 2)).astype(np.float32)
Y = (X @ np.array([[1.5], [-2.0]], np.float32) + 0.1 * RNG.normal(size=(16, 1))
     ).astype(np.float32)
BATCH = 8


def model_fn(features, labels, mode, params):
    w = nd.get_variable("w", [2, 1], initializer=nd.zeros_initializer())
    pred = nd.matmul(features["x"], w)
    predictions = {"y": pred, "twice": 2.0 * pred}
    if mode == ModeKeys.PREDICT:
        return EstimatorSpec(mode, predictions=predictions)
    loss = nd.reduce_mean(nd.square(pred - labels))
    opt = nd.train.GradientDescentOptimizer(params["lr"])
    train_op = opt.minimize(loss, global_step=nd.train.get_global_step())
    metrics = {"mae": nd.metrics.mean_absolute_error(labels, pred)}
    return EstimatorSpec(mode, predictions, loss, train_op, eval_metric_ops=metrics)


def dataset(repeat=False):
    ds = nd.data.Dataset.from_tensor_slices(({"x": X}, Y)).batch(BATCH)
    return ds.repeat() if repeat else ds


def oracle_weights(steps, w=None):
    """Gradient descent over the batches in dataset order."""
    w = np.zeros((2, 1), np.float64) if w is None else w.copy()
    for step in range(steps):
        lo = (step % (len(X) // BATCH)) * BATCH
        x, y = X[lo:lo + BATCH], Y[lo:lo + BATCH]
        w -= LR * 2.0 / BATCH * x.T @ (x @ w - y)
    return w


def make(tmp_path, name="model", **config):
    config.setdefault("save_checkpoints_steps", 100)
    return Estimator(model_fn, str(tmp_path / name), RunConfig(**config),
                     params={"lr": LR})


class CountingHook(nd.estimator.SessionRunHook):
    def __init__(self):
        self.begun = self.runs = 0

    def begin(self):
        self.begun += 1

    def after_run(self, run_context, run_values):
        self.runs += 1


def test_train_to_max_steps_then_again_is_a_no_op(tmp_path):
    est = make(tmp_path, save_summary_steps=1, log_step_count_steps=2)
    assert est.train(lambda: dataset(repeat=True), max_steps=6) is est
    np.testing.assert_allclose(est.get_variable_value("w"), oracle_weights(6),
                               rtol=1e-5)
    assert est.get_variable_value("global_step") == 6
    assert est.latest_checkpoint().endswith("model.ckpt-6")
    assert set(est.get_variable_names()) == {"global_step", "w"}
    checkpoint_files = sorted(os.listdir(est.model_dir))
    hook = CountingHook()
    est.train(lambda: dataset(repeat=True), hooks=[hook], max_steps=6)
    assert hook.begun == hook.runs == 0
    assert sorted(os.listdir(est.model_dir)) == checkpoint_files
    est.train(lambda: dataset(repeat=True), hooks=[hook], steps=2)
    assert hook.runs == 2 and est.get_variable_value("global_step") == 8
    np.testing.assert_allclose(est.get_variable_value("w"), oracle_weights(8),
                               rtol=1e-5)
    # The chief's summaries: the loss of every step, as TF adds it.
    events = glob.glob(os.path.join(est.model_dir, "events.out.tfevents.*"))
    tags = {v.tag for f in events for e in nd.train.summary_iterator(f)
            if e.HasField("summary") for v in e.summary.value}
    assert "loss" in tags and "global_step/sec" in tags


def test_training_until_the_input_ends_and_from_tensors(tmp_path):
    est = make(tmp_path)
    est.train(dataset)  # two batches, then OutOfRange ends training
    assert est.get_variable_value("global_step") == 2

    def tensors():
        return {"x": nd.constant(X[:BATCH])}, nd.constant(Y[:BATCH])

    est.train(tensors, steps=1)
    w = oracle_weights(2)
    w -= LR * 2.0 / BATCH * X[:BATCH].T @ (X[:BATCH] @ w - Y[:BATCH])
    np.testing.assert_allclose(est.get_variable_value("w"), w, rtol=1e-5)


def test_evaluate_returns_metrics_loss_and_global_step(tmp_path):
    est = make(tmp_path)
    est.train(lambda: dataset(repeat=True), max_steps=4)
    w = est.get_variable_value("w")
    batches = [(X[i:i + BATCH], Y[i:i + BATCH]) for i in range(0, len(X), BATCH)]
    losses = [np.mean((x @ w - y) ** 2) for x, y in batches]
    result = est.evaluate(dataset, name="held_out")
    assert set(result) == {"loss", "mae", "global_step"}
    assert result["global_step"] == 4
    np.testing.assert_allclose(result["loss"], np.mean(losses), rtol=1e-5)
    np.testing.assert_allclose(result["mae"], np.mean(np.abs(X @ w - Y)), rtol=1e-5)
    one = est.evaluate(dataset, steps=1)
    np.testing.assert_allclose(one["loss"], losses[0], rtol=1e-5)
    for name, expected in (("eval_held_out", result), ("eval", one)):
        (events,) = glob.glob(os.path.join(est.eval_dir(name[5:] or None),
                                           "events.out.tfevents.*"))
        assert os.path.basename(os.path.dirname(events)) == name
        written = {(e.step, v.tag): v.simple_value
                   for e in nd.train.summary_iterator(events)
                   if e.HasField("summary") for v in e.summary.value}
        np.testing.assert_allclose(written[(4, "loss")], expected["loss"], rtol=1e-6)


def test_predict_yields_per_example_dicts(tmp_path):
    est = make(tmp_path)
    est.train(lambda: dataset(repeat=True), max_steps=3)
    expected = X @ est.get_variable_value("w")

    def features():
        return nd.data.Dataset.from_tensor_slices({"x": X[:5]}).batch(2)

    preds = list(est.predict(features))
    assert len(preds) == 5 and set(preds[0]) == {"y", "twice"}
    np.testing.assert_allclose([p["y"] for p in preds], expected[:5], rtol=1e-5)
    only = list(est.predict(features, predict_keys=["twice"]))
    np.testing.assert_allclose([p["twice"] for p in only], 2 * expected[:5], rtol=1e-5)
    batches = list(est.predict(features, yield_single_examples=False))
    assert [len(b["y"]) for b in batches] == [2, 2, 1]
    with pytest.raises(ValueError, match="Expected to run at least one output"):
        next(est.predict(features, predict_keys=["nothing"]))


def test_export_saved_model_serves_the_trained_model(tmp_path):
    est = make(tmp_path)
    receiver_fn = nd.estimator.export.build_raw_serving_input_receiver_fn(
        {"x": nd.placeholder(nd.float32, [None, 2])})
    with pytest.raises(ValueError, match="Couldn't find trained model"):
        est.export_saved_model(str(tmp_path / "export"), receiver_fn)
    est.train(lambda: dataset(repeat=True), max_steps=5)
    path = est.export_saved_model(str(tmp_path / "export"), receiver_fn)
    assert isinstance(path, bytes) and os.path.basename(path).isdigit()
    assert os.path.exists(os.path.join(path, b"variables", b"variables.index"))
    again = est.export_savedmodel(str(tmp_path / "export"), receiver_fn)
    assert again != path  # a new timestamped directory, no temp- leftovers
    assert sorted(os.listdir(tmp_path / "export")) == sorted(
        os.path.basename(p).decode() for p in (path, again))
    with nd.Graph().as_default(), nd.Session() as sess:
        meta = nd.saved_model.loader.load(sess, ["serve"], path.decode())
        sig = meta.signature_def["serving_default"]
        assert sig.method_name == "tensorflow/serving/predict"
        y = sess.run(sig.outputs["y"].name, {sig.inputs["x"].name: X[:3]})
    np.testing.assert_allclose(y, X[:3] @ est.get_variable_value("w"), rtol=1e-5)


def test_warm_start_by_regex_rename_and_vocabulary(tmp_path):
    old = make(tmp_path, "old")
    old.train(lambda: dataset(repeat=True), max_steps=5)
    trained = old.get_variable_value("w")
    warm = Estimator(model_fn, str(tmp_path / "warm"), params={"lr": LR},
                     warm_start_from=old.model_dir)
    # No checkpoint of its own yet: evaluate warm-starts as train would.
    np.testing.assert_allclose(warm.evaluate(dataset)["loss"],
                               old.evaluate(dataset)["loss"], rtol=1e-5)
    cold = Estimator(model_fn, str(tmp_path / "cold"), params={"lr": LR},
                     warm_start_from=nd.estimator.WarmStartSettings(
                         old.model_dir, vars_to_warm_start="nothing.*"))
    cold.train(lambda: dataset(repeat=True), max_steps=1)
    np.testing.assert_allclose(cold.get_variable_value("w"), oracle_weights(1),
                               rtol=1e-5)

    def renamed_fn(features, labels, mode):
        v = nd.get_variable("v", [2, 1], initializer=nd.zeros_initializer())
        loss = nd.reduce_sum(v)
        return EstimatorSpec(mode, loss=loss, train_op=nd.assign_add(
            nd.train.get_global_step(), 1).op)

    renamed = Estimator(renamed_fn, str(tmp_path / "renamed"),
                        warm_start_from=nd.estimator.WarmStartSettings(
                            old.model_dir, var_name_to_prev_var_name={"v": "w"}))
    renamed.train(lambda: dataset(), max_steps=1)
    np.testing.assert_allclose(renamed.get_variable_value("v"), trained)
    bad = Estimator(renamed_fn, str(tmp_path / "bad"),
                    warm_start_from=nd.estimator.WarmStartSettings(
                        old.model_dir, var_name_to_prev_var_name={"v": "w", "u": "w"}))
    with pytest.raises(ValueError, match="var_name_to_prev_var_name that were not "
                                         "used"):
        bad.train(lambda: dataset(), max_steps=1)


def test_vocab_info_remaps_rows_by_word(tmp_path):
    (tmp_path / "old.txt").write_text("apple\nbanana\ncherry\n")
    (tmp_path / "new.txt").write_text("cherry\ndate\napple\n")
    old_rows = np.arange(6, dtype=np.float32).reshape(3, 2)
    with nd.Graph().as_default():
        emb = nd.get_variable("emb", initializer=old_rows)
        with nd.Session() as sess:
            sess.run(emb.initializer)
            nd.train.Saver([emb]).save(sess, str(tmp_path / "ckpt"))
    info = nd.estimator.VocabInfo(str(tmp_path / "new.txt"), new_vocab_size=3,
                                  num_oov_buckets=1,
                                  old_vocab=str(tmp_path / "old.txt"),
                                  backup_initializer=nd.ones_initializer())
    with nd.Graph().as_default():
        emb = nd.get_variable("emb", [4, 2], initializer=nd.zeros_initializer())
        from nbdist.estimator.warm_starting_util import warm_start

        warm_start(str(tmp_path / "ckpt"), vars_to_warm_start=None,
                   var_name_to_vocab_info={"emb": info})
        with nd.Session() as sess:
            sess.run(emb.initializer)
            value = sess.run(emb)
    # cherry, date (new: backup), apple, then the OOV bucket (backup).
    np.testing.assert_array_equal(value, [[4, 5], [1, 1], [0, 1], [1, 1]])


def test_tfs_errors(tmp_path):
    with pytest.raises(ValueError, match="model_fn must be provided"):
        Estimator(None)
    with pytest.raises(ValueError, match="must include features argument"):
        Estimator(lambda labels, mode: None)
    with pytest.raises(ValueError, match="does not include params argument"):
        Estimator(lambda features, labels: None, params={"a": 1})
    with pytest.raises(ValueError, match="has following not expected args"):
        Estimator(lambda features, labels, extra: None)
    with pytest.raises(ValueError, match="are set both in constructor and "
                                         "`RunConfig`"):
        Estimator(model_fn, "/tmp/a", RunConfig(model_dir="/tmp/b"), {"lr": LR})
    est = make(tmp_path)
    with pytest.raises(ValueError, match="Could not find trained model"):
        est.get_variable_value("w")
    with pytest.raises(ValueError, match="Can not provide both steps and max_steps"):
        est.train(dataset, steps=1, max_steps=2)
    with pytest.raises(ValueError, match="Must specify steps > 0, given: 0"):
        est.train(dataset, steps=0)
    with pytest.raises(TypeError, match="Hooks must be a SessionRunHook"):
        est.train(dataset, hooks=["hook"], steps=1)
    no_checkpoints = Estimator(model_fn, str(tmp_path / "n"), RunConfig(
        save_checkpoints_secs=None), params={"lr": LR})
    with pytest.raises(ValueError, match="There should be a CheckpointSaverHook"):
        no_checkpoints.train(dataset, steps=1,
                             saving_listeners=[nd.estimator.CheckpointSaverListener()])

    def no_labels_fn(features, mode):
        return EstimatorSpec(mode, predictions=features["x"])

    with pytest.raises(ValueError, match="model_fn does not take labels"):
        Estimator(no_labels_fn, str(tmp_path / "l")).train(dataset, steps=1)


def test_saving_listeners_hear_every_checkpoint(tmp_path):
    class Listener(nd.estimator.CheckpointSaverListener):
        steps = []

        def after_save(self, session, global_step_value):
            self.steps.append(global_step_value)

    est = make(tmp_path, save_checkpoints_steps=2)
    est.train(lambda: dataset(repeat=True), max_steps=5, saving_listeners=[Listener()])
    assert Listener.steps == [0, 2, 4, 5]
