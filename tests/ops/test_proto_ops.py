"""``tf.io.decode_proto`` / ``encode_proto`` over the process's protobuf
descriptor pool (``descriptor_source="local://"``).

Expected values and error messages are TF 2.21's for the same messages
(``tensorflow.TensorShapeProto``, whose nbdist twin is
``nbdist.TensorShapeProto``): sizes count each field's values, values are
padded with the field default, sub-messages come out serialized."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd
from nbdist.proto import tensor_shape_pb2 as ts

io = nd.compat.v1.io
Dim = ts.TensorShapeProto.Dim


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def test_decode_counts_pads_and_serializes_submessages():
    full = ts.TensorShapeProto(dim=[Dim(size=3, name="a"), Dim(size=4)],
                               unknown_rank=True).SerializeToString()
    empty = ts.TensorShapeProto().SerializeToString()
    sizes, (dims, unknown) = io.decode_proto(
        [[full], [empty]], "tensorflow.TensorShapeProto", ["dim", "unknown_rank"],
        [nd.string, nd.bool])
    assert sizes.shape.as_list() == [2, 1, 2] and dims.shape.as_list() == [2, 1, None]
    with nd.Session() as s:
        sz, d, u = s.run([sizes, dims, unknown])
    assert sz.tolist() == [[[2, 1]], [[0, 0]]]
    assert [Dim.FromString(x) for x in d[0, 0]] == [Dim(size=3, name="a"),
                                                     Dim(size=4)]
    assert d[1, 0].tolist() == [b"", b""] and u.tolist() == [[[True]], [[False]]]


def test_encode_inverts_decode_and_text_format_reads():
    msgs = [Dim(size=-1, name="x").SerializeToString(), b""]
    sizes, values = io.decode_proto(msgs, "nbdist.TensorShapeProto.Dim",
                                    ["size", "name"], [nd.int64, nd.string])
    enc = io.encode_proto(sizes, values, ["size", "name"],
                          "nbdist.TensorShapeProto.Dim")
    text = io.decode_proto(['size: 7 name: "t"'], "nbdist.TensorShapeProto.Dim",
                           ["size"], [nd.int64], message_format="text")
    with nd.Session() as s:
        assert s.run(enc).tolist() == msgs
        t_sizes, (t_size,) = s.run(text)
    assert t_sizes.tolist() == [[1]] and t_size.tolist() == [[7]]


@pytest.mark.parametrize("args, error, message", [
    (("no.Such", ["size"], [nd.int64]), nd.errors.InvalidArgumentError,
     "No descriptor found for message type no.Such"),
    (("nbdist.TensorShapeProto.Dim", ["nope"], [nd.int64]),
     nd.errors.InvalidArgumentError,
     "Unknown field: nope in message type nbdist.TensorShapeProto.Dim"),
    (("nbdist.TensorShapeProto.Dim", ["size"], [nd.string]),
     nd.errors.InvalidArgumentError,
     ("Unexpected output type for nbdist.TensorShapeProto.Dim.size: int64 to "
      "DT_STRING")),
])
def test_bad_requests_have_tfs_errors(args, error, message):
    sizes, _ = io.decode_proto([Dim(size=1).SerializeToString()], *args)
    with nd.Session() as s, pytest.raises(error, match=message):
        s.run(sizes)


def test_corrupt_bytes_are_data_loss():
    sizes, _ = io.decode_proto([np.bytes_(b"\xff\xff")], "nbdist.TensorShapeProto.Dim",
                               ["size"], [nd.int64])
    with nd.Session() as s, pytest.raises(nd.errors.DataLossError):
        s.run(sizes)
