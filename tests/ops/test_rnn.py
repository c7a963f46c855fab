"""nd.nn.rnn_cell and the RNN loops as TF 1.15 builds them.

What a user relies on: the variable names TF 1.15 gives (so a TF checkpoint of
the same model loads; the lists below are what TF 2.21's tf.compat.v1 with
tf_keras builds, checked in /work/tfvenv), the cells' documented equations
(LSTM gates i, j, f, o; forget bias added at run time; peepholes, cell clip,
projection; GRU r, u gates), ``sequence_length`` (zeros past each length, the
state held from the entry's last step), ``time_major``, ``initial_state``,
static and bidirectional forms and ``raw_rnn`` agreeing with ``dynamic_rnn``,
gradients through the loop matching finite differences, and a small model
learning a sequence task. The oracle is NumPy, step by step.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import FIXTURES

import nbdist as nd

rc = nd.nn.rnn_cell
RNG = np.random.default_rng(3)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def np_lstm(x, c, h, kernel, bias, forget_bias=1.0, peep=None, clip=None, proj=None):
    i, j, f, o = np.split(np.concatenate([x, h], 1) @ kernel + bias, 4, axis=1)
    if peep is None:
        c = sigmoid(f + forget_bias) * c + sigmoid(i) * np.tanh(j)
    else:
        wf, wi, wo = peep
        c = sigmoid(f + forget_bias + wf * c) * c + sigmoid(i + wi * c) * np.tanh(j)
    if clip is not None:
        c = np.clip(c, -clip, clip)
    m = sigmoid(o + (0 if peep is None else peep[2] * c)) * np.tanh(c)
    if proj is not None:
        m = m @ proj
    return c, m


def np_gru(x, h, gk, gb, ck, cb):
    r, u = np.split(sigmoid(np.concatenate([x, h], 1) @ gk + gb), 2, axis=1)
    c = np.tanh(np.concatenate([x, r * h], 1) @ ck + cb)
    return u * h + (1 - u) * c


def np_rnn(step, x, state, lengths):
    """Runs ``step(x_t, state) -> (out, state)`` over [batch, time, depth] with
    TF's copy-through past each entry's length."""
    outs = []
    for t in range(x.shape[1]):
        out, new = step(x[:, t], state)
        live = (t < lengths)[:, None]
        outs.append(np.where(live, out, 0.0))
        state = tuple(np.where(live, n, s) for n, s in zip(new, state))
    return np.stack(outs, 1), state


def values(sess, cell):
    return {v.op.name[len(cell.scope_name) + 1:]: sess.run(v)
            for v in cell.trainable_variables}


# -- names ------------------------------------------------------------------------
def test_variable_names_are_tf_1_15s(graph):
    x = nd.placeholder(nd.float32, [2, 3, 4])
    multi = rc.MultiRNNCell([rc.DropoutWrapper(rc.BasicLSTMCell(5)), rc.GRUCell(3)])
    nd.nn.dynamic_rnn(multi, x, dtype=nd.float32)
    nd.nn.dynamic_rnn(rc.LSTMCell(4, use_peepholes=True, num_proj=2), x,
                      dtype=nd.float32)
    nd.nn.dynamic_rnn(rc.BasicRNNCell(4), x, dtype=nd.float32, scope="foo")
    nd.nn.static_rnn(rc.BasicRNNCell(4), nd.unstack(x, axis=1), dtype=nd.float32)
    nd.nn.bidirectional_dynamic_rnn(rc.GRUCell(3), rc.GRUCell(3), x, dtype=nd.float32)
    got = [(v.op.name, v.shape.as_list()) for v in nd.global_variables()]
    gru = [("gates/kernel", [None, 6]), ("gates/bias", [6]),
           ("candidate/kernel", [None, 3]), ("candidate/bias", [3])]
    want = [
        ("rnn/multi_rnn_cell/cell_0/basic_lstm_cell/kernel", [9, 20]),
        ("rnn/multi_rnn_cell/cell_0/basic_lstm_cell/bias", [20]),
        *[(f"rnn/multi_rnn_cell/cell_1/gru_cell/{n}", s if s[0] else [8] + s[1:])
          for n, s in gru],
        ("rnn/lstm_cell/kernel", [6, 16]), ("rnn/lstm_cell/bias", [16]),
        ("rnn/lstm_cell/w_f_diag", [4]), ("rnn/lstm_cell/w_i_diag", [4]),
        ("rnn/lstm_cell/w_o_diag", [4]), ("rnn/lstm_cell/projection/kernel", [4, 2]),
        ("foo/basic_rnn_cell/kernel", [8, 4]), ("foo/basic_rnn_cell/bias", [4]),
        ("rnn/basic_rnn_cell/kernel", [8, 4]), ("rnn/basic_rnn_cell/bias", [4]),
        *[(f"bidirectional_rnn/{d}/gru_cell/{n}", s if s[0] else [7] + s[1:])
          for d in ("fw", "bw") for n, s in gru],
    ]
    assert got == want
    assert [v.op.name for v in multi.trainable_variables] == [n for n, _ in want[:6]]
    # The same namespace under TF1's other paths.
    assert nd.compat.v1.nn.rnn_cell.LSTMCell is rc.LSTMCell
    assert nd.contrib.rnn.MultiRNNCell is rc.MultiRNNCell
    assert nd.contrib.rnn.static_rnn is nd.nn.static_rnn


def test_initialisation_as_tf(graph):
    cell = rc.GRUCell(3)
    lstm = rc.LSTMCell(2)
    cell(nd.zeros([1, 2]), nd.zeros([1, 3]))
    lstm(nd.zeros([1, 2]), lstm.zero_state(1, nd.float32))
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        v, w = values(s, cell), values(s, lstm)
    np.testing.assert_array_equal(v["gates/bias"], np.ones(6))
    np.testing.assert_array_equal(v["candidate/bias"], np.zeros(3))
    np.testing.assert_array_equal(w["bias"], np.zeros(8))  # forget bias not stored
    limit = np.sqrt(6.0 / (5 + 6))  # glorot_uniform, get_variable's default
    assert 0 < np.abs(v["gates/kernel"]).max() <= limit


# -- numbers ----------------------------------------------------------------------
@pytest.mark.parametrize("time_major", [False, True])
def test_dynamic_rnn_multi_cell_against_numpy(graph, time_major):
    x = RNG.standard_normal((3, 5, 4))
    lengths = np.array([5, 2, 0])
    lstm = rc.LSTMCell(6, use_peepholes=True, cell_clip=0.7, num_proj=3,
                       forget_bias=0.5)
    gru, basic = rc.GRUCell(4), rc.BasicLSTMCell(2, forget_bias=0.25)
    cell = rc.MultiRNNCell([lstm, gru, basic])
    feed_x = x.transpose(1, 0, 2) if time_major else x
    out, state = nd.nn.dynamic_rnn(cell, nd.constant(feed_x), sequence_length=lengths,
                                   dtype=nd.float64, time_major=time_major)
    assert out.shape.as_list() == list(feed_x.shape[:2]) + [2]
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        got_out, got_state = s.run([out, state])
        a, b, c = values(s, lstm), values(s, gru), values(s, basic)

    def step(xt, st):
        c0, m0, h1, c2, h2 = st
        c0, m0 = np_lstm(xt, c0, m0, a["kernel"], a["bias"], 0.5,
                         (a["w_f_diag"], a["w_i_diag"], a["w_o_diag"]), 0.7,
                         a["projection/kernel"])
        h1 = np_gru(m0, h1, b["gates/kernel"], b["gates/bias"],
                    b["candidate/kernel"], b["candidate/bias"])
        c2, h2 = np_lstm(h1, c2, h2, c["kernel"], c["bias"], 0.25)
        return h2, (c0, m0, h1, c2, h2)

    zeros = [np.zeros((3, n)) for n in (6, 3, 4, 2, 2)]
    want_out, want_state = np_rnn(step, x, tuple(zeros), lengths)
    if time_major:
        want_out = want_out.transpose(1, 0, 2)
    np.testing.assert_allclose(got_out, want_out, atol=1e-10)
    (g0, g1, g2) = got_state
    assert isinstance(g0, rc.LSTMStateTuple) and isinstance(g2, rc.LSTMStateTuple)
    for g, w in zip([g0.c, g0.h, g1, g2.c, g2.h], want_state):
        np.testing.assert_allclose(g, w, atol=1e-10)
    np.testing.assert_array_equal(got_out[2] if not time_major else got_out[:, 2], 0)


def test_initial_state_static_rnn_and_state_is_tuple_false(graph):
    x = RNG.standard_normal((2, 4, 3))
    h0 = RNG.standard_normal((2, 4))
    cell = rc.BasicLSTMCell(2, state_is_tuple=False)
    assert cell.state_size == 4
    with nd.variable_scope("m") as scope:
        dyn, dyn_state = nd.nn.dynamic_rnn(cell, nd.constant(x),
                                           initial_state=nd.constant(h0))
    with nd.variable_scope(scope, reuse=True):
        sta, sta_state = nd.nn.static_rnn(cell, nd.unstack(nd.constant(x), axis=1),
                                          initial_state=nd.constant(h0),
                                          sequence_length=[4, 3])
    assert len(nd.global_variables()) == 2
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        d, ds, st, ss = s.run([dyn, dyn_state, sta, sta_state])
        w = values(s, cell)

    def step(xt, st):
        c, h = np_lstm(xt, *st, w["kernel"], w["bias"])
        return h, (c, h)

    for got_out, got_state, lengths in ((d, ds, [4, 4]), (np.stack(st, 1), ss,
                                                         [4, 3])):
        want, (c, h) = np_rnn(step, x, (h0[:, :2], h0[:, 2:]), np.array(lengths))
        np.testing.assert_allclose(got_out, want, atol=1e-10)
        np.testing.assert_allclose(got_state, np.concatenate([c, h], 1), atol=1e-10)
    np.testing.assert_array_equal(st[3][1], 0)  # entry 1 stops after 3 steps


def test_bidirectional_forms_reverse_within_lengths(graph):
    x = RNG.standard_normal((2, 4, 3))
    lengths = np.array([4, 2])
    fw, bw = rc.GRUCell(2), rc.GRUCell(2)
    (of, ob), (sf, sb) = nd.nn.bidirectional_dynamic_rnn(
        fw, bw, nd.constant(x), sequence_length=lengths, dtype=nd.float64)
    sfw, sbw = rc.GRUCell(2), rc.GRUCell(2)
    so, ssf, ssb = nd.nn.static_bidirectional_rnn(
        sfw, sbw, nd.unstack(nd.constant(x), axis=1), sequence_length=lengths,
        dtype=nd.float64, scope="static")
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        got = s.run([of, ob, sb, so])
        wf, wb, wsf, wsb = (values(s, c) for c in (fw, bw, sfw, sbw))

    def run(w, seqs):
        def step(xt, st):
            h = np_gru(xt, st[0], *w.values())
            return h, (h,)

        return np_rnn(step, seqs, (np.zeros((2, 2)),), lengths)

    rev = x.copy()
    for b, n in enumerate(lengths):
        rev[b, :n] = x[b, :n][::-1]
    back, (back_state,) = run(wb, rev)
    for b, n in enumerate(lengths):
        back[b, :n] = back[b, :n][::-1]
    np.testing.assert_allclose(got[0], run(wf, x)[0], atol=1e-10)
    np.testing.assert_allclose(got[1], back, atol=1e-10)
    np.testing.assert_allclose(got[2], back_state, atol=1e-10)
    sback = run(wsb, rev)[0]
    for b, n in enumerate(lengths):
        sback[b, :n] = sback[b, :n][::-1]
    np.testing.assert_allclose(np.stack(got[3], 1),
                               np.concatenate([run(wsf, x)[0], sback], 2), atol=1e-10)


def test_raw_rnn_reproduces_dynamic_rnn(graph):
    x = RNG.standard_normal((4, 2, 3))  # time-major
    lengths = nd.constant([4, 1])
    cell = rc.BasicLSTMCell(3)
    with nd.variable_scope("m") as scope:
        dyn, dyn_state = nd.nn.dynamic_rnn(cell, nd.constant(x), lengths,
                                           dtype=nd.float64, time_major=True)
    inputs_ta = nd.TensorArray(nd.float64, size=4).unstack(nd.constant(x))

    def loop_fn(time, cell_output, cell_state, loop_state):
        emit = cell_output
        if cell_output is None:
            cell_state = cell.zero_state(2, nd.float64)
        finished = time >= lengths
        nxt = nd.cond(nd.reduce_all(finished), lambda: nd.zeros([2, 3], nd.float64),
                      lambda: inputs_ta.read(time))
        return finished, nxt, cell_state, emit, None

    with nd.variable_scope(scope, reuse=True):
        emit_ta, raw_state, loop_state = nd.nn.raw_rnn(cell, loop_fn)
    assert loop_state is None
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        d, ds, r, rs = s.run([dyn, dyn_state, emit_ta.stack(), raw_state])
    np.testing.assert_allclose(r, d, atol=1e-12)
    np.testing.assert_allclose(rs.h, ds.h, atol=1e-12)


# -- wrappers ---------------------------------------------------------------------
def test_wrappers(graph):
    x = nd.constant(RNG.standard_normal((64, 3)).astype(np.float32))
    inner = rc.BasicLSTMCell(3)
    cell = rc.ResidualWrapper(rc.DeviceWrapper(
        rc.DropoutWrapper(inner, output_keep_prob=0.5, state_keep_prob=0.5, seed=5),
        "/cpu:0"))
    state = cell.zero_state(64, nd.float32)
    out, new_state = cell(x, state)
    plain_out, plain_state = inner(x, state)
    assert [v.op.name for v in cell.trainable_variables] == [
        "basic_lstm_cell/kernel", "basic_lstm_cell/bias"]
    assert out.op.inputs[1].device.endswith("/device:CPU:0")
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        o, ns, po, ps, xv = s.run([out, new_state, plain_out, plain_state, x])
    dropped = o - xv
    kept = ~np.isclose(dropped, 0, atol=1e-7)
    np.testing.assert_allclose(dropped[kept], 2 * po[kept], rtol=1e-5, atol=1e-6)
    assert 0.35 < kept.mean() < 0.65
    np.testing.assert_allclose(ns.c, ps.c, rtol=1e-6)  # c is never dropped
    assert np.isclose(ns.h, 0).mean() > 0.3
    with pytest.raises(ValueError, match="must be between 0 and 1"):
        rc.DropoutWrapper(inner, input_keep_prob=1.5)


class EchoCell(rc.RNNCell):
    """A user's cell: outputs its input, keeps a ``get_variable`` counter."""

    @property
    def state_size(self):
        return 5

    @property
    def output_size(self):
        return 5

    def call(self, inputs, state):
        scale = nd.get_variable("scale", [], initializer=nd.ones_initializer())
        return inputs * scale, state


