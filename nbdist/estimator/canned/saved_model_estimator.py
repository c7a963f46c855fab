"""``SavedModelEstimator`` (TF 1.15's ``tf.estimator.experimental``): an
``Estimator`` whose model is the graph of a SavedModel that an Estimator
exported.

Each mode's graph is the SavedModel's ``MetaGraphDef`` of that mode's tags
(``serve`` for ``PREDICT``), imported into the Estimator's graph with its
``serving_default`` signature's inputs replaced by the input function's
features of the same keys; the signature's outputs are the predictions. The
variables come from the SavedModel until ``model_dir`` has a checkpoint of
its own. Only ``predict`` is available: the train and eval graphs that TF's
``experimental_export_all_saved_models`` adds are not read, and
``train``/``evaluate`` raise naming the missing mode.
"""

from __future__ import annotations

import os

from nbdist.estimator.estimator import Estimator
from nbdist.estimator.export.export import wrap_and_check_input_tensors
from nbdist.estimator.model_fn import EXPORT_TAG_MAP, EstimatorSpec, ModeKeys
from nbdist.framework.ops import get_default_graph
from nbdist.framework.tensor_shape import TensorShape
from nbdist.saved_model import constants
from nbdist.saved_model.loader import read_saved_model
from nbdist.saved_model.signature_constants import DEFAULT_SERVING_SIGNATURE_DEF_KEY
from nbdist.train import training_util
from nbdist.train.saver import Saver, import_meta_graph, scoped_var_list
from nbdist.train.scaffold import Scaffold

__all__ = ["SavedModelEstimator"]

_SCOPE = "saved_model"  # the imported graph's names, apart from the input's


class SavedModelEstimator(Estimator):
    """An ``Estimator`` of the model in ``saved_model_dir`` (written by
    ``Estimator.export_saved_model``); new checkpoints go to ``model_dir``.

    >>> import tempfile, numpy as np, nbdist as nd
    >>> fc = nd.feature_column
    >>> cols = [fc.numeric_column("x")]
    >>> est = nd.estimator.LinearRegressor(cols, model_dir=tempfile.mkdtemp())
    >>> est.train(lambda: ({"x": [[1.0], [2.0]]}, [[2.0], [4.0]]), steps=5)
    <...LinearRegressor object at ...>
    >>> path = est.export_saved_model(tempfile.mkdtemp(),
    ...     nd.estimator.export.build_parsing_serving_input_receiver_fn(
    ...         fc.make_parse_example_spec(cols)))
    >>> example = nd.train.Example(features=nd.train.Features(feature={
    ...     "x": nd.train.Feature(float_list=nd.train.FloatList(value=[3.0]))}))
    >>> loaded = nd.estimator.experimental.SavedModelEstimator(path)
    >>> got = next(loaded.predict(
    ...     lambda: {"inputs": nd.constant([example.SerializeToString()])}))
    >>> want = next(est.predict(lambda: {"x": np.array([[3.0]], np.float32)}))
    >>> bool(np.allclose(got["outputs"], want["predictions"]))
    True
    """

    def __init__(self, saved_model_dir, model_dir=None):
        super().__init__(model_fn=self._model_fn_from_saved_model,
                         model_dir=model_dir)
        self.saved_model_dir = os.fsdecode(saved_model_dir)
        self._saved_model = read_saved_model(self.saved_model_dir)
        # Only the serving graph: TF's train and eval graphs (of
        # experimental_export_all_saved_models) are not read.
        self._available_modes = [ModeKeys.PREDICT] if self._signature_def(
            ModeKeys.PREDICT) is not None else []

    def _meta_graph(self, mode):
        tags = set(EXPORT_TAG_MAP[mode])
        return next((mg for mg in self._saved_model.meta_graphs
                     if set(mg.meta_info_def.tags) == tags), None)

    def _signature_def(self, mode):
        mg = self._meta_graph(mode)
        key = DEFAULT_SERVING_SIGNATURE_DEF_KEY if mode == ModeKeys.PREDICT else mode
        return None if mg is None or key not in mg.signature_def else (
            mg.signature_def[key])

    def _create_and_assert_global_step(self, graph):
        # The SavedModel's graph brings its global step.
        return None

    def latest_checkpoint(self):
        """The latest checkpoint of ``model_dir``, else the SavedModel's
        variables."""
        return super().latest_checkpoint() or _saved_model_variables(
            self.saved_model_dir)

    def _model_fn_from_saved_model(self, features, labels, mode):
        if mode not in self._available_modes:
            raise RuntimeError(
                f"{mode} mode is not available in the SavedModel. Use "
                "saved_model_cli to check that the Metagraph for this mode has "
                "been exported.")
        g = get_default_graph()
        if training_util.get_global_step(g) is not None:
            raise RuntimeError(
                "Graph must not contain a global step tensor before the SavedModel "
                "is loaded. Please make sure that the input function does not "
                "create a global step.")
        signature = self._signature_def(mode)
        meta_graph = self._meta_graph(mode)
        saver = import_meta_graph(meta_graph, import_scope=_SCOPE,
                                  input_map=_input_map(signature, features, labels))
        if not meta_graph.saver_def.restore_op_name:
            # The checkpoint names the variables without the scope.
            saver = Saver(var_list=scoped_var_list(_SCOPE))
        outputs = {key: g.get_tensor_by_name(f"{_SCOPE}/{info.name}")
                   for key, info in signature.outputs.items()}
        training_util.assert_global_step(training_util.get_global_step(g))
        restore_saved_model = None
        if not super().latest_checkpoint():
            variables = _saved_model_variables(self.saved_model_dir)

            def restore_saved_model(scaffold, session):
                saver.restore(session, variables)

        scaffold = Scaffold(saver=saver, init_fn=restore_saved_model,
                            local_init_op=_main_op(g, meta_graph))
        return EstimatorSpec(mode, predictions=outputs, scaffold=scaffold)


