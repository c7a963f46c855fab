"""Slim's variable helpers: ``variable``, ``model_variable`` (also in
``MODEL_VARIABLES``), ``get_variables``, ``get_variables_to_restore`` ...,
as TF1's ``tf.contrib.framework``."""

from __future__ import annotations

import re

import nbdist as nd
from nbdist.contrib.framework.arg_scope import add_arg_scope
from nbdist.framework.ops import GraphKeys


@add_arg_scope
def variable(name, shape=None, dtype=None, initializer=None, regularizer=None,
             trainable=True, collections=None, caching_device=None, device=None,
             partitioner=None, custom_getter=None, use_resource=None,
             synchronization=None, aggregation=None):
    """``get_variable`` that also adds the variable to ``collections`` (with
    ``GLOBAL_VARIABLES`` always) and places it on ``device``."""
    collections = list(collections or [])
    collections = list(dict.fromkeys([GraphKeys.GLOBAL_VARIABLES] + collections))
    with nd.device(device or ""):
        return nd.get_variable(name, shape=shape, dtype=dtype,
                               initializer=initializer, regularizer=regularizer,
                               trainable=trainable, collections=collections,
                               caching_device=caching_device,
                               partitioner=partitioner,
                               custom_getter=custom_getter)


@add_arg_scope
def model_variable(name, shape=None, dtype=nd.float32, initializer=None,
                   regularizer=None, trainable=True, collections=None,
                   caching_device=None, device=None, partitioner=None,
                   custom_getter=None, use_resource=None, synchronization=None,
                   aggregation=None):
    """``variable`` also in ``GraphKeys.MODEL_VARIABLES``."""
    collections = list(collections or []) + [GraphKeys.GLOBAL_VARIABLES,
                                             GraphKeys.MODEL_VARIABLES]
    return variable(name, shape=shape, dtype=dtype, initializer=initializer,
                    regularizer=regularizer, trainable=trainable,
                    collections=collections, caching_device=caching_device,
                    device=device, partitioner=partitioner,
                    custom_getter=custom_getter)


def local_variable(initial_value, validate_shape=True, name=None, use_resource=None):
    """A variable in ``LOCAL_VARIABLES`` only."""
    return nd.Variable(initial_value, trainable=False,
                       collections=[GraphKeys.LOCAL_VARIABLES],
                       validate_shape=validate_shape, name=name)


def global_variable(initial_value, validate_shape=True, name=None,
                    use_resource=None):
    """A non-trainable variable in ``GLOBAL_VARIABLES``."""
    return nd.Variable(initial_value, trainable=False,
                       collections=[GraphKeys.GLOBAL_VARIABLES],
                       validate_shape=validate_shape, name=name)


def _scope_name(scope):
    return scope.name if isinstance(scope, nd.VariableScope) else scope


def get_variables(scope=None, suffix=None, collection=GraphKeys.GLOBAL_VARIABLES):
    """The variables of ``collection`` whose names start with ``scope`` (and end
    with ``suffix``)."""
    out = nd.get_collection(collection, _scope_name(scope))
    if suffix is not None:
        out = [v for v in out if v.op.name.endswith(suffix)]
    return out


def get_model_variables(scope=None, suffix=None):
    return get_variables(scope, suffix, GraphKeys.MODEL_VARIABLES)


def get_local_variables(scope=None, suffix=None):
    return get_variables(scope, suffix, GraphKeys.LOCAL_VARIABLES)


def get_trainable_variables(scope=None, suffix=None):
    return get_variables(scope, suffix, GraphKeys.TRAINABLE_VARIABLES)


def get_variables_by_name(given_name, scope=None):
    """The variables whose last name component is ``given_name``."""
    return [v for v in get_variables(scope) if
            re.search(r"(^|/)" + re.escape(given_name) + "$", v.op.name)]


def get_variables_by_suffix(suffix, scope=None):
    return get_variables(scope=scope, suffix=suffix)


def get_unique_variable(var_op_name):
    """The one variable named ``var_op_name``; ValueError if there is none."""
    found = [v for v in nd.global_variables() if v.op.name == var_op_name]
    if not found:
        raise ValueError(f"Couldn't find variable {var_op_name}")
    return found[0]


def get_variables_to_restore(include=None, exclude=None):
    """The global variables under the ``include`` scopes (all by default)
    minus those under the ``exclude`` scopes."""
    if include is None:
        candidates = get_variables()
    else:
        candidates = [v for scope in include for v in get_variables(scope)]
    excluded = {id(v) for scope in (exclude or []) for v in get_variables(scope)}
    return [v for v in candidates if id(v) not in excluded]


def assert_or_get_global_step(graph=None, global_step_tensor=None):
    if global_step_tensor is None:
        return nd.train.get_global_step(graph)
    nd.train.assert_global_step(global_step_tensor)
    return global_step_tensor