def test_user_cell_and_variational_dropout(graph):
    x = nd.ones([2, 6, 5])
    echo = EchoCell()
    nd.nn.dynamic_rnn(echo, x, dtype=nd.float32)
    # TF 1.15 names a user's cell's variables after its class, as TF 2.21 does.
    assert [v.op.name for v in echo.trainable_variables] == ["rnn/echo_cell/scale"]
    outs = []
    for variational in (True, False):
        cell = rc.DropoutWrapper(EchoCell(), input_keep_prob=0.5,
                                 variational_recurrent=variational, input_size=5,
                                 dtype=nd.float32, seed=3)
        outs.append(nd.nn.dynamic_rnn(cell, x, dtype=nd.float32,
                                      scope=f"v{variational}")[0])
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        same, fresh = s.run(outs)
    assert set(np.unique(same)) <= {0.0, 2.0} and set(np.unique(fresh)) <= {0.0, 2.0}
    # One mask for every time step (and every batch entry) vs one per step.
    assert (same == same[:1, :1]).all() and 0 < same[0, 0].sum() < 10
    assert not (fresh == fresh[:, :1]).all()


def test_errors_name_what_was_expected(graph):
    x = nd.zeros([2, 3, 4])
    with pytest.raises(ValueError, match="you must give a dtype"):
        nd.nn.dynamic_rnn(rc.GRUCell(2), x)
    with pytest.raises(ValueError, match="at least one cell"):
        rc.MultiRNNCell([])
    with pytest.raises(TypeError, match="is not an RNNCell"):
        nd.nn.dynamic_rnn(lambda a, b: a, x, dtype=nd.float32)
    with pytest.raises(ValueError, match="depth of inputs"):
        nd.nn.dynamic_rnn(rc.GRUCell(2), nd.placeholder(nd.float32, [2, 3, None]),
                          dtype=nd.float32)
    with pytest.raises(ValueError, match="sequence_length must be a vector"):
        nd.nn.dynamic_rnn(rc.GRUCell(2), x, sequence_length=[[1]], dtype=nd.float32)


