"""nd.summary: summary ops run by a real Session, event files written by
FileWriter and read back by TensorBoard's own reader (EventAccumulator), the
TFRecord framing checked against TensorBoard's CRC, a torn last record, the
SummarySaverHook, and summary ops on a task in another process."""

from __future__ import annotations

import io
import os
import re
import socket
import threading
import time

import numpy as np
import pytest
from helpers import local_cluster
from PIL import Image
from tensorboard.backend.event_processing import event_accumulator as ea
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import (
    masked_crc32c as tensorboard_masked_crc32c,
)
from tensorboard.util import tensor_util as tb_tensor_util

import nbdist as nd
from nbdist import errors
from nbdist.proto import summary_pb2
from nbdist.train.event_file_writer import masked_crc32c, tfrecord
from nbdist.train.summary_hooks import SummarySaverHook

KEEP_ALL = {
    ea.SCALARS: 0,
    ea.HISTOGRAMS: 0,
    ea.COMPRESSED_HISTOGRAMS: 0,
    ea.IMAGES: 0,
    ea.TENSORS: 0,
    ea.AUDIO: 0,
}


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g
    nd.summary.FileWriterCache.clear()


def load(logdir) -> ea.EventAccumulator:
    acc = ea.EventAccumulator(str(logdir), size_guidance=KEEP_ALL)
    acc.Reload()
    return acc


def event_files(logdir) -> list[str]:
    return sorted(f for f in os.listdir(logdir) if "tfevents" in f)


def histogram_oracle(x, limits):
    """Counts of ``x`` in [previous limit, limit) per emitted bucket, by NumPy."""
    lower = np.concatenate([[-np.inf], limits[:-1]])
    return [int(np.sum((x >= lo) & (x < hi))) for lo, hi in zip(lower, limits)]


# -- a real session's summaries, read back by TensorBoard ------------------------------
def test_summaries_from_a_session_are_read_by_tensorboard(tmp_path, fresh_graph):
    rng = np.random.default_rng(0)
    hist_values = rng.normal(size=500).astype(np.float32)
    pictures = rng.integers(0, 256, size=(3, 4, 5, 3), dtype=np.uint8)

    loss = nd.placeholder(nd.float32, [], name="loss_value")
    nd.summary.scalar("loss", loss)
    nd.summary.histogram("weights", nd.constant(hist_values))
    nd.summary.image("pictures", nd.constant(pictures), max_outputs=2)
    nd.summary.text("notes", nd.constant("**step** notes"))
    merged = nd.summary.merge_all()
    assert merged is not None

    losses = [2.0, 1.5, 0.75, 0.5]
    with (
        nd.Session() as sess,
        nd.summary.FileWriter(
            tmp_path, graph=fresh_graph, filename_suffix=".test"
        ) as writer,
    ):
        assert writer.get_logdir() == str(tmp_path)
        for step, value in enumerate(losses):
            writer.add_summary(sess.run(merged, {loss: value}), global_step=10 * step)

    [name] = event_files(tmp_path)
    host = re.escape(socket.gethostname())
    assert re.fullmatch(rf"events\.out\.tfevents\.\d{{10}}\.{host}\.test", name)

    acc = load(tmp_path)
    assert acc.file_version == 2.0
    tags = acc.Tags()
    assert tags[ea.SCALARS] == ["loss"]
    assert tags[ea.HISTOGRAMS] == ["weights"]
    assert sorted(tags[ea.IMAGES]) == ["pictures/image/0", "pictures/image/1"]
    assert tags[ea.TENSORS] == ["notes"]
    assert tags[ea.GRAPH]

    scalars = acc.Scalars("loss")
    assert [s.step for s in scalars] == [0, 10, 20, 30]
    assert [s.value for s in scalars] == losses

    histo = acc.Histograms("weights")[-1].histogram_value
    limits = np.array(histo.bucket_limit)
    assert histo.num == 500 and sum(histo.bucket) == 500
    np.testing.assert_allclose(histo.sum, hist_values.astype(np.float64).sum())
    np.testing.assert_allclose(
        histo.sum_squares, np.square(hist_values.astype(np.float64)).sum()
    )
    assert (histo.min, histo.max) == (hist_values.min(), hist_values.max())
    assert list(histo.bucket) == histogram_oracle(hist_values, limits)

    for i in range(2):
        event = acc.Images(f"pictures/image/{i}")[-1]
        assert (event.height, event.width, event.step) == (4, 5, 30)
        decoded = np.asarray(Image.open(io.BytesIO(event.encoded_image_string)))
        np.testing.assert_array_equal(decoded, pictures[i])

    [text] = acc.Tensors("notes")[-1:]
    assert tb_tensor_util.make_ndarray(text.tensor_proto).item() == b"**step** notes"
    assert "notes" in acc.PluginTagToContent("text")

    node_names = {n.name for n in acc.Graph().node}
    assert {"loss_value", "loss", "Merge"} <= node_names


