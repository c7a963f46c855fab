"""Recurrent networks over a cell, as TF 1.15's ``tf.nn``: ``dynamic_rnn``,
``static_rnn``, ``bidirectional_dynamic_rnn``, ``static_bidirectional_rnn``
and ``raw_rnn``.

``dynamic_rnn`` is one ``while_loop`` that reads time step ``t`` from a
``TensorArray`` of the inputs and writes the cell's output to another, so the
graph does not grow with the sequence and ``nd.gradients`` differentiates
through the loop. With ``sequence_length``, a batch entry past its length
outputs zeros and carries its last state through (TF's copy-through), so the
final state is the state at each entry's own length. ``static_rnn`` unrolls the
cell in Python over a list of inputs. Variables live in the scope ``rnn`` (or
``scope``), ``bidirectional_rnn/fw`` and ``bidirectional_rnn/bw``, as in TF.

>>> import nbdist as nd
>>> x = nd.ones([2, 5, 3])   # batch, time, depth
>>> cell = nd.nn.rnn_cell.GRUCell(4)
>>> outputs, state = nd.nn.dynamic_rnn(cell, x, dtype=nd.float32)
>>> outputs.shape.as_list(), state.shape.as_list()
([2, 5, 4], [2, 4])
"""

from __future__ import annotations

from nbdist.framework import dtypes, nest
from nbdist.framework.constant_op import constant, identity
from nbdist.framework.ops import Tensor, convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape, as_shape
from nbdist.ops import array_ops, math_ops
from nbdist.ops.control_flow_v2 import while_loop
from nbdist.ops.rnn_cell_impl import assert_like_rnncell, batch_zeros, map_pairs
from nbdist.ops.tensor_array_ops import TensorArray
from nbdist.ops.variables import variable_scope


# -- helpers ----------------------------------------------------------------------
def _transpose_batch_time(x):
    """[batch, time, ...] <-> [time, batch, ...]."""
    x = convert_to_tensor(x)
    rank = x.shape.rank
    if rank is None:
        raise ValueError(f"Expected input tensor {x.name} to have a known rank")
    if rank < 2:
        return x
    out = array_ops.transpose(x, [1, 0] + list(range(2, rank)))
    dims = x.shape.as_list()
    out.set_shape([dims[1], dims[0]] + dims[2:])
    return out


def _best_effort_batch_size(flat_input, batch_axis=1):
    for x in flat_input:
        shape = x.shape
        if shape.rank is None:
            continue
        if shape.rank < 2:
            raise ValueError(f"Expected input tensor {x.name} to have rank at least "
                             f"2, but saw shape: {shape}")
        b = shape.as_list()[batch_axis]
        if b is not None:
            return b
    return array_ops.shape(flat_input[0])[batch_axis]


def _state_dtype(explicit, state):
    if explicit is not None:
        return explicit
    flat = nest.flatten(state)
    if not flat:
        raise ValueError("Unable to infer dtype from empty state.")
    return convert_to_tensor(flat[0]).dtype.base_dtype


def _initial_state(cell, initial_state, batch_size, dtype, what):
    if initial_state is not None:
        return initial_state
    if not dtype:
        raise ValueError(what)
    if hasattr(cell, "get_initial_state"):
        return cell.get_initial_state(inputs=None, batch_size=batch_size, dtype=dtype)
    return cell.zero_state(batch_size, dtype)


def _sequence_length(sequence_length):
    if sequence_length is None:
        return None
    sequence_length = math_ops.cast(convert_to_tensor(sequence_length), dtypes.int32)
    if sequence_length.shape.rank not in (None, 1):
        raise ValueError("sequence_length must be a vector of length batch_size, "
                         f"but saw shape: {sequence_length.shape}")
    return identity(sequence_length, name="sequence_length")


def _copy_through(done, old, new):
    """``old`` in the batch rows where ``done``, else ``new`` (TF's select)."""
    out = array_ops.where(done, old, new)
    out.set_shape(new.shape)
    return out


