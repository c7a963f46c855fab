"""``nd.contrib.rnn``: the names of TF 1.15's ``tf.contrib.rnn`` that are TF
core's (the cells, wrappers and ``static_rnn`` family).

>>> import nbdist as nd
>>> nd.contrib.rnn.LSTMCell is nd.nn.rnn_cell.LSTMCell
True
"""

from __future__ import annotations

from nbdist.ops.rnn import (static_bidirectional_rnn, static_rnn,
                            static_state_saving_rnn)
from nbdist.ops.rnn_cell import *  # noqa: F401,F403
from nbdist.ops.rnn_cell import __all__ as _cells

__all__ = [*_cells, "static_bidirectional_rnn", "static_rnn", "static_state_saving_rnn"]
