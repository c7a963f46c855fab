"""``nd.distribute``: cluster resolvers, the distribute coordinator, the event
stream, (TF2 style) ``ParameterServerStrategy`` with ``ClusterCoordinator``, and
``MultiWorkerMirroredStrategy`` (collective all-reduce between workers).

Sub-packages: ``strategies`` (the strategies, the distribute coordinator and
its context, input contexts, partitioners), ``coordinator`` (the
``ClusterCoordinator`` and its parts; also TF's ``tf.distribute.coordinator``),
``tracing`` (``nd.function``: traced functions, ``TensorSpec``, the
``_FunctionCall`` op; its tracer core and ``nest`` are ``nbdist.framework``'s
``func_graph`` and ``nest``, shared with control flow) and ``data``
(``nd.data``'s datasets and iterators). ``cluster_resolver`` and
``experimental`` are TF's alias modules; ``coordination`` and
``worker_context`` the coordination service's client side.
"""

from __future__ import annotations

import importlib

from nbdist.distribute import cluster_resolver as cluster_resolver

_DC = "nbdist.distribute.strategies.distribute_coordinator"
_DC_CONTEXT = "nbdist.distribute.strategies.distribute_coordinator_context"
_PS = "nbdist.distribute.strategies.parameter_server_strategy"
_COLLECTIVE = "nbdist.distribute.strategies.collective_all_reduce_strategy"
_LAZY = {
    "run_distribute_coordinator": (_DC, "run_distribute_coordinator"),
    "CoordinatorMode": (_DC, "CoordinatorMode"),
    "run_standard_tensorflow_server": (_DC, "run_standard_tensorflow_server"),
    "BetweenGraphStrategy": (_DC, "BetweenGraphStrategy"),
    "get_current_worker_context": (_DC_CONTEXT, "get_current_worker_context"),
    "watch_events": ("nbdist.distribute.coordination", "watch_events"),
    "coordination_client": ("nbdist.distribute.coordination", "coordination_client"),
    "ParameterServerStrategy": (_PS, "ParameterServerStrategy"),
    "MultiWorkerMirroredStrategy": (_COLLECTIVE, "MultiWorkerMirroredStrategy"),
    "CollectiveAllReduceStrategy": (_COLLECTIVE, "CollectiveAllReduceStrategy"),
    "ReduceOp": (_COLLECTIVE, "ReduceOp"),
    "InputContext": ("nbdist.distribute.strategies.input_context", "InputContext"),
}
_MODULES = {
    "distribute_coordinator": _DC,
    "distribute_coordinator_context": _DC_CONTEXT,
    "experimental": "nbdist.distribute.experimental",
    "coordinator": "nbdist.distribute.coordinator",
}


def __getattr__(name):
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
    elif name in _MODULES:
        value = importlib.import_module(_MODULES[name])
    else:
        raise AttributeError(f"module 'nbdist.distribute' has no attribute '{name}'")
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY) | set(_MODULES))
