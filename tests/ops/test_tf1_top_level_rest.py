"""The rest of TF1's top-level names (issue 34): N-D FFTs, ``fingerprint``,
``check_pinned``, the generic ``conv`` and the V2 conv backprops,
``approx_top_k``, ``GradientTape``, ``Module``, the type specs, ``variant``,
``NameAttrList``, ``ConditionalAccumulatorBase``, ``enable_tensor_equality``.
Oracles: NumPy, and values checked with TensorFlow 2.21 (tf.compat.v1 graph
mode) where stated."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd

tf = nd.compat.v1
RNG = np.random.RandomState(0)


def run(*fetches):
    with nd.Session() as s:
        s.run(nd.global_variables_initializer())
        return s.run(list(fetches))


@pytest.fixture(autouse=True)
def _fresh_graph():
    with nd.Graph().as_default():
        yield


def test_nd_ffts_match_numpy_with_cropping_and_padding():
    x = (RNG.rand(2, 3, 4) + 1j * RNG.rand(2, 3, 4)).astype(np.complex64)
    r = RNG.rand(2, 3, 4).astype(np.float32)
    a, b, c, d, e = run(tf.fftnd(x, [3, 4], [-2, -1]), tf.fftnd(x, [2, 6], [0, 2]),
                        tf.ifftnd(x, [3, 4], [1, 2]), tf.rfftnd(r, [3, 5], [1, 2]),
                        tf.irfftnd(x, [3, 6], [1, 2]))
    np.testing.assert_allclose(a, np.fft.fftn(x, s=[3, 4], axes=[-2, -1]), atol=1e-4)
    np.testing.assert_allclose(b, np.fft.fftn(x, s=[2, 6], axes=[0, 2]), atol=1e-4)
    np.testing.assert_allclose(c, np.fft.ifftn(x, s=[3, 4], axes=[1, 2]), atol=1e-5)
    np.testing.assert_allclose(d, np.fft.rfftn(r, s=[3, 5], axes=[1, 2]), atol=1e-4)
    np.testing.assert_allclose(e, np.fft.irfftn(x, s=[3, 6], axes=[1, 2]), atol=1e-5)
    assert d.dtype == np.complex64 and e.dtype == np.float32
    assert tf.rfftnd(r, [3, 5], [1, 2]).shape.as_list() == [2, 3, 3]
    with pytest.raises(ValueError, match="same length"):
        tf.fftnd(x, [3], [1, 2])


def test_fingerprint_equals_tensorflows_farmhash64():
    # Values from TF 2.21: tf.compat.v1.fingerprint of the same data.
    ints, one, two, empty, floats = run(
        tf.fingerprint(nd.constant([[1, 2], [3, 4]], nd.int64)),
        tf.fingerprint(nd.constant(["ab", "c"])),
        tf.fingerprint(nd.constant([["a", "bc"], ["d", "e"]])),
        tf.fingerprint(nd.constant(np.zeros((2, 0), np.int32))),
        tf.fingerprint(nd.constant([[1.5, 2.0]], nd.float32)))
    assert ints.tolist() == [[13, 174, 106, 137, 46, 191, 85, 144],
                             [243, 64, 135, 33, 239, 128, 109, 162]]
    assert one[0].tolist() == [30, 165, 173, 66, 82, 110, 141, 170]
    assert two[0].tolist() == [85, 27, 103, 37, 147, 177, 144, 87]
    assert empty.tolist() == [[79, 64, 144, 47, 59, 106, 225, 154]] * 2
    assert floats.tolist() == [[204, 236, 229, 42, 36, 120, 163, 209]]
    assert ints.dtype == np.uint8
    with pytest.raises(ValueError, match="rank >= 1"):
        tf.fingerprint(nd.constant(1))


def test_check_pinned_fails_as_tf_on_unpinned_memory():
    with pytest.raises(nd.errors.InvalidArgumentError, match="not pinned"):
        run(tf.check_pinned(nd.constant([1.0])))


def _np_conv2d_valid(x, w):
    kh, kw = w.shape[:2]
    oh, ow = x.shape[1] - kh + 1, x.shape[2] - kw + 1
    out = np.zeros((x.shape[0], oh, ow, w.shape[3]), np.float64)
    for i in range(oh):
        for j in range(ow):
            out[:, i, j] = np.einsum("nhwc,hwco->no", x[:, i:i + kh, j:j + kw], w)
    return out


def test_generic_conv_batch_dims_groups_and_channels_first():
    x = RNG.rand(2, 5, 5, 4).astype(np.float32)
    w = RNG.rand(3, 3, 4, 6).astype(np.float32)
    wg = RNG.rand(3, 3, 2, 6).astype(np.float32)
    plain, batched, grouped, first = run(
        tf.conv(x, w, [1, 1, 1, 1], "VALID"),
        tf.conv(x[None], w, [1, 1, 1, 1], "VALID", batch_dims=2),
        tf.conv(x, wg, [1, 1, 1, 1], "VALID", groups=2),
        tf.conv(np.transpose(x, (0, 3, 1, 2)), w, [1, 1, 1, 1], "VALID",
                data_format="CHANNELS_FIRST"))
    want = _np_conv2d_valid(x, w)
    np.testing.assert_allclose(plain, want, rtol=1e-5)
    np.testing.assert_allclose(batched[0], want, rtol=1e-5)
    np.testing.assert_allclose(np.transpose(first, (0, 2, 3, 1)), want, rtol=1e-5)
    want_g = np.concatenate([_np_conv2d_valid(x[..., :2], wg[..., :3]),
                             _np_conv2d_valid(x[..., 2:], wg[..., 3:])], -1)
    np.testing.assert_allclose(grouped, want_g, rtol=1e-5)
    with pytest.raises(ValueError, match="Stride attribute should contain 4"):
        tf.conv(x, w, [1, 1, 1], "VALID")


def test_conv2d_backprop_v2_equal_the_shape_taking_forms():
    x = RNG.rand(2, 5, 5, 3).astype(np.float32)
    w = RNG.rand(3, 3, 3, 4).astype(np.float32)
    dy = RNG.rand(2, 3, 3, 4).astype(np.float32)
    v2f, v1f, v2i, v1i = run(
        tf.conv2d_backprop_filter_v2(x, w, dy, [1, 2, 2, 1], "SAME"),
        nd.nn.conv2d_backprop_filter(x, [3, 3, 3, 4], dy, [1, 2, 2, 1], "SAME"),
        tf.conv2d_backprop_input_v2(x, w, dy, [1, 2, 2, 1], "SAME"),
        nd.nn.conv2d_backprop_input([2, 5, 5, 3], w, dy, [1, 2, 2, 1], "SAME"))
    np.testing.assert_allclose(v2f, v1f)
    np.testing.assert_allclose(v2i, v1i)


def test_approx_top_k_is_exact_as_tfs_cpu_kernel():
    x = np.array([[3.0, 1, 4, 1, 5], [9, 2, 6, 5, 3]], np.float32)
    (top, idx), (low, low_idx), (col, col_idx) = run(
        tf.approx_top_k(x, 2), tf.approx_top_k(x, 2, is_max_k=False),
        tf.approx_top_k(x, 1, reduction_dimension=0))
    assert top.tolist() == [[5, 4], [9, 6]] and idx.tolist() == [[4, 2], [0, 2]]
    assert low.tolist() == [[1, 1], [2, 3]] and low_idx.tolist() == [[1, 3], [1, 4]]
    assert col.tolist() == [[9, 2, 6, 5, 5]] and col_idx.tolist() == [[1, 1, 1, 1, 0]]
    with pytest.raises(ValueError, match="recall_target"):
        tf.approx_top_k(x, 2, recall_target=0.0)


def test_gradient_tape_records_only_its_ops():
    w = nd.Variable(2.0)
    x = nd.constant([1.0, 2.0, 3.0])
    before = w * 5.0
    with tf.GradientTape(persistent=True) as tape:
        tape.watch(x)
        y = w * x * x
        with tape.stop_recording():
            hidden = y * 2.0
        z = hidden + y
    off_tape = w * 7.0
    gy, gz, jac = run(tape.gradient(y, [w, x]), tape.gradient(z, {"w": w, "x": x}),
                      tape.jacobian(y, x))
    # d(w x^2)/dw = sum x^2, d/dx = 2 w x; `hidden` is not recorded.
    assert gy[0] == 14.0 and gy[1].tolist() == [4.0, 8.0, 12.0]
    assert gz["w"] == 14.0 and gz["x"].tolist() == [4.0, 8.0, 12.0]
    np.testing.assert_allclose(jac, np.diag([4.0, 8.0, 12.0]))
    assert tape.gradient(off_tape, w) is None
    assert tape.gradient(y, before) is None


def test_non_persistent_tape_answers_once_and_batch_jacobian():
    xb = nd.constant(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    with tf.GradientTape() as tape:
        tape.watch(xb)
        yb = xb * xb
    bj = run(tape.batch_jacobian(yb, xb))[0]
    np.testing.assert_allclose(bj, [np.diag([0.0, 2, 4]), np.diag([6.0, 8, 10])])
    with pytest.raises(RuntimeError, match="non-persistent GradientTape"):
        tape.gradient(yb, xb)


def test_module_tracks_variables_submodules_and_scope():
    class Dense(tf.Module):
        def __init__(self):
            super().__init__(name="m")
            with self.name_scope:
                self.w = nd.Variable(1.0, name="w")
                self.k = nd.Variable(2.0, name="k", trainable=False)
            self.sub = tf.Module(name="sub")
            with self.sub.name_scope:
                self.sub.v = nd.Variable(3.0, name="v")
            self.layers = [tf.Module(name="inner")]

        @tf.Module.with_name_scope
        def __call__(self, x):
            return nd.multiply(x, self.w, name="mul")

    m = Dense()
    # Names and order as TF 2.21 gives them for the same class.
    assert m.name_scope.name == "m/"
    assert [v.name for v in m.variables] == ["m/k:0", "m/w:0", "sub/v:0"]
    assert [v.name for v in m.trainable_variables] == ["m/w:0", "sub/v:0"]
    assert [v.name for v in m.non_trainable_variables] == ["m/k:0"]
    assert [s.name for s in m.submodules] == ["inner", "sub"]
    assert m(nd.constant(2.0)).name == "m/mul:0"
    assert m(nd.constant(2.0)).name == "m/mul_1:0"
    assert tf.Module().name == "module"
    with pytest.raises(ValueError, match="valid module name"):
        tf.Module(name="not valid")


def test_type_specs_dtype_and_small_names():
    spec = tf.TensorArraySpec([2], nd.int32)
    assert spec == tf.TensorArraySpec([2], nd.int32)
    assert spec != tf.TensorArraySpec([3], nd.int32)
    ta = nd.TensorArray(nd.int32, size=2, element_shape=[2])
    assert spec.is_compatible_with(ta)
    opt = tf.OptionalSpec(tf.TensorSpec([3]))
    assert opt.element_spec == tf.TensorSpec([3]) and opt == tf.OptionalSpec(
        tf.TensorSpec([3]))
    assert tf.NoneTensorSpec() == tf.NoneTensorSpec()
    assert tf.NoneTensorSpec().is_compatible_with(None)
    assert tf.variant.as_datatype_enum == 21 and tf.as_dtype("variant") is tf.variant
    assert tf.NameAttrList(name="f").name == "f"
    acc = tf.ConditionalAccumulator(nd.float32, shape=[2])
    assert isinstance(acc, tf.ConditionalAccumulatorBase)
    base = tf.ConditionalAccumulatorBase(nd.float32, [2], acc.accumulator_ref)
    assert run(base.num_accumulated())[0] == 0
    tf.enable_tensor_equality()
    a, b = nd.constant(1.0), nd.constant(1.0)
    same = a
    # TF1 graph mode keeps identity equality for graph tensors (checked in TF).
    assert (a == b) is False and (a == same) is True


def test_session_handles_keep_a_value_between_runs():
    a = nd.constant([[1.0, 2.0], [3.0, 4.0]])
    with nd.Session() as s:
        h = s.run(tf.get_session_handle(nd.matmul(a, a)))
        assert isinstance(h.handle, str) and str(h) == h.handle
        holder, kept = tf.get_session_tensor(h.handle, nd.float32)
        doubled = s.run(kept * 2.0, feed_dict={holder: h.handle})
        again = s.run(kept, feed_dict={holder: h})  # a TensorHandle feeds too
        np.testing.assert_allclose(doubled, 2 * np.array([[7, 10], [15, 22]]))
        np.testing.assert_allclose(again, [[7, 10], [15, 22]])
        np.testing.assert_allclose(h.eval(), again)
        # A handle of a handle-fed value: chains across runs.
        h2 = s.run(tf.get_session_handle(kept + 1.0), feed_dict={holder: h.handle})
        np.testing.assert_allclose(h2.eval(), again + 1.0)
        del_holder, deleter = tf.delete_session_tensor(h.handle)
        s.run(deleter, feed_dict={del_holder: h.handle})
        with pytest.raises(nd.errors.InvalidArgumentError, match="session store"):
            s.run(kept, feed_dict={holder: h.handle})
    with pytest.raises(TypeError, match="must be of type Tensor"):
        tf.get_session_handle(1.0)


def test_wrap_function_traces_once_and_calls_in_a_graph():
    calls = []

    def f(x):
        calls.append(1)
        return {"y": x * 3.0}

    wrapped = tf.wrap_function(f, [tf.TensorSpec([2], nd.float32)])
    out = wrapped(nd.constant([1.0, 2.0]))["y"]
    now = wrapped(np.array([2.0, 4.0], np.float32))["y"]
    assert run(out)[0].tolist() == [3.0, 6.0] and now.tolist() == [6.0, 12.0]
    assert len(calls) == 1  # traced once, for the signature
    with pytest.raises(ValueError, match="shape"):
        wrapped(nd.constant([1.0, 2.0, 3.0]))


def test_nondifferentiable_batch_function_values_and_no_gradient():
    @tf.nondifferentiable_batch_function(1, 4, 1000, allowed_batch_sizes=[2, 4])
    def double(a, b):
        return a * 2.0 + b

    x = nd.constant([[1.0], [2.0]])
    y = double(x, nd.constant([[0.5], [0.5]]))
    assert run(y)[0].tolist() == [[2.5], [4.5]]
    assert nd.gradients(y, x) == [None]
    with pytest.raises(ValueError, match="max_batch_size"):
        tf.nondifferentiable_batch_function(1, 4, 10, allowed_batch_sizes=[2, 3])
    with pytest.raises(ValueError, match="num_batch_threads"):
        tf.nondifferentiable_batch_function(0, 4, 10)


def test_random_index_shuffle_is_tensorflows_permutation():
    # Values from TF 2.21's tf.compat.v1.random_index_shuffle on the same input.
    full = tf.random_index_shuffle(nd.range(10, dtype=nd.int64),
                                   nd.constant([1, 2, 3], nd.int64), 9)
    one = tf.random_index_shuffle(nd.constant(5, nd.int32),
                                  nd.constant([7, 8, 9], nd.int32),
                                  nd.constant(100000, nd.int32), rounds=6)
    rows = tf.random_index_shuffle(
        nd.constant([0, 1, 2], nd.int64),
        nd.constant([[1, 2, 3], [4, 5, 6], [7, 8, 9]], nd.int64),
        nd.constant([3, 1000, 2**40], nd.int64))
    big = tf.random_index_shuffle(nd.range(300, dtype=nd.int64),
                                  nd.constant([42, 0, 1], nd.int64), 299)
    f, o, r, b = run(full, one, rows, big)
    assert f.tolist() == [2, 0, 6, 4, 8, 1, 7, 9, 5, 3]
    assert o == 37819 and o.shape == ()
    assert r.tolist() == [2, 909, 233110709]
    assert b[:10].tolist() == [276, 292, 181, 60, 115, 260, 274, 36, 131, 183]
    assert sorted(b.tolist()) == list(range(300))  # a permutation
    with pytest.raises(nd.errors.InvalidArgumentError, match="max_index must be >="):
        run(tf.random_index_shuffle(nd.constant(5, nd.int64),
                                    nd.constant([1, 2, 3], nd.int64), 3))
    with pytest.raises(ValueError, match="rounds"):
        tf.random_index_shuffle(nd.constant(1, nd.int64), [1, 2, 3], 3, rounds=5)


def test_critical_section_excludes_other_runs_and_frees_after_failure():
    import threading

    entered = nd.FIFOQueue(1, nd.float32)
    gate = nd.FIFOQueue(1, nd.float32)
    cs = tf.CriticalSection()

    def hold():  # inside: say so, then wait for the gate
        with nd.control_dependencies([entered.enqueue(0.0)]):
            return gate.dequeue()

    held = cs.execute(hold)
    other = cs.execute(lambda: nd.constant(1.0))
    bad = nd.placeholder(nd.float32, [])
    failing = cs.execute(lambda: nd.debugging.check_numerics(bad, "bad"))
    out = []
    with nd.Session() as s:
        t = threading.Thread(target=lambda: out.append(s.run(held)))
        t.start()
        # Bounded: the thread now holds the mutex.
        s.run(entered.dequeue(), options=tf.RunOptions(timeout_in_ms=30000))
        with pytest.raises(nd.errors.DeadlineExceededError):
            s.run(other, options=tf.RunOptions(timeout_in_ms=300))
        s.run(gate.enqueue(5.0))
        t.join(timeout=30)
        assert not t.is_alive() and out == [5.0]
        assert s.run(other) == 1.0
        try:
            s.run(failing, feed_dict={bad: np.nan})
        except nd.errors.InvalidArgumentError:
            pass
        # The failed run's lock was dropped with it: the section is free.
        assert s.run(other, options=tf.RunOptions(timeout_in_ms=5000)) == 1.0
        assert s.run(failing, feed_dict={bad: 2.0}) == 2.0
