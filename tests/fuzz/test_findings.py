"""What fuzzing found (``scripts/fuzz.py``, atheris), each kept as a test of the
decoder's documented error on the smallest input that showed it:

* the framed wire named a tensor's dtype with any string NumPy parses: ``","``
  raised ``SyntaxError`` (NumPy's comma-string parser), ``"a"`` a
  ``DeprecationWarning``; now only numeric dtypes are looked up, anything else
  is ``ValueError`` (the connection is dropped, nothing is logged as a crash);
* a string tensor's bytes that are not a ``TensorProto`` raised protobuf's
  ``DecodeError``; now ``ValueError``;
* a GraphDef node whose colocation constraint (``_class``) is not UTF-8 made
  ``CreateSession`` fail with ``UnicodeDecodeError`` (gRPC ``INTERNAL``, a
  traceback in the server's log); now ``InvalidArgumentError`` naming the node.
"""

from __future__ import annotations

import json
import struct

import pytest
import targets

from nbdist import errors
from nbdist.proto import graph_pb2


def _frame(header: dict, payload: bytes = b"") -> bytes:
    """A frame as ``framed.wire`` lays it out: sizes, JSON header, payload."""
    head = json.dumps(header).encode()
    return struct.pack("<IQ", len(head), len(payload)) + head + payload


@pytest.mark.parametrize("dtype", [",", "a", "f4,", "O", ["<f4"]])
def test_a_frame_naming_a_non_numeric_dtype_is_refused(dtype):
    frame = _frame({"op": "step", "t": [{"k": "x", "d": dtype, "s": [], "n": 0}]})
    with pytest.raises(ValueError, match="malformed|not a numeric dtype"):
        targets.TARGETS["wire"].decode(frame)


def test_a_string_tensor_that_is_no_tensor_proto_is_refused():
    frame = _frame({"op": "step", "t": [{"k": "s", "d": "proto", "n": 3, "o": 0}]},
                   b"\xff\xff\xff")
    with pytest.raises(ValueError, match="tensor s"):
        targets.TARGETS["wire"].decode(frame)


def test_a_colocation_constraint_that_is_not_text_is_invalid_argument():
    graph_def = graph_pb2.GraphDef()
    node = graph_def.node.add(name="c", op="Const")
    node.attr["dtype"].type = 1
    node.attr["value"].tensor.dtype = 1
    node.attr["value"].tensor.float_val.append(1.0)
    node.attr["_class"].list.s.append(b"loc:@\xba")
    with pytest.raises(errors.InvalidArgumentError, match="'c'.*not UTF-8"):
        targets.TARGETS["graphdef"].decode(graph_def.SerializeToString())
