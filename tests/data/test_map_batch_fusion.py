"""``map(parse)`` then ``batch(n)`` parses each batch once (tf.data's
``map_and_batch_fusion``) and gives exactly what the unfused pipeline gives.

The oracle of every test is the same pipeline with the fusion turned off
through ``Options().experimental_optimization.map_and_batch_fusion = False``:
values, dtypes, shapes, the last smaller batch, ``drop_remainder``, errors and
what follows an error. Whether a batch was fused is read from a traced run's
``RunMetadata``: the parse node of the map function runs once per batch
(fused) or once per element.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import nbdist as nd
from nbdist.proto import example_pb2

TRACE = nd.RunOptions(trace_level=nd.RunOptions.FULL_TRACE)


def example(i, image_len=4, label=True, garbage=False):
    if garbage:
        return b"\x0a\xffnot an example"
    ex = example_pb2.Example()
    f = ex.features.feature
    f["image"].bytes_list.value.append(bytes((i * 7 + k) % 256 for k in range(image_len)))
    if label:
        f["label"].int64_list.value.append(i)
    f["f"].float_list.value.extend([i / 3, -i])
    return ex.SerializeToString()


def features():
    return {"image": nd.FixedLenFeature([], nd.string),
            "label": nd.FixedLenFeature([], nd.int64),
            "f": nd.FixedLenFeature([2], nd.float32, default_value=[0.5, 0.5])}


def parse(s):
    """parse_single_example, decode_raw, cast, reshape, arithmetic with
    constants: every rule of the rewrite."""
    p = nd.parse_single_example(s, features())
    image = nd.cast(nd.decode_raw(p["image"], nd.uint8), nd.float32)
    return {"image": nd.reshape(image, [2, -1]) / 255.0, "label": p["label"],
            "f": p["f"] * nd.constant([2.0, 3.0]) - 1.0, "raw": s}


def parse_runs(run_metadata):
    """How many times a traced step ran the map function's parse node."""
    return sum(n.node_name.endswith("/ParseExampleV2")
               for d in run_metadata.step_stats.dev_stats for n in d.node_stats)


def run_all(records, fn, batch, fuse, drop=False, repeat=None, take=None,
            options_first=False, options=None):
    """(batches as lists of arrays, (error type, message) or None, the number
    of times the map's parse ran, the static shapes of an element)."""
    if options is None:
        options = nd.data.Options()
        options.experimental_optimization.map_and_batch_fusion = fuse
    with nd.Graph().as_default():
        ds = nd.data.Dataset.from_tensor_slices(records)
        if options_first:
            ds = ds.with_options(options)
        ds = ds.map(fn)
        if repeat is not None:
            ds = ds.repeat(repeat)
        if take is not None:
            ds = ds.take(take)
        ds = ds.batch(batch, drop_remainder=drop)
        if not options_first:
            ds = ds.with_options(options)
        nxt = nd.data.make_one_shot_iterator(ds).get_next()
        parts = nxt.items() if isinstance(nxt, dict) else [("", nxt)]
        shapes = {k: v.shape.as_list() for k, v in parts}
        batches, error, parses = [], None, 0
        with nd.Session() as s:
            for _ in range(50):
                md = nd.RunMetadata()
                try:
                    batches.append(s.run(nxt, options=TRACE, run_metadata=md))
                except nd.errors.OutOfRangeError:
                    break
                except nd.errors.OpError as e:
                    # the traced function's name has a per-graph counter
                    error = (type(e), re.sub(r"(function '\w+?)_\d+'", r"\1'",
                                             e.message))
                    # and what follows an error
                    with pytest.raises(nd.errors.OutOfRangeError):
                        s.run(nxt)
                    break
                finally:
                    parses += parse_runs(md)
    return batches, error, parses, shapes