# -- gradients and training -------------------------------------------------------
def test_gradients_through_dynamic_rnn_match_finite_differences(graph):
    x0 = RNG.standard_normal((2, 3, 2))
    xp = nd.placeholder(nd.float64, [2, 3, 2])
    cell = rc.GRUCell(2)
    out, state = nd.nn.dynamic_rnn(cell, xp, sequence_length=[3, 2], dtype=nd.float64)
    w = RNG.standard_normal((2, 3, 2))
    loss = nd.reduce_sum(out * w) + nd.reduce_sum(state * state)
    kernel = cell.trainable_variables[0]
    gk, gx = nd.gradients(loss, [kernel, xp])
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        k0 = s.run(kernel)
        sym_k, sym_x = s.run([gk, gx], {xp: x0})

        def f(k, x):
            kernel.load(k, s)
            return s.run(loss, {xp: x})

        eps = 1e-6
        num_k = np.zeros_like(k0)
        for idx in np.ndindex(k0.shape):
            d = np.zeros_like(k0)
            d[idx] = eps
            num_k[idx] = (f(k0 + d, x0) - f(k0 - d, x0)) / (2 * eps)
        num_x = np.zeros_like(x0)
        for idx in np.ndindex(x0.shape):
            d = np.zeros_like(x0)
            d[idx] = eps
            num_x[idx] = (f(k0, x0 + d) - f(k0, x0 - d)) / (2 * eps)
    np.testing.assert_allclose(sym_k, num_k, atol=1e-6)
    np.testing.assert_allclose(sym_x, num_x, atol=1e-6)
    np.testing.assert_array_equal(sym_x[1, 2], 0)  # past entry 1's length


