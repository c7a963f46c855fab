"""``tensorflow.core.protobuf``: each ``*_pb2`` module here is nbdist's own
(the same module object; see ``nbdist.core``)."""

from __future__ import annotations

from nbdist.python._forward import alias_modules

alias_modules(__name__, {
    "cluster_pb2": "nbdist.proto.cluster_pb2",
    "config_pb2": "nbdist.proto.config_pb2",
    "debug_pb2": "nbdist.proto.debug_pb2",
    "error_codes_pb2": "nbdist.proto.error_codes_pb2",
    "master_pb2": "nbdist.proto.master_pb2",
    "master_service_pb2": "nbdist.proto.master_service_pb2",
    "meta_graph_pb2": "nbdist.proto.meta_graph_pb2",
    "named_tensor_pb2": "nbdist.proto.named_tensor_pb2",
    "queue_runner_pb2": "nbdist.proto.queue_runner_pb2",
    "rewriter_config_pb2": "nbdist.proto.rewriter_config_pb2",
    "saved_model_pb2": "nbdist.proto.saved_model_pb2",
    "saver_pb2": "nbdist.proto.saver_pb2",
    "tensor_bundle_pb2": "nbdist.proto.tensor_bundle_pb2",
    "tensorflow_server_pb2": "nbdist.proto.server_def_pb2",
    "worker_pb2": "nbdist.proto.worker_pb2",
    "worker_service_pb2": "nbdist.proto.worker_service_pb2",
})
