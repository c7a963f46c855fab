"""``nd.data.Options`` / ``ThreadingOptions`` (TF's ``tf.data.Options``).

nbdist makes elements one at a time on the iterator's task, so the options
change nothing in how a pipeline runs; they are kept, merged and read back as
TF keeps them, so programs that set them run unchanged.

>>> import nbdist as nd
>>> opts = nd.data.Options()
>>> opts.threading.private_threadpool_size = 4
>>> ds = nd.data.Dataset.range(3).with_options(opts)
>>> ds.options().threading.private_threadpool_size
4
"""

from __future__ import annotations

import copy
from typing import ClassVar


class _OptionsBase:
    """Options with fixed fields (``_FIELDS``: name -> default, or a nested
    options class); setting any other attribute is TF's AttributeError."""

    _FIELDS: ClassVar[dict] = {}
    _ALIASES: ClassVar[dict] = {}

    def __init__(self):
        for k, v in self._FIELDS.items():
            object.__setattr__(self, k, v() if isinstance(v, type) else v)

    def __setattr__(self, name, value):
        name = self._ALIASES.get(name, name)
        if name not in self._FIELDS:
            raise AttributeError(f"Cannot set the property {name} on "
                                 f"{type(self).__name__}.")
        object.__setattr__(self, name, value)

    def __getattr__(self, name):
        if name in self._ALIASES:
            return getattr(self, self._ALIASES[name])
        raise AttributeError(f"{type(self).__name__} has no option {name!r}")

    def __eq__(self, other):
        return type(self) is type(other) and all(
            getattr(self, k) == getattr(other, k) for k in self._FIELDS)

    def __ne__(self, other):
        return not self == other

    __hash__ = None

    def _merged(self, other):
        out = copy.deepcopy(self)
        for k, default in self._FIELDS.items():
            theirs = getattr(other, k)
            if isinstance(default, type):
                object.__setattr__(out, k, getattr(out, k)._merged(theirs))
            elif theirs is not None and theirs != default:
                object.__setattr__(out, k, theirs)
        return out

    def __repr__(self):
        items = ", ".join(f"{k}={getattr(self, k)!r}" for k in self._FIELDS)
        return f"{type(self).__name__}({items})"


class ThreadingOptions(_OptionsBase):
    """``max_intra_op_parallelism`` and ``private_threadpool_size`` (None:
    unset), as TF's ``tf.data.ThreadingOptions``."""

    _FIELDS: ClassVar[dict] = {"max_intra_op_parallelism": None, "private_threadpool_size": None}


class AutotuneOptions(_OptionsBase):
    _FIELDS: ClassVar[dict] = {"enabled": None, "cpu_budget": None, "ram_budget": None,
               "autotune_algorithm": None}


class DistributeOptions(_OptionsBase):
    _FIELDS: ClassVar[dict] = {"auto_shard_policy": None, "num_devices": None}


class OptimizationOptions(_OptionsBase):
    _FIELDS: ClassVar[dict] = {"apply_default_optimizations": None, "filter_fusion": None,
               "filter_parallelization": None, "inject_prefetch": None,
               "map_and_batch_fusion": None, "map_and_filter_fusion": None,
               "map_fusion": None, "map_parallelization": None,
               "noop_elimination": None, "parallel_batch": None,
               "shuffle_and_repeat_fusion": None}


class Options(_OptionsBase):
    """A dataset's options (TF's ``tf.data.Options``): ``deterministic``,
    ``threading``, ``autotune``, ``experimental_optimization``,
    ``experimental_distribute``, ``experimental_slack`` ... Set them, then
    ``dataset.with_options(options)``."""

    _FIELDS: ClassVar[dict] = {"autotune": AutotuneOptions, "dataset_name": None,
               "deterministic": None, "experimental_distribute": DistributeOptions,
               "experimental_external_state_policy": None,
               "experimental_optimization": OptimizationOptions,
               "experimental_service": None, "experimental_slack": None,
               "experimental_symbolic_checkpoint": None,
               "experimental_warm_start": None, "framework_type": None,
               "threading": ThreadingOptions}
    _ALIASES: ClassVar[dict] = {"experimental_deterministic": "deterministic",
                "experimental_threading": "threading"}

    def merge(self, options):
        """These options with ``options``' set values on top."""
        if not isinstance(options, Options):
            raise TypeError(f"Options.merge needs Options, got "
                            f"{type(options).__name__}")
        return self._merged(options)

