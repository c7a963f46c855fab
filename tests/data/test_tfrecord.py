"""TFRecord files: ``nd.python_io`` / ``nd.io`` writers and iterators, TF's
framing and compression, and ``nd.train.Example`` read from files TensorFlow
wrote (fixtures made by scripts/make_tfrecord_fixtures.py)."""

from __future__ import annotations

import gzip
import struct
import zlib

import google_crc32c
import pytest
from helpers import FIXTURES

import nbdist as nd


def _masked(data: bytes) -> int:
    # TF's record_writer.cc: rotate right by 15, add 0xa282ead8.
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) % 2**32


def _frame(data: bytes) -> bytes:
    header = struct.pack("<Q", len(data))
    return (header + struct.pack("<I", _masked(header)) + data
            + struct.pack("<I", _masked(data)))


def test_writer_frames_records_as_tf(tmp_path):
    path = tmp_path / "r.tfrecord"
    with nd.python_io.TFRecordWriter(str(path)) as w:
        w.write(b"abc")
        w.write(b"")
        w.write("text")
    assert path.read_bytes() == _frame(b"abc") + _frame(b"") + _frame(b"text")


@pytest.mark.parametrize("options, unpack", [
    ("ZLIB", zlib.decompress),
    (nd.python_io.TFRecordCompressionType.ZLIB, zlib.decompress),
    ("GZIP", gzip.decompress),
    (nd.python_io.TFRecordOptions(nd.python_io.TFRecordCompressionType.GZIP),
     gzip.decompress),
])
def test_compressed_files_round_trip(tmp_path, options, unpack):
    path = str(tmp_path / "c.tfrecord")
    records = [b"x" * i for i in range(20)]
    with nd.io.TFRecordWriter(path, options) as w:
        for r in records:
            w.write(r)
    with open(path, "rb") as f:
        assert unpack(f.read()) == b"".join(_frame(r) for r in records)
    assert list(nd.io.tf_record_iterator(path, options)) == records


def test_compression_type_names():
    ct = nd.python_io.TFRecordCompressionType
    assert (ct.NONE, ct.ZLIB, ct.GZIP) == (0, 1, 2)
    get = nd.python_io.TFRecordOptions.get_compression_type_string
    assert [get(None), get(ct.ZLIB), get("GZIP"),
            get(nd.python_io.TFRecordOptions(ct.NONE))] == ["", "ZLIB", "GZIP", ""]
    with pytest.raises(ValueError, match="compression"):
        nd.python_io.TFRecordOptions("LZ4")


def _tf_example_values(example):
    f = example.features.feature
    return (list(f["id"].int64_list.value), list(f["label"].float_list.value),
            list(f["name"].bytes_list.value), list(f["tokens"].int64_list.value))


@pytest.mark.parametrize("name, options", [("examples.tfrecord", None),
                                           ("examples_gzip.tfrecord", "GZIP")])
def test_reads_examples_tensorflow_wrote(name, options):
    records = list(nd.python_io.tf_record_iterator(str(FIXTURES / name), options))
    assert len(records) == 4
    for i, r in enumerate(records):
        ex = nd.train.Example.FromString(r)
        # The fixture script's formulas.
        assert _tf_example_values(ex) == ([i], [i * 0.5], [b"ex%d" % i],
                                          list(range(10 * i, 11 * i)))


def test_example_field_numbers_match_tensorflow():
    # Example.features = 1; Features.feature = 1 (map); Feature.int64_list = 3;
    # Int64List.value = 1 packed. Bytes by hand from the wire format.
    ex = nd.train.Example(features=nd.train.Features(feature={
        "k": nd.train.Feature(int64_list=nd.train.Int64List(value=[5]))}))
    inner = b"\x1a\x03\x0a\x01\x05"                 # Feature{int64_list{[5]}}
    entry = b"\x0a\x01k" + b"\x12" + bytes([len(inner)]) + inner
    features = b"\x0a" + bytes([len(entry)]) + entry
    assert ex.SerializeToString() == b"\x0a" + bytes([len(features)]) + features
    seq = nd.train.SequenceExample()
    seq.feature_lists.feature_list["t"].feature.add().float_list.value.append(1.0)
    assert nd.train.SequenceExample.FromString(seq.SerializeToString()) == seq
    for cls in ("BytesList", "FloatList", "FeatureList", "FeatureLists"):
        assert hasattr(nd.train, cls)


def test_corrupted_record_is_data_loss(tmp_path):
    path = tmp_path / "bad.tfrecord"
    good = _frame(b"rec0") + _frame(b"rec1")
    bad = bytearray(good)
    bad[len(_frame(b"rec0")) + 13] ^= 1              # a data byte of record 1
    path.write_bytes(bytes(bad))
    it = nd.python_io.tf_record_iterator(str(path))
    assert next(it) == b"rec0"
    with pytest.raises(nd.errors.DataLossError, match="corrupted record at 20"):
        next(it)
    path.write_bytes(good[:-3])
    with pytest.raises(nd.errors.DataLossError, match="truncated record at 20"):
        list(nd.python_io.tf_record_iterator(str(path)))


def test_missing_file_is_not_found(tmp_path):
    with pytest.raises(nd.errors.NotFoundError):
        list(nd.python_io.tf_record_iterator(str(tmp_path / "nope")))


def test_event_file_framing_still_importable():
    from nbdist.train.event_file_writer import masked_crc32c, tfrecord

    assert masked_crc32c(b"abc") == _masked(b"abc")
    assert tfrecord(b"abc") == _frame(b"abc")


@pytest.mark.parametrize("options", [None, "ZLIB", "GZIP"])
def test_records_are_read_in_chunks(tmp_path, monkeypatch, options):
    from nbdist.executor import tf_record

    monkeypatch.setattr(tf_record, "_CHUNK", 7)     # records straddle chunks
    path = str(tmp_path / "c.tfrecord")
    records = [bytes([i]) * (i * 3) for i in range(12)]
    with nd.python_io.TFRecordWriter(path, options) as w:
        for r in records:
            w.write(r)
    assert list(nd.python_io.tf_record_iterator(path, options)) == records
    lines_path = tmp_path / "t.txt"
    lines_path.write_bytes(b"first line\r\n\nthird is longer than a chunk\nlast")
    assert list(tf_record.read_lines(str(lines_path))) == [
        b"first line", b"", b"third is longer than a chunk", b"last"]


def test_cut_compressed_file_is_data_loss(tmp_path):
    path = tmp_path / "z.tfrecord"
    with nd.python_io.TFRecordWriter(str(path), "ZLIB") as w:
        w.write(b"x" * 1000)
        w.write(b"y" * 1000)
    path.write_bytes(path.read_bytes()[:-8])
    with pytest.raises(nd.errors.DataLossError):
        list(nd.python_io.tf_record_iterator(str(path), "ZLIB"))
