"""Summaries on the fast path: merged scalars and histograms equal to NumPy
oracles (histogram buckets as TF's ``histogram.cc``: default limits growing by
10% from 1e-12, a value counted in [previous limit, limit), runs of empty
buckets collapsed), merged summaries as concatenated bytes, and event files
written under load (many steps, several writers and threads, a background
flush) all read back by TensorBoard's own readers, nothing lost at
``flush``/``close`` and no fsync per event."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from tensorboard.backend.event_processing import event_accumulator as ea
from tensorboard.backend.event_processing import event_file_loader

import nbdist as nd
from nbdist import errors
from nbdist.proto import summary_pb2

KEEP_ALL = {ea.SCALARS: 0, ea.HISTOGRAMS: 0, ea.TENSORS: 0}
DBL_MAX = sys.float_info.max


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def tf_default_limits() -> np.ndarray:
    """TF's default histogram bucket limits (histogram.cc), built independently."""
    positive, v = [], 1.0e-12
    while v < 1.0e20:
        positive.append(v)
        v *= 1.1
    positive.append(DBL_MAX)
    return np.array([-p for p in reversed(positive)] + [0.0] + positive)


LIMITS = tf_default_limits()


def histogram_oracle(values) -> dict:
    """TF's HistogramProto of ``values`` by NumPy: bucket i counts
    limits[i-1] <= x < limits[i]; a run of empty buckets is one entry with the
    run's last limit."""
    x = np.asarray(values, dtype=np.float64).ravel()
    lower = np.concatenate([[-np.inf], LIMITS[:-1]])
    counts = ((x[:, None] >= lower[None, :]) & (x[:, None] < LIMITS[None, :])).sum(0)
    counts[-1] += np.sum(x == DBL_MAX)  # TF's last bucket takes DBL_MAX itself
    limits, buckets, i = [], [], 0
    while i < len(counts):
        end, count = LIMITS[i], counts[i]
        i += 1
        if count == 0:
            while i < len(counts) and counts[i] == 0:
                end, count = LIMITS[i], counts[i]
                i += 1
        limits.append(end)
        buckets.append(float(count))
    with np.errstate(over="ignore"):  # as TF's doubles: a huge square is inf
        total, squares = x.sum(), np.dot(x, x)
    return {
        "min": x.min(), "max": x.max(), "num": float(x.size), "sum": total,
        "sum_squares": squares, "bucket_limit": limits, "bucket": buckets,
    }


