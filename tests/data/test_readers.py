"""Readers take filenames from a queue and produce ``(key, value)`` records with
TF's keys; their state (file in progress, counters) lives on the task across
steps; a closed, empty queue ends the input with ``OutOfRangeError``.
Also ``nd.data.TFRecordDataset`` / ``TextLineDataset`` and ``read_file``."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
from helpers import FIXTURES

import nbdist as nd


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def write_records(path, records, options=None):
    with nd.python_io.TFRecordWriter(str(path), options) as w:
        for r in records:
            w.write(r)
    return str(path)


def read_all(reader, files, limit=50):
    """(key, value) pairs until OutOfRangeError, and the reader's counters."""
    queue = nd.FIFOQueue(10, nd.string)
    key, value = reader.read(queue)
    counts = [reader.num_records_produced(), reader.num_work_units_completed()]
    out = []
    with nd.Session() as s:
        s.run(queue.enqueue_many([files]))
        s.run(queue.close())
        with pytest.raises(nd.errors.OutOfRangeError, match="is closed"):
            for _ in range(limit):
                out.append(tuple(s.run([key, value])))
        return out, [int(c) for c in s.run(counts)]


def test_tfrecord_reader_keys_are_byte_offsets(tmp_path):
    a = write_records(tmp_path / "a.tfrecord", [b"r0", b"r11", b""])
    b = write_records(tmp_path / "b.tfrecord", [b"x"])
    got, (produced, completed) = read_all(nd.TFRecordReader(), [a, b])
    # Each record takes 16 bytes of framing plus its data.
    assert got == [(f"{a}:0".encode(), b"r0"), (f"{a}:18".encode(), b"r11"),
                   (f"{a}:37".encode(), b""), (f"{b}:0".encode(), b"x")]
    assert (produced, completed) == (4, 2)


def test_tfrecord_reader_gzip_and_tf_fixture(tmp_path):
    a = write_records(tmp_path / "a.tfrecord", [b"one", b"two"], "GZIP")
    got, _ = read_all(nd.TFRecordReader(options=nd.python_io.TFRecordOptions(
        nd.python_io.TFRecordCompressionType.GZIP)), [a])
    assert [v for _, v in got] == [b"one", b"two"]
    fixture = str(FIXTURES / "examples_gzip.tfrecord")
    got, _ = read_all(nd.TFRecordReader(options="GZIP"), [fixture])
    assert [nd.train.Example.FromString(v).features.feature["id"].int64_list.value[0]
            for _, v in got] == [0, 1, 2, 3]


def test_text_line_reader_skips_headers_and_numbers_lines_from_one(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"header\r\nl1\n\nl3")
    got, (produced, _) = read_all(nd.TextLineReader(skip_header_lines=1),
                                  [str(path)])
    assert got == [(f"{path}:2".encode(), b"l1"), (f"{path}:3".encode(), b""),
                   (f"{path}:4".encode(), b"l3")]
    assert produced == 3


def test_whole_file_and_identity_readers(tmp_path):
    path = tmp_path / "w.bin"
    path.write_bytes(b"\x00all\nof it")
    got, _ = read_all(nd.WholeFileReader(), [str(path)])
    assert got == [(str(path).encode(), b"\x00all\nof it")]
    got, _ = read_all(nd.IdentityReader(), ["work-a", "work-b"])
    assert got == [(b"work-a", b"work-a"), (b"work-b", b"work-b")]


def test_fixed_length_reader_header_footer_hop(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"HH" + b"abcdefgh" + b"FF")
    got, _ = read_all(nd.FixedLengthRecordReader(3, header_bytes=2, footer_bytes=2,
                                                 hop_bytes=2), [str(path)])
    # Records start every 2 bytes while 3 bytes remain: 0, 2, 4.
    assert got == [(f"{path}:0".encode(), b"abc"), (f"{path}:1".encode(), b"cde"),
                   (f"{path}:2".encode(), b"efg")]
    raw = np.arange(6, dtype="<i4")
    path.write_bytes(raw.tobytes())
    queue = nd.FIFOQueue(2, nd.string)
    _, value = nd.FixedLengthRecordReader(8).read(queue)
    pair = nd.decode_raw(value, nd.int32)
    with nd.Session() as s:
        s.run(queue.enqueue([str(path)]))
        assert [s.run(pair).tolist() for _ in range(3)] == [[0, 1], [2, 3], [4, 5]]


def test_read_up_to_stops_at_the_end_of_a_file_and_reset(tmp_path):
    a = write_records(tmp_path / "a.tfrecord", [b"a0", b"a1", b"a2"])
    b = write_records(tmp_path / "b.tfrecord", [b"b0", b"b1"])
    queue = nd.FIFOQueue(10, nd.string)
    reader = nd.TFRecordReader()
    keys, values = reader.read_up_to(queue, 2)
    counts = [reader.num_records_produced(), reader.num_work_units_completed()]
    with nd.Session() as s:
        s.run(queue.enqueue_many([[a, b]]))
        s.run(queue.close())
        batches = [s.run(values).tolist() for _ in range(3)]
        assert batches == [[b"a0", b"a1"], [b"a2"], [b"b0", b"b1"]]
        with pytest.raises(nd.errors.OutOfRangeError):
            s.run(values)
        assert [int(c) for c in s.run(counts)] == [5, 2]
        s.run(reader.reset())
        assert [int(c) for c in s.run(counts)] == [0, 0]


