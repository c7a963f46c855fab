"""The RNN cells of ``tf.compat.v1.nn.rnn_cell`` (TF 1.15): ``RNNCell``,
``BasicRNNCell``, ``BasicLSTMCell``, ``LSTMCell``, ``GRUCell``,
``MultiRNNCell`` and ``LSTMStateTuple``.

A cell maps ``(inputs, state)`` to ``(output, new_state)`` for one time step.
Variables are named as TF 1.15 names them, so a TF checkpoint of the same model
loads: a cell called without ``scope`` opens a variable scope named after its
class in snake case (``basic_lstm_cell``, uniquified as ``_1`` ... when a second
cell of the class is first called under the same scope) and creates
``kernel`` and ``bias`` there (``rnn/basic_lstm_cell/kernel`` under
``dynamic_rnn``); ``MultiRNNCell`` adds ``multi_rnn_cell/cell_<i>``. Gates
are laid out as TF lays them: LSTM ``i, j, f, o`` (input, new input, forget,
output) along the kernel's columns, GRU ``r, u`` in ``gates/kernel`` and the
candidate in ``candidate/kernel``; the LSTM forget bias is added when the cell
runs, not stored in ``bias``.

>>> import nbdist as nd
>>> cell = nd.nn.rnn_cell.BasicLSTMCell(4)
>>> out, state = cell(nd.zeros([2, 3]), cell.zero_state(2, nd.float32))
>>> [v.op.name for v in cell.trainable_variables]
['basic_lstm_cell/kernel', 'basic_lstm_cell/bias']
"""

from __future__ import annotations

import collections
import re

from nbdist.framework import dtypes, nest
from nbdist.framework.ops import (Tensor, _static_value, convert_to_tensor,
                                  get_default_graph)
from nbdist.framework.tensor_shape import TensorShape, as_shape
from nbdist.ops import array_ops, clip_ops, init_ops, math_ops, nn_ops
from nbdist.ops.partitioned_variables import PartitionedVariable, fixed_size_partitioner
from nbdist.ops.variables import get_variable, get_variable_scope, variable_scope

WEIGHTS_VARIABLE_NAME = "kernel"
BIAS_VARIABLE_NAME = "bias"

_ACTIVATIONS = {"tanh": math_ops.tanh, "sigmoid": math_ops.sigmoid,
                "relu": nn_ops.relu, "linear": lambda x: x}


def _activation(activation):
    if activation is None:
        return math_ops.tanh
    if isinstance(activation, str):
        if activation not in _ACTIVATIONS:
            raise ValueError(f"Unknown activation function: {activation}")
        return _ACTIVATIONS[activation]
    if not callable(activation):
        raise TypeError(f"activation must be callable, got {activation!r}")
    return activation


def _snake_case(name: str) -> str:
    # As Keras' to_snake_case: BasicLSTMCell -> basic_lstm_cell.
    s = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", s).lower()


def assert_like_rnncell(cell_name, cell):
    """Raises a ``TypeError`` unless ``cell`` has what an RNN cell needs
    (``output_size``, ``state_size``, ``get_initial_state`` or ``zero_state``,
    and is callable), as TF's check of the same name."""
    conditions = [hasattr(cell, "output_size"), hasattr(cell, "state_size"),
                  hasattr(cell, "get_initial_state") or hasattr(cell, "zero_state"),
                  callable(cell)]
    errors = ["'output_size' property is missing", "'state_size' property is missing",
              "either 'zero_state' or 'get_initial_state' method is required",
              "is not callable"]
    if not all(conditions):
        msgs = [e for c, e in zip(conditions, errors) if not c]
        raise TypeError(f"The argument {cell_name!r} ({cell}) is not an RNNCell: "
                        + ", ".join(msgs) + ".")


def map_pairs(fn, a, b):
    """``fn(x, y)`` for the leaves of two structures alike, in ``a``'s shape."""
    nest.assert_same_structure(a, b, check_types=False)
    return nest.pack_sequence_as(a, [fn(x, y) for x, y in zip(nest.flatten(a),
                                                              nest.flatten(b))])


def batch_zeros(batch_size, size, dtype):
    """A zero tensor of shape [batch_size] + size, with its static shape."""
    tail = as_shape(size).as_list()
    if isinstance(batch_size, Tensor):
        shape = array_ops.stack([batch_size] + tail)
        static = TensorShape([_static_int(batch_size)] + tail)
    else:
        shape = [int(batch_size)] + tail
        static = TensorShape(shape)
    out = array_ops.zeros(shape, dtype=dtype)
    out.set_shape(static)
    return out


