"""The cell wrappers of ``tf.compat.v1.nn.rnn_cell`` (TF 1.15):
``DropoutWrapper``, ``ResidualWrapper`` and ``DeviceWrapper``.

A wrapper calls its cell in the caller's variable scope (it adds no scope of
its own, as TF's ``_RNNCellWrapperV1``), so wrapping a cell leaves its variable
names, and so a checkpoint's, unchanged.

>>> import nbdist as nd
>>> rc = nd.nn.rnn_cell
>>> cell = rc.DropoutWrapper(rc.GRUCell(3), output_keep_prob=0.5, seed=1)
>>> out, _ = cell(nd.ones([2, 4]), cell.zero_state(2, nd.float32))
>>> [v.op.name for v in cell.trainable_variables][0]
'gru_cell/gates/kernel'
"""

from __future__ import annotations

import hashlib
import numbers

from nbdist.framework import dtypes, nest
from nbdist.framework.ops import _static_value, convert_to_tensor, device
from nbdist.framework.ops import get_default_graph
from nbdist.framework.tensor_shape import as_shape
from nbdist.ops import math_ops, nn_ops, random_ops
from nbdist.ops.rnn_cell_impl import (LSTMStateTuple, RNNCell, assert_like_rnncell,
                                      map_pairs)


class _RNNCellWrapper(RNNCell):
    """A cell around ``cell``: same sizes, the wrapped cell's variables."""

    def __init__(self, cell, **kwargs):
        super().__init__(**kwargs)
        assert_like_rnncell("cell", cell)
        self.cell = cell

    def _sub_cells(self):
        return [self.cell]

    @property
    def wrapped_cell(self):
        return self.cell

    @property
    def state_size(self):
        return self.cell.state_size

    @property
    def output_size(self):
        return self.cell.output_size

    def zero_state(self, batch_size, dtype):
        with get_default_graph().name_scope(type(self).__name__ + "ZeroState"):
            return self.cell.zero_state(batch_size, dtype)

    def __call__(self, inputs, state, scope=None):
        return self._call_wrapped_cell(inputs, state, self.cell.__call__, scope=scope)

    def _call_wrapped_cell(self, inputs, state, cell_call_fn, **kwargs):
        raise NotImplementedError


def _default_dropout_state_filter(substate):
    # As TF: the memory ``c`` of an LSTM state is never dropped, only ``h``.
    if isinstance(substate, LSTMStateTuple):
        return LSTMStateTuple(c=False, h=True)
    return True


class DropoutWrapper(_RNNCellWrapper):
    """Dropout on the cell's inputs, outputs and state (``*_keep_prob``).

    A keep probability of 1 (the default) adds no op. With
    ``variational_recurrent=True`` one mask per run is drawn (Gal &
    Ghahramani): the same units are dropped at every time step, which needs
    ``input_size`` when ``input_keep_prob < 1`` and ``dtype``. ``seed`` makes
    the masks reproducible (a per-role seed as TF derives it).
    """

    def __init__(self, cell, input_keep_prob=1.0, output_keep_prob=1.0,
                 state_keep_prob=1.0, variational_recurrent=False, input_size=None,
                 dtype=None, seed=None, dropout_state_filter_visitor=None, **kwargs):
        super().__init__(cell, dtype=dtype, **kwargs)
        if (dropout_state_filter_visitor is not None
                and not callable(dropout_state_filter_visitor)):
            raise TypeError("dropout_state_filter_visitor must be callable")
        self._dropout_state_filter = (dropout_state_filter_visitor
                                      or _default_dropout_state_filter)
        with get_default_graph().name_scope("DropoutWrapperInit"):
            self._input_keep_prob = self._keep_prob(input_keep_prob, "input_keep_prob")
            self._state_keep_prob = self._keep_prob(state_keep_prob, "state_keep_prob")
            self._output_keep_prob = self._keep_prob(output_keep_prob,
                                                     "output_keep_prob")
        self._variational_recurrent = variational_recurrent
        self._seed = seed
        self._recurrent_input_noise = self._recurrent_state_noise = None
        self._recurrent_output_noise = None
        if variational_recurrent:
            if dtype is None:
                raise ValueError("When variational_recurrent=True, dtype must be "
                                 "provided")

            def noise(role, sizes):
                return nest.pack_sequence_as(sizes, [
                    random_ops.random_uniform([1] + as_shape(s).as_list(),
                                              seed=self._gen_seed(role, i),
                                              dtype=dtype)
                    for i, s in enumerate(nest.flatten(sizes))])

            if _should_dropout(self._input_keep_prob):
                if input_size is None:
                    raise ValueError("When variational_recurrent=True and "
                                     "input_keep_prob < 1.0 or is unknown, "
                                     "input_size must be provided")
                self._recurrent_input_noise = noise("input", input_size)
            self._recurrent_state_noise = noise("state", cell.state_size)
            self._recurrent_output_noise = noise("output", cell.output_size)

    @staticmethod
    def _keep_prob(v, attr):
        if isinstance(v, numbers.Real):
            if not 0 < float(v) <= 1:
                raise ValueError(f"Parameter {attr} must be between 0 and 1: {v}")
            return float(v)
        t = convert_to_tensor(v, dtype=dtypes.float32)
        const = _static_value(t)
        if const is not None and not 0 < float(const) <= 1:
            raise ValueError(f"Parameter {attr} must be between 0 and 1: {const}")
        return t

    def _gen_seed(self, salt_prefix, index):
        if self._seed is None:
            return None
        salt = f"{salt_prefix}_{index}"
        digest = hashlib.md5((str(self._seed) + salt).encode("utf-8")).hexdigest()
        return int(digest[:8], 16) & 0x7FFFFFFF

    def _dropout(self, values, role, noise, keep_prob, shallow=None):
        keeps = [True] * len(nest.flatten(values)) if shallow is None else shallow
        flat = list(zip(nest.flatten(values), keeps))
        if not self._variational_recurrent:
            out = [nn_ops.dropout(v, keep_prob=keep_prob,
                                  seed=self._gen_seed(role, i)) if keep else v
                   for i, (v, keep) in enumerate(flat)]
        else:
            noises = nest.flatten(noise)
            out = [_variational(v, keep_prob, noises[i]) if keep else v
                   for i, (v, keep) in enumerate(flat)]
        return nest.pack_sequence_as(values, out)

    def _call_wrapped_cell(self, inputs, state, cell_call_fn, **kwargs):
        if _should_dropout(self._input_keep_prob):
            inputs = self._dropout(inputs, "input", self._recurrent_input_noise,
                                   self._input_keep_prob)
        output, new_state = cell_call_fn(inputs, state, **kwargs)
        if _should_dropout(self._state_keep_prob):
            shallow = _dropped_leaves(self._dropout_state_filter, new_state)
            new_state = self._dropout(new_state, "state", self._recurrent_state_noise,
                                      self._state_keep_prob, shallow)
        if _should_dropout(self._output_keep_prob):
            output = self._dropout(output, "output", self._recurrent_output_noise,
                                   self._output_keep_prob)
        return output, new_state


