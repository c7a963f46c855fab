"""``nd.estimator.inputs``, ``add_metrics`` and ``nd.estimator.experimental``
(TF 1.15's ``numpy_io_test.py``, ``extenders_test.py``, ``early_stopping_test.py``):

* ``numpy_input_fn`` yields ``x``/``y`` in batches for ``num_epochs`` (the last
  batch short), the features a dict or the array itself, and refuses a missing
  ``shuffle``, mismatched lengths and keys in both ``x`` and ``y``;
* ``add_metrics`` adds a ``metric_fn``'s metrics to ``evaluate``;
* early stopping reads the metrics of the eval event files: training stops at
  once when the loss has not fallen for N steps, runs on otherwise, and the
  chief's stop variable is checkpointed; ``call_logit_fn`` passes what the
  function takes;
* ``make_stop_at_checkpoint_step_hook`` gives the chief a ``StopAtStepHook`` and
  a worker a hook that stops once the checkpoint, not the global step, is at
  the last step.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_estimator import LR, X, Y, dataset, make

import nbdist as nd
from nbdist.estimator import inputs


def run_all(fetch, n):
    with nd.Session() as sess:
        return [sess.run(fetch) for _ in range(n)]


def test_numpy_input_fn_batches_epochs_and_shapes():
    x = {"b": np.arange(5.0), "a": np.arange(5) * 10}
    with nd.Graph().as_default():
        features, labels = inputs.numpy_input_fn(x, np.arange(5) + 100, batch_size=2,
                                                 num_epochs=2, shuffle=False)()
        batches = run_all((features, labels), 5)
        assert [list(b[1]) for b in batches] == [
            [100, 101], [102, 103], [104, 100], [101, 102], [103, 104]]
        assert list(batches[0][0]["a"]) == [0, 10]
        with nd.Session() as sess:
            for _ in range(5):
                sess.run(labels)
            with pytest.raises(nd.errors.OutOfRangeError):
                sess.run(labels)
    with nd.Graph().as_default():
        array = inputs.numpy_input_fn(np.ones((4, 3)), batch_size=4, shuffle=True)()
        assert run_all(array, 1)[0].shape == (4, 3)
    with nd.Graph().as_default():
        feats, targets = inputs.numpy_input_fn(
            {"x": np.arange(6.0)}, {"y1": np.arange(6), "y2": -np.arange(6)},
            batch_size=6, shuffle=True, num_epochs=None)()
        got = run_all((feats["x"], targets["y1"], targets["y2"]), 2)
        for xs, y1, y2 in got:  # shuffled together, every epoch complete
            assert sorted(xs) == list(range(6))
            np.testing.assert_array_equal(y1, xs)
            np.testing.assert_array_equal(y2, -xs)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"x": {"x": np.ones(3)}}, ValueError, "shuffle must be provided"),
    ({"x": {"x": np.ones(3)}, "y": np.ones(2), "shuffle": False}, ValueError,
     "Length of tensors in x and y is mismatched"),
    ({"x": {"x": np.ones(3)}, "y": {"x": np.ones(3)}, "shuffle": False}, ValueError,
     "duplicate keys are found in both x and y"),
    ({"x": [1, 2], "shuffle": False}, TypeError, "x must be a dict or array"),
    ({"x": {}, "shuffle": False}, ValueError, "x cannot be an empty dict"),
])
def test_numpy_input_fn_refuses_what_tf_refuses(kwargs, error, message):
    with nd.Graph().as_default(), pytest.raises(error, match=message):
        inputs.numpy_input_fn(**kwargs)()


def test_training_on_numpy_input_fn_and_add_metrics(tmp_path):
    est = make(tmp_path)
    est.train(inputs.numpy_input_fn({"x": X}, Y, batch_size=8, num_epochs=None,
                                    shuffle=False), max_steps=4)
    assert est.get_variable_value("global_step") == 4

    def metric_fn(labels, predictions):
        return {"rmse": nd.metrics.root_mean_squared_error(labels,
                                                           predictions["y"])}

    extended = nd.estimator.add_metrics(est, metric_fn)
    assert extended.model_dir == est.model_dir
    result = extended.evaluate(dataset)
    w = est.get_variable_value("w")
    np.testing.assert_allclose(result["rmse"], np.sqrt(np.mean((X @ w - Y) ** 2)),
                               rtol=1e-5)
    assert {"loss", "mae", "rmse", "global_step"} == set(result)


def write_eval_losses(est, losses):
    writer = nd.summary.FileWriter(est.eval_dir())
    for step, loss in losses.items():
        writer.add_summary(nd.Summary(value=[nd.Summary.Value(
            tag="loss", simple_value=loss)]), step)
    writer.close()


def test_early_stopping_reads_the_eval_metrics(tmp_path):
    stalled = make(tmp_path, "stalled")
    write_eval_losses(stalled, {10: 1.0, 20: 0.5, 30: 0.6, 40: 0.7})
    hook = nd.estimator.experimental.stop_if_no_decrease_hook(
        stalled, "loss", max_steps_without_decrease=20, run_every_secs=None,
        run_every_steps=1)
    stalled.train(lambda: dataset(repeat=True), hooks=[hook], max_steps=50)
    assert stalled.get_variable_value("global_step") == 1
    assert stalled.get_variable_value("signal_early_stopping/STOP")

    improving = make(tmp_path, "improving")
    write_eval_losses(improving, {10: 1.0, 20: 0.5, 30: 0.6, 40: 0.7})
    hook = nd.estimator.experimental.stop_if_no_decrease_hook(
        improving, "loss", max_steps_without_decrease=21, run_every_secs=None,
        run_every_steps=1)
    lower = nd.estimator.experimental.stop_if_lower_hook(
        improving, "loss", threshold=0.4, run_every_secs=None, run_every_steps=1)
    improving.train(lambda: dataset(repeat=True), hooks=[hook, lower], max_steps=3)
    assert improving.get_variable_value("global_step") == 3
    assert not improving.get_variable_value("signal_early_stopping/STOP")
    with pytest.raises(ValueError, match="Only one of `run_every_secs` and "):
        nd.estimator.experimental.stop_if_higher_hook(improving, "loss", 1.0,
                                                      run_every_steps=1)


def test_call_logit_fn_passes_what_the_function_takes():
    with nd.Graph().as_default():
        x = nd.constant([[1.0, 2.0]])
        got = nd.estimator.experimental.call_logit_fn(
            lambda features, mode: features * (2.0 if mode == "train" else 1.0),
            x, "train", {"lr": LR}, None)
        with nd.Session() as sess:
            assert sess.run(got).tolist() == [[2.0, 4.0]]
        with pytest.raises(ValueError, match="logit_fn should return a Tensor"):
            nd.estimator.experimental.call_logit_fn(lambda features: [features], x,
                                                    "train", None, None)


def test_a_worker_stops_once_the_chiefs_checkpoint_has_the_last_step(
        tmp_path, monkeypatch):
    import json

    chief = make(tmp_path, "shared")
    chief.train(lambda: dataset(repeat=True), max_steps=3)
    monkeypatch.setenv("TF_CONFIG", json.dumps({
        "cluster": {"chief": ["127.0.0.1:1"], "worker": ["127.0.0.1:2"]},
        "task": {"type": "worker", "index": 0}}))
    worker = make(tmp_path, "shared")
    assert not worker.config.is_chief
    hook = nd.estimator.experimental.make_stop_at_checkpoint_step_hook(
        worker, last_step=3, wait_after_file_check_secs=0)
    assert not isinstance(hook, nd.train.StopAtStepHook)
    # In one process (as a worker would run it against its server): the hook
    # reads the chief's checkpoint, at step 3, and stops after one more step.
    monkeypatch.delenv("TF_CONFIG")
    local = make(tmp_path, "shared")
    local.train(lambda: dataset(repeat=True), hooks=[hook], steps=10)
    assert local.get_variable_value("global_step") == 4
    # Past last_step but the checkpoint is not: it runs on (here, until steps).
    waiting = nd.estimator.experimental.make_stop_at_checkpoint_step_hook(
        worker, last_step=5, wait_after_file_check_secs=0)
    local.train(lambda: dataset(repeat=True), hooks=[waiting], steps=3)
    assert local.get_variable_value("global_step") == 7


def test_in_memory_evaluator_evaluates_the_variables_being_trained(tmp_path):
    import glob
    import os

    est = make(tmp_path, "in_memory", save_checkpoints_steps=None,
               save_checkpoints_secs=None)
    hook = nd.estimator.experimental.InMemoryEvaluatorHook(est, dataset,
                                                           every_n_iter=2)
    est.train(lambda: dataset(repeat=True), hooks=[hook], max_steps=5)
    (events,) = glob.glob(os.path.join(est.eval_dir(), "events.out.tfevents.*"))
    losses = {e.step: v.simple_value for e in nd.train.summary_iterator(events)
              if e.HasField("summary") for v in e.summary.value if v.tag == "loss"}
    # At the start, every 2 steps, and at the end; no checkpoint was involved.
    assert sorted(losses) == [0, 2, 4, 5]
    assert not glob.glob(os.path.join(est.model_dir, "model.ckpt-*.index"))
    w = np.zeros((2, 1))
    for step in range(5):
        lo = (step % 2) * 8
        x, y = X[lo:lo + 8], Y[lo:lo + 8]
        w -= LR * 2.0 / 8 * x.T @ (x @ w - y)
    np.testing.assert_allclose(losses[5], np.mean((X @ w - Y) ** 2), rtol=1e-5)
    assert losses[0] > losses[2] > losses[4] > losses[5]