def test_reader_state_is_per_session_on_a_server(tmp_path):
    # As TF 2.21: a reader (no shared_name) starts afresh in a new session.
    a = write_records(tmp_path / "a.tfrecord", [b"a0", b"a1"])
    server = nd.Server.create_local_server()
    queue = nd.FIFOQueue(10, nd.string, shared_name="files")
    _, value = nd.TFRecordReader(name="own_reader").read(queue)
    with nd.Session(server.target) as s:
        s.run(queue.enqueue([a]))
        assert s.run(value) == b"a0"
    with nd.Session(server.target) as s:
        s.run(queue.enqueue([a]))
        assert s.run(value) == b"a0"


def test_corrupted_file_in_a_reader_is_data_loss(tmp_path):
    path = tmp_path / "bad.tfrecord"
    write_records(path, [b"abc"])
    data = bytearray(path.read_bytes())
    data[13] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(nd.errors.DataLossError, match="corrupted record at 0"):
        read_all(nd.TFRecordReader(), [str(path)])


def test_missing_file_is_not_found(tmp_path):
    with pytest.raises(nd.errors.NotFoundError, match="nope"):
        read_all(nd.TFRecordReader(), [str(tmp_path / "nope")])


def test_reader_needs_a_queue():
    with pytest.raises(TypeError, match="queue"):
        nd.TFRecordReader().read("not a queue")


def test_read_file_and_write_file(tmp_path):
    path = str(tmp_path / "sub" / "f.txt")
    with nd.Session() as s:
        s.run(nd.write_file(path, "contents\n"))
        assert s.run(nd.io.read_file(path)) == b"contents\n"


def test_tfrecord_dataset_reads_files_in_order(tmp_path):
    a = write_records(tmp_path / "a.tfrecord", [b"a0", b"a1"], "ZLIB")
    b = write_records(tmp_path / "b.tfrecord", [b"b0"], "ZLIB")
    nxt = nd.data.TFRecordDataset([a, b], compression_type="ZLIB") \
        .make_one_shot_iterator().get_next()
    with nd.Session() as s:
        assert [s.run(nxt) for _ in range(3)] == [b"a0", b"a1", b"b0"]
        with pytest.raises(nd.errors.OutOfRangeError):
            s.run(nxt)


def test_tfrecord_dataset_map_parse_batch_of_tf_fixture():
    ds = nd.data.TFRecordDataset(str(FIXTURES / "examples.tfrecord"))
    ds = ds.map(lambda r: nd.parse_single_example(
        r, {"label": nd.FixedLenFeature([], nd.float32)})["label"]).batch(3)
    nxt = ds.make_one_shot_iterator().get_next()
    with nd.Session() as s:
        np.testing.assert_array_equal(s.run(nxt), [0.0, 0.5, 1.0])
        np.testing.assert_array_equal(s.run(nxt), [1.5])


def test_text_line_dataset_gzip(tmp_path):
    path = tmp_path / "t.txt.gz"
    path.write_bytes(gzip.compress(b"a\nb\r\nc"))
    nxt = nd.data.TextLineDataset(str(path), compression_type="GZIP") \
        .make_one_shot_iterator().get_next()
    with nd.Session() as s:
        assert [s.run(nxt) for _ in range(3)] == [b"a", b"b", b"c"]


def test_file_dataset_filenames_from_a_placeholder(tmp_path):
    a = write_records(tmp_path / "a.tfrecord", [b"a0"])
    b = write_records(tmp_path / "b.tfrecord", [b"b0", b"b1"])
    files = nd.placeholder(nd.string, [None])
    it = nd.data.TFRecordDataset(files).make_initializable_iterator()
    nxt = it.get_next()
    with nd.Session() as s:
        s.run(it.initializer, {files: [b, a]})
        assert [s.run(nxt) for _ in range(3)] == [b"b0", b"b1", b"a0"]
    with pytest.raises(TypeError, match="Dataset of filenames"):
        nd.data.TFRecordDataset(nd.data.Dataset.from_tensor_slices([a]))


def test_whole_file_reader_files_empty_missing_and_a_directory(tmp_path):
    # As TF 2.21: every file whole (an empty one as b""), counted as one record
    # and one work unit each; a missing file is NotFound when it is read, a
    # directory FailedPrecondition ("<path>; Is a directory").
    big = bytes(range(256)) * 5000  # larger than one read of a pipe or socket
    files = [tmp_path / n for n in ("a", "empty", "big")]
    for f, data in zip(files, (b"abc", b"", big)):
        f.write_bytes(data)
    got, counts = read_all(nd.WholeFileReader(), [str(f) for f in files])
    assert got == [(str(f).encode(), f.read_bytes()) for f in files]
    assert counts == [3, 3]
    with pytest.raises(nd.errors.NotFoundError, match="nope; No such file"):
        read_all(nd.WholeFileReader(), [str(tmp_path / "nope")])
    with pytest.raises(nd.errors.FailedPreconditionError, match="; Is a directory"):
        read_all(nd.WholeFileReader(), [str(tmp_path)])
    with nd.Session() as s, pytest.raises(nd.errors.NotFoundError, match="nope"):
        s.run(nd.io.read_file(str(tmp_path / "nope")))