def test_lstm_learns_to_recall_the_first_symbol(graph):
    """A sequence task: the class of a sequence is its first symbol, so the LSTM
    must carry it through noise; the loss falls well below chance."""
    nd.set_random_seed(1)
    rng = np.random.default_rng(0)
    n_sym, steps, batch = 3, 5, 32
    x = nd.placeholder(nd.int32, [batch, steps])
    y = nd.placeholder(nd.int32, [batch])
    emb = nd.get_variable("emb", [n_sym, 4])
    out, state = nd.nn.dynamic_rnn(rc.LSTMCell(8), nd.nn.embedding_lookup(emb, x),
                                   dtype=nd.float32)
    logits = nd.layers.dense(state.h, n_sym)
    loss = nd.reduce_mean(nd.nn.sparse_softmax_cross_entropy_with_logits(
        labels=y, logits=logits))
    train = nd.train.AdamOptimizer(0.05).minimize(loss)
    losses = []
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        for _ in range(60):
            xs = rng.integers(0, n_sym, (batch, steps))
            losses.append(s.run([loss, train], {x: xs, y: xs[:, 0]})[0])
    assert losses[0] > 0.9 and np.mean(losses[-5:]) < 0.2, losses


def test_a_tf_checkpoint_of_the_same_model_loads(graph):
    """A checkpoint TF wrote for the same model (scripts/make_tf_rnn_fixture.py)
    restores by name into nbdist's cells and gives TF's outputs."""
    fixture = FIXTURES / "rnn"
    x = (np.arange(24, dtype=np.float32).reshape(2, 4, 3) % 7 - 3) / 4
    cell = rc.MultiRNNCell([rc.LSTMCell(5, use_peepholes=True, num_proj=3),
                            rc.GRUCell(4)])
    outputs, _ = nd.nn.dynamic_rnn(cell, nd.constant(x), sequence_length=[4, 2],
                                   dtype=nd.float32)
    with nd.Session() as s:
        nd.train.Saver().restore(s, str(fixture / "model"))
        got = s.run(outputs)
    np.testing.assert_allclose(got, np.load(fixture / "outputs.npy"), atol=1e-6)