def _saved_model_variables(saved_model_dir):
    prefix = os.path.join(saved_model_dir, constants.VARIABLES_DIRECTORY,
                          constants.VARIABLES_FILENAME)
    if not os.path.isfile(prefix + ".index"):
        raise ValueError("Directory provided has an invalid SavedModel format: "
                         f"{saved_model_dir}")
    return prefix


def _main_op(graph, meta_graph):
    for key in (constants.MAIN_OP_KEY, constants.LEGACY_INIT_OP_KEY):
        cd = meta_graph.collection_def.get(key)
        if cd is not None and cd.node_list.value:
            return graph.get_operation_by_name(
                f"{_SCOPE}/{cd.node_list.value[0].split(':')[0]}")
    return None


def _input_map(signature, features, labels):
    """The signature's input tensors (by name) -> the features (and labels)
    of the same key, checked for dtype and shape."""
    given = dict(wrap_and_check_input_tensors(features, "feature"))
    if labels is not None:
        given.update(wrap_and_check_input_tensors(labels, "label"))
    input_map = {}
    for key, info in signature.inputs.items():
        if key not in given:
            raise ValueError(f"Key '{key}' not found in features or labels passed "
                             f"in to the model function. All required keys: "
                             f"{sorted(signature.inputs)}")
        tensor = given[key]
        dtype = tensor.dtype.base_dtype
        if dtype.as_datatype_enum != info.dtype:
            raise ValueError(f"Tensor {key} has dtype {dtype.name}, but the "
                             "SavedModel's signature expects another "
                             f"(enum {info.dtype})")
        shape = TensorShape(None if info.tensor_shape.unknown_rank else [
            d.size if d.size >= 0 else None for d in info.tensor_shape.dim])
        if not tensor.shape.is_compatible_with(shape):
            raise ValueError(f"Tensor {key} has shape {tensor.shape}, but the "
                             f"SavedModel's signature expects {shape}")
        input_map[info.name] = tensor
    return input_map
