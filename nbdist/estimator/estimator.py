"""``Estimator`` (TF 1.15's ``estimator/estimator.py``): a ``model_fn`` trained,
evaluated, asked for predictions and exported as a SavedModel, each call in a
graph of its own, with the state between calls kept in checkpoints in
``model_dir``.

>>> import numpy as np, tempfile
>>> import nbdist as nd
>>> def model_fn(features, labels, mode):
...     w = nd.get_variable("w", [], initializer=nd.zeros_initializer())
...     pred = w * features["x"]
...     loss = nd.reduce_mean(nd.square(pred - labels))
...     step = nd.train.get_global_step()
...     train_op = nd.train.GradientDescentOptimizer(0.1).minimize(loss, step)
...     return nd.estimator.EstimatorSpec(mode, {"y": pred}, loss, train_op)
>>> def input_fn():
...     x = np.arange(1.0, 5.0, dtype=np.float32)
...     return nd.data.Dataset.from_tensor_slices(({"x": x}, 3 * x)).batch(4)
>>> est = nd.estimator.Estimator(model_fn, tempfile.mkdtemp())
>>> est = est.train(lambda: input_fn().repeat(), max_steps=50)
>>> round(float(est.get_variable_value("w")), 3)
3.0
>>> int(est.evaluate(input_fn)["global_step"])
50
"""

from __future__ import annotations

import copy
import logging
import os
import shutil
import tempfile

import numpy as np

from nbdist import errors
from nbdist.estimator import run_config as run_config_lib
from nbdist.estimator import util
from nbdist.estimator.export import export as export_lib
from nbdist.estimator.model_fn import (
    EXPORT_TAG_MAP,
    LOSS_METRIC_KEY,
    EstimatorSpec,
    ModeKeys,
    fn_args,
    validate_hooks,
    verify_model_fn_args,
)
from nbdist.estimator.warm_starting_util import default_warm_start_settings, warm_start
from nbdist.framework import ops
from nbdist.framework.ops import GraphKeys
from nbdist.metrics import mean as metric_mean
from nbdist.ops import summary_ops
from nbdist.ops.control_flow_ops import group
from nbdist.proto import summary_pb2
from nbdist.proto.config_pb2 import ConfigProto
from nbdist.runtime.session import Session
from nbdist.saved_model.builder import SavedModelBuilder
from nbdist.train import checkpoint_utils, hooks as hooks_lib, training_util
from nbdist.train.device_setter import STANDARD_PS_OPS, replica_device_setter
from nbdist.train.monitored_session import (
    ChiefSessionCreator,
    MonitoredSession,
    MonitoredTrainingSession,
)
from nbdist.train.saver import Saver, SaverDef, latest_checkpoint
from nbdist.train.scaffold import Scaffold
from nbdist.train.summary_writer import FileWriterCache

__all__ = ["Estimator"]

_log = logging.getLogger("nbdist.estimator")


