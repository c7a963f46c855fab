"""``nbdist.python``: TF1's ``tensorflow.python`` module paths, as thin aliases.

TF1 programs import ``from tensorflow.python.ops import control_flow_ops``,
``from tensorflow.python.training import saver`` ...; with ``tensorflow``
replaced by ``nbdist`` they import these modules, whose names are nbdist's own
objects (``nbdist.python.ops.control_flow_ops.cond is nd.cond``). Paths:

``ops``: array_ops, control_flow_ops, data_flow_ops, init_ops, lookup_ops, math_ops,
  nn_ops, state_ops, string_ops, variable_scope, variables.
``framework``: constant_op, dtypes, errors, ops, tensor_shape.
``platform``: gfile, tf_logging (the module nbdist logs through itself).
``saved_model``: builder(_impl), constants, loader(_impl), signature_constants,
  signature_def_utils(_impl), tag_constants, utils(_impl): ``nd.saved_model``'s
  own modules.
``training``: basic_session_run_hooks, coordinator, device_setter,
  monitored_session, optimizer, queue_runner, saver, server_lib, session_run_hook,
  sync_replicas_optimizer, training_util.
``client``: session.
``util``: nest.

TF's ``tensorflow.core`` proto paths are ``nbdist.core`` (the ``nbdist.proto``
modules themselves).
"""
