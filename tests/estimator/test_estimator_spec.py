"""``EstimatorSpec``, export outputs and serving receivers, as TF 1.15's
``model_fn_test.py``, ``export_output_test.py`` and ``export_test.py`` state them:

* each mode requires its fields (TRAIN: loss and train_op; EVAL: loss; PREDICT:
  predictions) with TF's messages; a ``[1]`` loss becomes a scalar, a ``[2]``
  one is refused; tensors from another graph, non-hooks and metric values that
  are not pairs are refused;
* in PREDICT mode the export outputs default to a ``PredictOutput`` under
  ``serving_default``; one named output is also served as the default; several
  without a default are refused;
* ``ServingInputReceiver`` names a lone feature ``feature`` and a lone receiver
  tensor ``input``; ``build_raw_serving_input_receiver_fn`` frees the batch
  dimension; the classify signature needs one string input.
"""

from __future__ import annotations

import pytest

import nbdist as nd
from nbdist.estimator import EstimatorSpec, ModeKeys
from nbdist.estimator import export as ex


@pytest.fixture
def graph():
    with nd.Graph().as_default() as g:
        yield g


def _train_op(loss):
    step = nd.train.get_or_create_global_step()
    return nd.assign_add(step, 1).op


@pytest.mark.parametrize("mode, fields, message", [
    (ModeKeys.TRAIN, {"loss": True}, "Missing train_op."),
    (ModeKeys.TRAIN, {"train_op": True}, "Missing loss."),
    (ModeKeys.EVAL, {}, "Missing loss."),
    (ModeKeys.PREDICT, {}, "Missing predictions."),
])
def test_each_mode_requires_its_fields(graph, mode, fields, message):
    loss = nd.constant(1.0)
    kwargs = {"loss": loss} if "loss" in fields else {}
    if "train_op" in fields:
        kwargs["train_op"] = _train_op(loss)
    with pytest.raises(ValueError, match=message):
        EstimatorSpec(mode, **kwargs)


def test_a_spec_with_every_field_of_its_mode_is_kept(graph):
    loss = nd.constant(2.0)
    hook = nd.estimator.StopAtStepHook(last_step=3)
    spec = EstimatorSpec(ModeKeys.TRAIN, predictions={"p": loss}, loss=loss,
                         train_op=_train_op(loss), training_hooks=[hook])
    assert spec.training_hooks == (hook,) and spec.evaluation_hooks == ()
    assert spec.eval_metric_ops == {} and spec.export_outputs is None
    assert isinstance(spec.scaffold, nd.train.Scaffold)
    with pytest.raises(ValueError, match="mode of EstimatorSpec cannot be changed"):
        spec._replace(mode=ModeKeys.EVAL)
    assert spec._replace(predictions={"q": loss}).predictions == {"q": loss}


def test_loss_of_shape_one_becomes_a_scalar_and_a_longer_one_is_refused(graph):
    spec = EstimatorSpec(ModeKeys.EVAL, loss=nd.constant([3.0]))
    assert spec.loss.shape.as_list() == []
    with nd.Session() as sess:
        assert sess.run(spec.loss) == 3.0
    with pytest.raises(ValueError, match="Loss must be scalar"):
        EstimatorSpec(ModeKeys.EVAL, loss=nd.constant([1.0, 2.0]))
    with pytest.raises(TypeError, match="loss must be Tensor"):
        EstimatorSpec(ModeKeys.EVAL, loss=1.0)


def test_tensors_of_another_graph_are_refused(graph):
    with nd.Graph().as_default():
        other = nd.constant(1.0)
    with pytest.raises(ValueError, match='loss with "Const:0" must be from the '
                                         "default graph"):
        EstimatorSpec(ModeKeys.EVAL, loss=other)
    with pytest.raises(ValueError, match="prediction values .* default graph"):
        EstimatorSpec(ModeKeys.PREDICT, predictions={"p": other})


