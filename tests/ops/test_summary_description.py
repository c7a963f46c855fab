"""``tf.compat.v1.summary.get_summary_description``: the ``SummaryDescription``
a TF1 ``TensorSummary`` node carries as JSON in its ``description`` attr, with
TF's error for any other op (checked against TF 2.21)."""

from __future__ import annotations

import pytest

import nbdist as nd
from nbdist.proto.node_def_pb2 import NodeDef

S = nd.compat.v1.summary


def test_reads_the_type_hint_of_a_tensor_summary_node():
    node = NodeDef(op="TensorSummary")
    node.attr["description"].s = b'{"type_hint": "foo"}'
    got = S.get_summary_description(node)
    assert isinstance(got, S.SummaryDescription) and got.type_hint == "foo"
    assert S.SummaryDescription.FromString(got.SerializeToString()) == got


def test_other_ops_are_refused_with_tfs_message():
    with pytest.raises(ValueError, match="Can't get_summary_description on "
                                         "TensorSummaryV2"):
        S.get_summary_description(NodeDef(op="TensorSummaryV2"))
