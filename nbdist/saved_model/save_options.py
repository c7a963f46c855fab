"""``SaveOptions`` and ``Asset`` of TF's ``tf.saved_model`` as TF1 graph mode
has them: the options of a save (recorded; nbdist's ``SavedModelBuilder``
writes one local directory) and a file that goes with a model, whose
``asset_path`` is a string tensor.

>>> import nbdist as nd
>>> asset = nd.saved_model.Asset("/tmp/vocab.txt")
>>> with nd.Session() as s:
...     s.run(asset.asset_path)
b'/tmp/vocab.txt'
"""

from __future__ import annotations

import os

from nbdist.framework import dtypes
from nbdist.framework.constant_op import constant
from nbdist.framework.ops import get_default_graph


class SaveOptions:
    """Options of a SavedModel save (TF's fields, kept as given)."""

    def __init__(self, namespace_whitelist=None, save_debug_info=False,
                 function_aliases=None, experimental_debug_stripper=False,
                 experimental_io_device=None, experimental_variable_policy=None,
                 experimental_custom_gradients=True, experimental_image_format=False,
                 experimental_skip_saver=False, experimental_sharding_callback=None,
                 extra_tags=None):
        self.namespace_whitelist = list(namespace_whitelist or [])
        self.save_debug_info = save_debug_info
        self.function_aliases = dict(function_aliases or {})
        self.experimental_debug_stripper = experimental_debug_stripper
        self.experimental_io_device = experimental_io_device
        self.experimental_variable_policy = experimental_variable_policy
        self.experimental_custom_gradients = experimental_custom_gradients
        self.experimental_image_format = experimental_image_format
        self.experimental_skip_saver = experimental_skip_saver
        self.experimental_sharding_callback = experimental_sharding_callback
        self.extra_tags = extra_tags


class Asset:
    """A file a model uses (a vocabulary ...): ``asset_path`` is its path as a
    string tensor of the default graph, placed on the CPU."""

    def __init__(self, path):
        g = get_default_graph()
        with g.device("/device:CPU:*"):
            self._path = constant(os.fspath(path), dtype=dtypes.string,
                                  name="asset_path")

    @property
    def asset_path(self):
        return self._path


__all__ = ["Asset", "SaveOptions"]
