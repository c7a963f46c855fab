"""map_fn, scan, foldl, foldr, py_func / numpy_function and Print as TF1.

Oracles: NumPy loops for the higher-order functions (nested structures,
``initializer``, ``reverse``) and central finite differences for their
gradients; for ``Print``, the lines TF 2.21's ``tf.compat.v1.Print`` writes for
the same tensors (checked in /work/tfvenv); for ``py_func``, the function's own
result, its errors as TF maps them, and where it may run: in the process that
built the graph, with a clear error on a task of another process, where a
``Print`` writes to that task's stderr.
"""

from __future__ import annotations

import numpy as np
import pytest
from helpers import local_cluster, wait_for
from test_gradients import check_gradient

import nbdist as nd
from nbdist import errors

RNG = np.random.default_rng(5)


def run(fetches, feed=None):
    with nd.Session() as s:
        return s.run(fetches, feed)


# -- map_fn / scan / fold ---------------------------------------------------------
def test_map_fn_nested_elems_and_dtype(graph):
    a = RNG.standard_normal((4, 2)).astype(np.float32)
    b = np.arange(4, dtype=np.int32)
    out = nd.map_fn(lambda ab: (nd.reduce_sum(ab[0]) * nd.cast(ab[1], nd.float32),
                                ab[1] * 2), (a, b), dtype=(nd.float32, nd.int32))
    assert out[0].shape.as_list() == [4] and out[1].shape.as_list() == [4]
    same = nd.map_fn(lambda v: v + 1.0, nd.placeholder_with_default(a, [None, 2]))
    assert same.shape.as_list() == [None, 2]
    got = run([out, same])
    np.testing.assert_allclose(got[0][0], a.sum(1) * b, rtol=1e-6)
    np.testing.assert_array_equal(got[0][1], b * 2)
    np.testing.assert_allclose(got[1], a + 1.0)
    with pytest.raises(ValueError, match="not a scalar"):
        nd.map_fn(lambda v: v, nd.constant(1.0))
    with pytest.raises(TypeError, match="fn must be callable"):
        nd.map_fn(None, a)


def test_scan_initializer_structures_and_reverse(graph):
    x = np.array([1.0, 2.0, 3.0, 4.0])
    running = nd.scan(lambda acc, v: acc + v, x)
    backwards = nd.scan(lambda acc, v: acc * 2 + v, x, reverse=True)
    # Fibonacci with a tuple accumulator and an initializer.
    fib = nd.scan(lambda ab, _: (ab[1], ab[0] + ab[1]), nd.zeros([6]),
                  initializer=(nd.constant(0.0), nd.constant(1.0)))
    got = run([running, backwards, fib])
    np.testing.assert_allclose(got[0], np.cumsum(x))
    want, acc = np.zeros(4), x[-1]
    want[-1] = acc
    for i in (2, 1, 0):
        acc = acc * 2 + x[i]
        want[i] = acc
    np.testing.assert_allclose(got[1], want)
    np.testing.assert_allclose(got[2][0], [1, 1, 2, 3, 5, 8])
    np.testing.assert_allclose(got[2][1], [1, 2, 3, 5, 8, 13])


def test_foldl_and_foldr_order(graph):
    x = np.array([1.0, 2.0, 3.0])
    left = nd.foldl(lambda a, v: a * 10 + v, x)            # ((1)*10+2)*10+3
    right = nd.foldr(lambda a, v: a * 10 + v, x)           # ((3)*10+2)*10+1
    init = nd.foldl(lambda a, v: (a[0] + v, a[1] * v), x,
                    initializer=(nd.constant(0.0, nd.float64), nd.constant(1.0,
                                                                           nd.float64)))
    pairs = nd.foldr(lambda a, xy: a + xy[0] * xy[1], (x, x * 2),
                     initializer=nd.constant(0.0, nd.float64))
    got = run([left, right, init, pairs])
    assert got[0] == 123.0 and got[1] == 321.0
    assert got[2] == (6.0, 6.0)
    assert got[3] == 2 * np.sum(x * x)


@pytest.mark.parametrize("which", ["map_fn", "scan", "foldl", "foldr"])
def test_gradients_match_finite_differences(which):
    x0 = RNG.standard_normal((3, 2))
    w0 = RNG.standard_normal(2)

    def build(x, w):
        if which == "map_fn":
            return nd.map_fn(lambda r: nd.sin(r) * w, x)
        if which == "scan":
            return nd.scan(lambda a, r: a * nd.tanh(r) + w, x, initializer=w * 0.5)
        fold = nd.foldl if which == "foldl" else nd.foldr
        return fold(lambda a, r: a * nd.cos(r) + w * r, x)

    check_gradient(build, [x0, w0])


