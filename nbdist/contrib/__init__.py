"""``nd.contrib``: the names of TF1's ``tf.contrib`` that nbdist has:
``training``, ``framework``, ``layers``, ``losses``, ``slim``, ``lookup``, ``rnn``, ``seq2seq``.

>>> import nbdist as nd
>>> nd.contrib.training.byte_size_load_fn is nd.train.byte_size_load_fn
True
"""

from __future__ import annotations

import importlib

from nbdist.contrib import training as training

_LAZY = ("framework", "layers", "losses", "slim", "lookup", "rnn", "seq2seq")


def __getattr__(name):
    # Loaded on first use: they pull in nd.layers and the facade.
    if name in _LAZY:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'nbdist.contrib' has no attribute '{name}'")


__all__ = ["framework", "layers", "lookup", "losses", "slim", "training"]
__all__ += ["rnn", "seq2seq"]
