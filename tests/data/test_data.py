"""``nd.data``: each transformation against a Python reference, end of sequence,
shuffle determinism, traced map functions, and iterators as task resources
read by ``next(iterator)`` inside ``nd.function``."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from helpers import local_cluster

import nbdist as nd
from nbdist import data, errors


def _drain(ds_or_it, sess=None, limit=1000):
    it = ds_or_it if isinstance(ds_or_it, data.Iterator) else \
        ds_or_it.make_one_shot_iterator()
    nxt = it.get_next()
    own = sess is None
    sess = sess or nd.Session()
    out = []
    try:
        for _ in range(limit):
            try:
                out.append(sess.run(nxt))
            except errors.OutOfRangeError:
                break
    finally:
        if own:
            sess.close()
    return out


def _ints(values):
    return [np.asarray(v).tolist() for v in values]


@pytest.fixture
def local_server():
    server = nd.Server.create_local_server()
    yield server
    server.stop()


# -- sources ---------------------------------------------------------------------
def test_from_tensor_slices_structures(graph):
    xs = np.arange(6, dtype=np.float32).reshape(3, 2)
    ys = np.array([b"a", b"b", b"c"], dtype=object)
    ds = data.Dataset.from_tensor_slices((xs, {"label": [0, 1, 2], "name": ys}))
    spec = ds.element_spec
    assert spec[0] == data.TensorSpec([2], nd.float32)
    assert spec[1]["label"] == data.TensorSpec([], nd.int32)
    assert ds.output_types[1]["name"] is nd.string
    assert ds.output_shapes[0].as_list() == [2]
    got = _drain(ds)
    assert len(got) == 3
    for i, (x, d) in enumerate(got):
        np.testing.assert_array_equal(x, xs[i])
        assert d["label"] == i and d["name"] == ys[i]
    # A Python list is one tensor, not a structure (as in tf.data).
    assert _ints(_drain(data.Dataset.from_tensor_slices([3] * 3))) == [3, 3, 3]
    with pytest.raises(ValueError, match="different first dimensions"):
        data.Dataset.from_tensor_slices((np.zeros(2), np.zeros(3)))


@pytest.mark.parametrize("args", [(5,), (2, 10, 3), (5, 0, -2), (3, 3)])
def test_range_matches_python(graph, args):
    ds = data.Dataset.range(*args)
    assert ds.output_types is nd.int64
    got = _drain(ds)
    assert _ints(got) == list(range(*args))
    assert all(np.asarray(v).dtype == np.int64 for v in got)


def test_from_tensors_is_one_element(graph):
    got = _drain(data.Dataset.from_tensors(([1, 2], 3.5)))
    assert len(got) == 1
    np.testing.assert_array_equal(got[0][0], [1, 2])


# -- transformations ---------------------------------------------------------------
def test_map_with_traced_function(graph):
    scale = nd.constant(10, dtype=nd.int64, name="scale")  # a captured constant

    def f(x, y):
        return {"sum": x * scale + y, "x": x}

    ds = data.Dataset.from_tensor_slices((np.arange(4, dtype=np.int64),
                                          np.arange(4, dtype=np.int64) * 2)).map(f)
    assert set(ds.element_spec) == {"sum", "x"}
    got = _drain(ds)
    assert [int(d["sum"]) for d in got] == [i * 10 + 2 * i for i in range(4)]
    assert [int(d["x"]) for d in got] == list(range(4))
    # The map function travels in the graph's function library.
    assert len(graph.as_graph_def().library.function) == 1


def test_map_reads_a_captured_variable(graph):
    v = nd.Variable(np.int64(100), name="offset")
    ds = data.Dataset.range(3).map(lambda x: x + v)
    it = ds.make_initializable_iterator()
    with nd.Session() as sess:
        sess.run([v.initializer, it.initializer])
        assert _ints(_drain(it, sess)) == [100, 101, 102]
        sess.run(v.assign(np.int64(7)))
        sess.run(it.initializer)
        assert _ints(_drain(it, sess)) == [7, 8, 9]


@pytest.mark.parametrize("n,drop", [(3, False), (3, True), (4, False), (10, True)])
def test_batch_matches_python(graph, n, drop):
    items = list(range(10))
    ds = data.Dataset.from_tensor_slices((np.array(items), np.array(items) * 1.0))
    ds = ds.batch(n, drop_remainder=drop)
    assert ds.output_shapes[0].as_list() == [n if drop else None]
    want = [items[i:i + n] for i in range(0, len(items), n)]
    if drop:
        want = [w for w in want if len(w) == n]
    got = _drain(ds)
    assert [a.tolist() for a, _ in got] == want
    assert all(b.dtype == np.float64 for _, b in got)


def test_batch_of_different_shapes_fails(graph):
    ds = data.Dataset.range(1, 4).map(lambda n: nd.range(n))  # [0], [0, 1], ...
    assert _ints(_drain(ds)) == [[0], [0, 1], [0, 1, 2]]
    nxt = ds.batch(2).make_one_shot_iterator().get_next()
    with nd.Session() as sess, pytest.raises(errors.InvalidArgumentError,
                                             match="Cannot batch tensors with "
                                                   "different shapes in component 0"):
        sess.run(nxt)


@pytest.mark.parametrize("count", [0, 1, 3])
def test_repeat_take_prefetch_match_python(graph, count):
    ds = data.Dataset.range(4).repeat(count).prefetch(2)
    assert _ints(_drain(ds)) == list(range(4)) * count
    forever = data.Dataset.range(3).repeat().take(7)
    assert _ints(_drain(forever)) == list(itertools.islice(itertools.cycle(range(3)),
                                                           7))
    assert _ints(_drain(data.Dataset.range(5).take(-1))) == list(range(5))
    assert _ints(_drain(data.Dataset.range(5).take(2))) == [0, 1]


def test_end_of_sequence_is_out_of_range(graph):
    it = data.Dataset.from_tensor_slices([1, 2]).make_one_shot_iterator()
    nxt = it.get_next()
    with nd.Session() as sess:
        assert [sess.run(nxt) for _ in range(2)] == [1, 2]
        for _ in range(2):  # stays at the end
            with pytest.raises(errors.OutOfRangeError, match="End of sequence"):
                sess.run(nxt)


def test_initializable_iterator_restarts_and_must_be_initialized(graph):
    it = data.make_initializable_iterator(data.Dataset.range(3), shared_name="it")
    nxt = it.get_next()
    with nd.Session() as sess:
        with pytest.raises(errors.FailedPreconditionError, match="not been init"):
            sess.run(nxt)
        sess.run(it.initializer)
        assert [sess.run(nxt) for _ in range(2)] == [0, 1]
        sess.run(it.initializer)
        assert _ints(_drain(it, sess)) == [0, 1, 2]


def _shuffled(seed, n=20, buf=5, epochs=1, reshuffle=True, graph_seed=None):
    g = nd.Graph()
    with g.as_default():
        if graph_seed is not None:
            nd.set_random_seed(graph_seed)
        ds = data.Dataset.range(n).shuffle(buf, seed=seed,
                                           reshuffle_each_iteration=reshuffle)
        return _ints(_drain(ds.repeat(epochs)))


def test_shuffle_is_deterministic_with_a_seed():
    a = _shuffled(42)
    assert a == _shuffled(42)
    assert sorted(a) == list(range(20)) and a != list(range(20))
    assert _shuffled(43) != a
    assert _shuffled(None, graph_seed=7) == _shuffled(None, graph_seed=7)
    # buffer of one: the input order
    assert _shuffled(1, buf=1) == list(range(20))
    two = _shuffled(42, epochs=2)
    assert two[:20] == a and sorted(two[20:]) == list(range(20)) and two[20:] != a
    same = _shuffled(42, epochs=2, reshuffle=False)
    assert same[:20] == same[20:] == a


def test_shuffle_buffer_bounds_how_far_elements_move():
    # TF's algorithm: element i can come out no earlier than position i - buf + 1.
    got = _shuffled(3, n=50, buf=4)
    assert all(pos >= value - 3 for pos, value in enumerate(got))


def test_pipeline_on_a_server(graph, local_server):
    ds = (data.Dataset.from_tensor_slices(np.arange(10, dtype=np.int32))
          .map(lambda x: x * x).shuffle(4, seed=1).batch(3).take(2))
    it = ds.make_initializable_iterator()
    with nd.Session(local_server.target) as sess:
        sess.run(it.initializer)
        got = _drain(it, sess)
    assert len(got) == 2 and all(len(b) == 3 for b in got)
    assert set(np.concatenate(got).tolist()) <= {i * i for i in range(10)}


# -- iterators as resources and inside functions ----------------------------------
def test_iter_and_next_need_a_function(graph):
    ds = data.Dataset.range(3)
    with pytest.raises(RuntimeError, match="only inside an nd.function"):
        iter(ds)
    with pytest.raises(TypeError, match="inside an nd.function"):
        next(ds.make_one_shot_iterator())


def test_iter_inside_function_is_a_fresh_iterator(graph):
    ds = data.Dataset.range(10).map(lambda x: x + 1)

    @nd.function
    def first_two():
        it = iter(ds)  # the dataset's ops are copied into the function
        return next(it), next(it)

    assert first_two() == (1, 2)
    assert first_two() == (1, 2)


def test_per_worker_dataset_next_inside_function():
    """The ClusterCoordinator pattern: each worker owns an iterator of the same
    shared name; one traced function reads the iterator of the task it runs on."""
    w1, w2 = nd.Server.create_local_server(), nd.Server.create_local_server()
    try:
        iterators = {}
        for i, server in enumerate((w1, w2)):
            g = nd.Graph()
            with g.as_default():
                ds = data.Dataset.from_tensor_slices([3] * 3 if i == 0 else [4, 5])
                it = ds.make_initializable_iterator(shared_name="per_worker")
            with nd.Session(server.target, graph=g) as sess:
                sess.run(it.initializer)
            iterators[server.target] = it

        @nd.function
        def worker_fn(iterator):
            return next(iterator)

        it = iterators[w1.target]
        c = worker_fn.get_concrete_function(it)
        assert worker_fn.get_concrete_function(iterators[w2.target]) is c
        assert [c.run(w1.target, it) for _ in range(3)] == [3, 3, 3]
        assert [c.run(w2.target, it) for _ in range(2)] == [4, 5]
        for server in (w1, w2):
            with pytest.raises(errors.OutOfRangeError, match="End of sequence"):
                c.run(server.target, it)
        # The iterator is a resource of each task, found by its shared name.
        for server in (w1, w2):
            rm = server._worker.resources_for("")
            res = rm.lookup("", "iterator", "per_worker")
            assert res is not None and res.elements_produced == (3 if server is w1
                                                                 else 2)
        assert worker_fn.experimental_get_tracing_count() == 1
    finally:
        w1.stop()
        w2.stop()


def test_dataset_is_instantiated_on_its_iterators_task(servers, graph):
    cluster = local_cluster(ps=1, worker=1)
    ps = servers(cluster, "ps", 0)
    worker = servers(cluster, "worker", 0)
    ds = data.Dataset.range(4).map(lambda x: x * 2)  # no device of its own
    with nd.device("/job:ps/task:0"):
        it = ds.make_one_shot_iterator(shared_name="on_ps")
    nxt = it.get_next()
    with nd.Session(worker.target) as sess:
        md = nd.RunMetadata()
        assert sess.run(nxt, options=nd.RunOptions(output_partition_graphs=True),
                        run_metadata=md) == 0
        assert _ints(_drain(it, sess)) == [2, 4, 6]
    ops_by_device = {}
    for pg in md.partition_graphs:
        for n in pg.node:
            ops_by_device.setdefault(n.op, set()).add(n.device)
    for op in ("RangeDataset", "MapDataset", "OneShotIterator", "IteratorGetNext"):
        assert ops_by_device[op] == {"/job:ps/replica:0/task:0/device:CPU:0"}, op
    assert ps._worker.resources_for("").lookup("", "iterator", "on_ps") is not None
    assert worker._worker.resources_for("").lookup("", "iterator", "on_ps") is None
