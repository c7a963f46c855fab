"""Exporters (TF's ``estimator/exporter.py``): what ``train_and_evaluate`` does
with a model after each evaluation, each writing SavedModels under
``<model_dir>/export/<name>/<timestamp>``: ``LatestExporter`` every time (the
newest ``exports_to_keep`` kept), ``FinalExporter`` once after the last step,
``BestExporter`` when ``compare_fn`` prefers the new metrics (default: a
smaller ``loss``, the best so far read back from the eval event files).

>>> import nbdist as nd
>>> fn = nd.estimator.export.build_raw_serving_input_receiver_fn(
...     {"x": nd.placeholder(nd.float32, [None, 2])})
>>> nd.estimator.LatestExporter("latest", fn, exports_to_keep=2).name
'latest'
"""

from __future__ import annotations

import abc
import glob
import logging
import os
import shutil

from nbdist.estimator.model_fn import LOSS_METRIC_KEY, fn_args
from nbdist.train.summary_iterator import summary_iterator

__all__ = ["BestExporter", "Exporter", "FinalExporter", "LatestExporter"]

_log = logging.getLogger("nbdist.estimator")


class Exporter(abc.ABC):
    """Exports a model: ``export(estimator, export_path, checkpoint_path,
    eval_result, is_the_final_export)`` returns what it wrote (or None)."""

    @property
    @abc.abstractmethod
    def name(self):
        """The directory name under ``<model_dir>/export``."""

    @abc.abstractmethod
    def export(self, estimator, export_path, checkpoint_path, eval_result,
               is_the_final_export):
        """Exports ``checkpoint_path``'s model under ``export_path``."""


class _SavedModelExporter(Exporter):
    def __init__(self, name, serving_input_receiver_fn, assets_extra=None,
                 as_text=False):
        self._name = name
        self._serving_input_receiver_fn = serving_input_receiver_fn
        self._assets_extra = assets_extra
        self._as_text = as_text

    @property
    def name(self):
        return self._name

    def export(self, estimator, export_path, checkpoint_path, eval_result,
               is_the_final_export):
        del eval_result, is_the_final_export
        return estimator.export_saved_model(
            export_path, self._serving_input_receiver_fn,
            assets_extra=self._assets_extra, as_text=self._as_text,
            checkpoint_path=checkpoint_path)


def _check_exports_to_keep(exports_to_keep):
    if exports_to_keep is not None and exports_to_keep <= 0:
        raise ValueError("`exports_to_keep`, if provided, must be a positive "
                         f"number. Got {exports_to_keep}")


def _garbage_collect_exports(export_dir_base, exports_to_keep):
    """Deletes all but the ``exports_to_keep`` newest timestamped exports."""
    if exports_to_keep is None or not os.path.isdir(export_dir_base):
        return
    versions = sorted(int(n) for n in os.listdir(export_dir_base)
                      if len(n) == 10 and n.isdigit())
    for version in versions[:-exports_to_keep]:
        shutil.rmtree(os.path.join(export_dir_base, str(version)),
                      ignore_errors=True)


def _loss_smaller(best_eval_result, current_eval_result):
    """Whether ``current_eval_result`` has a smaller ``loss`` than the best."""
    if not best_eval_result or LOSS_METRIC_KEY not in best_eval_result:
        raise ValueError("best_eval_result cannot be empty or no loss is found in it.")
    if not current_eval_result or LOSS_METRIC_KEY not in current_eval_result:
        raise ValueError(
            "current_eval_result cannot be empty or no loss is found in it.")
    return best_eval_result[LOSS_METRIC_KEY] > current_eval_result[LOSS_METRIC_KEY]


def _verify_compare_fn_args(compare_fn):
    args = set(fn_args(compare_fn))
    for needed in ("best_eval_result", "current_eval_result"):
        if needed not in args:
            raise ValueError(f"compare_fn ({compare_fn}) must include {needed} "
                             "argument.")
    unexpected = list(args - {"best_eval_result", "current_eval_result"})
    if unexpected:
        raise ValueError(f"compare_fn ({compare_fn}) has following not expected "
                         f"args: {unexpected}")


