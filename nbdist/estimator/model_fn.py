"""What a ``model_fn`` returns (TF 1.15's ``estimator/model_fn.py``): ``ModeKeys``
and the validated ``EstimatorSpec``.

>>> import nbdist as nd
>>> with nd.Graph().as_default():
...     loss = nd.constant(1.0)
...     spec = nd.estimator.EstimatorSpec(nd.estimator.ModeKeys.EVAL, loss=loss)
>>> spec.mode, spec.eval_metric_ops, spec.training_hooks
('eval', {}, ())
"""

from __future__ import annotations

import collections
import inspect
import logging

from nbdist.estimator.export import export_output as export_output_lib
from nbdist.framework import ops
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops.array_ops_shape import reshape
from nbdist.ops.variables import Variable
from nbdist.saved_model import signature_constants, tag_constants
from nbdist.train.hooks import SessionRunHook
from nbdist.train.scaffold import Scaffold

__all__ = ["EstimatorSpec", "ModeKeys", "validate_hooks", "verify_model_fn_args"]


class ModeKeys:
    """The three modes a ``model_fn`` is called in: ``TRAIN``, ``EVAL``, ``PREDICT``.

    >>> import nbdist as nd
    >>> nd.estimator.ModeKeys.PREDICT
    'infer'
    """

    TRAIN = "train"
    EVAL = "eval"
    PREDICT = "infer"


LOSS_METRIC_KEY = "loss"
AVERAGE_LOSS_METRIC_KEY = "average_loss"

# The SavedModel tags each mode's graph is exported under.
EXPORT_TAG_MAP = {
    ModeKeys.PREDICT: [tag_constants.SERVING],
    ModeKeys.TRAIN: [tag_constants.TRAINING],
    ModeKeys.EVAL: [tag_constants.EVAL],
}

_FIELDS = ["mode", "predictions", "loss", "train_op", "eval_metric_ops",
           "export_outputs", "training_chief_hooks", "training_hooks", "scaffold",
           "evaluation_hooks", "prediction_hooks"]

_NOT_DEFAULT_GRAPH = (
    '{0} with "{1}" must be from the default graph. Possible causes of this '
    "error include: \n\n1) {0} was created outside the context of the default "
    "graph.\n\n2) The object passed through to EstimatorSpec was not created in "
    'the most recent call to "model_fn".')


class EstimatorSpec(collections.namedtuple("EstimatorSpec", _FIELDS)):
    """Ops and objects a ``model_fn`` returns to an ``Estimator``, validated.

    ``TRAIN`` needs ``loss`` and ``train_op``, ``EVAL`` needs ``loss`` and
    ``PREDICT`` needs ``predictions``; other fields are checked when given.
    ``eval_metric_ops`` maps names to ``(value, update_op)`` pairs; in ``PREDICT``
    mode ``export_outputs`` defaults to a ``PredictOutput`` of ``predictions``
    under ``serving_default``.

    >>> import nbdist as nd
    >>> with nd.Graph().as_default():
    ...     nd.estimator.EstimatorSpec(nd.estimator.ModeKeys.TRAIN,
    ...                                loss=nd.constant(1.0))
    Traceback (most recent call last):
    ...
    ValueError: Missing train_op.
    """

    def __new__(cls, mode, predictions=None, loss=None, train_op=None,
                eval_metric_ops=None, export_outputs=None,
                training_chief_hooks=None, training_hooks=None, scaffold=None,
                evaluation_hooks=None, prediction_hooks=None):
        train_op = _validate_train_op(train_op, mode)
        loss = _validate_loss(loss, mode)
        predictions = _validate_predictions(predictions, mode)
        if mode == ModeKeys.PREDICT:
            export_outputs = get_export_outputs(export_outputs, predictions)
        scaffold = scaffold or Scaffold()
        if not isinstance(scaffold, Scaffold):
            raise TypeError(
                f"scaffold must be tf.train.Scaffold. Given: {scaffold}")
        return super().__new__(
            cls, mode=mode, predictions=predictions, loss=loss, train_op=train_op,
            eval_metric_ops=_validate_eval_metric_ops(eval_metric_ops),
            export_outputs=export_outputs,
            training_chief_hooks=validate_hooks(training_chief_hooks),
            training_hooks=validate_hooks(training_hooks), scaffold=scaffold,
            evaluation_hooks=validate_hooks(evaluation_hooks),
            prediction_hooks=validate_hooks(prediction_hooks))

    def _replace(self, **kwds):
        """A new, validated spec with some fields replaced; ``mode`` stays."""
        if "mode" in kwds and self.mode != kwds["mode"]:
            raise ValueError("mode of EstimatorSpec cannot be changed.")
        return EstimatorSpec(*[kwds.pop(f, v) for f, v in zip(self._fields, self)])


def _is_tensor(x) -> bool:
    return isinstance(x, (ops.Tensor, Variable))


def _check_graph(value, what, name):
    if value.graph is not ops.get_default_graph():
        raise ValueError(_NOT_DEFAULT_GRAPH.format(what, name))


def _check_is_tensor(x, name):
    if not _is_tensor(x):
        raise TypeError(f"{name} must be Tensor, given: {x}")
    return x


def _validate_train_op(train_op, mode):
    if train_op is None:
        if mode == ModeKeys.TRAIN:
            raise ValueError("Missing train_op.")
        return None
    if not (isinstance(train_op, ops.Operation) or _is_tensor(train_op)):
        raise TypeError(f"train_op must be Operation or Tensor, given: {train_op}")
    _check_graph(train_op, "train_op", train_op.name)
    return train_op