def assert_histogram(histo, values):
    want = histogram_oracle(values)
    assert (histo.min, histo.max, histo.num) == (want["min"], want["max"], want["num"])
    np.testing.assert_allclose(histo.sum, want["sum"], rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(histo.sum_squares, want["sum_squares"], rtol=1e-12)
    assert list(histo.bucket_limit) == want["bucket_limit"]
    assert list(histo.bucket) == want["bucket"]


def load(logdir) -> ea.EventAccumulator:
    acc = ea.EventAccumulator(str(logdir), size_guidance=KEEP_ALL)
    acc.Reload()
    return acc


def file_events(path) -> list:
    """Every event of one file, by TensorBoard's own record loader."""
    records = event_file_loader.RawEventFileLoader(str(path)).Load()
    return [summary_pb2.Event.FromString(r) for r in records]


def event_files(logdir) -> list[str]:
    return sorted(
        os.path.join(logdir, f) for f in os.listdir(logdir) if "tfevents" in f
    )


def model():
    """4 scalars and 2 histograms of a fed vector, merged by merge_all."""
    x = nd.placeholder(nd.float32, [None])
    y = nd.placeholder(nd.float64, [None])
    nd.summary.scalar("x_mean", nd.reduce_mean(x))
    nd.summary.scalar("x_max", nd.reduce_max(x))
    nd.summary.scalar("x_min", nd.reduce_min(x), family="extremes")
    nd.summary.scalar("y_total", nd.reduce_sum(y))
    nd.summary.histogram("x", x)
    nd.summary.histogram("y", y)
    return x, y, nd.summary.merge_all()


def data(step: int):
    rng = np.random.default_rng(step)
    x = (rng.standard_normal(1000) * 10.0 ** rng.uniform(-14, 22, 1000)).astype(
        np.float32
    )
    y = rng.standard_normal(1000) * 3.0
    return x, y


# -- values: scalars and TF's histogram buckets ----------------------------------------
def test_merged_scalars_and_histograms_equal_numpy_oracles(tmp_path):
    x, y, merged = model()
    with nd.Session() as sess, nd.summary.FileWriter(tmp_path) as writer:
        fed = {}
        for step in range(5):
            fed[step] = data(step)
            summary = sess.run(merged, {x: fed[step][0], y: fed[step][1]})
            assert isinstance(summary, bytes)
            writer.add_summary(summary, global_step=step)
    acc = load(tmp_path)
    oracles = {
        "x_mean": lambda a, b: np.mean(a),
        "x_max": lambda a, b: np.max(a),
        "extremes/extremes/x_min": lambda a, b: np.min(a),
        "y_total": lambda a, b: np.sum(b),
    }
    assert sorted(acc.Tags()[ea.SCALARS]) == sorted(oracles)
    for tag, oracle in oracles.items():
        events = acc.Scalars(tag)
        assert [e.step for e in events] == list(range(5))
        for e in events:
            # simple_value is a float32: NumPy's value rounded to it.
            want = np.float32(oracle(*fed[e.step]))
            np.testing.assert_allclose(e.value, want, rtol=2e-6)
    for tag, which in (("x", 0), ("y", 1)):
        events = acc.Histograms(tag)
        assert [e.step for e in events] == list(range(5))
        for e in events:
            assert_histogram(e.histogram_value, fed[e.step][which])


def test_values_on_and_beside_every_bucket_limit_fall_as_tfs_upper_bound():
    finite = LIMITS[1:-1]
    edges = np.concatenate([
        LIMITS,
        np.nextafter(finite, np.inf),
        np.nextafter(finite, -np.inf),
        [0.0, -0.0, 5e-324, -5e-324, 1e-300, -1e-300, 1e300, -1e300, 1e20, -1e20],
    ])
    v = nd.placeholder(nd.float64, [None])
    summary = nd.summary.histogram("edges", v)
    with nd.Session() as sess:
        for values in (edges, edges[:1], np.array([-0.0]), np.full(7, 2.5)):
            parsed = summary_pb2.Summary.FromString(sess.run(summary, {v: values}))
            [value] = parsed.value
            assert value.tag == "edges"
            assert_histogram(value.histo, values)


def test_a_non_finite_value_is_still_an_error():
    v = nd.placeholder(nd.float32, [None])
    summary = nd.summary.histogram("h", v)
    with nd.Session() as sess:
        for bad in (np.nan, np.inf, -np.inf):
            with pytest.raises(errors.InvalidArgumentError, match="Nan in summary"):
                sess.run(summary, {v: [1.0, bad]})


def test_scalar_summaries_round_to_float32_as_tf(fresh_graph):
    tags = nd.placeholder(nd.string, [3])
    values = nd.placeholder(nd.float64, [3])
    one = nd.summary.scalar("one", nd.constant(1.0 / 3.0))
    # TF's ScalarSummary op also takes a vector of tags and of values.
    many = fresh_graph.create_op(
        "ScalarSummary", [tags, values], {"T": nd.float64}, name="many"
    ).outputs[0]
    with nd.Session() as sess:
        [v] = summary_pb2.Summary.FromString(sess.run(one)).value
        assert v.simple_value == np.float32(1.0 / 3.0)
        got = summary_pb2.Summary.FromString(
            sess.run(many, {tags: [b"a", b"b", b"c"], values: [1e40, -2.0, 0.1]})
        )
        assert [x.tag for x in got.value] == ["a", "b", "c"]
        assert [x.simple_value for x in got.value] == [np.inf, -2.0, np.float32(0.1)]


# -- merge: concatenated bytes, still checked ------------------------------------------
def test_merge_is_the_concatenation_and_still_checks_its_inputs():
    a = nd.summary.scalar("a", nd.constant(1.5))
    h = nd.summary.histogram("h", nd.constant([1.0, 2.0, 2.0]))
    merged = nd.summary.merge([a, h])
    dup = nd.summary.merge([a, nd.summary.merge([a])])
    junk = nd.summary.merge([a, nd.constant(b"\xff\xff not a summary")])
    with nd.Session() as sess:
        sa, sh, sm = sess.run([a, h, merged])
        assert sm == sa + sh
        parsed = summary_pb2.Summary.FromString(sm)
        assert [v.tag for v in parsed.value] == ["a", "h"]
        assert parsed.value[0].simple_value == 1.5
        assert_histogram(parsed.value[1].histo, [1.0, 2.0, 2.0])
        with pytest.raises(errors.InvalidArgumentError, match="Duplicate tag a"):
            sess.run(dup)
        with pytest.raises(errors.InvalidArgumentError, match="Could not parse"):
            sess.run(junk)


# -- event files under load ------------------------------------------------------------
def scalar_summary(tag: str, value: float) -> bytes:
    return summary_pb2.Summary(
        value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)]
    ).SerializeToString()


