"""The outputs a model serves (TF's ``export_output``): ``PredictOutput``,
``ClassificationOutput`` and ``RegressionOutput``, each turning itself into a
``SignatureDef`` over the serving receiver's tensors.

>>> import nbdist as nd
>>> with nd.Graph().as_default():
...     x = nd.placeholder(nd.float32, [None], name="x")
...     out = nd.estimator.export.PredictOutput(2.0 * x)
...     sig = out.as_signature_def({"x": x})
>>> sorted(out.outputs), sig.method_name
(['output'], 'tensorflow/serving/predict')
"""

from __future__ import annotations

import abc

from nbdist.framework import dtypes, ops
from nbdist.saved_model import signature_def_utils

__all__ = ["ClassificationOutput", "ExportOutput", "PredictOutput",
           "RegressionOutput"]


class ExportOutput(abc.ABC):
    """An output of a model that can be served (one per model head)."""

    _SEPARATOR_CHAR = "/"

    @abc.abstractmethod
    def as_signature_def(self, receiver_tensors):
        """The ``SignatureDef`` of this output fed by ``receiver_tensors``."""

    def _wrap_and_check_outputs(self, outputs, default_name, error_label=None):
        if not isinstance(outputs, dict):
            outputs = {default_name: outputs}
        label = error_label or default_name
        checked = {}
        for key, value in outputs.items():
            if isinstance(key, tuple):
                key = self._SEPARATOR_CHAR.join(key)
            if not isinstance(key, str):
                raise ValueError(f"{label} output key must be a string; got {key}.")
            if not isinstance(value, ops.Tensor):
                raise ValueError(
                    f"{label} output value must be a Tensor; got {value}.")
            checked[key] = value
        return checked


def _single_string_input(receiver_tensors, what):
    message = (
        f"{what} signatures can only accept a single tensor input of type "
        "tf.string. Please check to make sure that you have structured the "
        "serving_input_receiver_fn so that it creates a single string "
        "placeholder. If your model function expects multiple inputs, then use "
        "`tf.io.parse_example()` to parse the string into multiple tensors.\n "
        f"Received: {receiver_tensors}")
    if len(receiver_tensors) != 1:
        raise ValueError(message)
    ((_, examples),) = receiver_tensors.items()
    if examples.dtype != dtypes.string:
        raise ValueError(message)
    return examples


class ClassificationOutput(ExportOutput):
    """A classification head's output: float ``scores`` and/or string ``classes``.

    Served through the ``classify`` method, fed by one string tensor of
    serialized ``tf.Example``s.
    """

    def __init__(self, scores=None, classes=None):
        if scores is not None and not (
                isinstance(scores, ops.Tensor) and scores.dtype.is_floating):
            raise ValueError(
                f"Classification scores must be a float32 Tensor; got {scores}")
        if classes is not None and not (
                isinstance(classes, ops.Tensor) and classes.dtype == dtypes.string):
            raise ValueError(
                f"Classification classes must be a string Tensor; got {classes}")
        if scores is None and classes is None:
            raise ValueError(
                "Cannot create a ClassificationOutput with empty arguments. At "
                "least one of `scores` and `classes` must be defined.")
        self._scores, self._classes = scores, classes

    @property
    def scores(self):
        return self._scores

    @property
    def classes(self):
        return self._classes

    def as_signature_def(self, receiver_tensors):
        examples = _single_string_input(receiver_tensors, "Classification")
        return signature_def_utils.classification_signature_def(
            examples, self.classes, self.scores)


class RegressionOutput(ExportOutput):
    """A regression head's output: one float tensor of predicted values."""

    def __init__(self, value):
        if not (isinstance(value, ops.Tensor) and value.dtype.is_floating):
            raise ValueError(
                f"Regression output value must be a float32 Tensor; got {value}")
        self._value = value

    @property
    def value(self):
        return self._value

    def as_signature_def(self, receiver_tensors):
        examples = _single_string_input(receiver_tensors, "Regression")
        return signature_def_utils.regression_signature_def(examples, self.value)


class PredictOutput(ExportOutput):
    """A generic prediction: a tensor (served as ``output``) or a dict of them."""

    _SINGLE_OUTPUT_DEFAULT_NAME = "output"

    def __init__(self, outputs):
        self._outputs = self._wrap_and_check_outputs(
            outputs, self._SINGLE_OUTPUT_DEFAULT_NAME, error_label="Prediction")

    @property
    def outputs(self):
        return self._outputs

    def as_signature_def(self, receiver_tensors):
        return signature_def_utils.predict_signature_def(receiver_tensors,
                                                         self.outputs)
