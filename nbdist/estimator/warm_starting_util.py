"""Warm starts of an ``Estimator`` (TF's ``WarmStartSettings``): which
checkpoint and variables ``nd.train.warm_start`` initializes from.

>>> import nbdist as nd
>>> ws = nd.estimator.WarmStartSettings("/tmp/old_model", vars_to_warm_start="dense")
>>> ws.ckpt_to_initialize_from, ws.vars_to_warm_start, ws.var_name_to_vocab_info
('/tmp/old_model', 'dense', {})
"""

from __future__ import annotations

import collections
import logging
import os

from nbdist.train.warm_starting_util import VocabInfo, warm_start

__all__ = ["VocabInfo", "WarmStartSettings", "warm_start"]

_log = logging.getLogger("nbdist.estimator")


class WarmStartSettings(collections.namedtuple("WarmStartSettings", [
        "ckpt_to_initialize_from", "vars_to_warm_start", "var_name_to_vocab_info",
        "var_name_to_prev_var_name"])):
    """Which checkpoint an ``Estimator`` warm-starts from and which variables:
    ``vars_to_warm_start`` is a regex over trainable variables (default
    ``".*"``), a list of regexes or variables over all global ones, or None for
    none but those with a ``VocabInfo``; ``var_name_to_prev_var_name`` renames."""

    def __new__(cls, ckpt_to_initialize_from, vars_to_warm_start=".*",
                var_name_to_vocab_info=None, var_name_to_prev_var_name=None):
        if not ckpt_to_initialize_from:
            raise ValueError(
                "`ckpt_to_initialize_from` MUST be set in WarmStartSettings")
        return super().__new__(cls, ckpt_to_initialize_from, vars_to_warm_start,
                               var_name_to_vocab_info or {},
                               var_name_to_prev_var_name or {})


def default_warm_start_settings(warm_start_from):
    """``warm_start_from`` (a checkpoint, a SavedModel directory or settings) as
    ``WarmStartSettings``, or None."""
    if warm_start_from is None:
        return None
    if isinstance(warm_start_from, (str, bytes, os.PathLike)):
        path = os.fsdecode(warm_start_from)
        variables = os.path.join(path, "variables", "variables")
        if os.path.exists(variables + ".index"):
            _log.info("Warm-starting from a SavedModel")
            return WarmStartSettings(ckpt_to_initialize_from=variables)
        return WarmStartSettings(ckpt_to_initialize_from=path)
    if isinstance(warm_start_from, WarmStartSettings):
        return warm_start_from
    raise ValueError("warm_start_from must be a string or a WarmStartSettings, "
                     f"instead got {type(warm_start_from)}")