def _static_int(t):
    v = _static_value(t)
    return None if v is None else int(v)


class LSTMStateTuple(collections.namedtuple("LSTMStateTuple", ("c", "h"))):
    """The state of an LSTM cell: ``c`` the cell state, ``h`` the output."""

    __slots__ = ()

    @property
    def dtype(self):
        (c, h) = self
        if c.dtype != h.dtype:
            raise TypeError(f"Inconsistent internal state: {c.dtype} vs {h.dtype}")
        return c.dtype


class RNNCell:
    """The abstract RNN cell: subclasses give ``state_size``, ``output_size``
    and ``call(inputs, state) -> (output, new_state)``; ``build(input_shape)``
    creates the variables on the first call.

    ``trainable_variables`` (``trainable_weights``) lists the variables the
    cell created or reused, its sub-cells' included.
    """

    def __init__(self, trainable=True, name=None, dtype=None, _reuse=None, **kwargs):
        del kwargs  # Keras' layer options (``_scope`` ...) have no role here
        self.trainable = trainable
        self._base_name = name or _snake_case(type(self).__name__)
        self._name = name
        self._dtype = dtypes.as_dtype(dtype) if dtype is not None else None
        self._reuse = _reuse
        self._scope = None
        self._rnncell_scope = None
        self._graph = None
        self.built = False
        self._trainable_weights: list = []
        self._non_trainable_weights: list = []

    # -- what a cell is -------------------------------------------------------------
    @property
    def state_size(self):
        """An int, a TensorShape or a nested structure of them."""
        raise NotImplementedError("Abstract method")

    @property
    def output_size(self):
        """An int or a TensorShape (or a structure of them)."""
        raise NotImplementedError("Abstract method")

    @property
    def name(self):
        return self._scope.name if self._scope is not None else self._base_name

    @property
    def dtype(self):
        return self._dtype

    @property
    def scope_name(self):
        if self._scope is None:
            raise ValueError("No name available for layer scope because the layer "
                             f"{self._base_name!r} has not been used yet.")
        return self._scope.name

    def _sub_cells(self) -> list:
        return []

    @property
    def trainable_weights(self) -> list:
        out = list(self._trainable_weights) if self.trainable else []
        for c in self._sub_cells():
            out += [v for v in getattr(c, "trainable_weights", []) if v not in out]
        return out

    @property
    def non_trainable_weights(self) -> list:
        out = list(self._non_trainable_weights)
        if not self.trainable:
            out = list(self._trainable_weights) + out
        for c in self._sub_cells():
            out += [v for v in getattr(c, "non_trainable_weights", []) if v not in out]
        return out

    @property
    def weights(self) -> list:
        return self.trainable_weights + self.non_trainable_weights

    trainable_variables = trainable_weights
    non_trainable_variables = non_trainable_weights
    variables = weights

    # -- calling --------------------------------------------------------------------
    def build(self, inputs_shape):
        self.built = True

    def call(self, inputs, state):
        raise NotImplementedError("Abstract method")

    def _rnn_get_variable(self, getter, *args, **kwargs):
        # Records what the cell's ``call`` gets with ``get_variable`` (TF's getter).
        variable = getter(*args, **kwargs)
        first = list(variable)[0] if isinstance(variable, PartitionedVariable) else (
            variable)
        trainable = first in get_default_graph().get_collection(
            "trainable_variables")
        if trainable and all(variable is not v for v in self._trainable_weights):
            self._trainable_weights.append(variable)
        elif not trainable and all(variable is not v
                                   for v in self._non_trainable_weights):
            self._non_trainable_weights.append(variable)
        return variable

    def __call__(self, inputs, state, scope=None):
        """Runs the cell on ``inputs`` and ``state`` in a variable scope (``scope``
        or the scope the cell was first called in)."""
        if scope is not None:
            with variable_scope(scope, custom_getter=self._rnn_get_variable) as sc:
                return self._layer_call(inputs, state, sc)
        if self._rnncell_scope is None:
            self._rnncell_scope = get_variable_scope()
        with variable_scope(self._rnncell_scope,
                            custom_getter=self._rnn_get_variable):
            return self._layer_call(inputs, state, None)

    def _set_scope(self, scope):
        if self._scope is not None:
            return
        if self._reuse:
            ctx = variable_scope(scope if scope is not None else self._base_name)
        else:
            ctx = variable_scope(scope, default_name=self._base_name)
        with ctx as captured:
            self._scope = captured

    def _layer_call(self, inputs, state, scope):
        """A TF1 layer's ``__call__``: the scope fixed on the first call, ``build``
        with the inputs' shapes, variables reused on every later call."""
        g = get_default_graph()
        if self._graph is not None and self._graph is not g:
            raise ValueError(f"RNNCell {self._base_name} was built in another graph")
        self._graph = g
        self._set_scope(scope)
        flat = nest.flatten(inputs)
        if self._dtype is None and flat:
            first = convert_to_tensor(flat[0])
            if first.dtype.is_floating:
                self._dtype = first.dtype.base_dtype
        reuse = True if self.built else self._reuse
        with variable_scope(self._scope, reuse=reuse, auxiliary_name_scope=False):
            with g.name_scope(self._scope.original_name_scope):
                if not self.built:
                    shapes = nest.map_structure(
                        lambda x: convert_to_tensor(x).shape, inputs)
                    self.build(shapes)
                    self.built = True
                return self.call(inputs, state)

    def add_variable(self, name, shape, dtype=None, initializer=None,
                     regularizer=None, trainable=True, partitioner=None, **kwargs):
        """``get_variable(name, ...)`` in the cell's scope, recorded as its weight."""
        del kwargs
        dtype = dtypes.as_dtype(dtype or self._dtype or dtypes.float32)
        var = get_variable(name, shape=shape, dtype=dtype, initializer=initializer,
                           regularizer=regularizer,
                           trainable=trainable and self.trainable,
                           partitioner=partitioner)
        dest = (self._trainable_weights if trainable and self.trainable
                else self._non_trainable_weights)
        if all(var is not v for v in dest):
            dest.append(var)
        return var

    add_weight = add_variable

    def get_initial_state(self, inputs=None, batch_size=None, dtype=None):
        """The zero state, with ``batch_size`` and ``dtype`` from ``inputs`` if
        given (TF's ``get_initial_state``)."""
        if inputs is not None:
            inputs = convert_to_tensor(inputs)
            static = inputs.shape.as_list()[0] if inputs.shape.rank else None
            batch_size = static if static is not None else array_ops.shape(inputs)[0]
            dtype = dtype or inputs.dtype
        if batch_size is None or dtype is None:
            raise ValueError("batch_size and dtype cannot be None while constructing "
                             f"initial state: batch_size={batch_size}, dtype={dtype}")
        return self.zero_state(batch_size, dtype)

    def zero_state(self, batch_size, dtype):
        """Zeros of shape ``[batch_size] + size`` for every size in
        ``state_size``, in a name scope ``<Class>ZeroState``."""
        g = get_default_graph()
        with g.name_scope(type(self).__name__ + "ZeroState"):
            return nest.map_structure(lambda s: batch_zeros(batch_size, s, dtype),
                                      self.state_size)

    def get_config(self):
        return {"name": self._base_name, "trainable": self.trainable,
                "dtype": None if self._dtype is None else self._dtype.name}


