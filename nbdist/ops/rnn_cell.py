"""``nd.nn.rnn_cell``: the module of TF 1.15's ``tf.nn.rnn_cell`` names.

>>> import nbdist as nd
>>> nd.nn.rnn_cell.LSTMStateTuple(1, 2).h
2
"""

from __future__ import annotations

from nbdist.ops.rnn_cell_impl import (
    BasicLSTMCell,
    BasicRNNCell,
    GRUCell,
    LSTMCell,
    LSTMStateTuple,
    MultiRNNCell,
    RNNCell,
)
from nbdist.ops.rnn_cell_wrappers import DeviceWrapper, DropoutWrapper, ResidualWrapper

__all__ = [
    "BasicLSTMCell",
    "BasicRNNCell",
    "DeviceWrapper",
    "DropoutWrapper",
    "GRUCell",
    "LSTMCell",
    "LSTMStateTuple",
    "MultiRNNCell",
    "RNNCell",
    "ResidualWrapper",
]