def _should_dropout(p):
    return not isinstance(p, float) or p < 1


def _dropped_leaves(visitor, s) -> list:
    """For every leaf of ``s`` (flattened), whether dropout applies to it: the
    visitor returns a bool for a whole substructure, or a structure of bools
    one level down (TF's ``get_traverse_shallow_structure``)."""
    keep = visitor(s)
    if not nest.is_nested(s):
        return [bool(keep)]
    keeps = [keep] * len(s) if isinstance(keep, bool) else list(keep)
    out = []
    for child, k in zip(s, keeps):
        out += (_dropped_leaves(visitor, child) if k
                else [False] * len(nest.flatten(child)))
    return out


def _variational(value, keep_prob, noise):
    binary = math_ops.floor(keep_prob + noise)
    return math_ops.divide(value, keep_prob) * binary


class ResidualWrapper(_RNNCellWrapper):
    """The cell's output plus its input (``residual_fn(inputs, outputs)`` if
    given); input and output must have the same structure and sizes."""

    def __init__(self, cell, residual_fn=None, **kwargs):
        super().__init__(cell, **kwargs)
        self._residual_fn = residual_fn

    def _call_wrapped_cell(self, inputs, state, cell_call_fn, **kwargs):
        outputs, new_state = cell_call_fn(inputs, state, **kwargs)

        def default_residual_fn(inputs, outputs):
            nest.assert_same_structure(inputs, outputs)
            for i, o in zip(nest.flatten(inputs), nest.flatten(outputs)):
                i = convert_to_tensor(i)
                if not i.shape.is_compatible_with(o.shape):
                    raise ValueError(f"ResidualWrapper: the cell's input {i.shape} "
                                     f"and output {o.shape} differ in shape")
            return map_pairs(lambda i, o: i + o, inputs, outputs)

        res = (self._residual_fn or default_residual_fn)(inputs, outputs)
        return res, new_state


class DeviceWrapper(_RNNCellWrapper):
    """Builds the cell's ops (and its zero state) on ``device``."""

    def __init__(self, cell, device, **kwargs):  # noqa: A002 - TF's name
        super().__init__(cell, **kwargs)
        self._device = device

    def zero_state(self, batch_size, dtype):
        with get_default_graph().name_scope(type(self).__name__ + "ZeroState"):
            with device(self._device):
                return self.cell.zero_state(batch_size, dtype)

    def _call_wrapped_cell(self, inputs, state, cell_call_fn, **kwargs):
        with device(self._device):
            return cell_call_fn(inputs, state, **kwargs)

__all__ = ["DeviceWrapper", "DropoutWrapper", "ResidualWrapper"]