def test_float_images_are_scaled_as_tensorflow_does(tmp_path):
    positive = np.array([[[[0.0], [0.5]], [[1.0], [2.0]]]], dtype=np.float32)
    signed = np.array([[[[-2.0], [0.0]], [[1.0], [np.nan]]]], dtype=np.float32)
    images = [
        nd.summary.image("pos", positive, max_outputs=1),
        nd.summary.image("neg", signed),
    ]
    with nd.Session() as sess:
        out = [summary_pb2.Summary.FromString(s) for s in sess.run(images)]
    # Oracle: >= 0 scales by 255/max; signed centres on 128 with 127/max|v|;
    # a pixel with a NaN gets bad_color (red; channel 0 of it for grayscale).
    want_pos = (positive[0, ..., 0] * np.float32(255.0 / 2.0)).astype(np.uint8)
    want_neg = np.array([[1, 128], [191, 255]], dtype=np.uint8)
    for summary, tag, want in (
        (out[0], "pos/image", want_pos),
        (out[1], "neg/image/0", want_neg),
    ):
        [value] = summary.value
        assert value.tag == tag and value.image.colorspace == 1
        decoded = np.asarray(Image.open(io.BytesIO(value.image.encoded_image_string)))
        np.testing.assert_array_equal(decoded, want)


def test_merge_and_tags(fresh_graph):
    x = nd.constant(3.0)
    a = nd.summary.scalar("a", x, family="train")
    b = nd.summary.scalar("a", x, collections=["mine"])
    assert a.op.name == "train/a" and b.op.name == "a"
    assert fresh_graph.get_collection(nd.GraphKeys.SUMMARIES) == [a]
    assert nd.summary.merge_all("mine") is not None
    assert nd.summary.merge_all("empty") is None
    odd = nd.summary.scalar("bad name!", x)
    merged = nd.summary.merge([a, b, odd])
    with nd.Session() as sess:
        summary = summary_pb2.Summary.FromString(sess.run(merged))
    # TF's summary_scope: the family prefixes the scope's name once more.
    assert [v.tag for v in summary.value] == ["train/train/a", "a", "bad_name_"]
    assert [v.simple_value for v in summary.value] == [3.0, 3.0, 3.0]


def test_bad_input_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="tags and values are not the same shape"):
        nd.summary.scalar("s", nd.constant([1.0, 2.0]))
    with pytest.raises(ValueError, match="4-D"):
        nd.summary.image("im", nd.zeros([4, 4, 3]))
    with pytest.raises(ValueError, match="last dim 1, 3, or 4"):
        nd.summary.image("im", nd.zeros([1, 4, 4, 2]))
    with pytest.raises(ValueError, match="dtype string"):
        nd.summary.text("t", nd.constant(1.0))
    with pytest.raises(TypeError, match="values"):
        nd.summary.histogram("h", nd.constant(["a"]))
    with pytest.raises(ValueError, match="at least one"):
        nd.summary.merge([])

    nan = nd.summary.histogram("has_nan", nd.constant([1.0, np.nan]))
    dup = nd.summary.merge(
        [nd.summary.scalar("same", 1.0), nd.summary.scalar("same", 2.0)]
    )
    ph = nd.placeholder(nd.float32, None)
    unknown = nd.summary.scalar("unknown", ph)
    with nd.Session() as sess:
        with pytest.raises(
            errors.InvalidArgumentError, match="Nan in summary histogram for: has_nan"
        ) as e:
            sess.run(nan)
        assert e.value.op.name == "has_nan"  # as TF: the Operation
        with pytest.raises(errors.InvalidArgumentError, match="Duplicate tag"):
            x = nd.summary.scalar("x", 1.0)
            sess.run(nd.summary.merge([x, x]))
        # The second "same" gets the scope (and tag) "same_1": no clash.
        assert len(summary_pb2.Summary.FromString(sess.run(dup)).value) == 2
        with pytest.raises(errors.InvalidArgumentError, match="same shape") as e:
            sess.run(unknown, {ph: [1.0, 2.0]})
        assert e.value.op.name == "unknown"

    with nd.summary.FileWriter(tmp_path) as writer:
        with pytest.raises(TypeError, match="Summary proto or its serialized"):
            writer.add_summary(3.0)
        with pytest.raises(TypeError, match="must be an instance of `Graph`"):
            writer.add_graph("graph")


