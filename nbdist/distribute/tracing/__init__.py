"""``nd.function``: Python functions traced into graph functions (``function``),
``TensorSpec`` (``tensor_spec``), the op that calls one (``function_ops``) and
the sessions a function keeps per target (``session_cache``). The tracer core
(``FuncGraph``, the per-thread trace stack) and ``nest`` are
``nbdist.framework.func_graph`` / ``function_def`` / ``nest``, shared with control
flow."""
