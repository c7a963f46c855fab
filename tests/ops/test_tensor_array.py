"""nd.TensorArray as TF1's tensor_array_ops tests use it: write/read/stack,
unstack/gather/scatter, split/concat, size, dynamic size, the classic
``ta.write(i, x)`` while_loop, a TensorArray through cond, the run-time
errors TF raises (unwritten index, writing twice, reading twice with
clear_after_read, out of range), and gradients of stack/read/gather/concat
through while_loop checked against central finite differences."""

from __future__ import annotations

import numpy as np
import pytest
from test_gradients import check_gradient

import nbdist as nd
from nbdist import errors

RNG = np.random.default_rng(11)


def run(fetches, feed=None):
    with nd.Session() as s:
        return s.run(fetches, feed)


# -- the surface -----------------------------------------------------------------------
def test_write_read_stack_and_properties(graph):
    ta = nd.TensorArray(nd.float32, size=3, tensor_array_name="foo")
    assert ta.dtype == nd.float32 and ta.flow.dtype == nd.float32
    w = ta.write(0, [[4.0, 5.0]]).write(1, [[1.0, 3.0]]).write(2, [[7.0, -1.0]])
    assert w.element_shape.as_list() == [1, 2]
    r0, r1 = w.read(0), w.read(1)
    assert r0.shape.as_list() == [1, 2]
    got = run([r0, r1, w.identity().size()])
    np.testing.assert_array_equal(got[0], [[4.0, 5.0]])
    np.testing.assert_array_equal(got[1], [[1.0, 3.0]])
    assert got[2] == 3
    packed = nd.TensorArray(nd.float32, size=3).unstack(
        np.arange(6, dtype=np.float32).reshape(3, 2)).stack()
    assert packed.shape.as_list() == [None, 2]
    np.testing.assert_array_equal(run(packed), np.arange(6).reshape(3, 2))


def test_gather_scatter_split_concat(graph):
    x = np.arange(12, dtype=np.float64).reshape(6, 2)
    ta = nd.TensorArray(nd.float64, size=6).unstack(x)
    g = ta.gather([4, 0, 2])
    sc = nd.TensorArray(nd.float64, size=4, clear_after_read=False).scatter(
        [3, 1], x[:2]).scatter([0, 2], x[2:4])
    parts = nd.TensorArray(nd.float64, size=3, infer_shape=False,
                           clear_after_read=False).split(x, [1, 3, 2])
    got = run([g, sc.stack(), parts.concat(), parts.read(1), parts.size()])
    np.testing.assert_array_equal(got[0], x[[4, 0, 2]])
    np.testing.assert_array_equal(got[1], x[[2, 1, 3, 0]])
    np.testing.assert_array_equal(got[2], x)
    np.testing.assert_array_equal(got[3], x[1:4])
    assert got[4] == 3


def test_dynamic_size_grows_and_fixed_size_does_not(graph):
    ta = nd.TensorArray(nd.int32, size=0, dynamic_size=True)
    ta = ta.write(0, 5).write(3, 7)
    grown = ta.size()
    fixed = nd.TensorArray(nd.int32, size=2).write(2, 1).stack()
    assert run(grown) == 4
    with pytest.raises(errors.InvalidArgumentError,
                       match="Tried to write to index 2 but array is not resizeable "
                             "and size is: 2"):
        run(fixed)