def test_many_steps_several_writers_and_threads_all_read_back(tmp_path):
    # Three writers, each fed by two threads, with a background flush every
    # 10 ms racing the writes; then one writer per directory is read back.
    steps, threads_per_writer = 400, 2
    writers = [
        nd.summary.FileWriter(tmp_path / f"run{i}", max_queue=q, flush_secs=0.01)
        for i, q in enumerate((1, 10, 1000))
    ]
    failures = []

    def feed(writer, offset):
        try:
            for step in range(offset, steps, threads_per_writer):
                writer.add_summary(scalar_summary("loss", step / 8.0), step)
                if step % 97 == 0:
                    writer.flush()
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(e)

    threads = [
        threading.Thread(target=feed, args=(w, k))
        for w in writers
        for k in range(threads_per_writer)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
        assert not t.is_alive()
    for w in writers:
        w.close()
    assert not failures
    for i in range(len(writers)):
        [path] = event_files(tmp_path / f"run{i}")
        scalars = load(tmp_path / f"run{i}").Scalars("loss")
        assert sorted(s.step for s in scalars) == list(range(steps))
        assert all(s.value == s.step / 8.0 for s in scalars)
        # Each thread's events are in the order it added them.
        by_thread = [[s.step for s in scalars if s.step % 2 == k] for k in range(2)]
        assert all(b == sorted(b) for b in by_thread)
        assert len(file_events(path)) == steps + 1  # and the file_version record


def test_flush_and_close_lose_nothing_that_waits_in_the_queue(tmp_path):
    writer = nd.summary.FileWriter(tmp_path, max_queue=1000, flush_secs=3600)
    [path] = event_files(tmp_path)
    for step in range(25):
        writer.add_summary(scalar_summary("a", float(step)), step)
    writer.flush()
    assert [e.step for e in file_events(path)[1:]] == list(range(25))
    for step in range(25, 40):
        writer.add_summary(scalar_summary("a", float(step)), step)
    writer.close()
    assert [e.step for e in file_events(path)[1:]] == list(range(40))
    assert [s.value for s in load(tmp_path).Scalars("a")] == list(range(40))


def test_events_queued_in_a_writer_left_open_are_written_at_exit(tmp_path):
    program = (
        "import sys, nbdist as nd\n"
        "w = nd.summary.FileWriter(sys.argv[1], max_queue=100, flush_secs=3600)\n"
        "for step in range(7):\n"
        "    w.add_summary(nd.summary.Summary(value=[nd.summary.Summary.Value(\n"
        "        tag='a', simple_value=step)]), step)\n"
    )
    subprocess.run([sys.executable, "-c", program, str(tmp_path)], check=True,
                   timeout=120)
    assert [s.step for s in load(tmp_path).Scalars("a")] == list(range(7))


def test_no_fsync_per_event(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    writer = nd.summary.FileWriter(tmp_path, max_queue=5, flush_secs=0.01)
    for step in range(300):
        writer.add_summary(scalar_summary("a", 1.0), step)
    writer.flush()
    assert synced == []
    writer.close()
    assert len(synced) <= 1  # close syncs the file once, as TF's EventsWriter
    assert len(load(tmp_path).Scalars("a")) == 300


def test_steps_and_summaries_of_every_kind_survive_the_byte_path(tmp_path):
    metadata = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text")
    )
    text = nd.summary.text("notes", nd.constant("hello"))
    with nd.Session() as sess, nd.summary.FileWriter(tmp_path) as writer:
        serialized = sess.run(text)
        for step in (-3, 0, 2**40):
            writer.add_summary(serialized, global_step=step)
        writer.add_summary(summary_pb2.Summary.FromString(scalar_summary("s", 2.0)))
    parsed = file_events(event_files(tmp_path)[0])[1:]
    assert [e.step for e in parsed] == [-3, 0, 2**40, 0]
    notes = [e.summary.value[0] for e in parsed[:3]]
    # As TF: a tag's metadata is kept on its first value only.
    assert [v.HasField("metadata") for v in notes] == [True, False, False]
    assert notes[0].metadata.plugin_data.plugin_name == metadata.plugin_data.plugin_name
    assert parsed[3].summary.value[0].simple_value == 2.0
    assert all(e.wall_time > 0 for e in parsed)
    with nd.summary.FileWriter(tmp_path) as writer, pytest.raises(
        TypeError, match="add_summary expects"
    ):
        writer.add_summary(3.0)
