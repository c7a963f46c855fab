"""TF1's ``tf.data.Dataset`` transformations beyond map/batch/repeat, in a
graph with one-shot and initializable iterators.

Expected element sequences are TF 2.21's for the same pipelines
(tf.compat.v1, graph mode), including ``interleave``'s cycle order and
``padded_batch``'s padding; plus ``FixedLengthRecordDataset``, ``Options`` and
``DatasetSpec``."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd
from nbdist.framework.nest import map_structure

D = nd.compat.v1.data.Dataset


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def drain(ds, sess=None):
    nxt = ds.make_one_shot_iterator().get_next()
    out = []
    with (sess or nd.Session()) as s:
        for _ in range(200):  # bounded: every pipeline here is shorter
            try:
                out.append(map_structure(
                    lambda v: np.asarray(v).tolist(), s.run(nxt)))
            except nd.errors.OutOfRangeError:
                break
    return out


@pytest.mark.parametrize("build, expected", [
    (lambda: D.zip((D.range(3), D.range(10, 20))), [(0, 10), (1, 11), (2, 12)]),
    (lambda: D.zip({"a": D.range(2), "b": D.range(5, 9)}),
     [{"a": 0, "b": 5}, {"a": 1, "b": 6}]),
    (lambda: D.range(3).concatenate(D.range(7, 9)), [0, 1, 2, 7, 8]),
    (lambda: D.range(6).filter(lambda x: x % 2 > 0).flat_map(
        lambda x: D.from_tensors(x).repeat(2)), [1, 1, 3, 3, 5, 5]),
    (lambda: D.range(1, 6).interleave(lambda x: D.from_tensors(x).repeat(x),
                                      cycle_length=2, block_length=2),
     [1, 2, 2, 3, 3, 3, 4, 4, 5, 5, 4, 4, 5, 5, 5]),
    (lambda: D.range(1, 6).interleave(lambda x: D.from_tensors(x).repeat(6 - x),
                                      cycle_length=3),
     [1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2, 1, 4, 5, 4]),
    (lambda: D.range(1, 4).map(lambda x: nd.fill([x], x)).padded_batch(
        2, padded_shapes=[None]), [[[1, 0], [2, 2]], [[3, 3, 3]]]),
    (lambda: D.range(1, 4).map(lambda x: nd.fill([x], x)).padded_batch(
        2, padded_shapes=[4], padding_values=np.int64(-1), drop_remainder=True),
     [[[1, -1, -1, -1], [2, 2, -1, -1]]]),
    (lambda: D.from_tensor_slices([[1, 2], [3, 4]]).unbatch(), [1, 2, 3, 4]),
    (lambda: D.range(8).shard(3, 2), [2, 5]),
    (lambda: D.range(5).skip(2), [2, 3, 4]),
    (lambda: D.range(5).skip(-1), []),
    (lambda: D.range(3).enumerate(5), [(5, 0), (6, 1), (7, 2)]),
    (lambda: D.range(4).apply(lambda ds: ds.take(2)), [0, 1]),
], ids=["zip", "zip-dict", "concatenate", "filter-flat_map", "interleave-block2",
        "interleave-cycle3", "padded_batch", "padded_batch-values", "unbatch",
        "shard", "skip", "skip-all", "enumerate", "apply"])
def test_transformations_give_tfs_sequences(build, expected):
    assert drain(build()) == expected


def test_static_element_specs():
    assert D.range(3).padded_batch(2).element_spec.shape.as_list() == [None]
    padded = D.range(3).map(lambda x: nd.fill([x], x)).padded_batch(
        2, padded_shapes=[5], drop_remainder=True)
    assert padded.element_spec.shape.as_list() == [2, 5]
    mixed = D.from_tensors(nd.zeros([2])).concatenate(D.from_tensors(nd.zeros([3])))
    assert mixed.element_spec.shape.as_list() == [None]
    assert D.from_tensor_slices(np.zeros([4, 2, 3])).unbatch().element_spec.shape == [3]
    with pytest.raises(TypeError, match="Incompatible dataset elements"):
        D.range(2).concatenate(D.from_tensors(1.0))
    with pytest.raises(ValueError, match="scalar boolean"):
        D.range(2).filter(lambda x: x)
    with pytest.raises(ValueError, match="Index must be between 0 and 1"):
        D.range(2).shard(2, 2)


def test_cache_replays_the_first_pass_and_files_outlive_the_session(tmp_path):
    # A random map would draw new numbers each pass; the cache replays pass 1.
    mem = drain(D.range(3).map(lambda x: nd.random_uniform([])).cache().repeat(2))
    assert mem[:3] == mem[3:] and len(set(mem)) == 3
    path = str(tmp_path / "cache")
    first = drain(D.range(3).map(lambda x: nd.random_uniform([])).cache(path))
    again = drain(D.range(3).map(lambda x: nd.random_uniform([])).cache(path))
    assert first == again


def test_initializable_iterator_reinitializes_transformed_pipeline():
    n = nd.placeholder(nd.int64, [])
    it = D.range(n).filter(lambda x: x > 0).padded_batch(2).make_initializable_iterator()
    nxt = it.get_next()
    with nd.Session() as s:
        s.run(it.initializer, {n: 4})
        assert s.run(nxt).tolist() == [1, 2]
        s.run(it.initializer, {n: 2})
        assert s.run(nxt).tolist() == [1]
        with pytest.raises(nd.errors.OutOfRangeError):
            s.run(nxt)


def test_fixed_length_record_dataset(tmp_path):
    good, bad = tmp_path / "good.bin", tmp_path / "bad.bin"
    good.write_bytes(b"HHabcdefghiFF")
    bad.write_bytes(b"HHabcdefghijFF")
    ds = nd.compat.v1.data.FixedLengthRecordDataset(
        [str(good)], 3, header_bytes=2, footer_bytes=2)
    assert ds.element_spec == nd.data.TensorSpec([], nd.string)
    assert drain(ds) == [b"abc", b"def", b"ghi"]
    nxt = nd.data.FixedLengthRecordDataset(str(bad), 3, 2, 2).make_one_shot_iterator(
        ).get_next()
    with nd.Session() as s, pytest.raises(
            nd.errors.InvalidArgumentError, match="body length 10 bytes, which is "
            "not an exact multiple of the record length"):
        s.run(nxt)


def test_options_are_kept_merged_and_checked_and_dataset_spec():
    v1 = nd.compat.v1.data
    opts = v1.Options()
    opts.threading.private_threadpool_size = 4
    opts.experimental_deterministic = False
    ds = D.range(3).with_options(opts).map(lambda x: x + 1)
    assert ds.options().threading.private_threadpool_size == 4
    assert ds.options().deterministic is False
    assert D.range(2).options() == v1.Options()
    assert isinstance(v1.ThreadingOptions(), v1.ThreadingOptions)
    with pytest.raises(AttributeError, match="Cannot set the property foo on Options"):
        opts.foo = 1
    spec = v1.DatasetSpec(nd.data.TensorSpec([], nd.int64))
    assert v1.DatasetSpec.from_value(ds) == spec and spec.value_type is D
    assert repr(spec).startswith("DatasetSpec(TensorSpec(shape=(), ")
    assert drain(ds) == [1, 2, 3]


def test_reinitializable_iterator_from_structure():
    a, b = D.range(3), D.range(10, 12).map(lambda x: x * 2)
    it = nd.compat.v1.data.Iterator.from_structure(a.output_types, a.output_shapes)
    init_a, init_b, nxt = it.make_initializer(a), it.make_initializer(b), it.get_next()
    with nd.Session() as s:
        with pytest.raises(nd.errors.FailedPreconditionError):
            s.run(nxt)
        s.run(init_a)
        assert [s.run(nxt) for _ in range(2)] == [0, 1]
        s.run(init_b)
        assert s.run(nxt) == 20
    with pytest.raises(TypeError, match="Expected output types tf.int64 but got "
                                        "dataset with output types tf.float32"):
        it.make_initializer(D.from_tensors(1.0))
    pairs = nd.data.Iterator.from_structure((nd.int64, nd.string), ([], [None]))
    assert pairs.output_shapes[1].as_list() == [None]
    with pytest.raises(ValueError, match="does not have an initializer"):
        _ = pairs.initializer


def test_from_generator_runs_the_generator_each_pass_and_checks_elements():
    calls = []

    def gen(n):
        calls.append(int(n))
        for i in range(int(n)):
            yield i, [b"x"] * i

    ds = D.from_generator(gen, (nd.int64, nd.string), ([], [None]), args=(3,))
    assert ds.element_spec[1].shape.as_list() == [None]
    got = drain(ds.repeat(2))
    assert got == [(0, []), (1, [b"x"]), (2, [b"x", b"x"])] * 2 and calls == [3, 3]
    wrong_shape = D.from_generator(lambda: iter([[1, 2]]), nd.int64, [3])
    wrong_type = D.from_generator(lambda: iter(["a"]), nd.int64)
    shape_message = (r"yielded an element of shape \(2,\) where an element of "
                     r"shape \(3,\) was expected")
    for ds, message in ((wrong_shape, shape_message),
                        (wrong_type, "could not be converted to the expected type")):
        nxt = ds.make_one_shot_iterator().get_next()
        with nd.Session() as s, pytest.raises(nd.errors.InvalidArgumentError,
                                              match=message):
            s.run(nxt)