def _validate_loss(loss, mode):
    if loss is None:
        if mode in (ModeKeys.TRAIN, ModeKeys.EVAL):
            raise ValueError("Missing loss.")
        return None
    loss = _check_is_tensor(loss, "loss")
    shape = loss.get_shape()
    if shape.num_elements() not in (None, 1):
        raise ValueError(f"Loss must be scalar, given: {loss}")
    _check_graph(loss, "loss", loss.name)
    if not shape.is_compatible_with(TensorShape([])):
        loss = reshape(loss, [])  # a [1]-shaped loss becomes the scalar TF makes
    return loss


def _validate_predictions(predictions, mode):
    if predictions is None:
        if mode == ModeKeys.PREDICT:
            raise ValueError("Missing predictions.")
        return {}
    if isinstance(predictions, dict):
        predictions = {k: _check_is_tensor(v, f"predictions[{k}]")
                       for k, v in predictions.items()}
        for key, value in predictions.items():
            _check_graph(value, "prediction values", f"{key}: {value.name}")
        return predictions
    predictions = _check_is_tensor(predictions, "predictions")
    _check_graph(predictions, "prediction values", predictions.name)
    return predictions


def validate_hooks(hooks, message="All hooks must be SessionRunHook instances, "
                   "given: {}"):
    """``hooks`` as a tuple, each checked to be a ``SessionRunHook`` (the
    ``TypeError`` in the wording of the caller's TF counterpart)."""
    hooks = tuple(hooks or [])
    for hook in hooks:
        if not isinstance(hook, SessionRunHook):
            raise TypeError(message.format(hook))
    return hooks


def _validate_eval_metric_ops(eval_metric_ops):
    if eval_metric_ops is None:
        return {}
    if not isinstance(eval_metric_ops, dict):
        raise TypeError(f"eval_metric_ops must be a dict, given: {eval_metric_ops}")
    for key, value in eval_metric_ops.items():
        if not isinstance(value, tuple) or len(value) != 2:
            raise TypeError(
                "Values of eval_metric_ops must be (metric_value, update_op) "
                f"tuples, given: {value} for key: {key}")
        for part in value:
            _check_graph(part, "eval_metric_ops", f"{key}: {part.name}")
    return eval_metric_ops


def get_export_outputs(export_outputs, predictions):
    """``export_outputs`` checked, or a default ``PredictOutput`` of
    ``predictions``; a single output is also served as ``serving_default``."""
    default_key = signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY
    if export_outputs is None:
        export_outputs = {default_key: export_output_lib.PredictOutput(predictions)}
    if not isinstance(export_outputs, dict):
        raise TypeError(f"export_outputs must be dict, given: {export_outputs}")
    for v in export_outputs.values():
        if not isinstance(v, export_output_lib.ExportOutput):
            raise TypeError("Values in export_outputs must be ExportOutput objects. "
                            f"Given: {export_outputs}")
    export_outputs = dict(export_outputs)
    if len(export_outputs) == 1:
        ((key, value),) = export_outputs.items()
        export_outputs.setdefault(default_key, value)
    if len(export_outputs) > 1 and default_key not in export_outputs:
        raise ValueError(
            "Multiple export_outputs were provided, but none of them is specified "
            "as the default.  Do this by naming one of them with "
            "signature_constants.DEFAULT_SERVING_SIGNATURE_DEF_KEY.")
    return export_outputs


_VALID_MODEL_FN_ARGS = {"features", "labels", "mode", "params", "self", "config"}


def fn_args(fn) -> tuple:
    """The argument names of ``fn`` (a function, bound method or partial)."""
    import functools

    if isinstance(fn, functools.partial):
        args = fn_args(fn.func)
        return tuple(a for a in args[len(fn.args):] if a not in (fn.keywords or {}))
    params = inspect.signature(fn).parameters
    return tuple(name for name, p in params.items()
                 if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


def verify_model_fn_args(model_fn, params):
    """TF's checks of a ``model_fn``'s argument names against ``params``."""
    args = set(fn_args(model_fn))
    if "features" not in args:
        raise ValueError(f"model_fn ({model_fn}) must include features argument.")
    if params is not None and "params" not in args:
        raise ValueError(f"model_fn ({model_fn}) does not include params argument, "
                         f"but params ({params}) is passed to Estimator.")
    if params is None and "params" in args:
        logging.getLogger("nbdist.estimator").warning(
            "Estimator's model_fn (%s) includes params argument, but params are "
            "not passed to Estimator.", model_fn)
    unexpected = sorted(args - _VALID_MODEL_FN_ARGS)
    if unexpected:
        raise ValueError(f"model_fn ({model_fn}) has following not expected args: "
                         f"{unexpected}")


def call_logit_fn(logit_fn, features, mode, params, config):
    """Calls ``logit_fn(features, [mode, params, config])`` with the arguments it
    takes; its result must be a ``Tensor`` or a dict of names to ``Tensor``s."""
    args = fn_args(logit_fn)
    available = {"mode": mode, "params": params, "config": config}
    result = logit_fn(features=features,
                      **{k: v for k, v in available.items() if k in args})
    valid_dict = isinstance(result, dict) and all(
        isinstance(k, str) and isinstance(v, ops.Tensor) for k, v in result.items())
    if not (valid_dict or isinstance(result, ops.Tensor)):
        raise ValueError("logit_fn should return a Tensor or a dictionary mapping "
                         f"strings to Tensors.  logit_fn returned: {result}")
    return result