class Estimator:
    """Trains, evaluates, predicts with and exports the model of ``model_fn``.

    ``model_fn(features, labels, mode, params, config)`` (any subset beginning
    with ``features``) returns an ``EstimatorSpec``. ``input_fn`` returns a
    ``nd.data.Dataset`` of ``(features, labels)`` (of features alone for
    ``predict``) or the tensors themselves. ``config`` is a ``RunConfig``; its
    ``TF_CONFIG`` cluster places variables on the ps tasks through
    ``replica_device_setter`` and its ``master`` is the session target.
    ``warm_start_from`` is a checkpoint, a SavedModel directory or a
    ``WarmStartSettings``. See the module docstring for a full example.
    """

    def __init__(self, model_fn, model_dir=None, config=None, params=None,
                 warm_start_from=None):
        self._config = _config_with_model_dir(config, model_dir)
        self._model_dir = self._config.model_dir
        self._session_config = self._config.session_config
        self._device_fn = self._config.device_fn or _replica_device_setter(
            self._config)
        if model_fn is None:
            raise ValueError("model_fn must be provided to Estimator.")
        verify_model_fn_args(model_fn, params)
        self._model_fn = model_fn
        self._params = copy.deepcopy(params or {})
        self._warm_start_settings = default_warm_start_settings(warm_start_from)

    model_dir = property(lambda self: self._model_dir)
    config = property(lambda self: copy.deepcopy(self._config))
    params = property(lambda self: copy.deepcopy(self._params))

    @property
    def model_fn(self):
        """The ``model_fn``, called with every argument by keyword."""

        def public_model_fn(features, labels, mode, config):
            return self._call_model_fn(features, labels, mode, config)

        return public_model_fn

    # -- checkpoints --------------------------------------------------------------
    def get_variable_value(self, name):
        """The value of variable ``name`` in the latest checkpoint."""
        _check_checkpoint_available(self.model_dir)
        return checkpoint_utils.load_variable(self.model_dir, name)

    def get_variable_names(self):
        """The names of the variables in the latest checkpoint."""
        _check_checkpoint_available(self.model_dir)
        return [name for name, _ in checkpoint_utils.list_variables(self.model_dir)]

    def latest_checkpoint(self):
        """The path of the latest checkpoint in ``model_dir``, or None."""
        return latest_checkpoint(self.model_dir)

    def eval_dir(self, name=None):
        """Where ``evaluate(name=...)`` writes its summaries."""
        return os.path.join(self._model_dir, "eval_" + name if name else "eval")

    # -- train ----------------------------------------------------------------------
    def train(self, input_fn, hooks=None, steps=None, max_steps=None,
              saving_listeners=None):
        """Trains for ``steps`` more steps, or up to global step ``max_steps``
        (returns at once if the checkpoint is there already), or until
        ``input_fn``'s data ends. Returns ``self``."""
        if self._config.task_type in (run_config_lib.TaskType.EVALUATOR,
                                      run_config_lib.TaskType.PS):
            raise ValueError(
                "Train has been called wrong configuration. Please use "
                "tf.estimator.train_and_evaluate which calls proper API according "
                f"to given configuration. Current configuration: {self._config}.")
        if steps is not None and max_steps is not None:
            raise ValueError("Can not provide both steps and max_steps.")
        if steps is not None and steps <= 0:
            raise ValueError(f"Must specify steps > 0, given: {steps}")
        if max_steps is not None and max_steps <= 0:
            raise ValueError(f"Must specify max_steps > 0, given: {max_steps}")
        if max_steps is not None:
            if max_steps <= _global_step_in_checkpoint(self._model_dir):
                _log.info("Skipping training since max_steps has already saved.")
                return self
        hooks = _check_hooks_type(hooks)
        if steps is not None or max_steps is not None:
            hooks.append(hooks_lib.StopAtStepHook(steps, max_steps))
        listeners = _check_listeners_type(saving_listeners)
        loss = self._train_model(input_fn, hooks, listeners)
        _log.info("Loss for final step: %s.", loss)
        return self

    def _train_model(self, input_fn, hooks, saving_listeners):
        worker_hooks = []
        with ops.Graph().as_default() as g, g.device(self._device_fn):
            _, _, input_hooks, spec = self._model_in_graph(g, input_fn,
                                                           ModeKeys.TRAIN)
            worker_hooks.extend(input_hooks)
            return self._train_with_estimator_spec(
                spec, worker_hooks, hooks, training_util.get_global_step(g),
                saving_listeners)

    def _train_with_estimator_spec(self, spec, worker_hooks, hooks, global_step,
                                   saving_listeners):
        if self._warm_start_settings:
            _log.info("Warm-starting with WarmStartSettings: %s",
                      self._warm_start_settings)
            warm_start(*self._warm_start_settings)
        summaries = ops.get_collection(GraphKeys.SUMMARIES)
        if not any(x.op.name == "loss" for x in summaries):
            summary_ops.scalar("loss", spec.loss)
        ops.add_to_collection(GraphKeys.LOSSES, spec.loss)
        worker_hooks.extend(hooks)
        worker_hooks.append(hooks_lib.NanTensorHook(spec.loss))
        if self._config.log_step_count_steps is not None:
            worker_hooks.append(hooks_lib.LoggingTensorHook(
                {"loss": spec.loss, "step": global_step},
                every_n_iter=self._config.log_step_count_steps))
        worker_hooks.extend(spec.training_hooks)
        if not (spec.scaffold.saver or ops.get_collection(GraphKeys.SAVERS)):
            ops.add_to_collection(GraphKeys.SAVERS, Saver(
                sharded=True, max_to_keep=self._config.keep_checkpoint_max,
                keep_checkpoint_every_n_hours=(
                    self._config.keep_checkpoint_every_n_hours),
                defer_build=True, save_relative_paths=True,
                write_version=SaverDef.V2))  # TF's own checkpoint format
        chief_hooks = []
        saver_hooks = [h for h in worker_hooks + list(spec.training_chief_hooks)
                       if isinstance(h, hooks_lib.CheckpointSaverHook)]
        if (self._config.save_checkpoints_secs or
                self._config.save_checkpoints_steps) and not saver_hooks:
            chief_hooks = [hooks_lib.CheckpointSaverHook(
                self._model_dir, save_secs=self._config.save_checkpoints_secs,
                save_steps=self._config.save_checkpoints_steps,
                scaffold=spec.scaffold, listeners=list(saving_listeners))]
        elif saving_listeners:
            if not saver_hooks:
                raise ValueError(
                    "There should be a CheckpointSaverHook to use saving_listeners. "
                    "Please set one of the RunConfig.save_checkpoints_steps or "
                    "RunConfig.save_checkpoints_secs.")
            # The model's own saver hook (TF picks the first) hears them too.
            for listener in saving_listeners:
                if listener not in saver_hooks[0]._listeners:
                    saver_hooks[0]._listeners.append(listener)
        with MonitoredTrainingSession(
                master=self._config.master, is_chief=self._config.is_chief,
                checkpoint_dir=self._model_dir, scaffold=spec.scaffold,
                hooks=worker_hooks,
                chief_only_hooks=tuple(chief_hooks) + tuple(spec.training_chief_hooks),
                save_checkpoint_secs=0,  # the CheckpointSaverHook above saves
                save_summaries_steps=self._config.save_summary_steps,
                config=self._session_config,
                max_wait_secs=self._config.session_creation_timeout_secs,
                log_step_count_steps=self._config.log_step_count_steps) as sess:
            loss = None
            while not sess.should_stop():
                _, loss = sess.run([spec.train_op, spec.loss])
        if loss is None:
            _log.warning("Training with estimator made no steps. Perhaps input is "
                         "empty or misspecified.")
        return loss

    # -- evaluate -------------------------------------------------------------------
    def evaluate(self, input_fn, steps=None, hooks=None, checkpoint_path=None,
                 name=None):
        """Evaluates the model of ``checkpoint_path`` (default: the latest) on
        ``steps`` batches (default: until ``input_fn``'s data ends). Returns the
        ``eval_metric_ops`` values, ``loss`` (mean over batches) and
        ``global_step``; writes them as summaries to ``eval_dir(name)``."""
        hooks = _check_hooks_type(hooks) + self._convert_eval_steps_to_hooks(steps)
        checkpoint_path = self._checkpoint_or_latest(checkpoint_path, "evaluate")
        with ops.Graph().as_default():
            scaffold, update_op, eval_dict, all_hooks = self._evaluate_build_graph(
                input_fn, hooks, checkpoint_path)
            return self._evaluate_run(checkpoint_path, scaffold, update_op,
                                      eval_dict, all_hooks, self.eval_dir(name))

    def _convert_eval_steps_to_hooks(self, steps):
        if steps is None:
            return []
        if steps <= 0:
            raise ValueError(f"Must specify steps > 0, given: {steps}")
        return [util.StopAfterNEvalsHook(steps)]

    def _evaluate_build_graph(self, input_fn, hooks, checkpoint_path):
        """(scaffold, update op, {name: metric value}, hooks) of an evaluation,
        built in the default graph."""
        g = ops.get_default_graph()
        features, labels, input_hooks, spec = self._model_in_graph(
            g, input_fn, ModeKeys.EVAL)
        metric_ops = _verify_and_create_loss_metric(spec.eval_metric_ops, spec.loss)
        update_op = group(*[op for _, op in metric_ops.values()])
        eval_dict = {k: value for k, (value, _) in metric_ops.items()}
        self._maybe_warm_start(checkpoint_path)
        if GraphKeys.GLOBAL_STEP in eval_dict:
            raise ValueError(
                "Metric with name `global_step` is not allowed, because "
                "Estimator already defines a default metric with the same name.")
        eval_dict[GraphKeys.GLOBAL_STEP] = training_util.get_global_step(g)
        all_hooks = input_hooks + list(hooks) + list(spec.evaluation_hooks)
        return spec.scaffold, update_op, eval_dict, all_hooks

    def _evaluate_run(self, checkpoint_path, scaffold, update_op, eval_dict,
                      all_hooks, output_dir):
        """Runs ``update_op`` until the input ends (or a hook stops), then
        returns the metric values, also written as summaries to ``output_dir``."""
        final_ops = hooks_lib.FinalOpsHook(eval_dict)
        creator = ChiefSessionCreator(
            scaffold=scaffold, checkpoint_filename_with_path=checkpoint_path,
            master=self._config.evaluation_master, config=self._session_config)
        with MonitoredSession(session_creator=creator,
                              hooks=list(all_hooks) + [final_ops]) as sess:
            while not sess.should_stop():
                sess.run(update_op)
        results = final_ops.final_ops_values
        _write_dict_to_summary(output_dir, results, results[GraphKeys.GLOBAL_STEP])
        return results

    # -- predict --------------------------------------------------------------------
    def predict(self, input_fn, predict_keys=None, hooks=None, checkpoint_path=None,
                yield_single_examples=True):
        """Yields the model's predictions for ``input_fn``'s features until its
        data ends: one dict (or value) per example, or per batch without
        ``yield_single_examples``; ``predict_keys`` picks prediction keys."""
        hooks = _check_hooks_type(hooks)
        checkpoint_path = self._checkpoint_or_latest(checkpoint_path, "predict")
        with ops.Graph().as_default() as g:
            _, _, input_hooks, spec = self._model_in_graph(g, input_fn,
                                                           ModeKeys.PREDICT)
            self._maybe_warm_start(checkpoint_path)
            predictions = _extract_keys(spec.predictions, predict_keys)
            creator = ChiefSessionCreator(
                checkpoint_filename_with_path=checkpoint_path,
                master=self._config.master, scaffold=spec.scaffold,
                config=self._session_config)
            all_hooks = input_hooks + hooks + list(spec.prediction_hooks)
            with MonitoredSession(session_creator=creator, hooks=all_hooks) as sess:
                while not sess.should_stop():
                    values = sess.run(predictions)
                    if not yield_single_examples:
                        yield values
                    elif not isinstance(predictions, dict):
                        yield from values
                    else:
                        for i in range(_batch_length(values)):
                            yield {key: value[i] for key, value in values.items()}

    # -- export ---------------------------------------------------------------------
    def export_saved_model(self, export_dir_base, serving_input_receiver_fn,
                           assets_extra=None, as_text=False, checkpoint_path=None,
                           experimental_mode=ModeKeys.PREDICT):
        """Writes the serving graph (``serving_input_receiver_fn``'s receiver
        into ``model_fn`` in ``PREDICT`` mode) with the variables of
        ``checkpoint_path`` (default: the latest) as a SavedModel in a new
        ``<export_dir_base>/<timestamp>`` directory; returns its path (bytes)."""
        if not serving_input_receiver_fn:
            raise ValueError("An input_receiver_fn must be defined.")
        if not checkpoint_path:
            checkpoint_path = latest_checkpoint(self._model_dir)
        if not checkpoint_path:
            raise ValueError(f"Couldn't find trained model at {self._model_dir}.")
        export_dir = export_lib.get_timestamped_export_dir(export_dir_base)
        temp_export_dir = export_lib.get_temp_export_dir(export_dir)
        builder = SavedModelBuilder(os.fsdecode(temp_export_dir))
        self._add_meta_graph_for_mode(builder, serving_input_receiver_fn,
                                      checkpoint_path, experimental_mode)
        builder.save(as_text)
        if assets_extra:
            extra_dir = os.path.join(os.fsdecode(temp_export_dir), "assets.extra")
            for dest_relative, source in assets_extra.items():
                dest = os.path.join(extra_dir, dest_relative)
                os.makedirs(os.path.dirname(dest), exist_ok=True)
                shutil.copyfile(source, dest)
        os.rename(temp_export_dir, export_dir)
        return export_dir

    def export_savedmodel(self, export_dir_base, serving_input_receiver_fn,
                          assets_extra=None, as_text=False, checkpoint_path=None,
                          strip_default_attrs=False):
        """The TF 1.x name of ``export_saved_model``."""
        del strip_default_attrs
        return self.export_saved_model(export_dir_base, serving_input_receiver_fn,
                                       assets_extra, as_text, checkpoint_path)

    def _add_meta_graph_for_mode(self, builder, receiver_fn, checkpoint_path, mode):
        with ops.Graph().as_default() as g:
            self._create_and_assert_global_step(g)
            ops.set_random_seed(self._config.tf_random_seed)
            receiver = receiver_fn()
            spec = self._call_model_fn(receiver.features,
                                       getattr(receiver, "labels", None), mode,
                                       self._config)
            signature_def_map = export_lib.build_all_signature_defs(
                receiver.receiver_tensors, spec.export_outputs,
                getattr(receiver, "receiver_tensors_alternatives", None))
            local_init_op = (spec.scaffold.local_init_op or
                             Scaffold.default_local_init_op())
            graph_saver = spec.scaffold.saver or Saver(sharded=True,
                                                     write_version=SaverDef.V2)
            with Session(config=self._session_config) as session:
                try:
                    graph_saver.restore(session, checkpoint_path)
                except errors.NotFoundError as e:
                    raise ValueError(
                        "Could not load all requested variables from checkpoint. "
                        "Please make sure your model_fn does not expect variables "
                        "that were not saved in the checkpoint.\n\nEncountered "
                        f"error with mode `{mode}` while restoring checkpoint from: "
                        f"`{checkpoint_path}`. Full Traceback:\n\n{e}") from e
                builder.add_meta_graph_and_variables(
                    session, EXPORT_TAG_MAP[mode], signature_def_map=signature_def_map,
                    main_op=local_init_op, saver=graph_saver)

    # -- calling the user's functions ----------------------------------------------
    def _checkpoint_or_latest(self, checkpoint_path, what):
        checkpoint_path = checkpoint_path or latest_checkpoint(self._model_dir)
        if not checkpoint_path:
            _log.info("Could not find trained model in model_dir: %s, running "
                      "initialization to %s.", self._model_dir, what)
        return checkpoint_path

    def _model_in_graph(self, graph, input_fn, mode):
        """(features, labels, input hooks, spec): the model of ``mode`` in ``graph``
        (the default graph), with its global step and ``tf_random_seed``."""
        ops.set_random_seed(self._config.tf_random_seed)
        self._create_and_assert_global_step(graph)
        features, labels, input_hooks = self._input(input_fn, mode)
        if mode == ModeKeys.PREDICT:
            labels = None  # predict hands the model features alone
        spec = self._call_model_fn(features, labels, mode, self._config)
        return features, labels, input_hooks, spec

    def _input(self, input_fn, mode):
        """(features, labels, input hooks) of ``input_fn`` called in ``mode``."""
        args = fn_args(input_fn)
        kwargs = {}
        if "mode" in args:
            kwargs["mode"] = mode
        if "params" in args:
            kwargs["params"] = self.params
        if "config" in args:
            kwargs["config"] = self.config
        with ops.device("/cpu:0"):
            return util.parse_input_fn_result(input_fn(**kwargs))

    def _call_model_fn(self, features, labels, mode, config):
        args = fn_args(self._model_fn)
        kwargs = {}
        if "labels" in args:
            kwargs["labels"] = labels
        elif labels is not None:
            raise ValueError(
                "model_fn does not take labels, but input_fn returns labels.")
        if "mode" in args:
            kwargs["mode"] = mode
        if "params" in args:
            kwargs["params"] = self.params
        if "config" in args:
            kwargs["config"] = config
        spec = self._model_fn(features=features, **kwargs)
        if not isinstance(spec, EstimatorSpec):
            raise ValueError("model_fn should return an EstimatorSpec.")
        return spec

    def _create_and_assert_global_step(self, graph):
        step = training_util.create_global_step(graph)
        assert step is training_util.get_global_step(graph)
        assert step.dtype.is_integer
        return step

    def _maybe_warm_start(self, checkpoint_path):
        if not checkpoint_path and self._warm_start_settings:
            warm_start(*self._warm_start_settings)