class LayerRNNCell(RNNCell):
    """A cell whose variables are made in ``build`` (``add_variable``): called
    with ``scope``, that scope replaces the cell's own name."""

    def __call__(self, inputs, state, scope=None, *args, **kwargs):
        del args, kwargs
        return self._layer_call(inputs, state, scope)


def _input_depth(inputs_shape):
    if inputs_shape.rank is None or inputs_shape.as_list()[-1] is None:
        raise ValueError(f"Expected inputs.shape[-1] to be known, saw shape: "
                         f"{inputs_shape}")
    return inputs_shape.as_list()[-1]


class _UnitsCell(LayerRNNCell):
    """A cell whose state and output are one ``[batch, num_units]`` tensor."""

    def __init__(self, num_units, activation=None, reuse=None, name=None, dtype=None,
                 **kwargs):
        super().__init__(_reuse=reuse, name=name, dtype=dtype, **kwargs)
        self._num_units = int(num_units)
        self._activation = _activation(activation)

    @property
    def state_size(self):
        return self._num_units

    @property
    def output_size(self):
        return self._num_units


class BasicRNNCell(_UnitsCell):
    """``output = new_state = activation(W [inputs, state] + b)``.

    Variables: ``basic_rnn_cell/kernel`` ``[input_depth + num_units,
    num_units]`` and ``basic_rnn_cell/bias`` ``[num_units]`` (zeros).
    """

    def build(self, inputs_shape):
        depth = _input_depth(inputs_shape)
        self._kernel = self.add_variable(WEIGHTS_VARIABLE_NAME,
                                         shape=[depth + self._num_units,
                                                self._num_units])
        self._bias = self.add_variable(BIAS_VARIABLE_NAME, shape=[self._num_units],
                                       initializer=init_ops.zeros_initializer())
        self.built = True

    def call(self, inputs, state):
        gate = math_ops.matmul(array_ops.concat([inputs, state], 1), self._kernel)
        output = self._activation(nn_ops.bias_add(gate, self._bias))
        return output, output