def assert_same_batches(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert sorted(g) == sorted(w)
        for k in w:
            assert g[k].dtype == w[k].dtype, k
            assert g[k].shape == w[k].shape, k
            np.testing.assert_array_equal(g[k], w[k])


@pytest.mark.parametrize("n,batch,drop,repeat,take,n_batches", [
    (10, 4, False, None, None, 3),   # the last batch has 2
    (10, 4, True, None, None, 2),    # ... dropped
    (7, 3, False, 2, None, 5),       # batches straddle the repeat's epochs
    (7, 3, True, 3, 17, 5),          # a take between the map and the batch
    (1, 5, False, None, None, 1),    # one element, smaller than a batch
    (6, 4, False, "S", None, 2),     # records of a fixed-width bytes array
])
def test_fused_batches_are_the_unfused_ones_parsed_once(n, batch, drop, repeat, take,
                                                         n_batches):
    records = [example(i) for i in range(n)]
    if repeat == "S":  # (no record 0: an "S" array drops a trailing NUL byte)
        records = np.array([example(i) for i in range(1, n + 1)], dtype=bytes)
        repeat = None
    kw = {"drop": drop, "repeat": repeat, "take": take}
    fused, err_f, parses_f, shapes_f = run_all(records, parse, batch, True, **kw)
    plain, err_p, parses_p, shapes_p = run_all(records, parse, batch, False, **kw)
    assert err_f is None and err_p is None
    assert len(plain) == n_batches
    assert_same_batches(fused, plain)
    assert shapes_f == shapes_p
    assert parses_p == sum(len(b["label"]) for b in plain)  # per element
    assert parses_f == n_batches  # one parse per batch


@pytest.mark.parametrize("bad,kind", [
    (example(5, garbage=True), nd.errors.InvalidArgumentError),  # not a proto
    (example(5, label=False), nd.errors.InvalidArgumentError),   # required key
    (example(5, image_len=6), nd.errors.InvalidArgumentError),   # unequal shapes
])
def test_a_bad_record_fails_as_unfused(bad, kind):
    records = [example(i) for i in range(8)]
    records[5] = bad
    fused, err_f, _, _ = run_all(records, parse, 4, True)
    plain, err_p, _, _ = run_all(records, parse, 4, False)
    assert_same_batches(fused, plain)
    assert len(plain) == 1
    assert err_p[0] is kind
    assert err_f == err_p


def reduce_per_element(s):
    # a reduction over the element: run on a batch it would sum the batch
    return nd.reduce_sum(nd.parse_single_example(s, features())["f"])


def broadcast_wider(s):
    # a constant of higher rank than the element broadcasts differently
    return nd.parse_single_example(s, features())["label"] + nd.constant([1, 2],
                                                                          nd.int64)


def sparse_feature(s):
    p = nd.parse_single_example(s, {"f": nd.VarLenFeature(nd.float32)})
    return p["f"].values


@pytest.mark.parametrize("fn", [reduce_per_element, broadcast_wider, sparse_feature])
def test_functions_that_do_not_vectorise_run_per_element(fn):
    records = [example(i) for i in range(6)]
    fused, err_f, parses_f, _ = run_all(records, fn, 4, True)
    plain, err_p, _, _ = run_all(records, fn, 4, False)
    assert err_f is None and err_p is None
    assert [b.tolist() for b in fused] == [b.tolist() for b in plain]
    assert parses_f == 6


def options(default=None, fusion=None):
    o = nd.data.Options()
    o.experimental_optimization.apply_default_optimizations = default
    o.experimental_optimization.map_and_batch_fusion = fusion
    return o


@pytest.mark.parametrize("opts,first,fused", [
    (options(), False, True),  # TF's default: on
    (options(fusion=False), False, False),
    (options(fusion=False), True, False),  # options below the map still apply
    (options(default=False), False, False),  # a default optimisation
    (options(default=False, fusion=True), False, True),
])
def test_options_switch_the_fusion(opts, first, fused):
    records = [example(i) for i in range(8)]
    _, _, parses, _ = run_all(records, parse, 4, None, options=opts,
                              options_first=first)
    assert parses == (2 if fused else 8)


def test_options_from_another_encoding_do_not_decide():
    from nbdist.executor.kernels.dataset_kernels import options_fusion

    assert options_fusion(b"\x08\x01binary proto") is None
    assert options_fusion("") is None


def test_records_of_files_fuse_and_keep_their_element_types(tmp_path):
    """A TFRecordDataset's elements (0-d object arrays) through the fused
    map: the record passed through stays as the unfused batch stacks it."""
    from nbdist.executor import tf_record

    path = str(tmp_path / "r.tfrecord")
    with tf_record.TFRecordWriter(path) as w:
        for i in range(9):
            w.write(example(i))
    got, parses = {}, {}
    for fuse in (True, False):
        o = nd.data.Options()
        o.experimental_optimization.map_and_batch_fusion = fuse
        with nd.Graph().as_default():
            ds = nd.data.TFRecordDataset([path]).map(parse).batch(4).with_options(o)
            nxt = nd.data.make_one_shot_iterator(ds).get_next()
            with nd.Session() as s:
                md = nd.RunMetadata()
                got[fuse] = [s.run(nxt, options=TRACE, run_metadata=md)]
                got[fuse] += [s.run(nxt) for _ in range(2)]
        parses[fuse] = parse_runs(md)
    assert_same_batches(got[True], got[False])
    assert got[True][0]["raw"].dtype == object
    assert parses == {True: 1, False: 4}
