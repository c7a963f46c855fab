"""What an ``input_fn`` returns, made into features, labels and the hooks that
start its iterator (TF's ``estimator/util.py``); the hook that ends an
evaluation after N batches."""

from __future__ import annotations

from nbdist.distribute.data.data_ops import Dataset
from nbdist.train.hooks import SessionRunHook

__all__ = ["DatasetInitializerHook", "StopAfterNEvalsHook", "parse_input_fn_result"]


class DatasetInitializerHook(SessionRunHook):
    """Initializes a dataset's iterator once the session exists."""

    def __init__(self, iterator):
        self._iterator = iterator

    def begin(self):
        self._initializer = self._iterator.initializer

    def after_create_session(self, session, coord):
        del coord
        session.run(self._initializer)


def parse_input_fn_result(result):
    """``(features, labels, input_hooks)`` from an ``input_fn``'s result: a
    ``Dataset`` (of ``(features, labels)`` pairs or of features), a
    ``(features, labels)`` tuple, or features alone."""
    input_hooks = []
    if isinstance(result, Dataset):
        iterator = result.make_initializable_iterator()
        input_hooks.append(DatasetInitializerHook(iterator))
        result = iterator.get_next()
    if isinstance(result, (list, tuple)):
        if len(result) != 2:
            raise ValueError(
                "input_fn should return (features, labels) as a len 2 tuple.")
        return result[0], result[1], input_hooks
    return result, None, input_hooks


class StopAfterNEvalsHook(SessionRunHook):
    """Requests a stop once ``num_evals`` evaluation batches have run."""

    def __init__(self, num_evals):
        self._num_evals = num_evals

    def begin(self):
        self._evals_completed = 0  # per evaluation: the hook may be reused

    def after_run(self, run_context, run_values):
        del run_values
        self._evals_completed += 1
        if self._evals_completed >= self._num_evals:
            run_context.request_stop()
