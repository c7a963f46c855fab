"""``nd.estimator.export``: serving input receivers and the outputs a model
serves, as ``tf.estimator.export``."""

from __future__ import annotations

from nbdist.estimator.export.export import (
    ServingInputReceiver,
    TensorServingInputReceiver,
    build_parsing_serving_input_receiver_fn,
    build_raw_serving_input_receiver_fn,
)
from nbdist.estimator.export.export_output import (
    ClassificationOutput,
    ExportOutput,
    PredictOutput,
    RegressionOutput,
)

__all__ = [
    "ClassificationOutput", "ExportOutput", "PredictOutput", "RegressionOutput",
    "ServingInputReceiver", "TensorServingInputReceiver",
    "build_parsing_serving_input_receiver_fn", "build_raw_serving_input_receiver_fn",
]
