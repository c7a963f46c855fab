"""``nd.saved_model``: TensorFlow's SavedModel format, written and read
(``tf.compat.v1.saved_model``): ``builder.SavedModelBuilder``,
``simple_save``, ``loader.load``, signatures (``signature_def_utils``,
``utils.build_tensor_info``) and the standard keys and tags.
"""

from __future__ import annotations

from nbdist.saved_model import (
    builder,
    constants,
    loader,
    signature_constants,
    signature_def_utils,
    tag_constants,
    utils,
)
from nbdist.saved_model.builder import SavedModelBuilder as Builder
from nbdist.saved_model.loader import load, maybe_saved_model_directory
from nbdist.saved_model.signature_constants import (
    CLASSIFY_METHOD_NAME,
    DEFAULT_SERVING_SIGNATURE_DEF_KEY,
    PREDICT_METHOD_NAME,
    REGRESS_METHOD_NAME,
)
from nbdist.saved_model.signature_def_utils import (
    build_signature_def,
    is_valid_signature,
    predict_signature_def,
)
from nbdist.saved_model.tag_constants import EVAL, GPU, SERVING, TPU, TRAINING
from nbdist.saved_model.utils import build_tensor_info, get_tensor_from_tensor_info

contains_saved_model = maybe_saved_model_directory


def simple_save(session, export_dir, inputs, outputs, legacy_init_op=None):
    """Saves a serving SavedModel of ``session``: tag ``serve``, signature
    ``serving_default`` predicting tensor dict ``outputs`` from ``inputs``."""
    signature_def_map = {
        signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY:
            predict_signature_def(inputs, outputs)}
    b = builder.SavedModelBuilder(export_dir)
    b.add_meta_graph_and_variables(
        session, tags=[tag_constants.SERVING], signature_def_map=signature_def_map,
        main_op=legacy_init_op, clear_devices=True)
    b.save()


__all__ = [
    "CLASSIFY_METHOD_NAME",
    "DEFAULT_SERVING_SIGNATURE_DEF_KEY",
    "EVAL",
    "GPU",
    "PREDICT_METHOD_NAME",
    "REGRESS_METHOD_NAME",
    "SERVING",
    "TPU",
    "TRAINING",
    "Builder",
    "build_signature_def",
    "build_tensor_info",
    "builder",
    "constants",
    "contains_saved_model",
    "get_tensor_from_tensor_info",
    "is_valid_signature",
    "load",
    "loader",
    "maybe_saved_model_directory",
    "predict_signature_def",
    "signature_constants",
    "signature_def_utils",
    "simple_save",
    "tag_constants",
    "utils",
]
