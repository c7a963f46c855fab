"""``nbdist.core``: TF's ``tensorflow.core`` proto module paths, as nbdist's own.

``from tensorflow.core.protobuf import saver_pb2`` becomes
``from nbdist.core.protobuf import saver_pb2``, and that module *is*
``nbdist.proto.saver_pb2`` (the same object), so its messages are the ones
nbdist reads and writes. Paths: ``framework`` (graph, node_def, attr_value,
tensor, tensor_shape, types, versions, function, step_stats, summary,
variable, device_attributes), ``example`` (example, feature), ``protobuf``
(config, cluster, debug, meta_graph, queue_runner, rewriter_config, saver,
saved_model, tensorflow_server, master, worker, master_service,
worker_service, named_tensor, tensor_bundle, error_codes), ``util`` (event),
``lib.core`` (error_codes, TF1's path).
"""