def _config_with_model_dir(config, model_dir):
    if config is None:
        config = run_config_lib.RunConfig()
    if not isinstance(config, run_config_lib.RunConfig):
        raise ValueError(
            f"config must be an instance of `RunConfig`, but provided {config}.")
    if config.session_config is None:
        config = config.replace(session_config=ConfigProto(allow_soft_placement=True))
    model_dir = os.fspath(model_dir) if model_dir is not None else None
    if model_dir is not None and config.model_dir not in (None, model_dir):
        raise ValueError(
            "`model_dir` are set both in constructor and `RunConfig`, but with "
            f"different values. In constructor: '{model_dir}', in `RunConfig`: "
            f"'{config.model_dir}' ")
    if model_dir:
        return config.replace(model_dir=model_dir)
    if config.model_dir is None:
        model_dir = tempfile.mkdtemp()
        _log.warning("Using temporary folder as model directory: %s", model_dir)
        return config.replace(model_dir=model_dir)
    return config


def _replica_device_setter(config):
    """TF's default device function: variables round-robin on the ps tasks."""
    if config.num_ps_replicas <= 0:
        return None
    worker_device = (f"/job:{config.task_type}/task:{config.task_id}"
                     if config.task_type else "/job:worker")
    return replica_device_setter(
        ps_tasks=config.num_ps_replicas, worker_device=worker_device,
        merge_devices=True, ps_ops=list(STANDARD_PS_OPS),
        cluster=config.cluster_spec)