def _rnn_step(cell, input_, state, time, sequence_length, zero_output):
    """One step of ``cell``; with ``sequence_length``, TF's copy-through: past
    its length an entry outputs zeros and keeps its state."""
    new_output, new_state = cell(input_, state)
    if sequence_length is None:
        return new_output, new_state
    nest.assert_same_structure(zero_output, new_output)
    nest.assert_same_structure(state, new_state)
    done = math_ops.greater_equal(time, sequence_length)
    output = nest.pack_sequence_as(new_output, [
        _copy_through(done, z, n) for z, n in zip(nest.flatten(zero_output),
                                                  nest.flatten(new_output))])
    new_state = nest.pack_sequence_as(new_state, [
        _copy_through(done, s, n) for s, n in zip(nest.flatten(state),
                                                  nest.flatten(new_state))])
    return output, new_state


def _reverse_sequence(x, lengths, seq_axis, batch_axis):
    """Each batch entry's first ``lengths[b]`` steps reversed, the rest kept
    (TF's ``reverse_sequence``), as a gather so its gradient is a gather too."""
    x = convert_to_tensor(x)
    if lengths is None:
        return array_ops.reverse(x, [seq_axis])
    static = x.shape
    rank = static.rank
    perm = None
    if (seq_axis, batch_axis) != (0, 1):
        perm = [seq_axis, batch_axis] + [d for d in range(rank)
                                         if d not in (seq_axis, batch_axis)]
        x = array_ops.transpose(x, perm)
    shape = array_ops.shape(x)
    steps, batch = shape[0], shape[1]
    t = array_ops.expand_dims(array_ops.range(steps), 1)   # [T, 1]
    n = array_ops.expand_dims(math_ops.cast(lengths, dtypes.int32), 0)  # [1, B]
    src_t = array_ops.where_v2(math_ops.less(t, n), n - 1 - t, t)
    flat_idx = src_t * batch + array_ops.expand_dims(array_ops.range(batch), 0)
    flat = array_ops.reshape(x, array_ops.concat([[-1], shape[2:]], 0))
    out = array_ops.reshape(array_ops.gather(flat, array_ops.reshape(flat_idx, [-1])),
                            shape)
    if perm is not None:
        inverse = [0] * rank
        for i, p in enumerate(perm):
            inverse[p] = i
        out = array_ops.transpose(out, inverse)
    out.set_shape(static)
    return out


# -- dynamic_rnn ------------------------------------------------------------------
def dynamic_rnn(cell, inputs, sequence_length=None, initial_state=None, dtype=None,
                parallel_iterations=None, swap_memory=False, time_major=False,
                scope=None):
    """Runs ``cell`` over ``inputs`` in a ``while_loop`` (``tf.nn.dynamic_rnn``).

    ``inputs`` is ``[batch, time, ...]`` (``[time, batch, ...]`` with
    ``time_major``) or a nested structure of such tensors; returns
    ``(outputs, final_state)`` with ``outputs`` shaped as ``inputs`` with the
    cell's ``output_size`` as depth. Give ``initial_state`` or ``dtype``.
    ``swap_memory`` is accepted and has no effect (there is no GPU memory to
    swap from).

    >>> import nbdist as nd
    >>> cell = nd.nn.rnn_cell.BasicLSTMCell(3)
    >>> x = nd.ones([2, 4, 5])
    >>> out, st = nd.nn.dynamic_rnn(cell, x, sequence_length=[4, 2],
    ...                             dtype=nd.float32)
    >>> cell.trainable_variables[0].op.name
    'rnn/basic_lstm_cell/kernel'
    """
    assert_like_rnncell("cell", cell)
    del swap_memory
    with variable_scope(scope or "rnn"):
        flat_input = [convert_to_tensor(x) for x in nest.flatten(inputs)]
        if not time_major:
            flat_input = [_transpose_batch_time(x) for x in flat_input]
        parallel_iterations = parallel_iterations or 32
        sequence_length = _sequence_length(sequence_length)
        batch_size = _best_effort_batch_size(flat_input)
        state = _initial_state(cell, initial_state, batch_size, dtype,
                               "If there is no initial_state, you must give a dtype.")
        inputs = nest.pack_sequence_as(inputs, flat_input)
        outputs, final_state = _dynamic_rnn_loop(
            cell, inputs, state, parallel_iterations, sequence_length, dtype)
        if not time_major:
            outputs = nest.map_structure(_transpose_batch_time, outputs)
        return outputs, final_state