class GRUCell(_UnitsCell):
    """The gated recurrent unit (Cho et al., 2014) as TF 1.15 builds it.

    ``r, u = split(sigmoid(W_g [x, h] + b_g))``,
    ``c = activation(W_c [x, r * h] + b_c)``, ``h' = u * h + (1 - u) * c``.
    Variables: ``gru_cell/gates/kernel`` ``[depth + n, 2n]``,
    ``gru_cell/gates/bias`` (ones unless ``bias_initializer``),
    ``gru_cell/candidate/kernel`` ``[depth + n, n]`` and ``candidate/bias``
    (zeros).
    """

    def __init__(self, num_units, activation=None, reuse=None, kernel_initializer=None,
                 bias_initializer=None, name=None, dtype=None, **kwargs):
        super().__init__(num_units, activation, reuse, name, dtype, **kwargs)
        self._kernel_initializer = kernel_initializer
        self._bias_initializer = bias_initializer

    def build(self, inputs_shape):
        depth = _input_depth(inputs_shape)
        n = self._num_units
        self._gate_kernel = self.add_variable(
            f"gates/{WEIGHTS_VARIABLE_NAME}", shape=[depth + n, 2 * n],
            initializer=self._kernel_initializer)
        self._gate_bias = self.add_variable(
            f"gates/{BIAS_VARIABLE_NAME}", shape=[2 * n],
            initializer=(self._bias_initializer if self._bias_initializer is not None
                         else init_ops.constant_initializer(1.0)))
        self._candidate_kernel = self.add_variable(
            f"candidate/{WEIGHTS_VARIABLE_NAME}", shape=[depth + n, n],
            initializer=self._kernel_initializer)
        self._candidate_bias = self.add_variable(
            f"candidate/{BIAS_VARIABLE_NAME}", shape=[n],
            initializer=(self._bias_initializer if self._bias_initializer is not None
                         else init_ops.zeros_initializer()))
        self.built = True

    def call(self, inputs, state):
        gate_inputs = nn_ops.bias_add(
            math_ops.matmul(array_ops.concat([inputs, state], 1), self._gate_kernel),
            self._gate_bias)
        r, u = array_ops.split(math_ops.sigmoid(gate_inputs), 2, axis=1)
        candidate = nn_ops.bias_add(
            math_ops.matmul(array_ops.concat([inputs, r * state], 1),
                            self._candidate_kernel), self._candidate_bias)
        c = self._activation(candidate)
        new_h = u * state + (1 - u) * c
        return new_h, new_h