def _check_checkpoint_available(model_dir):
    if not latest_checkpoint(model_dir):
        raise ValueError(f"Could not find trained model in model_dir: {model_dir}.")


def _check_hooks_type(hooks):
    return list(validate_hooks(hooks, "Hooks must be a SessionRunHook, given: {}"))


def _check_listeners_type(saving_listeners):
    listeners = list(saving_listeners or [])
    for listener in listeners:
        if not isinstance(listener, hooks_lib.CheckpointSaverListener):
            raise TypeError("saving_listeners must be a list of "
                            f"CheckpointSaverListener, given: {listener}")
    return listeners


def _global_step_in_checkpoint(checkpoint_dir) -> int:
    try:
        reader = checkpoint_utils.load_checkpoint(checkpoint_dir)
        return int(reader.get_tensor(GraphKeys.GLOBAL_STEP))
    except (ValueError, errors.NotFoundError):
        return 0


def _verify_and_create_loss_metric(eval_metric_ops, loss):
    if LOSS_METRIC_KEY in eval_metric_ops:
        raise ValueError(
            f'Metric with name "{LOSS_METRIC_KEY}" is not allowed, because '
            "Estimator already defines a default metric with the same name.")
    metric_ops = dict(eval_metric_ops)
    metric_ops[LOSS_METRIC_KEY] = metric_mean(loss)
    return metric_ops