def _dynamic_rnn_loop(cell, inputs, initial_state, parallel_iterations,
                      sequence_length, dtype):
    flat_input = nest.flatten(inputs)
    flat_output_size = nest.flatten(cell.output_size)
    shapes = []
    for x in flat_input:
        if x.shape.rank is not None and x.shape.rank < 3:
            raise ValueError(f"Shape {x.shape} must have rank at least 3")
        if x.shape.rank is None or not TensorShape(x.shape.as_list()[2:]) \
                .is_fully_defined():
            raise ValueError("Input size (depth of inputs) must be accessible via "
                             "shape inference, but saw value None.")
        shapes.append(x.shape)
    const_steps, const_batch = shapes[0].as_list()[:2]
    for s in shapes[1:]:
        if s.as_list()[0] != const_steps:
            raise ValueError("Time steps is not the same for all the elements in the "
                             "input in a batch.")
        if s.as_list()[1] != const_batch:
            raise ValueError("Batch_size is not the same for all the elements in the "
                             "input.")
    time_steps = (const_steps if const_steps is not None
                  else array_ops.shape(flat_input[0])[0])
    batch_size = _best_effort_batch_size(flat_input)
    out_dtype = _state_dtype(dtype, initial_state)
    zero_output = nest.pack_sequence_as(cell.output_size, [
        batch_zeros(batch_size, s, out_dtype) for s in flat_output_size])
    time = constant(0, dtype=dtypes.int32, name="time")
    output_ta = tuple(
        TensorArray(out_dtype, size=time_steps, tensor_array_name=f"output_{i}",
                    element_shape=TensorShape([const_batch]).concatenate(as_shape(s)))
        for i, s in enumerate(flat_output_size))
    input_ta = tuple(
        TensorArray(x.dtype.base_dtype, size=time_steps,
                    tensor_array_name=f"input_{i}",
                    element_shape=TensorShape(x.shape.as_list()[1:])).unstack(x)
        for i, x in enumerate(flat_input))

    def time_step(t, out_ta, state):
        input_t = []
        for ta, shape in zip(input_ta, shapes):
            v = ta.read(t)
            v.set_shape(shape.as_list()[1:])
            input_t.append(v)
        input_t = nest.pack_sequence_as(inputs, input_t)
        output, new_state = _rnn_step(cell, input_t, state, t, sequence_length,
                                      zero_output)
        out_ta = tuple(ta.write(t, o) for ta, o in zip(out_ta, nest.flatten(output)))
        return t + 1, out_ta, new_state

    # Every step runs (to ``time_steps``): past the longest sequence the rows
    # are zeros and states copied, which is what TF's shorter loop leaves.
    _, final_ta, final_state = while_loop(
        lambda t, *_: t < time_steps, time_step, (time, output_ta, initial_state),
        parallel_iterations=parallel_iterations, maximum_iterations=time_steps)
    final_outputs = []
    for ta, size in zip(final_ta, flat_output_size):
        out = ta.stack()
        out.set_shape([const_steps, const_batch] + as_shape(size).as_list())
        final_outputs.append(out)
    return nest.pack_sequence_as(cell.output_size, final_outputs), final_state


def _check_input_list(inputs):
    if not nest.is_nested(inputs):
        raise TypeError("inputs must be a sequence")
    if not inputs:
        raise ValueError("inputs must not be empty")