def test_hooks_and_metrics_are_type_checked(graph):
    loss = nd.constant(1.0)
    with pytest.raises(TypeError, match="All hooks must be SessionRunHook"):
        EstimatorSpec(ModeKeys.EVAL, loss=loss, evaluation_hooks=["not a hook"])
    with pytest.raises(TypeError, match="eval_metric_ops must be a dict"):
        EstimatorSpec(ModeKeys.EVAL, loss=loss, eval_metric_ops=[loss])
    with pytest.raises(TypeError, match=r"\(metric_value, update_op\) tuples"):
        EstimatorSpec(ModeKeys.EVAL, loss=loss, eval_metric_ops={"m": loss})
    with pytest.raises(TypeError, match="scaffold must be tf.train.Scaffold"):
        EstimatorSpec(ModeKeys.EVAL, loss=loss, scaffold="scaffold")


def test_predict_export_outputs_default_and_single_output_is_the_default(graph):
    x = nd.placeholder(nd.float32, [None], name="x")
    spec = EstimatorSpec(ModeKeys.PREDICT, predictions={"y": 2.0 * x})
    (key, out), = spec.export_outputs.items()
    assert key == "serving_default" and isinstance(out, ex.PredictOutput)
    assert list(out.outputs) == ["y"]
    head = ex.RegressionOutput(2.0 * x)
    spec = EstimatorSpec(ModeKeys.PREDICT, predictions=x, export_outputs={"h": head})
    assert spec.export_outputs == {"h": head, "serving_default": head}
    with pytest.raises(ValueError, match="none of them is specified as the default"):
        EstimatorSpec(ModeKeys.PREDICT, predictions=x,
                      export_outputs={"a": head, "b": ex.PredictOutput(x)})
    with pytest.raises(TypeError, match="must be ExportOutput objects"):
        EstimatorSpec(ModeKeys.PREDICT, predictions=x, export_outputs={"a": x})


def test_export_outputs_check_their_tensors(graph):
    x = nd.placeholder(nd.float32, [None, 3])
    with pytest.raises(ValueError, match="Classification scores must be a float32"):
        ex.ClassificationOutput(scores=nd.constant([1]))
    with pytest.raises(ValueError, match="Cannot create a ClassificationOutput"):
        ex.ClassificationOutput()
    with pytest.raises(ValueError, match="Regression output value must be a float32"):
        ex.RegressionOutput(nd.constant([1]))
    with pytest.raises(ValueError, match="Prediction output key must be a string"):
        ex.PredictOutput({1: x})
    assert list(ex.PredictOutput({("a", "b"): x}).outputs) == ["a/b"]
    classify = ex.ClassificationOutput(scores=x)
    with pytest.raises(ValueError, match="single tensor input of type tf.string"):
        classify.as_signature_def({"x": x})
    examples = nd.placeholder(nd.string, [None])
    sig = classify.as_signature_def({"examples": examples})
    assert sig.method_name == "tensorflow/serving/classify"
    assert list(sig.inputs) == ["inputs"] and list(sig.outputs) == ["scores"]
    sig = ex.RegressionOutput(x[:, 0]).as_signature_def({"examples": examples})
    assert sig.method_name == "tensorflow/serving/regress"


def test_serving_input_receivers(graph):
    x = nd.placeholder(nd.float32, [None, 2], name="x")
    receiver = ex.ServingInputReceiver(x, x)
    assert list(receiver.features) == ["feature"]
    assert list(receiver.receiver_tensors) == ["input"]
    assert ex.TensorServingInputReceiver(x, {"x": x}).features is x
    with pytest.raises(ValueError, match="feature keys must be strings or ints"):
        ex.ServingInputReceiver({1.5: x}, x)
    with pytest.raises(ValueError, match="receiver_tensor keys must be strings"):
        ex.ServingInputReceiver(x, {1: x})
    with pytest.raises(ValueError, match="feature must be a Tensor or SparseTensor"):
        ex.ServingInputReceiver({"feature": 3.0}, x)
    raw = ex.build_raw_serving_input_receiver_fn(
        {"x": nd.placeholder(nd.float32, [8, 2])}, default_batch_size=4)()
    assert raw.receiver_tensors["x"].shape.as_list() == [4, 2]
    parsing = ex.build_parsing_serving_input_receiver_fn(
        {"x": nd.FixedLenFeature([2], nd.float32)})()
    assert raw.features.keys() == parsing.features.keys() == {"x"}
    assert parsing.receiver_tensors["examples"].dtype == nd.string