class BasicLSTMCell(LayerRNNCell):
    """The LSTM of Zaremba et al. (2014), no peepholes, no projection.

    ``i, j, f, o = split(W [x, h] + b, 4)``,
    ``c' = c * sigmoid(f + forget_bias) + sigmoid(i) * activation(j)``,
    ``h' = activation(c') * sigmoid(o)``. The state is ``LSTMStateTuple(c, h)``
    (or ``concat([c, h], 1)`` with ``state_is_tuple=False``). Variables:
    ``basic_lstm_cell/kernel`` ``[depth + n, 4n]`` and ``bias`` ``[4n]`` (zeros).
    """

    def __init__(self, num_units, forget_bias=1.0, state_is_tuple=True,
                 activation=None, reuse=None, name=None, dtype=None, **kwargs):
        super().__init__(_reuse=reuse, name=name, dtype=dtype, **kwargs)
        self._num_units = int(num_units)
        self._forget_bias = forget_bias
        self._state_is_tuple = state_is_tuple
        self._activation = _activation(activation)

    @property
    def state_size(self):
        n = self._num_units
        return LSTMStateTuple(n, n) if self._state_is_tuple else 2 * n

    @property
    def output_size(self):
        return self._num_units

    def build(self, inputs_shape):
        depth = _input_depth(inputs_shape)
        n = self._num_units
        self._kernel = self.add_variable(WEIGHTS_VARIABLE_NAME,
                                         shape=[depth + n, 4 * n])
        self._bias = self.add_variable(BIAS_VARIABLE_NAME, shape=[4 * n],
                                       initializer=init_ops.zeros_initializer())
        self.built = True

    def call(self, inputs, state):
        if self._state_is_tuple:
            c, h = state
        else:
            c, h = array_ops.split(state, 2, axis=1)
        gates = nn_ops.bias_add(
            math_ops.matmul(array_ops.concat([inputs, h], 1), self._kernel),
            self._bias)
        i, j, f, o = array_ops.split(gates, 4, axis=1)
        forget_bias = convert_to_tensor(self._forget_bias, dtype=f.dtype)
        sigmoid = math_ops.sigmoid
        new_c = c * sigmoid(f + forget_bias) + sigmoid(i) * self._activation(j)
        new_h = self._activation(new_c) * sigmoid(o)
        if self._state_is_tuple:
            return new_h, LSTMStateTuple(new_c, new_h)
        return new_h, array_ops.concat([new_c, new_h], 1)


class LSTMCell(LayerRNNCell):
    """The LSTM of Hochreiter & Schmidhuber with TF 1.15's options:
    ``use_peepholes`` (diagonal ``w_f_diag``, ``w_i_diag``, ``w_o_diag``),
    ``cell_clip`` (``c`` clipped to ``[-cell_clip, cell_clip]``), ``num_proj``
    (the output projected by ``projection/kernel``, clipped by ``proj_clip``)
    and ``forget_bias`` (added to the forget gate when the cell runs).

    Variables: ``lstm_cell/kernel`` ``[depth + (num_proj or n), 4n]`` with gates
    ``i, j, f, o``; ``lstm_cell/bias`` ``[4n]`` (zeros). ``num_unit_shards`` /
    ``num_proj_shards`` partition the kernels as TF does.
    """

    def __init__(self, num_units, use_peepholes=False, cell_clip=None,
                 initializer=None, num_proj=None, proj_clip=None,
                 num_unit_shards=None, num_proj_shards=None, forget_bias=1.0,
                 state_is_tuple=True, activation=None, reuse=None, name=None,
                 dtype=None, **kwargs):
        super().__init__(_reuse=reuse, name=name, dtype=dtype, **kwargs)
        self._num_units = int(num_units)
        self._use_peepholes = use_peepholes
        self._cell_clip = cell_clip
        self._initializer = initializer
        self._num_proj = num_proj
        self._proj_clip = proj_clip
        self._num_unit_shards = num_unit_shards
        self._num_proj_shards = num_proj_shards
        self._forget_bias = forget_bias
        self._state_is_tuple = state_is_tuple
        self._activation = _activation(activation)
        self._output = num_proj if num_proj else self._num_units

    @property
    def state_size(self):
        n, p = self._num_units, self._output
        return LSTMStateTuple(n, p) if self._state_is_tuple else n + p

    @property
    def output_size(self):
        return self._output

    def build(self, inputs_shape):
        depth = _input_depth(inputs_shape)
        n = self._num_units
        unit_part = (fixed_size_partitioner(self._num_unit_shards)
                     if self._num_unit_shards is not None else None)
        self._kernel = self.add_variable(
            WEIGHTS_VARIABLE_NAME, shape=[depth + self._output, 4 * n],
            initializer=self._initializer, partitioner=unit_part)
        self._bias = self.add_variable(BIAS_VARIABLE_NAME, shape=[4 * n],
                                       initializer=init_ops.zeros_initializer())
        if self._use_peepholes:
            self._w_f_diag, self._w_i_diag, self._w_o_diag = (
                self.add_variable(k, shape=[n], initializer=self._initializer)
                for k in ("w_f_diag", "w_i_diag", "w_o_diag"))
        if self._num_proj is not None:
            proj_part = (fixed_size_partitioner(self._num_proj_shards)
                         if self._num_proj_shards is not None else None)
            self._proj_kernel = self.add_variable(
                f"projection/{WEIGHTS_VARIABLE_NAME}", shape=[n, self._num_proj],
                initializer=self._initializer, partitioner=proj_part)
        self.built = True

    def call(self, inputs, state):
        n, sigmoid = self._num_units, math_ops.sigmoid
        if self._state_is_tuple:
            c_prev, m_prev = state
        else:
            c_prev = array_ops.slice(state, [0, 0], [-1, n])
            m_prev = array_ops.slice(state, [0, n], [-1, self._output])
        if inputs.shape.rank is not None and inputs.shape.as_list()[-1] is None:
            raise ValueError("Could not infer input size from inputs.get_shape()[-1]")
        lstm_matrix = nn_ops.bias_add(
            math_ops.matmul(array_ops.concat([inputs, m_prev], 1),
                            convert_to_tensor(self._kernel)), self._bias)
        i, j, f, o = array_ops.split(lstm_matrix, 4, axis=1)
        forget_bias = convert_to_tensor(self._forget_bias, dtype=f.dtype)
        if self._use_peepholes:
            c = (sigmoid(f + forget_bias + self._w_f_diag * c_prev) * c_prev
                 + sigmoid(i + self._w_i_diag * c_prev) * self._activation(j))
        else:
            c = sigmoid(f + forget_bias) * c_prev + sigmoid(i) * self._activation(j)
        if self._cell_clip is not None:
            c = clip_ops.clip_by_value(c, -self._cell_clip, self._cell_clip)
        if self._use_peepholes:
            m = sigmoid(o + self._w_o_diag * c) * self._activation(c)
        else:
            m = sigmoid(o) * self._activation(c)
        if self._num_proj is not None:
            m = math_ops.matmul(m, convert_to_tensor(self._proj_kernel))
            if self._proj_clip is not None:
                m = clip_ops.clip_by_value(m, -self._proj_clip, self._proj_clip)
        if self._state_is_tuple:
            return m, LSTMStateTuple(c, m)
        return m, array_ops.concat([c, m], 1)


