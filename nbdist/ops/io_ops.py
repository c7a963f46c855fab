"""Readers: stateful resources that take filenames from a queue and produce
``(key, value)`` records, as TF1's ``io_ops`` readers.

>>> import os, tempfile
>>> import nbdist as nd
>>> path = os.path.join(tempfile.mkdtemp(), "lines.txt")
>>> with open(path, "w") as f:
...     _ = f.write("header\\nfirst\\nsecond\\n")
>>> queue = nd.FIFOQueue(4, nd.string)
>>> reader = nd.TextLineReader(skip_header_lines=1)
>>> key, value = reader.read(queue)
>>> with nd.Session() as s:
...     s.run(queue.enqueue([path])); s.run(queue.close())
...     print([s.run(value) for _ in range(2)])
[b'first', b'second']

A reader lives in the resource manager of its task (like a queue), so every
step that runs ``read`` continues where the last one stopped. When it has no
file in progress it dequeues the next filename from the queue (which must be
on the same task); a closed, empty queue ends the input with
``OutOfRangeError``. Keys are TF's: ``<file>:<byte offset>`` for TFRecords,
``<file>:<line number>`` (from 1) for lines, ``<file>:<record number>`` (from
0) for fixed-length records, the file name for whole files and the queued
string itself for ``IdentityReader``.

Also here: ``read_file`` and ``write_file`` (a whole file as one string).
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.ops import Tensor, convert_to_tensor, get_default_graph
from nbdist.framework.tensor_shape import TensorShape

_RESOURCE_ATTRS = {"container": ("string", ""), "shared_name": ("string", "")}


def _reader_infer(c):
    return [(dtypes.resource, TensorShape([]))]


register_op("TFRecordReaderV2", _reader_infer,
            attrs=dict(_RESOURCE_ATTRS, compression_type=("string", "")),
            num_inputs=0, stateful=True)
register_op("TextLineReaderV2", _reader_infer,
            attrs=dict(_RESOURCE_ATTRS, skip_header_lines=("int", 0)),
            num_inputs=0, stateful=True)
register_op("WholeFileReaderV2", _reader_infer, attrs=dict(_RESOURCE_ATTRS),
            num_inputs=0, stateful=True)
register_op("IdentityReaderV2", _reader_infer, attrs=dict(_RESOURCE_ATTRS),
            num_inputs=0, stateful=True)
register_op("FixedLengthRecordReaderV2", _reader_infer,
            attrs=dict(_RESOURCE_ATTRS, header_bytes=("int", 0),
                       record_bytes=("int", REQUIRED), footer_bytes=("int", 0),
                       hop_bytes=("int", 0), encoding=("string", "")),
            num_inputs=0, stateful=True)
READER_OPS = ("TFRecordReaderV2", "TextLineReaderV2", "WholeFileReaderV2",
              "IdentityReaderV2", "FixedLengthRecordReaderV2")


def _reader_only(c):
    if c.dtype(0) is not dtypes.resource:
        raise TypeError(f"{c.op_type} needs a reader handle as input 0")


def _read_infer(c):
    _reader_only(c)
    if c.dtype(1) is not dtypes.resource:
        raise TypeError(f"{c.op_type} needs a queue handle as input 1")
    return [(dtypes.string, TensorShape([]))] * 2


def _read_up_to_infer(c):
    _read_infer(c)
    if not c.dtype(2).is_integer or c.shape(2).rank not in (None, 0):
        raise ValueError(f"ReaderReadUpToV2: num_records must be an integer scalar, "
                         f"got {c.dtype(2).name} {c.shape(2)}")
    return [(dtypes.string, TensorShape([None]))] * 2


def _count_infer(c):
    _reader_only(c)
    return [(dtypes.int64, TensorShape([]))]


register_op("ReaderReadV2", _read_infer, num_inputs=2, ref_inputs=(0, 1),
            stateful=True)
register_op("ReaderReadUpToV2", _read_up_to_infer, num_inputs=3, ref_inputs=(0, 1),
            stateful=True)
register_op("ReaderNumRecordsProducedV2", _count_infer, num_inputs=1,
            ref_inputs=(0,), stateful=True)
register_op("ReaderNumWorkUnitsCompletedV2", _count_infer, num_inputs=1,
            ref_inputs=(0,), stateful=True)
register_op("ReaderResetV2", lambda c: (_reader_only(c), [])[1], num_inputs=1,
            ref_inputs=(0,), stateful=True)


def _string_scalar(name):
    def infer(c):
        if c.dtype(0) is not dtypes.string or c.shape(0).rank not in (None, 0):
            raise ValueError(f"{name} needs a string scalar filename, got "
                             f"{c.dtype(0).name} {c.shape(0)}")
        return [(dtypes.string, TensorShape([]))] if name == "ReadFile" else []

    return infer


def _file_dataset_infer(c):
    if c.dtype(0) is not dtypes.string or c.shape(0).rank not in (None, 0, 1):
        raise ValueError(f"{c.op_type}: filenames must be a string scalar or vector, "
                         f"got {c.dtype(0).name} {c.shape(0)}")
    if c.dtype(1) is not dtypes.string or c.dtype(2) is not dtypes.int64:
        raise TypeError(f"{c.op_type}: compression_type is a string, buffer_size "
                        "an int64")
    return [(dtypes.resource, TensorShape([]))]


# Datasets of the records / lines of files (``nd.data.TFRecordDataset`` ...).
register_op("TFRecordDataset", _file_dataset_infer, num_inputs=3)
register_op("TextLineDataset", _file_dataset_infer, num_inputs=3)
FILE_DATASET_OPS = ("TFRecordDataset", "TextLineDataset")

register_op("ReadFile", _string_scalar("ReadFile"), num_inputs=1)
register_op("WriteFile", _string_scalar("WriteFile"), num_inputs=2, stateful=True)


class ReaderBase:
    """What every reader offers: ``read``, ``read_up_to``, ``num_records_produced``,
    ``num_work_units_completed``, ``reset``. Build one of the subclasses."""

    _OP_TYPE = ""

    def __init__(self, name=None, _attrs=None):
        g = get_default_graph()
        self._reader_ref = g.create_op(self._OP_TYPE, [], dict(_attrs or {}),
                                       name=name or self._OP_TYPE).outputs[0]

    reader_ref = property(lambda self: self._reader_ref)
    supports_serialize = False

    def _op(self, op_type, inputs, name):
        g = self._reader_ref.graph
        with g.colocate_with(self._reader_ref.op):
            return g.create_op(op_type, [self._reader_ref] + list(inputs), {},
                               name=name or op_type)

    @staticmethod
    def _queue_ref(queue) -> Tensor:
        ref = getattr(queue, "queue_ref", queue)
        if not isinstance(ref, Tensor) or ref.dtype.base_dtype is not dtypes.resource:
            raise TypeError(f"A reader reads filenames from a queue (nd.FIFOQueue, "
                            f"string_input_producer ...), got {queue!r}")
        return ref

    def read(self, queue, name=None):
        """The next ``(key, value)`` record, a pair of string scalars."""
        op = self._op("ReaderReadV2", [self._queue_ref(queue)], name)
        return op.outputs[0], op.outputs[1]

    def read_up_to(self, queue, num_records, name=None):
        """Up to ``num_records`` records as ``(keys, values)`` vectors (fewer at
        the end of a file)."""
        n = convert_to_tensor(num_records, dtype=dtypes.int64)
        op = self._op("ReaderReadUpToV2", [self._queue_ref(queue), n], name)
        return op.outputs[0], op.outputs[1]

    def num_records_produced(self, name=None):
        """How many records this reader has produced (an int64 scalar)."""
        return self._op("ReaderNumRecordsProducedV2", [], name).outputs[0]

    def num_work_units_completed(self, name=None):
        """How many files (work units) this reader has finished."""
        return self._op("ReaderNumWorkUnitsCompletedV2", [], name).outputs[0]

    def reset(self, name=None):
        """Back to the initial state: no file in progress, counters at 0."""
        return self._op("ReaderResetV2", [], name)

    def serialize_state(self, name=None):
        raise NotImplementedError(f"{type(self).__name__} does not support "
                                  "serializing its state")

    def restore_state(self, state, name=None):
        raise NotImplementedError(f"{type(self).__name__} does not support "
                                  "restoring its state")


class TFRecordReader(ReaderBase):
    """Reads the records of TFRecord files (``options``: a ``TFRecordOptions``
    or a compression name)."""

    _OP_TYPE = "TFRecordReaderV2"

    def __init__(self, name=None, options=None):
        super().__init__(name, {"compression_type": _compression_name(options)})


def _compression_name(options) -> str:
    """"", "ZLIB" or "GZIP" from a ``TFRecordOptions``, enum value or name."""
    value = getattr(options, "compression_type", options)
    names = {None: "", 0: "", 1: "ZLIB", 2: "GZIP", "": "", "ZLIB": "ZLIB",
             "GZIP": "GZIP"}
    key = value.upper() if isinstance(value, str) else value
    if isinstance(key, bool) or key not in names:
        raise ValueError(f"Unknown TFRecord compression type {value!r}: expected "
                         "'', 'ZLIB' or 'GZIP'")
    return names[key]


class TextLineReader(ReaderBase):
    """Reads the lines of text files (without their newline), after skipping
    ``skip_header_lines`` lines of each file."""

    _OP_TYPE = "TextLineReaderV2"

    def __init__(self, skip_header_lines=None, name=None):
        super().__init__(name, {"skip_header_lines": int(skip_header_lines or 0)})


class WholeFileReader(ReaderBase):
    """Reads each file whole: the key is its name, the value its contents."""

    _OP_TYPE = "WholeFileReaderV2"


class IdentityReader(ReaderBase):
    """Produces each queued string as both key and value (one record each)."""

    _OP_TYPE = "IdentityReaderV2"


class FixedLengthRecordReader(ReaderBase):
    """Reads records of ``record_bytes`` bytes, after ``header_bytes`` and before
    ``footer_bytes``; consecutive records start ``hop_bytes`` apart (default:
    ``record_bytes``). ``encoding``: "", "ZLIB" or "GZIP"."""

    _OP_TYPE = "FixedLengthRecordReaderV2"

    def __init__(self, record_bytes, header_bytes=None, footer_bytes=None,
                 hop_bytes=None, name=None, encoding=None):
        if int(record_bytes) <= 0:
            raise ValueError(f"record_bytes must be > 0, got {record_bytes}")
        super().__init__(name, {"record_bytes": int(record_bytes),
                                "header_bytes": int(header_bytes or 0),
                                "footer_bytes": int(footer_bytes or 0),
                                "hop_bytes": int(hop_bytes or 0),
                                "encoding": encoding or ""})


def read_file(filename, name=None):
    """The contents of the file ``filename`` (a string scalar)."""
    filename = convert_to_tensor(filename, dtype=dtypes.string)
    return filename.graph.create_op("ReadFile", [filename], {},
                                    name=name or "ReadFile").outputs[0]


def write_file(filename, contents, name=None):
    """An op writing ``contents`` (a string scalar) to ``filename``."""
    filename = convert_to_tensor(filename, dtype=dtypes.string)
    contents = convert_to_tensor(contents, dtype=dtypes.string)
    return filename.graph.create_op("WriteFile", [filename, contents], {},
                                    name=name or "WriteFile")


__all__ = ["FixedLengthRecordReader", "IdentityReader", "ReaderBase",
           "TFRecordReader", "TextLineReader", "WholeFileReader", "read_file",
           "write_file"]
