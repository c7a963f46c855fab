"""A ``map(parse)`` that no ``batch`` follows directly (``map -> shuffle ->
batch``, or elements one at a time) parses chunks of records read ahead from a
tensor or file source, and hands out exactly what the per-element map does.

The oracle of every test is the same pipeline with
``Options().experimental_optimization.map_and_batch_fusion = False`` (one map
call per element): each element's values, dtypes and shapes, the ``get_next``
at which a bad record's error comes and what follows it. How often the map's
parse ran is read from traced runs' ``RunMetadata``.
"""

from __future__ import annotations

import numpy as np
import pytest
from test_map_batch_fusion import TRACE, example, parse, parse_runs

import nbdist as nd
from nbdist.executor import tf_record


def pipeline(source, fuse, *, shuffle=False, batch=None, then=None):
    """The one-shot iterator's next element of ``source() .map(parse)``
    (``then`` applied to the source first), shuffled and batched if asked."""
    options = nd.data.Options()
    options.experimental_optimization.map_and_batch_fusion = fuse
    ds = source()
    if then is not None:
        ds = then(ds)
    ds = ds.map(parse)
    if shuffle:
        ds = ds.shuffle(6, seed=3)
    if batch:
        ds = ds.batch(batch)
    return nd.data.make_one_shot_iterator(ds.with_options(options)).get_next()


def run_all(source, fuse, limit=80, **kw):
    """(the elements, (index, error type, message) or None, parse runs)."""
    with nd.Graph().as_default():
        nxt = pipeline(source, fuse, **kw)
        got, error, parses = [], None, 0
        with nd.Session() as s:
            for i in range(limit):
                md = nd.RunMetadata()
                try:
                    got.append(s.run(nxt, options=TRACE, run_metadata=md))
                except nd.errors.OutOfRangeError:
                    break
                except nd.errors.OpError as e:
                    error = (i, type(e), e.message.split("function '")[0])
                    with pytest.raises(nd.errors.OutOfRangeError):
                        s.run(nxt)  # and what follows the error
                    break
                finally:
                    parses += parse_runs(md)
    return got, error, parses


def assert_same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert sorted(g) == sorted(w)
        for k in w:
            assert type(g[k]) is type(w[k]), k
            a, b = np.asarray(g[k]), np.asarray(w[k])
            assert a.dtype == b.dtype and a.shape == b.shape, k
            np.testing.assert_array_equal(g[k], w[k])


def records(n, bad=None):
    return [example(i, garbage=i == bad) for i in range(n)]


def slices(n, bad=None):
    return lambda: nd.data.Dataset.from_tensor_slices(records(n, bad))


def tfrecords(path, n, truncate=0):
    with tf_record.TFRecordWriter(str(path)) as w:
        for r in records(n):
            w.write(r)
    if truncate:
        data = path.read_bytes()
        path.write_bytes(data[:-truncate])
    return lambda: nd.data.TFRecordDataset([str(path)])


@pytest.mark.parametrize("n,then,shuffle,batch,chunked_parses", [
    (30, None, False, None, 3),  # chunks of 8, 16, then the 6 left
    (7, lambda d: d.repeat(3).skip(2).take(15), False, None, 2),
    (20, None, True, 4, 2),  # the dataset shape: map -> shuffle -> batch
])
def test_chunks_give_the_elements_of_the_map_per_element(n, then, shuffle, batch,
                                                         chunked_parses):
    want, want_err, per_element = run_all(slices(n), False, then=then,
                                          shuffle=shuffle, batch=batch)
    got, err, parses = run_all(slices(n), True, then=then, shuffle=shuffle,
                               batch=batch)
    assert err is None and want_err is None
    assert_same(got, want)
    n_elements = len(want) * (batch or 1)
    assert per_element == n_elements
    assert parses == chunked_parses  # once per chunk, not per record


def test_records_of_a_file_chunk_and_keep_their_element_types(tmp_path):
    """A TFRecordDataset's records (0-d object arrays): the ``raw`` output is
    the record as it came, in both pipelines."""
    src = tfrecords(tmp_path / "r.tfrecord", 12)
    want, _, _ = run_all(src, False)
    got, err, parses = run_all(src, True)
    assert err is None
    assert_same(got, want)
    assert parses == 2  # 8 then 4 records


@pytest.mark.parametrize("bad", [0, 5, 13])
def test_a_bad_record_fails_at_its_own_get_next(bad):
    """A chunk whose parse fails runs element by element: the elements before
    the bad one come, its error comes at its index, then the end, as per
    element."""
    want, want_err, _ = run_all(slices(20, bad), False)
    got, err, _ = run_all(slices(20, bad), True)
    assert want_err is not None and want_err[0] == bad
    assert err == want_err
    assert_same(got, want)


def test_a_read_error_comes_after_the_records_before_it(tmp_path):
    """A truncated file: the records read ahead before the damaged one are
    handed out first, then the read's error, at the index it has per element."""
    src = tfrecords(tmp_path / "r.tfrecord", 11, truncate=3)
    want, want_err, _ = run_all(src, False)
    got, err, _ = run_all(src, True)
    assert want_err is not None and want_err[0] == 10
    assert err == want_err
    assert_same(got, want)


def test_a_generator_upstream_is_not_read_ahead():
    """``from_generator`` has effects a user sees (here a count of what it
    yielded): the map reads it one element per ``get_next``."""
    pulled = []

    def gen():
        for r in records(20):
            pulled.append(r)
            yield r

    def source():
        return nd.data.Dataset.from_generator(gen, nd.string, nd.TensorShape([]))

    with nd.Graph().as_default():
        nxt = pipeline(source, True)
        with nd.Session() as s:
            for i in range(3):
                s.run(nxt)
                assert len(pulled) == i + 1