# -- the event file ----------------------------------------------------------------------
def read_records(path) -> list[bytes]:
    """The records of a complete TFRecord file, checking both CRCs against
    TensorBoard's own masked CRC32C."""
    with open(path, "rb") as f:
        data, out, pos = f.read(), [], 0
    while pos < len(data):
        header = data[pos : pos + 8]
        assert int.from_bytes(
            data[pos + 8 : pos + 12], "little"
        ) == tensorboard_masked_crc32c(header)
        n = int.from_bytes(header, "little")
        body = data[pos + 12 : pos + 12 + n]
        assert int.from_bytes(
            data[pos + 12 + n : pos + 16 + n], "little"
        ) == tensorboard_masked_crc32c(body)
        out.append(body)
        pos += 16 + n
    return out


def test_records_are_tfrecords_with_tensorboards_crc(tmp_path):
    for data in (b"", b"a", bytes(range(256)) * 9):
        assert masked_crc32c(data) == tensorboard_masked_crc32c(data)
        assert len(tfrecord(data)) == 16 + len(data)
    with nd.summary.FileWriter(tmp_path) as writer:
        writer.add_session_log(
            nd.summary.SessionLog(status=nd.summary.SessionLog.START), global_step=7
        )
    [name] = event_files(tmp_path)
    first, second = [
        summary_pb2.Event.FromString(r) for r in read_records(tmp_path / name)
    ]
    assert first.file_version == "brain.Event:2"
    assert abs(first.wall_time - time.time()) < 600
    assert int(name.split(".")[3]) == int(first.wall_time)
    assert second.step == 7 and second.session_log.status == 1


def test_a_torn_last_record_leaves_the_earlier_ones_readable(tmp_path):
    with nd.summary.FileWriter(tmp_path) as writer:
        for step in range(3):
            summary = nd.summary.Summary(
                value=[nd.summary.Summary.Value(tag="x", simple_value=float(step))]
            )
            writer.add_summary(summary, global_step=step)
    [name] = event_files(tmp_path)
    path = tmp_path / name
    os.truncate(path, os.path.getsize(path) - 7)  # mid-way through the last one
    assert [s.step for s in load(tmp_path).Scalars("x")] == [0, 1]


def test_metadata_is_kept_only_on_the_first_value_of_a_tag(tmp_path):
    text = nd.summary.text("t", nd.constant("hi"))
    with nd.Session() as sess, nd.summary.FileWriter(tmp_path) as writer:
        for step in range(2):
            writer.add_summary(sess.run(text), step)
    [name] = event_files(tmp_path)
    events = [summary_pb2.Event.FromString(r) for r in read_records(tmp_path / name)]
    values = [e.summary.value[0] for e in events if e.HasField("summary")]
    assert [v.HasField("metadata") for v in values] == [True, False]
    assert [e.step for e in load(tmp_path).Tensors("t")] == [0, 1]


def test_the_writer_thread_flushes_every_flush_secs(tmp_path):
    writer = nd.summary.FileWriter(tmp_path, flush_secs=0.2)
    try:
        [name] = event_files(tmp_path)
        path = tmp_path / name
        header_size = os.path.getsize(path)  # the file_version record, flushed
        assert len(read_records(path)) == 1
        writer.add_summary(
            nd.summary.Summary(
                value=[nd.summary.Summary.Value(tag="x", simple_value=1.0)]
            ),
            global_step=1,
        )
        # Polls the file: no flush is asked for, the thread must do it on time.
        deadline = time.monotonic() + 30
        while os.path.getsize(path) == header_size and time.monotonic() < deadline:
            threading.Event().wait(0.05)
        assert len(read_records(path)) == 2
    finally:
        writer.close()


