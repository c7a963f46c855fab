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
    classification_signature_def,
    is_valid_signature,
    predict_signature_def,
    regression_signature_def,
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

# TF's tf.compat.v1.saved_model also names every constant at its top.
from nbdist.saved_model.constants import (  # noqa: E402
    ASSETS_DIRECTORY,
    ASSETS_KEY,
    LEGACY_INIT_OP_KEY,
    MAIN_OP_KEY,
    SAVED_MODEL_FILENAME_PB,
    SAVED_MODEL_FILENAME_PBTXT,
    SAVED_MODEL_SCHEMA_VERSION,
    VARIABLES_DIRECTORY,
    VARIABLES_FILENAME,
)
from nbdist.saved_model.signature_constants import (  # noqa: E402
    CLASSIFY_INPUTS,
    CLASSIFY_OUTPUT_CLASSES,
    CLASSIFY_OUTPUT_SCORES,
    PREDICT_INPUTS,
    PREDICT_OUTPUTS,
    REGRESS_INPUTS,
    REGRESS_OUTPUTS,
)

DEBUG_DIRECTORY = "debug"
DEBUG_INFO_FILENAME_PB = "saved_model_debug_info.pb"


def main_op_with_restore(restore_op_name):
    """TF1's main op for a SavedModel restored by ``restore_op_name``: the
    local-variable and table initializers, run after the restore op."""
    from nbdist.framework.ops import control_dependencies, get_default_graph
    from nbdist.lookup import tables_initializer
    from nbdist.ops.control_flow_ops import group
    from nbdist.ops.variable_collections import (local_variables,
                                                 variables_initializer)

    restore = get_default_graph().as_graph_element(restore_op_name)
    with control_dependencies([restore]):
        return group(variables_initializer(local_variables()), tables_initializer())


__all__ += ["ASSETS_DIRECTORY", "ASSETS_KEY", "CLASSIFY_INPUTS",
            "CLASSIFY_OUTPUT_CLASSES", "CLASSIFY_OUTPUT_SCORES", "DEBUG_DIRECTORY",
            "DEBUG_INFO_FILENAME_PB", "LEGACY_INIT_OP_KEY", "MAIN_OP_KEY",
            "PREDICT_INPUTS", "PREDICT_OUTPUTS", "REGRESS_INPUTS", "REGRESS_OUTPUTS",
            "SAVED_MODEL_FILENAME_PB", "SAVED_MODEL_FILENAME_PBTXT",
            "SAVED_MODEL_SCHEMA_VERSION", "VARIABLES_DIRECTORY", "VARIABLES_FILENAME",
            "classification_signature_def", "main_op_with_restore",
            "regression_signature_def"]

from nbdist.saved_model.save_options import Asset, SaveOptions  # noqa: E402

__all__ += ["Asset", "SaveOptions"]
