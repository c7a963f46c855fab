"""``tensorflow.core.example``: each ``*_pb2`` module here is nbdist's own
(the same module object; see ``nbdist.core``)."""

from __future__ import annotations

from nbdist.python._forward import alias_modules

alias_modules(__name__, {
    "example_pb2": "nbdist.proto.example_pb2",
    "feature_pb2": "nbdist.proto.feature_pb2",
})
