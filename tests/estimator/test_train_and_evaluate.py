"""``train_and_evaluate``, ``TrainSpec``, ``EvalSpec`` and the exporters, the
behaviours of TF 1.15's ``training_test.py`` and ``exporter_test.py``, in one
process:

* the specs refuse what TF refuses, with TF's messages;
* locally, training evaluates after every checkpoint but the first and after
  the last step, and returns the last metrics and the exports: a
  ``LatestExporter`` keeps its newest N, a ``FinalExporter`` exports once at the
  final step, a ``BestExporter`` only when the loss improves on the best in the
  eval event files;
* an ``evaluator`` task evaluates the newest checkpoint, exports it as the final
  one once it reached ``max_steps``, and returns; a second evaluator, and
  ``train`` on an evaluator or ps, are refused;
* in a worker context (a task's thread of a ``%%cluster`` cell) ``RunConfig``
  is that task's: chief, workers and evaluator threads over in-process servers
  train the ps's variables between-graph to ``max_steps`` and evaluate them;
* a task whose address is beyond loopback needs ``NBDIST_TOKEN``.
"""

from __future__ import annotations

import glob
import json
import os

import numpy as np
import pytest
from helpers import free_port, in_threads
from test_estimator import LR, Y, dataset, model_fn

import nbdist as nd
from nbdist.distribute.worker_context import between_graph_context
from nbdist.estimator import EvalSpec, TrainSpec, train_and_evaluate
from nbdist.notebook.widget_training import read_scalars