def test_close_reopen_and_a_closed_writer(tmp_path):
    writer = nd.summary.FileWriter(tmp_path, max_queue=1)
    for step in range(20):  # more than the queue holds: add_summary waits
        writer.add_summary(
            nd.summary.Summary(
                value=[nd.summary.Summary.Value(tag="x", simple_value=float(step))]
            ),
            global_step=step,
        )
    writer.close()
    writer.close()
    with pytest.warns(UserWarning, match="closed FileWriter"):
        writer.add_summary(nd.summary.Summary(), global_step=99)
    writer.reopen()
    writer.add_summary(
        nd.summary.Summary(
            value=[nd.summary.Summary.Value(tag="x", simple_value=20.0)]
        ),
        global_step=20,
    )
    writer.close()
    assert len(event_files(tmp_path)) == 2
    assert [s.step for s in load(tmp_path).Scalars("x")] == list(range(21))


# -- SummarySaverHook -----------------------------------------------------------------------
def test_summary_saver_hook_writes_every_save_steps(tmp_path):
    step = nd.train.get_or_create_global_step()
    train = nd.assign_add(step, 1)
    value = nd.placeholder_with_default(2.5, [])
    summary = nd.summary.scalar("value", value)
    hook = SummarySaverHook(save_steps=2, output_dir=str(tmp_path), summary_op=summary)
    with nd.train.MonitoredSession(hooks=[hook]) as sess:
        for _ in range(5):
            sess.run(train)
    # Written at the global step after the run: the first, then every 2 (TF).
    scalars = load(tmp_path).Scalars("value")
    assert [(s.step, s.value) for s in scalars] == [(1, 2.5), (3, 2.5), (5, 2.5)]
    with pytest.raises(ValueError, match="Exactly one of scaffold or summary_op"):
        SummarySaverHook(save_steps=1, output_dir=str(tmp_path))


# -- a summary op on another task -----------------------------------------------------------
@pytest.mark.slow
def test_summary_ops_run_on_a_task_in_another_process(spawn, servers, tmp_path):
    cluster = local_cluster(ps=1, worker=1)
    spawn("ps", 0, cluster)
    worker = servers(cluster, "worker", 0)
    values = np.arange(6, dtype=np.float32)
    with nd.device("/job:ps/task:0"):
        merged = nd.summary.merge(
            [
                nd.summary.scalar("total", nd.reduce_sum(nd.constant(values))),
                nd.summary.histogram("values", nd.constant(values)),
                nd.summary.image("im", nd.reshape(nd.constant(values), [1, 2, 3, 1])),
            ]
        )
    with nd.Session(worker.target) as sess:
        serialized = sess.run(merged)
    summary = summary_pb2.Summary.FromString(serialized)
    assert [v.tag for v in summary.value] == ["total", "values", "im/image/0"]
    assert summary.value[0].simple_value == values.sum()
    assert summary.value[1].histo.num == 6


def test_monitored_training_session_writes_summaries_to_its_checkpoint_dir(
        tmp_path, fresh_graph):
    """The chief's default SummarySaverHook: merge_all every save_summaries_steps."""
    x = nd.Variable(0.0, name="x")
    step = nd.train.get_or_create_global_step()
    train = nd.group(x.assign_add(1.0), step.assign_add(1))
    nd.summary.scalar("x_value", x)
    with nd.train.MonitoredTrainingSession(
            checkpoint_dir=str(tmp_path), save_summaries_steps=2,
            save_checkpoint_secs=None, log_step_count_steps=None) as sess:
        for _ in range(5):
            sess.run(train)
    scalars = load(tmp_path).Scalars("x_value")
    # As TF: the value read during the step, written at the step count after it.
    assert [(s.step, s.value) for s in scalars] == [(1, 0.0), (3, 2.0), (5, 4.0)]