# -- py_func ----------------------------------------------------------------------
def test_py_func_outputs_strings_and_errors(graph):
    seen = []

    def two(a, s):
        seen.append(s.tolist())
        return np.sort(a), np.int64(a.size)

    x = nd.constant([3.0, 1.0, 2.0])
    sorted_x, n = nd.py_func(two, [x, nd.constant(["a", "b"])],
                             [nd.float32, nd.int64])
    up = nd.numpy_function(lambda s: np.char.upper(s.astype(bytes)),
                           [nd.constant(["ab", "c"])], nd.string)
    effect = nd.py_func(lambda: seen.append("ran"), [], [])
    got = run([sorted_x, n, up])
    np.testing.assert_array_equal(got[0], [1.0, 2.0, 3.0])
    assert got[1] == 3 and got[2].tolist() == [b"AB", b"C"]
    assert seen == [[b"a", b"b"]]
    run(effect)
    assert seen[-1] == "ran"
    assert nd.gradients(nd.reduce_sum(sorted_x), [x])[0] is None
    wrong = nd.py_func(lambda v: v * 2.0, [nd.constant([1.0], nd.float64)],
                       nd.float32)
    with pytest.raises(errors.InvalidArgumentError,
                       match="0-th value returned by pyfunc_.* is float64, but "
                             "expects float32"):
        run(wrong)

    def bad(v):
        raise ValueError("no negative values")

    with pytest.raises(errors.InvalidArgumentError, match="no negative values"):
        run(nd.py_func(bad, [x], nd.float32))
    with pytest.raises(errors.OutOfRangeError):
        run(nd.py_func(lambda: next(iter(())), [], nd.float32))


def test_py_func_inside_map_fn(graph):
    out = nd.map_fn(lambda r: nd.py_func(lambda v: v[::-1].copy(), [r], nd.int32),
                    nd.constant([[1, 2], [3, 4]]))
    np.testing.assert_array_equal(run(out), [[2, 1], [4, 3]])


# -- Print ------------------------------------------------------------------------
def test_print_writes_tfs_summary_to_stderr(graph, capfd):
    x = nd.constant([[1.5, 2.0], [1 / 3, 4.0]])
    y = nd.Print(x, [x, nd.constant(7), nd.constant([True, False]),
                     nd.constant(["ab", "c"]), nd.constant(0.1, nd.float64)],
                 "x is: ", first_n=2, summarize=5)
    z = nd.Print(x, [x], "short: ")
    g = nd.gradients(nd.reduce_sum(z * 3.0), [x])[0]
    with nd.Session() as s:
        for _ in range(3):
            np.testing.assert_allclose(s.run(y), s.run(x))
        s.run(z)
        np.testing.assert_allclose(s.run(g), np.full((2, 2), 3.0))
    err = capfd.readouterr().err.splitlines()
    # TF 2.21 writes exactly these lines (first_n=2: two of the three runs).
    full = "x is: [[1.5 2][0.333333343 4]][7][1 0][ab c][0.1]"
    assert [ln for ln in err if ln.startswith("x is")] == [full, full]
    assert [ln for ln in err if ln.startswith("short")] == [
        "short: [[1.5 2][0.333333343...]...]"]  # the gradient needs no print


# -- where they run ---------------------------------------------------------------
@pytest.mark.slow
def test_py_func_runs_only_in_its_process_and_print_on_the_task(spawn, servers):
    cluster = local_cluster(client=1, worker=1)
    remote = spawn("worker", 0, cluster)
    client = servers(cluster, "client", 0)
    g = nd.Graph()
    with g.as_default():
        with nd.device("/job:client/task:0"):
            here = nd.py_func(lambda v: v + 1, [nd.constant([1])], nd.int32,
                              name="here")
        with nd.device("/job:worker/task:0"):
            there = nd.py_func(lambda v: v + 1, [nd.constant([1])], nd.int32,
                               name="there")
            shown = nd.Print(nd.constant(1.0), [nd.constant([4, 5])], "on worker: ")
    with g.as_default(), nd.Session(client.target) as s:
        assert s.run(here).tolist() == [2]
        with pytest.raises(errors.FailedPreconditionError) as e:
            s.run(there)
        assert "PyFunc 'there'" in str(e.value)
        assert "/job:worker" in str(e.value)
        assert s.run(shown) == 1.0
    wait_for(lambda: any("on worker: [4 5]" in ln for ln in remote.stderr), 30,
             "the worker's stderr to show the Print")


def test_py_func_referring_to_its_graph_lets_the_graph_be_freed():
    # A py_func's function often refers to the graph's tensors (a closure, a
    # model's method); the graph must still be collected once dropped.
    import gc
    import weakref

    def build():
        g = nd.Graph()
        with g.as_default():
            x = nd.constant([1.0, 2.0])
            y = nd.py_func(lambda a: a * 2 + 0 * len(x.name), [x], nd.float32)
            with nd.Session() as s:
                np.testing.assert_allclose(s.run(y), [2.0, 4.0])
        return weakref.ref(g)

    refs = [build() for _ in range(3)]
    gc.collect()
    assert [r() for r in refs] == [None, None, None]


def test_map_fn_over_no_rows_gives_an_empty_result_of_the_fn_shape():
    # An empty batch (TF1's map_fn gives shape (0, 3) here, checked in TF).
    x = nd.placeholder(nd.float32, [None, 3])
    y = nd.map_fn(lambda row: row * 2.0, x)
    with nd.Session() as s:
        out = s.run(y, {x: np.zeros((0, 3), np.float32)})
    assert out.shape == (0, 3) and out.dtype == np.float32
