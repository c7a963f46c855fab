"""The variables' collections (``global_variables``, ``trainable_variables`` ...),
their initializer ops and ``report_uninitialized_variables``."""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.ops import state_ops
from nbdist.ops.control_flow_ops import group, no_op
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.ops import GraphKeys, get_default_graph
from nbdist.framework.tensor_shape import TensorShape


# -- uninitialised reporting ----------------------------------------------------------
register_op("UninitializedNames",
            lambda c: [(dtypes.string, TensorShape([None]))],
            attrs={"names": ("list(string)", REQUIRED)})


def _all(var_list):
    return list(var_list)


def report_uninitialized_variables(var_list=None,
                                   name="report_uninitialized_variables"):
    """A 1-D string tensor: the names of the variables not yet initialised."""
    if var_list is None:
        var_list = global_variables() + local_variables()
    g = get_default_graph()
    with g.name_scope(name) as scope:
        flags = []
        for v in var_list:
            with g.colocate_with(v.op):
                flags.append(state_ops.is_variable_initialized(v._variable))
        op = g.create_op("UninitializedNames", flags,
                         {"names": [v.op.name for v in var_list]}, name=scope)
    return op.outputs[0]


def is_variable_initialized(variable):
    return state_ops.is_variable_initialized(variable)


# -- collections -----------------------------------------------------------------------
def global_variables(scope=None):
    return get_default_graph().get_collection(GraphKeys.GLOBAL_VARIABLES, scope)


all_variables = global_variables


def trainable_variables(scope=None):
    return get_default_graph().get_collection(GraphKeys.TRAINABLE_VARIABLES, scope)


def local_variables(scope=None):
    return get_default_graph().get_collection(GraphKeys.LOCAL_VARIABLES, scope)


def model_variables(scope=None):
    return get_default_graph().get_collection(GraphKeys.MODEL_VARIABLES, scope)


def variables_initializer(var_list, name="init"):
    """An op that runs the initializers of ``var_list``."""
    if var_list:
        return group(*[v.initializer for v in var_list], name=name)
    return no_op(name=name)


def global_variables_initializer():
    return variables_initializer(global_variables())


initialize_all_variables = global_variables_initializer


def local_variables_initializer():
    return variables_initializer(local_variables(), name="init")


__all__ = ["all_variables", "global_variables", "global_variables_initializer",
           "initialize_all_variables", "is_variable_initialized",
           "local_variables", "local_variables_initializer", "model_variables",
           "report_uninitialized_variables", "trainable_variables",
           "variables_initializer"]