def _extract_keys(predictions, predict_keys):
    if not predict_keys:
        return predictions
    if not isinstance(predictions, dict):
        raise ValueError(
            "predict_keys argument is not valid in case of non-dict predictions.")
    existing = predictions.keys()
    picked = {k: v for k, v in predictions.items() if k in predict_keys}
    if not picked:
        raise ValueError(f"Expected to run at least one output from {existing}, "
                         f"provided {predict_keys}.")
    return picked


def _batch_length(values):
    length = None
    for key, value in values.items():
        length = length or value.shape[0]
        if value.shape[0] != length:
            raise ValueError("Batch length of predictions should be same. "
                             f"{key} has different batch length than others.")
    return length


def _write_dict_to_summary(output_dir, dictionary, current_global_step):
    """The float and int metrics as scalar summaries at the global step."""
    _log.info("Saving dict for global step %d: %s", current_global_step,
              ", ".join(f"{k} = {v}" for k, v in sorted(dictionary.items())
                        if not isinstance(v, bytes)))
    summary = summary_pb2.Summary()
    for key, value in dictionary.items():
        if value is None or key == GraphKeys.GLOBAL_STEP:
            continue
        if isinstance(value, (float, int, np.floating, np.integer)):
            summary.value.add(tag=key, simple_value=float(value))
        elif isinstance(value, bytes):
            try:
                parsed = summary_pb2.Summary.FromString(value)
            except Exception:  # noqa: BLE001 - TF skips a string it cannot parse
                _log.warning("Skipping summary for %s, cannot parse string to "
                             "Summary.", key)
                continue
            for i, v in enumerate(parsed.value):
                v.tag = f"{key}/{i}"
            summary.value.extend(parsed.value)
        else:
            _log.warning("Skipping summary for %s, must be a float, np.float32, "
                         "np.int64, np.int32 or int or a serialized string of "
                         "Summary.", key)
    writer = FileWriterCache.get(output_dir)
    writer.add_summary(summary, current_global_step)
    writer.flush()