# -- static_rnn -------------------------------------------------------------------
def static_rnn(cell, inputs, initial_state=None, dtype=None, sequence_length=None,
               scope=None):
    """``cell`` unrolled over the list ``inputs`` (each ``[batch, depth]``), as
    ``tf.nn.static_rnn``: returns ``(outputs, final_state)``, outputs a list.

    >>> import nbdist as nd
    >>> xs = [nd.ones([2, 3]) for _ in range(4)]
    >>> outs, st = nd.nn.static_rnn(nd.nn.rnn_cell.BasicRNNCell(5), xs,
    ...                             dtype=nd.float32)
    >>> len(outs), outs[0].shape.as_list()
    (4, [2, 5])
    """
    assert_like_rnncell("cell", cell)
    _check_input_list(inputs)
    outputs = []
    with variable_scope(scope or "rnn") as varscope:
        first = inputs[0]
        while nest.is_nested(first):
            first = first[0]
        first = convert_to_tensor(first)
        for x in nest.flatten(inputs):
            s = convert_to_tensor(x).shape
            if s.rank is not None and s.rank >= 2 and any(
                    d is None for d in s.as_list()[1:]):
                raise ValueError("Input size (dimension 1 of inputs) must be "
                                 "accessible via shape inference, but saw value None.")
        static_b = first.shape.as_list()[0] if first.shape.rank else None
        batch_size = static_b if static_b is not None else array_ops.shape(first)[0]
        state = _initial_state(cell, initial_state, batch_size, dtype,
                               "If no initial_state is provided, dtype must be "
                               "specified")
        zero_output = None
        sequence_length = _sequence_length(sequence_length)
        if sequence_length is not None:
            out_dtype = _state_dtype(dtype, state)
            zero_output = nest.pack_sequence_as(cell.output_size, [
                batch_zeros(batch_size, s, out_dtype)
                for s in nest.flatten(cell.output_size)])
        for time, input_ in enumerate(inputs):
            if time > 0:
                varscope.reuse_variables()
            output, state = _rnn_step(cell, input_, state, time, sequence_length,
                                      zero_output)
            outputs.append(output)
        return outputs, state


def static_state_saving_rnn(cell, inputs, state_saver, state_name,
                            sequence_length=None, scope=None):
    """``static_rnn`` whose initial state is ``state_saver.state(name)`` and
    whose final state is handed to ``state_saver.save_state(name, value)``
    before the last output (and the state returned) can be read, as
    ``tf.nn.static_state_saving_rnn``: long sequences in segments, the state
    carried from one run to the next. ``state_name`` has ``cell.state_size``'s
    structure."""
    state_size = cell.state_size
    is_tuple = nest.is_nested(state_size)
    if is_tuple != nest.is_nested(state_name):
        raise ValueError(f"state_name should be the same type as cell.state_size.  "
                         f"state_name: {state_name}, cell.state_size: {state_size}")
    names = nest.flatten(state_name) if is_tuple else [state_name]
    if is_tuple and len(names) != len(nest.flatten(state_size)):
        raise ValueError(f"#elems(state_name) != #elems(state_size): {len(names)} "
                         f"vs. {len(nest.flatten(state_size))}")
    saved = [state_saver.state(n) for n in names]
    initial = nest.pack_sequence_as(state_size, saved) if is_tuple else saved[0]
    outputs, state = static_rnn(cell, inputs, initial_state=initial,
                                sequence_length=sequence_length, scope=scope)
    flat_state = nest.flatten(state) if is_tuple else [state]
    saves = [state_saver.save_state(n, v) for n, v in zip(names, flat_state)]
    g = flat_state[0].graph
    with g.control_dependencies(saves):
        last = outputs[-1]
        outputs[-1] = nest.pack_sequence_as(last, [identity(o)
                                                   for o in nest.flatten(last)])
        flat_state = [identity(v) for v in flat_state]
    state = nest.pack_sequence_as(state, flat_state) if is_tuple else flat_state[0]
    return outputs, state


