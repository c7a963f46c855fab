"""Placement reads colocation constraints as names, whatever bytes they hold.

``place`` is a pure function over the NodeDefs of a request: a ``_class``
entry ``loc:@a`` puts the node on ``a``'s device (even against its own device
request, as TF's placer does for a colocation group with one explicit spec),
and an entry that is not UTF-8 text is ``InvalidArgumentError`` naming the node
(before, ``place`` raised a bare ``UnicodeDecodeError``: a crash, not an answer).
"""

from __future__ import annotations

import pytest

from nbdist import errors
from nbdist.proto import node_def_pb2
from nbdist.runtime.placement import place

DEVICES = ["/job:ps/replica:0/task:0/device:CPU:0",
           "/job:worker/replica:0/task:0/device:CPU:0"]
WORKER = "/job:worker/replica:0/task:0"


def _nodes(colocation: bytes):
    a = node_def_pb2.NodeDef(name="a", op="NoOp", device="/job:ps/task:0")
    b = node_def_pb2.NodeDef(name="b", op="NoOp")
    b.attr["_class"].list.s.append(colocation)
    return [a, b]


def test_a_colocation_constraint_joins_its_group():
    placed = place(_nodes(b"loc:@a"), DEVICES, WORKER)
    assert placed == {"a": DEVICES[0], "b": DEVICES[0]}
    # A constraint naming no node of the graph is ignored, as TF's placer does.
    assert place(_nodes(b"loc:@zz"), DEVICES, WORKER)["b"] == DEVICES[1]


@pytest.mark.parametrize("raw", [b"loc:@\xff\xfe", b"\x80", b"loc:@a\xc3"])
def test_a_constraint_that_is_not_text_is_refused_naming_the_node(raw):
    with pytest.raises(errors.InvalidArgumentError,
                       match="Node 'b': its colocation constraint .* is not UTF-8 text"
                       ) as caught:
        place(_nodes(raw), DEVICES, WORKER)
    assert caught.value.op == "b"