class VariableStateSaver:
    """A state saver keeping each state in a variable (a one-stream version of
    the saver TF's batch_sequences_with_states gives)."""

    def __init__(self, sizes):
        self.vars = {n: nd.Variable(np.zeros((1, s), np.float32), name=n)
                     for n, s in sizes.items()}

    def state(self, name):
        return self.vars[name].read_value()

    def save_state(self, name, value):
        return nd.assign(self.vars[name], value)


def test_static_state_saving_rnn_carries_the_state_across_runs(graph):
    x = RNG.standard_normal((1, 6, 2)).astype(np.float32)
    part = nd.placeholder(nd.float32, [1, 3, 2])
    saver = VariableStateSaver({"c": 3, "h": 3})
    cell = rc.BasicLSTMCell(3)
    outs, state = nd.nn.static_state_saving_rnn(
        cell, nd.unstack(part, axis=1), saver, rc.LSTMStateTuple("c", "h"))
    with nd.variable_scope("rnn", reuse=True):
        whole, _ = nd.nn.static_rnn(cell, nd.unstack(nd.constant(x), axis=1),
                                    dtype=nd.float32)
    with pytest.raises(ValueError, match="same type as cell.state_size"):
        nd.nn.static_state_saving_rnn(cell, [x[:, 0]], saver, "c")
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        first = s.run(outs, {part: x[:, :3]})
        second = s.run(outs, {part: x[:, 3:]})
        want = s.run(whole)
    np.testing.assert_allclose(np.stack(first + second), np.stack(want), atol=1e-6)