CLUSTER = {"chief": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"], "worker": ["127.0.0.1:3"]}


def last_eval_loss(eval_dir) -> tuple[int, float]:
    """(global step, loss) of the last evaluation summarised in ``eval_dir``,
    read from its event files as TensorBoard reads them."""
    _, step, loss = read_scalars(str(eval_dir), "loss")["."][-1]
    return step, loss


def receiver_fn():
    x = nd.placeholder(nd.float32, [None, 2], name="x")
    return nd.estimator.export.ServingInputReceiver({"x": x}, {"x": x})


def estimator(model_dir, **config):
    config.setdefault("save_checkpoints_steps", 2)
    return nd.estimator.Estimator(model_fn, str(model_dir),
                                  nd.estimator.RunConfig(**config), {"lr": LR})


@pytest.mark.parametrize("make, error, message", [
    (lambda: TrainSpec("fn"), TypeError, "`input_fn` must be callable, given: fn"),
    (lambda: TrainSpec(dataset, max_steps=0), ValueError,
     "Must specify max_steps > 0, given: 0"),
    (lambda: TrainSpec(dataset, hooks=[1]), TypeError,
     "All hooks must be `SessionRunHook` instances, given: 1"),
    (lambda: EvalSpec(dataset, steps=0), ValueError, "Must specify steps > 0"),
    (lambda: EvalSpec(dataset, name=3), TypeError, "`name` must be string"),
    (lambda: EvalSpec(dataset, start_delay_secs=-1), ValueError,
     "Must specify start_delay_secs >= 0"),
    (lambda: EvalSpec(dataset, throttle_secs=-1), ValueError,
     "Must specify throttle_secs >= 0"),
    (lambda: EvalSpec(dataset, exporters=["e"]), TypeError,
     "`exporters` must be an Exporter, an iterable of Exporter, or `None`"),
    (lambda: EvalSpec(dataset, exporters=[
        nd.estimator.FinalExporter("a", receiver_fn),
        nd.estimator.LatestExporter("a", receiver_fn)]), ValueError,
     "`exporters` must have unique names"),
    (lambda: EvalSpec(dataset, exporters=nd.estimator.FinalExporter("", receiver_fn)),
     ValueError, "An Exporter cannot have a name that is `None` or empty"),
    (lambda: nd.estimator.LatestExporter("a", receiver_fn, exports_to_keep=0),
     ValueError, "`exports_to_keep`, if provided, must be a positive number"),
    (lambda: nd.estimator.BestExporter(compare_fn=lambda a, b: True), ValueError,
     "must include best_eval_result argument"),
    (lambda: train_and_evaluate("estimator", TrainSpec(dataset), EvalSpec(dataset)),
     TypeError, "`estimator` must have type `tf.estimator.Estimator`"),
])
def test_specs_refuse_what_tf_refuses(make, error, message):
    with pytest.raises(error) as info:
        make()
    assert message in str(info.value)


def test_specs_keep_their_fields_and_the_hooks_are_tfs():
    spec = EvalSpec(dataset, steps=None, name="held_out", throttle_secs=0,
                    exporters=nd.estimator.FinalExporter("final", receiver_fn))
    assert (spec.steps, spec.name, spec.throttle_secs, spec.start_delay_secs) == (
        None, "held_out", 0, 120)
    assert [e.name for e in spec.exporters] == ["final"]
    assert TrainSpec(dataset).hooks == () and TrainSpec(dataset).max_steps is None
    assert nd.estimator.StopAtStepHook is nd.train.StopAtStepHook
    assert nd.estimator.SessionRunHook is nd.train.SessionRunHook


def test_local_train_and_evaluate_evaluates_each_checkpoint_and_exports(tmp_path):
    est = estimator(tmp_path / "m")
    # The loss falls at every evaluation, so the best exporter exports each time
    # but the first (whose own event is then the best of the event files).
    exporters = [nd.estimator.LatestExporter("latest", receiver_fn, exports_to_keep=2),
                 nd.estimator.FinalExporter("final", receiver_fn),
                 nd.estimator.BestExporter("best", receiver_fn)]
    metrics, exports = train_and_evaluate(
        est, TrainSpec(lambda: dataset(repeat=True), max_steps=7),
        EvalSpec(dataset, steps=None, exporters=exporters, throttle_secs=0))
    assert metrics["global_step"] == 7
    np.testing.assert_allclose(metrics["loss"], est.evaluate(dataset)["loss"],
                               rtol=1e-6)
    (events,) = glob.glob(os.path.join(est.model_dir, "eval", "events.*"))
    steps = [e.step for e in nd.train.summary_iterator(events)
             if e.HasField("summary")]
    # Checkpoints at 0 (not evaluated), 2, 4, 6 and the final 7; the last
    # evaluate() above adds 7 again.
    assert steps == [2, 4, 6, 7, 7]
    export_root = os.path.join(est.model_dir, "export")
    assert len(os.listdir(os.path.join(export_root, "latest"))) == 2
    assert len(os.listdir(os.path.join(export_root, "final"))) == 1
    assert len(os.listdir(os.path.join(export_root, "best"))) == 3
    assert [os.path.dirname(p).decode() for p in exports] == [
        os.path.join(export_root, name) for name in ("latest", "final", "best")]


def test_the_evaluator_task_evaluates_the_final_checkpoint_and_returns_none(
        tmp_path, monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    estimator(tmp_path / "m").train(lambda: dataset(repeat=True), max_steps=4)
    monkeypatch.setenv("TF_CONFIG", json.dumps(
        {"cluster": CLUSTER, "task": {"type": "evaluator", "index": 0}}))
    est = estimator(tmp_path / "m")
    assert est.config.task_type == "evaluator" and not est.config.cluster_spec
    # As TF 1.15: a task of a cluster (the evaluator too) returns None; the
    # evaluator's metrics are its summaries, at the final step.
    assert train_and_evaluate(
        est, TrainSpec(lambda: dataset(repeat=True), max_steps=4),
        EvalSpec(dataset, steps=None, start_delay_secs=0, throttle_secs=0,
                 exporters=nd.estimator.FinalExporter("final", receiver_fn))) is None
    assert last_eval_loss(est.eval_dir())[0] == 4
    assert len(os.listdir(tmp_path / "m" / "export" / "final")) == 1
    with pytest.raises(ValueError, match="Train has been called wrong configuration"):
        est.train(dataset, steps=1)
    monkeypatch.setenv("TF_CONFIG", json.dumps(
        {"cluster": CLUSTER, "task": {"type": "evaluator", "index": 1}}))
    with pytest.raises(ValueError, match="there can only be one `evaluator` task"):
        train_and_evaluate(estimator(tmp_path / "m"), TrainSpec(dataset),
                           EvalSpec(dataset))
    monkeypatch.setenv("TF_CONFIG", json.dumps(
        {"cluster": CLUSTER, "task": {"type": "ps", "index": 0}}))
    with pytest.raises(ValueError, match="Train has been called wrong configuration"):
        estimator(tmp_path / "m").train(dataset, steps=1)


def test_a_task_beyond_loopback_needs_the_clusters_token(tmp_path, monkeypatch):
    # TF's server listens on every interface; nbdist's listens on the task's own
    # host only with NBDIST_TOKEN set, and refuses to start without it.
    monkeypatch.delenv("NBDIST_TOKEN", raising=False)
    monkeypatch.setenv("TF_CONFIG", json.dumps(
        {"cluster": {"chief": ["192.0.2.1:2222"], "ps": ["192.0.2.2:2222"]},
         "task": {"type": "chief", "index": 0}}))
    with pytest.raises(RuntimeError, match="needs NBDIST_TOKEN set"):
        train_and_evaluate(estimator(tmp_path / "m"),
                           TrainSpec(dataset, max_steps=1), EvalSpec(dataset))


def test_tasks_of_a_cluster_cell_train_between_graph(tmp_path, monkeypatch):
    # As a %%cluster cell runs it: each task a thread in its worker context (its
    # TF_CONFIG), the servers the cluster's own; chief and workers train the ps's
    # variables, the evaluator evaluates until the final step.
    monkeypatch.delenv("TF_CONFIG", raising=False)
    jobs = {"chief": 1, "ps": 1, "worker": 2}
    cluster = {job: [f"127.0.0.1:{free_port()}" for _ in range(n)]
               for job, n in jobs.items()}
    servers = [nd.Server(cluster, job_name=job, task_index=i)
               for job, n in jobs.items() for i in range(n)]
    with_evaluator = nd.train.ClusterSpec(
        {**cluster, "evaluator": [f"127.0.0.1:{free_port()}"]})
    tasks = [("chief", 0), ("worker", 0), ("worker", 1), ("evaluator", 0)]

    def task(i):
        job, index = tasks[i]
        with between_graph_context(with_evaluator, job, index):
            est = estimator(tmp_path / "m", save_checkpoints_steps=5,
                            experimental_max_worker_delay_secs=0)
            assert (est.config.task_type, est.config.task_id) == (job, index)
            return train_and_evaluate(
                est, TrainSpec(lambda: dataset(repeat=True), max_steps=20),
                EvalSpec(dataset, steps=None, start_delay_secs=0, throttle_secs=0.2))

    try:
        results = in_threads(len(tasks), task, bound_s=120)
    finally:
        for s in servers:
            s.stop()
    assert results == [None] * len(tasks)  # as TF 1.15 in a cluster
    step, loss = last_eval_loss(tmp_path / "m" / "eval")
    assert step >= 20
    reader = nd.train.load_checkpoint(str(tmp_path / "m"))
    assert reader.get_tensor("global_step") == step
    # The ps's variables moved: the loss is far below the one of w = 0.
    assert loss < 0.1 * float(np.mean(Y ** 2))
    # What a TrainingView(logdir=model_dir) draws: the chief's training loss
    # (run ".") and beside it the evaluator's, one point per checkpoint.
    runs = read_scalars(str(tmp_path / "m"), "loss")
    assert set(runs) == {".", "eval"}
    assert [p[1] for p in runs["eval"]] == sorted({p[1] for p in runs["eval"]})
