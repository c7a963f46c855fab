"""``nd.contrib``: the names of TF1's ``tf.contrib`` that nbdist has.

>>> import nbdist as nd
>>> nd.contrib.training.byte_size_load_fn is nd.train.byte_size_load_fn
True
"""

from __future__ import annotations

from nbdist.contrib import training as training

__all__ = ["training"]