class MultiRNNCell(RNNCell):
    """Cells stacked: cell i's output is cell i+1's input, each in a variable
    scope ``cell_<i>`` (``rnn/multi_rnn_cell/cell_0/basic_lstm_cell/kernel``).
    The state is the tuple of the cells' states."""

    def __init__(self, cells, state_is_tuple=True):
        super().__init__()
        if not cells:
            raise ValueError("Must specify at least one cell for MultiRNNCell.")
        if not nest.is_nested(cells):
            raise TypeError(f"cells must be a list or tuple, but saw: {cells}.")
        self._cells = list(cells)
        self._state_is_tuple = state_is_tuple
        if not state_is_tuple and any(nest.is_nested(c.state_size)
                                      for c in self._cells):
            raise ValueError("Some cells return tuples of states, but the flag "
                             "state_is_tuple is not set. State sizes are: "
                             f"{[c.state_size for c in self._cells]}")

    def _sub_cells(self):
        return self._cells

    @property
    def state_size(self):
        if self._state_is_tuple:
            return tuple(c.state_size for c in self._cells)
        return sum(c.state_size for c in self._cells)

    @property
    def output_size(self):
        return self._cells[-1].output_size

    def zero_state(self, batch_size, dtype):
        g = get_default_graph()
        with g.name_scope(type(self).__name__ + "ZeroState"):
            if self._state_is_tuple:
                return tuple(c.zero_state(batch_size, dtype) for c in self._cells)
            return super().zero_state(batch_size, dtype)

    def call(self, inputs, state):
        cur_inp, pos, new_states = inputs, 0, []
        for i, cell in enumerate(self._cells):
            with variable_scope(f"cell_{i}"):
                if self._state_is_tuple:
                    if not nest.is_nested(state):
                        raise ValueError(f"Expected state to be a tuple of length "
                                         f"{len(self.state_size)}, but received: "
                                         f"{state}")
                    cur_state = state[i]
                else:
                    cur_state = array_ops.slice(state, [0, pos], [-1, cell.state_size])
                    pos += cell.state_size
                cur_inp, new_state = cell(cur_inp, cur_state)
                new_states.append(new_state)
        if self._state_is_tuple:
            return cur_inp, tuple(new_states)
        return cur_inp, array_ops.concat(new_states, 1)


__all__ = [
    "BasicLSTMCell",
    "BasicRNNCell",
    "GRUCell",
    "LSTMCell",
    "LSTMStateTuple",
    "LayerRNNCell",
    "MultiRNNCell",
    "RNNCell",
    "assert_like_rnncell",
]