def test_run_time_errors_as_tf(graph):
    ta = nd.TensorArray(nd.float32, size=3)
    twice = ta.write(0, 1.0).write(0, 2.0).stack()
    with pytest.raises(errors.InvalidArgumentError,
                       match="index 0 because it has already been written to"):
        run(twice)
    w = nd.TensorArray(nd.float32, size=3, infer_shape=False).write(0, 1.0)
    with pytest.raises(errors.InvalidArgumentError,
                       match="Could not read from TensorArray index 2.*element shape "
                             "is not fully defined"):
        run(w.read(2))
    with pytest.raises(errors.InvalidArgumentError,
                       match="Could not read from TensorArray index 1"):
        run(ta.read(1))
    # As TF: once a write fixed the element shape, an unwritten index reads zeros.
    assert run(ta.write(0, 1.0).read(2)) == 0.0
    w2 = ta.write(0, 1.0)
    with pytest.raises(errors.InvalidArgumentError,
                       match="Could not read index 0 twice because it was cleared"):
        run([w2.read(0), w2.read(0, name="again")])
    keep = nd.TensorArray(nd.float32, size=1, clear_after_read=False).write(0, 3.0)
    assert run([keep.read(0), keep.read(0, name="again")]) == [3.0, 3.0]
    with pytest.raises(errors.InvalidArgumentError,
                       match="Tried to read from index 5 but array size is: 3"):
        run(w.read(5))
    # As TF: an unwritten index reads as zeros once the element shape is known.
    known = nd.TensorArray(nd.float32, size=2, element_shape=[2]).write(0, [1., 2.])
    np.testing.assert_array_equal(run(known.stack()), [[1.0, 2.0], [0.0, 0.0]])


def test_static_checks_at_build_time(graph):
    ta = nd.TensorArray(nd.float32, size=2)
    ta = ta.write(0, [1.0, 2.0])
    with pytest.raises(ValueError, match="Inconsistent shapes"):
        ta.write(1, [1.0, 2.0, 3.0])
    with pytest.raises(errors.InvalidArgumentError, match="TensorArray dtype is "
                                                          "float32"):
        ta.write(1, nd.constant([1, 2]))
    with pytest.raises(errors.InvalidArgumentError,
                       match="TensorArray dtype is float32 but Op is trying to write "
                             "dtype string"):
        ta.write(1, "wrong_type_scalar")
    with pytest.raises(ValueError, match="Size must be provided"):
        nd.TensorArray(nd.float32)


def test_close_then_use_fails(graph):
    ta = nd.TensorArray(nd.float32, size=1).write(0, 1.0)
    closed = ta.close()
    with nd.Session() as s:
        with pytest.raises(errors.InvalidArgumentError, match="already been closed"):
            with nd.control_dependencies([closed]):
                s.run(ta.read(0))


# -- control flow ----------------------------------------------------------------------
def test_classic_write_loop_then_stack(graph):
    x = nd.placeholder(nd.float32, [None, 3])
    n = nd.shape(x)[0]
    ta = nd.TensorArray(nd.float32, size=n)

    def body(i, ta):
        return i + 1, ta.write(i, nd.reduce_sum(x[i]) * nd.cast(i, nd.float32))

    i, out = nd.while_loop(lambda i, ta: i < n, body, [0, ta])
    assert isinstance(out, nd.TensorArray)
    xv = RNG.standard_normal((5, 3)).astype(np.float32)
    got = run([i, out.stack(), out.size()], {x: xv})
    assert got[0] == 5 and got[2] == 5
    np.testing.assert_allclose(got[1], xv.sum(1) * np.arange(5), rtol=1e-5)


def test_rnn_style_loop_reads_an_input_array(graph):
    """dynamic_rnn's pattern: unstack the inputs, read one per step, write outputs."""
    xs = np.arange(8, dtype=np.float32).reshape(4, 2)
    inputs = nd.TensorArray(nd.float32, size=4).unstack(xs)
    outputs = nd.TensorArray(nd.float32, size=4)

    def body(t, h, out):
        h = h * 0.5 + inputs.read(t)
        return t + 1, h, out.write(t, h)

    _, h, out = nd.while_loop(lambda t, h, o: t < 4, body,
                              [0, nd.zeros([2]), outputs], maximum_iterations=10)
    want, hv = [], np.zeros(2, np.float32)
    for row in xs:
        hv = hv * 0.5 + row
        want.append(hv)
    got = run([h, out.stack()])
    np.testing.assert_allclose(got[0], hv)
    np.testing.assert_allclose(got[1], np.stack(want))