# -- bidirectional ----------------------------------------------------------------
def bidirectional_dynamic_rnn(cell_fw, cell_bw, inputs, sequence_length=None,
                              initial_state_fw=None, initial_state_bw=None,
                              dtype=None, parallel_iterations=None, swap_memory=False,
                              time_major=False, scope=None):
    """A forward and a backward ``dynamic_rnn`` over the same inputs (the
    backward one over each sequence reversed within its length); returns
    ``((output_fw, output_bw), (state_fw, state_bw))``, both outputs in input
    order (``tf.nn.bidirectional_dynamic_rnn``)."""
    assert_like_rnncell("cell_fw", cell_fw)
    assert_like_rnncell("cell_bw", cell_bw)
    time_axis, batch_axis = (0, 1) if time_major else (1, 0)

    def reverse(x):
        return nest.map_structure(
            lambda t: _reverse_sequence(t, sequence_length, time_axis, batch_axis), x)

    with variable_scope(scope or "bidirectional_rnn"):
        with variable_scope("fw") as fw_scope:
            output_fw, state_fw = dynamic_rnn(
                cell_fw, inputs, sequence_length=sequence_length,
                initial_state=initial_state_fw, dtype=dtype,
                parallel_iterations=parallel_iterations, swap_memory=swap_memory,
                time_major=time_major, scope=fw_scope)
        with variable_scope("bw") as bw_scope:
            tmp, state_bw = dynamic_rnn(
                cell_bw, reverse(inputs), sequence_length=sequence_length,
                initial_state=initial_state_bw, dtype=dtype,
                parallel_iterations=parallel_iterations, swap_memory=swap_memory,
                time_major=time_major, scope=bw_scope)
    return (output_fw, reverse(tmp)), (state_fw, state_bw)


def _reverse_seq(input_seq, lengths):
    if lengths is None:
        return list(reversed(input_seq))
    flat_seq = [nest.flatten(x) for x in input_seq]
    out = []
    for parts in zip(*flat_seq):
        stacked = array_ops.stack([convert_to_tensor(p) for p in parts])
        rev = array_ops.unstack(_reverse_sequence(stacked, lengths, 0, 1))
        for r, p in zip(rev, parts):
            r.set_shape(convert_to_tensor(p).shape)
        out.append(rev)
    return [nest.pack_sequence_as(input_seq[0], list(step)) for step in zip(*out)]


def static_bidirectional_rnn(cell_fw, cell_bw, inputs, initial_state_fw=None,
                             initial_state_bw=None, dtype=None, sequence_length=None,
                             scope=None):
    """``static_rnn`` forward and over the reversed inputs; returns
    ``(outputs, state_fw, state_bw)`` with each output the forward and backward
    outputs concatenated on the last axis (``tf.nn.static_bidirectional_rnn``)."""
    assert_like_rnncell("cell_fw", cell_fw)
    assert_like_rnncell("cell_bw", cell_bw)
    _check_input_list(inputs)
    with variable_scope(scope or "bidirectional_rnn"):
        with variable_scope("fw") as fw_scope:
            output_fw, state_fw = static_rnn(cell_fw, inputs, initial_state_fw, dtype,
                                             sequence_length, scope=fw_scope)
        with variable_scope("bw") as bw_scope:
            reversed_inputs = _reverse_seq(inputs, sequence_length)
            tmp, state_bw = static_rnn(cell_bw, reversed_inputs, initial_state_bw,
                                       dtype, sequence_length, scope=bw_scope)
    output_bw = _reverse_seq(tmp, sequence_length)
    outputs = [nest.pack_sequence_as(fw, [array_ops.concat([a, b], 1) for a, b in
                                          zip(nest.flatten(fw), nest.flatten(bw))])
               for fw, bw in zip(output_fw, output_bw)]
    return outputs, state_fw, state_bw


