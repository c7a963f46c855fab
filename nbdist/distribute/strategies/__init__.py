"""The distribution strategies (``parameter_server_strategy``,
``collective_all_reduce_strategy``), the distribute coordinator and its worker
context (``distribute_coordinator``, ``distribute_coordinator_context``),
``input_context`` and the TF2 ``partitioners``; their public names are on
``nd.distribute`` and ``nd.distribute.experimental``."""