class _KeepingExporter(Exporter):
    """A SavedModel exporter that keeps the newest ``exports_to_keep`` exports."""

    def __init__(self, name, serving_input_receiver_fn, assets_extra, as_text,
                 exports_to_keep):
        self._saved_model_exporter = _SavedModelExporter(
            name, serving_input_receiver_fn, assets_extra, as_text)
        _check_exports_to_keep(exports_to_keep)
        self._exports_to_keep = exports_to_keep

    @property
    def name(self):
        return self._saved_model_exporter.name

    def _export_and_collect(self, estimator, export_path, checkpoint_path,
                            eval_result, is_the_final_export):
        result = self._saved_model_exporter.export(
            estimator, export_path, checkpoint_path, eval_result, is_the_final_export)
        _garbage_collect_exports(export_path, self._exports_to_keep)
        return result


class LatestExporter(_KeepingExporter):
    """Exports after every evaluation, keeping the newest ``exports_to_keep``."""

    def __init__(self, name, serving_input_receiver_fn, assets_extra=None,
                 as_text=False, exports_to_keep=5):
        super().__init__(name, serving_input_receiver_fn, assets_extra, as_text,
                         exports_to_keep)

    def export(self, estimator, export_path, checkpoint_path, eval_result,
               is_the_final_export):
        return self._export_and_collect(estimator, export_path, checkpoint_path,
                                        eval_result, is_the_final_export)


class FinalExporter(Exporter):
    """Exports once, after the evaluation of the final training step."""

    def __init__(self, name, serving_input_receiver_fn, assets_extra=None,
                 as_text=False):
        self._saved_model_exporter = _SavedModelExporter(
            name, serving_input_receiver_fn, assets_extra, as_text)

    @property
    def name(self):
        return self._saved_model_exporter.name

    def export(self, estimator, export_path, checkpoint_path, eval_result,
               is_the_final_export):
        if not is_the_final_export:
            return None
        _log.info("Performing the final export in the end of training.")
        return self._saved_model_exporter.export(
            estimator, export_path, checkpoint_path, eval_result, is_the_final_export)


class BestExporter(_KeepingExporter):
    """Exports when ``compare_fn(best_eval_result, current_eval_result)`` says
    the new evaluation is better; the best so far is first read from the event
    files matching ``event_file_pattern`` under ``model_dir``."""

    def __init__(self, name="best_exporter", serving_input_receiver_fn=None,
                 event_file_pattern="eval/*.tfevents.*", compare_fn=_loss_smaller,
                 assets_extra=None, as_text=False, exports_to_keep=5):
        if compare_fn is None:
            raise ValueError("`compare_fn` must not be None.")
        _verify_compare_fn_args(compare_fn)
        super().__init__(name, serving_input_receiver_fn, assets_extra, as_text,
                         exports_to_keep)
        self._compare_fn = compare_fn
        self._event_file_pattern = event_file_pattern
        self._model_dir = None
        self._best_eval_result = None

    def export(self, estimator, export_path, checkpoint_path, eval_result,
               is_the_final_export):
        if self._model_dir != estimator.model_dir and self._event_file_pattern:
            self._model_dir = estimator.model_dir
            self._best_eval_result = self._best_in_event_files(
                os.path.join(self._model_dir, self._event_file_pattern))
        if self._best_eval_result is not None and not self._compare_fn(
                best_eval_result=self._best_eval_result,
                current_eval_result=eval_result):
            return None
        _log.info("Performing best model export.")
        self._best_eval_result = eval_result
        return self._export_and_collect(estimator, export_path, checkpoint_path,
                                        eval_result, is_the_final_export)

    def _best_in_event_files(self, pattern):
        best = None
        for event_file in glob.glob(pattern):
            for event in summary_iterator(event_file):
                if not event.HasField("summary"):
                    continue
                result = {v.tag: v.simple_value for v in event.summary.value
                          if v.HasField("simple_value")}
                if result and (best is None or self._compare_fn(best, result)):
                    best = result
        return best