# -- raw_rnn ----------------------------------------------------------------------
def raw_rnn(cell, loop_fn, parallel_iterations=None, swap_memory=False, scope=None):
    """The RNN loop with the input, state and emitted output chosen by
    ``loop_fn(time, cell_output, cell_state, loop_state)`` (``tf.nn.raw_rnn``).

    ``loop_fn`` returns ``(finished, next_input, next_cell_state, emit_output,
    next_loop_state)``; at time 0 (``cell_output`` None) ``next_cell_state`` is
    the initial state and ``emit_output`` the structure to emit (None: the
    cell's ``output_size``). Runs until every entry is finished; a finished
    entry emits zeros and keeps its state. Returns ``(emit_ta, final_state,
    final_loop_state)`` with ``emit_ta`` TensorArrays of the emitted outputs.
    """
    assert_like_rnncell("cell", cell)
    if not callable(loop_fn):
        raise TypeError("loop_fn must be a callable")
    del swap_memory
    parallel_iterations = parallel_iterations or 32
    with variable_scope(scope or "rnn"):
        time = constant(0, dtype=dtypes.int32)
        finished, next_input, initial_state, emit_structure, init_loop_state = loop_fn(
            time=time, cell_output=None, cell_state=None, loop_state=None)
        flat_input = [convert_to_tensor(x) for x in nest.flatten(next_input)]
        loop_state = (init_loop_state if init_loop_state is not None
                      else constant(0, dtype=dtypes.int32))
        static_b = None
        for x in flat_input:
            if x.shape.rank:
                static_b = static_b or x.shape.as_list()[0]
        batch_size = static_b if static_b is not None else array_ops.shape(
            flat_input[0])[0]
        nest.assert_same_structure(initial_state, cell.state_size)
        state = nest.map_structure(convert_to_tensor, initial_state)
        if emit_structure is not None:
            flat_emit = [convert_to_tensor(e) for e in nest.flatten(emit_structure)]
            flat_size = [TensorShape(e.shape.as_list()[1:])
                         if e.shape.is_fully_defined() else array_ops.shape(e)[1:]
                         for e in flat_emit]
            flat_dtypes = [e.dtype.base_dtype for e in flat_emit]
        else:
            emit_structure = cell.output_size
            flat_size = [as_shape(s) for s in nest.flatten(emit_structure)]
            flat_dtypes = [nest.flatten(state)[0].dtype.base_dtype] * len(flat_size)
        emit_ta = nest.pack_sequence_as(emit_structure, [
            TensorArray(dt, size=0, dynamic_size=True, name=f"rnn_output_{i}",
                        element_shape=(TensorShape([static_b]).concatenate(s)
                                       if isinstance(s, TensorShape) else None))
            for i, (dt, s) in enumerate(zip(flat_dtypes, flat_size))])
        zero_emit = nest.pack_sequence_as(emit_structure, [
            _emit_zeros(batch_size, s, dt) for s, dt in zip(flat_size, flat_dtypes)])

        def condition(unused_time, elements_finished, *_):
            return math_ops.logical_not(math_ops.reduce_all(elements_finished))

        def body(time, elements_finished, current_input, emit_ta, state, loop_state):
            next_output, cell_state = cell(current_input, state)
            nest.assert_same_structure(state, cell_state)
            nest.assert_same_structure(cell.output_size, next_output)
            next_time = time + 1
            (next_finished, next_input, next_state, emit_output,
             next_loop_state) = loop_fn(next_time, next_output, cell_state, loop_state)
            nest.assert_same_structure(state, next_state)
            nest.assert_same_structure(current_input, next_input)
            nest.assert_same_structure(emit_ta, emit_output)
            loop_state = loop_state if next_loop_state is None else next_loop_state

            def copy(cur, cand):
                cand = convert_to_tensor(cand)
                if cur.shape.rank == 0:
                    return cand
                return _copy_through(elements_finished, cur, cand)

            emit_output = map_pairs(copy, zero_emit, emit_output)
            next_state = map_pairs(copy, state, next_state)
            emit_ta = map_pairs(lambda ta, e: ta.write(time, e), emit_ta,
                                         emit_output)
            elements_finished = math_ops.logical_or(elements_finished, next_finished)
            return (next_time, elements_finished, next_input, emit_ta, next_state,
                    loop_state)

        returned = while_loop(condition, body,
                              [time, convert_to_tensor(finished), next_input, emit_ta,
                               state, loop_state],
                              parallel_iterations=parallel_iterations)
        emit_ta, final_state, final_loop_state = returned[-3:]
        if init_loop_state is None:
            final_loop_state = None
        return emit_ta, final_state, final_loop_state


def _emit_zeros(batch_size, size, dtype):
    if isinstance(size, Tensor):
        return array_ops.zeros(array_ops.concat([[batch_size], size], 0), dtype=dtype)
    return batch_zeros(batch_size, size, dtype)


__all__ = [
    "bidirectional_dynamic_rnn",
    "dynamic_rnn",
    "raw_rnn",
    "static_bidirectional_rnn",
    "static_rnn",
    "static_state_saving_rnn",
]