def test_tensor_array_through_cond(graph):
    p = nd.placeholder(nd.bool, [])
    ta = nd.TensorArray(nd.float32, size=2).write(0, 1.0)
    out = nd.cond(p, lambda: ta.write(1, 10.0), lambda: ta.write(1, 20.0))
    assert isinstance(out, nd.TensorArray)
    with nd.Session() as s:
        np.testing.assert_array_equal(s.run(out.stack(), {p: True}), [1.0, 10.0])
        np.testing.assert_array_equal(s.run(out.stack(), {p: False}), [1.0, 20.0])


# -- gradients -------------------------------------------------------------------------
def _loop_stack(x, scale):
    n = nd.shape(x)[0]

    def body(i, ta):
        row = x[i] * nd.cast(i + 1, nd.float64) * scale
        return i + 1, ta.write(i, nd.sin(row))

    _, ta = nd.while_loop(lambda i, ta: i < n, body,
                          [0, nd.TensorArray(nd.float64, size=n)])
    return ta


def test_gradient_of_stack_through_while_loop():
    check_gradient(lambda x, s: _loop_stack(x, s).stack(),
                   [RNG.standard_normal((4, 3)), 0.7])


def test_gradient_of_read_and_gather_through_while_loop():
    def build(x, s):
        ta = _loop_stack(x, s)
        return nd.concat([ta.read(2)[None], ta.gather([3, 0]) * 2.0], 0)

    check_gradient(build, [RNG.standard_normal((4, 3)), 1.3])


def test_gradient_of_unstack_read_loop_and_concat():
    def build(x):
        inputs = nd.TensorArray(nd.float64, size=3).unstack(x)

        def body(t, h, out):
            h = nd.tanh(h + inputs.read(t))
            return t + 1, h, out.write(t, h[None] * h[None])

        _, h, out = nd.while_loop(
            lambda t, h, o: t < 3, body,
            [0, nd.zeros([2], nd.float64),
             nd.TensorArray(nd.float64, size=3, infer_shape=False)])
        return nd.concat([out.concat(), h[None]], 0)

    check_gradient(build, [RNG.standard_normal((3, 2))])


def test_gradient_of_split_and_scatter():
    def build(x):
        parts = nd.TensorArray(nd.float64, size=2, infer_shape=False).split(x, [1, 2])
        sc = nd.TensorArray(nd.float64, size=3).scatter([2, 0, 1], x * x)
        return nd.concat([parts.concat() * 3.0, sc.stack()], 0)

    check_gradient(build, [RNG.standard_normal((3, 2))])


def test_gradient_of_conditional_writes_in_a_loop():
    def build(x):
        def body(i, ta):
            v = x[i] * x[i]
            ta = nd.cond(nd.equal(i % 2, 0), lambda: ta.write(i, v),
                         lambda: ta.write(i, -v * 3.0))
            return i + 1, ta

        _, ta = nd.while_loop(lambda i, ta: i < 4, body,
                              [0, nd.TensorArray(nd.float64, size=4)],
                              shape_invariants=[nd.TensorShape([]),
                                                nd.TensorShape(None)])
        return ta.stack()

    check_gradient(build, [np.arange(8.0).reshape(4, 2) / 3.0])


def test_gradient_of_nested_loops_with_an_inner_array_per_iteration():
    def build(x):
        def outer(i, ta):
            def inner(j, t2):
                return j + 1, t2.write(j, x[i, j] * 2.0)

            _, t2 = nd.while_loop(lambda j, t: j < 3, inner,
                                  [0, nd.TensorArray(nd.float64, size=3)])
            return i + 1, ta.write(i, t2.stack())

        _, ta = nd.while_loop(lambda i, ta: i < 2, outer,
                              [0, nd.TensorArray(nd.float64, size=2)])
        return nd.sin(ta.stack())

    check_gradient(build, [np.arange(6.0).reshape(2, 3) / 5.0])


def test_gradient_through_cond_reading_a_captured_array():
    def build(x):
        ta = nd.TensorArray(nd.float64, size=3).unstack(x)
        y = nd.cond(nd.reduce_sum(x) > 0, lambda: ta.read(0) * 2.0,
                    lambda: nd.zeros([2], nd.float64))
        return y + ta.read(1) * 3.0

    x = np.arange(6.0).reshape(3, 2)
    check_gradient(build, [x])
    check_gradient(build, [-x])
