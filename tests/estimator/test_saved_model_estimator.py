"""``nd.estimator.experimental.SavedModelEstimator`` (TF 1.15's
``saved_model_estimator_test.py`` as reference): an Estimator over the
SavedModel a canned estimator exported with a parsing serving-input receiver.

* its ``predict`` feeds the input function's ``inputs`` (serialized Examples)
  to the ``serving_default`` signature and yields its outputs: the
  classifier's ``scores`` and ``classes`` equal the original estimator's
  ``probabilities`` and class ids on the same rows;
* without a checkpoint of its own, ``latest_checkpoint()`` is the SavedModel's
  variables;
* only the ``serve`` graph is read: ``train`` and ``evaluate`` raise naming the
  mode; an input function without the signature's key is refused naming it.
"""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd

fc = nd.feature_column


def _examples(x, color):
    return [nd.train.Example(features=nd.train.Features(feature={
        "x": nd.train.Feature(float_list=nd.train.FloatList(value=row)),
        "color": nd.train.Feature(bytes_list=nd.train.BytesList(
            value=[c.encode()]))})).SerializeToString()
        for row, c in zip(x, color)]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    rng = np.random.RandomState(0)
    x = rng.randn(60, 2).astype(np.float32)
    color = rng.choice(["R", "G", "B"], 60)
    y = ((x[:, 0] > 0) | (color == "R")).astype(np.int64)
    cols = [fc.numeric_column("x", shape=2), fc.indicator_column(
        fc.categorical_column_with_vocabulary_list("color", ["R", "G", "B"]))]
    est = nd.estimator.LinearClassifier(
        cols, model_dir=str(tmp_path_factory.mktemp("model")))
    est.train(lambda: nd.data.Dataset.from_tensor_slices(
        ({"x": x, "color": color}, y)).repeat().batch(20), steps=10)
    path = est.export_saved_model(
        str(tmp_path_factory.mktemp("export")),
        nd.estimator.export.build_parsing_serving_input_receiver_fn(
            fc.make_parse_example_spec(cols)))
    want = list(est.predict(lambda: nd.data.Dataset.from_tensor_slices(
        {"x": x[:6], "color": color[:6]}).batch(6)))
    return path, _examples(x[:6], color[:6]), want


def test_predict_serves_the_classification_signature_as_the_original(exported):
    path, examples, want = exported
    loaded = nd.estimator.experimental.SavedModelEstimator(path)
    got = list(loaded.predict(lambda: nd.data.Dataset.from_tensor_slices(
        {"inputs": examples}).batch(4)))
    assert len(got) == len(want) == 6
    np.testing.assert_allclose([g["scores"] for g in got],
                               [w["probabilities"] for w in want], atol=1e-6)
    assert [g["classes"][int(np.argmax(g["scores"]))] for g in got] == [
        str(int(w["class_ids"][0])).encode() for w in want]
    assert loaded.latest_checkpoint().endswith("variables/variables")


def test_only_predict_and_the_signatures_keys(exported):
    path, examples, _ = exported
    loaded = nd.estimator.experimental.SavedModelEstimator(path)
    data = lambda: ({"inputs": nd.constant(examples)}, nd.constant([[1]] * 6))  # noqa: E731
    with pytest.raises(RuntimeError, match="train mode is not available"):
        loaded.train(data, steps=1)
    with pytest.raises(RuntimeError, match="eval mode is not available"):
        loaded.evaluate(data, steps=1)
    with pytest.raises(ValueError, match="Key 'inputs' not found"):
        next(loaded.predict(lambda: {"examples": nd.constant(examples)}))
