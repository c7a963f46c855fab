"""Building ``SignatureDef``s (TF's ``saved_model.signature_def_utils``)."""

from __future__ import annotations

from nbdist.framework import dtypes, ops
from nbdist.proto import meta_graph_pb2
from nbdist.saved_model import signature_constants
from nbdist.saved_model.utils import build_tensor_info

__all__ = ["build_signature_def", "classification_signature_def", "is_valid_signature",
           "predict_signature_def", "regression_signature_def"]


def build_signature_def(inputs=None, outputs=None, method_name=None):
    """A ``SignatureDef`` of ``TensorInfo`` dicts ``inputs`` and ``outputs``."""
    sig = meta_graph_pb2.SignatureDef()
    for key, info in (inputs or {}).items():
        sig.inputs[key].CopyFrom(info)
    for key, info in (outputs or {}).items():
        sig.outputs[key].CopyFrom(info)
    if method_name is not None:
        sig.method_name = method_name
    return sig


def predict_signature_def(inputs, outputs):
    """The predict ``SignatureDef`` of tensor dicts ``inputs`` and ``outputs``.

    >>> import nbdist as nd
    >>> with nd.Graph().as_default():
    ...     x = nd.placeholder(nd.float32, [None], name="x")
    ...     sig = nd.saved_model.signature_def_utils.predict_signature_def(
    ...         {"x": x}, {"y": 2.0 * x})
    >>> sig.method_name, sig.inputs["x"].name
    ('tensorflow/serving/predict', 'x:0')
    """
    if inputs is None or not inputs:
        raise ValueError("Prediction inputs cannot be None or empty.")
    if outputs is None or not outputs:
        raise ValueError("Prediction outputs cannot be None or empty.")
    return build_signature_def(
        {k: build_tensor_info(t) for k, t in inputs.items()},
        {k: build_tensor_info(t) for k, t in outputs.items()},
        signature_constants.PREDICT_METHOD_NAME)


def is_valid_signature(signature_def) -> bool:
    """Whether a ``SignatureDef`` has a method name and its tensors names."""
    if signature_def is None or not signature_def.method_name:
        return False
    infos = list(signature_def.inputs.values()) + list(
        signature_def.outputs.values())
    return bool(signature_def.outputs) and all(i.name for i in infos)


def _string_examples(examples, what):
    if examples is None:
        raise ValueError(f"{what} `examples` cannot be None.")
    if not isinstance(examples, ops.Tensor) or examples.dtype != dtypes.string:
        raise ValueError(f"{what} `examples` must be a string Tensor. "
                         f"Found `examples` of type {type(examples)}.")
    return build_tensor_info(examples)


def classification_signature_def(examples, classes, scores):
    """The classify ``SignatureDef``: serialized ``examples`` in, string
    ``classes`` and/or float ``scores`` out (``tensorflow/serving/classify``)."""
    inputs = {signature_constants.CLASSIFY_INPUTS:
              _string_examples(examples, "Classification")}
    if classes is None and scores is None:
        raise ValueError("Classification `classes` and `scores` cannot both be None.")
    outputs = {}
    if classes is not None:
        if classes.dtype != dtypes.string:
            raise ValueError("Classification classes must be of type string Tensor.")
        outputs[signature_constants.CLASSIFY_OUTPUT_CLASSES] = build_tensor_info(
            classes)
    if scores is not None:
        if scores.dtype != dtypes.float32:
            raise ValueError("Classification scores must be a float Tensor.")
        outputs[signature_constants.CLASSIFY_OUTPUT_SCORES] = build_tensor_info(
            scores)
    return build_signature_def(inputs, outputs,
                               signature_constants.CLASSIFY_METHOD_NAME)


def regression_signature_def(examples, predictions):
    """The regress ``SignatureDef``: serialized ``examples`` in, float
    ``predictions`` out (``tensorflow/serving/regress``)."""
    inputs = {signature_constants.REGRESS_INPUTS:
              _string_examples(examples, "Regression")}
    if predictions is None:
        raise ValueError("Regression `predictions` cannot be None.")
    if predictions.dtype != dtypes.float32:
        raise ValueError("Regression output must be a float Tensor.")
    return build_signature_def(
        inputs, {signature_constants.REGRESS_OUTPUTS: build_tensor_info(predictions)},
        signature_constants.REGRESS_METHOD_NAME)
