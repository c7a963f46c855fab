"""The layers of TF1's ``tf.contrib.layers`` (slim's): ``conv2d``,
``fully_connected``, ``max_pool2d``, ``avg_pool2d``, ``flatten``, ``dropout``,
``batch_norm``, ``conv2d_transpose``, ``repeat``, ``stack``. Variables are
``<scope>/weights`` and ``<scope>/biases`` (model variables), scopes default to
``Conv``, ``fully_connected``, ``MaxPool2D`` ... and every layer takes
``arg_scope`` defaults.
"""

from __future__ import annotations

import nbdist as nd
from nbdist.contrib.framework.arg_scope import add_arg_scope
from nbdist.contrib.framework.variables import model_variable
from nbdist.contrib.layers.initializers import xavier_initializer
from nbdist.framework.ops import GraphKeys
from nbdist.layers.convolutional import _deconv_length

_ZEROS = nd.zeros_initializer()  # the biases' default initializer (stateless)


def _collect_outputs(collections, alias, outputs):
    for c in collections or ():
        nd.add_to_collection(c, outputs)
    try:
        outputs.alias = alias
    except AttributeError:
        pass
    return outputs


def _var_collections(variables_collections, name):
    if isinstance(variables_collections, dict):
        c = variables_collections.get(name)
        return None if c is None else list(c) if isinstance(c, (list, tuple)) else [c]
    return list(variables_collections) if variables_collections else None


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


def _finish(outputs, normalizer_fn, normalizer_params, biases, activation_fn):
    if normalizer_fn is not None:
        outputs = normalizer_fn(outputs, **(normalizer_params or {}))
    elif biases is not None:
        outputs = nd.nn.bias_add(outputs, biases)
    if activation_fn is not None:
        outputs = activation_fn(outputs)
    return outputs


def _biases(num_outputs, dtype, normalizer_fn, biases_initializer,
            biases_regularizer, variables_collections, trainable):
    if normalizer_fn is not None or biases_initializer is None:
        return None
    return model_variable("biases", shape=[num_outputs], dtype=dtype,
                          initializer=biases_initializer,
                          regularizer=biases_regularizer,
                          collections=_var_collections(variables_collections,
                                                       "biases"),
                          trainable=trainable)


@add_arg_scope
def fully_connected(inputs, num_outputs, activation_fn=nd.nn.relu,
                    normalizer_fn=None, normalizer_params=None,
                    weights_initializer=None, weights_regularizer=None,
                    biases_initializer=_ZEROS,
                    biases_regularizer=None, reuse=None,
                    variables_collections=None, outputs_collections=None,
                    trainable=True, scope=None):
    """``activation_fn(inputs @ weights + biases)`` over the last axis
    (``weights`` xavier-initialised; ``relu`` by default)."""
    if not isinstance(num_outputs, int):
        msg = f"num_outputs type should be one of (int, long), got {type(num_outputs)}."
        raise ValueError(msg)  # noqa: TRY004 - TF's error class
    with nd.variable_scope(scope, "fully_connected", reuse=reuse) as sc:
        inputs = nd.convert_to_tensor(inputs)
        dims = inputs.shape.as_list()
        if dims is None or dims[-1] is None:
            raise ValueError("The last dimension of the inputs to `Dense` should be "
                             "defined. Found `None`.")
        dtype = inputs.dtype.base_dtype
        weights = model_variable(
            "weights", shape=[dims[-1], num_outputs], dtype=dtype,
            initializer=weights_initializer or xavier_initializer(),
            regularizer=weights_regularizer,
            collections=_var_collections(variables_collections, "weights"),
            trainable=trainable)
        if len(dims) > 2:
            flat = nd.reshape(inputs, [-1, dims[-1]])
            outputs = nd.matmul(flat, weights)
            lead = dims[:-1]
            target = (lead + [num_outputs] if None not in lead else
                      nd.concat([nd.shape(inputs)[:-1], [num_outputs]], 0))
            outputs = nd.reshape(outputs, target)
            outputs.set_shape(lead + [num_outputs])
        else:
            outputs = nd.matmul(inputs, weights)
        biases = _biases(num_outputs, dtype, normalizer_fn, biases_initializer,
                         biases_regularizer, variables_collections, trainable)
        outputs = _finish(outputs, normalizer_fn, normalizer_params, biases,
                          activation_fn)
        return _collect_outputs(outputs_collections, sc.name, outputs)


@add_arg_scope
def conv2d(inputs, num_outputs, kernel_size, stride=1, padding="SAME",
           data_format=None, rate=1, activation_fn=nd.nn.relu, normalizer_fn=None,
           normalizer_params=None, weights_initializer=None,
           weights_regularizer=None, biases_initializer=_ZEROS,
           biases_regularizer=None, reuse=None, variables_collections=None,
           outputs_collections=None, trainable=True, scope=None):
    """2-D convolution, ``SAME`` padding and ``relu`` by default; ``weights``
    are ``[kh, kw, in, num_outputs]``."""
    fmt = data_format or "NHWC"
    if fmt not in ("NHWC", "NCHW"):
        raise ValueError("data_format has to be either NCHW or NHWC.")
    with nd.variable_scope(scope, "Conv", reuse=reuse) as sc:
        inputs = nd.convert_to_tensor(inputs)
        if inputs.shape.ndims != 4:
            raise ValueError(f"Convolution expects a rank-4 input here, got shape "
                             f"{inputs.shape}")
        in_ch = inputs.shape.as_list()[3 if fmt == "NHWC" else 1]
        kh, kw = _pair(kernel_size)
        sh, sw = _pair(stride)
        rh, rw = _pair(rate)
        dtype = inputs.dtype.base_dtype
        weights = model_variable(
            "weights", shape=[kh, kw, in_ch, num_outputs], dtype=dtype,
            initializer=weights_initializer or xavier_initializer(),
            regularizer=weights_regularizer,
            collections=_var_collections(variables_collections, "weights"),
            trainable=trainable)
        full = [1, sh, sw, 1] if fmt == "NHWC" else [1, 1, sh, sw]
        dil = [1, rh, rw, 1] if fmt == "NHWC" else [1, 1, rh, rw]
        outputs = nd.nn.conv2d(inputs, weights, full, padding.upper(),
                               data_format=fmt, dilations=dil, name="Conv2D")
        biases = _biases(num_outputs, dtype, normalizer_fn, biases_initializer,
                         biases_regularizer, variables_collections, trainable)
        if normalizer_fn is None and biases is not None and fmt == "NCHW":
            outputs = nd.nn.bias_add(outputs, biases, data_format="NCHW")
            biases = None
        outputs = _finish(outputs, normalizer_fn, normalizer_params, biases,
                          activation_fn)
        return _collect_outputs(outputs_collections, sc.name, outputs)


convolution2d = conv2d


@add_arg_scope
def conv2d_transpose(inputs, num_outputs, kernel_size, stride=1, padding="SAME",
                     data_format="NHWC", activation_fn=nd.nn.relu,
                     normalizer_fn=None, normalizer_params=None,
                     weights_initializer=None, weights_regularizer=None,
                     biases_initializer=_ZEROS,
                     biases_regularizer=None, reuse=None,
                     variables_collections=None, outputs_collections=None,
                     trainable=True, scope=None):
    """The transposed convolution; ``weights`` ``[kh, kw, num_outputs, in]``."""
    with nd.variable_scope(scope, "Conv2d_transpose", reuse=reuse) as sc:
        inputs = nd.convert_to_tensor(inputs)
        dims = inputs.shape.as_list()
        kh, kw = _pair(kernel_size)
        sh, sw = _pair(stride)
        pad = padding.upper()
        dtype = inputs.dtype.base_dtype
        weights = model_variable(
            "weights", shape=[kh, kw, num_outputs, dims[3]], dtype=dtype,
            initializer=weights_initializer or xavier_initializer(),
            regularizer=weights_regularizer,
            collections=_var_collections(variables_collections, "weights"),
            trainable=trainable)
        oh = _deconv_length(dims[1], kh, pad, sh)
        ow = _deconv_length(dims[2], kw, pad, sw)
        out_shape = nd.stack([nd.shape(inputs)[0], oh, ow, num_outputs])
        outputs = nd.nn.conv2d_transpose(inputs, weights, out_shape,
                                         [1, sh, sw, 1], pad)
        outputs.set_shape([dims[0], oh, ow, num_outputs])
        biases = _biases(num_outputs, dtype, normalizer_fn, biases_initializer,
                         biases_regularizer, variables_collections, trainable)
        outputs = _finish(outputs, normalizer_fn, normalizer_params, biases,
                          activation_fn)
        return _collect_outputs(outputs_collections, sc.name, outputs)


convolution2d_transpose = conv2d_transpose


def _pool(kind, default_scope):
    @add_arg_scope
    def pool(inputs, kernel_size, stride=2, padding="VALID", data_format="NHWC",
             outputs_collections=None, scope=None):
        if data_format not in ("NHWC", "NCHW"):
            raise ValueError("data_format has to be either NCHW or NHWC.")
        with nd.name_scope(scope, default_scope) as sc:
            kh, kw = _pair(kernel_size)
            sh, sw = _pair(stride)
            last = data_format == "NHWC"
            ksize = [1, kh, kw, 1] if last else [1, 1, kh, kw]
            strides = [1, sh, sw, 1] if last else [1, 1, sh, sw]
            fn = nd.nn.max_pool if kind == "max" else nd.nn.avg_pool
            outputs = fn(inputs, ksize, strides, padding.upper(),
                         data_format=data_format)
            return _collect_outputs(outputs_collections, sc, outputs)

    pool.__name__ = f"{kind}_pool2d"
    pool.__doc__ = (f"{kind.title()} pooling (``stride=2``, ``VALID`` by default); "
                    f"ops in the ``{default_scope}`` name scope.")
    return pool


max_pool2d = _pool("max", "MaxPool2D")
avg_pool2d = _pool("avg", "AvgPool2D")


@add_arg_scope
def flatten(inputs, outputs_collections=None, scope=None):
    """``[batch, ...]`` to ``[batch, k]``."""
    with nd.name_scope(scope, "Flatten") as sc:
        inputs = nd.convert_to_tensor(inputs)
        if inputs.shape.ndims is None or inputs.shape.ndims < 2:
            raise ValueError(f"Inputs must have a least 2 dimensions, got shape "
                             f"{inputs.shape}.")
        rest = inputs.shape.as_list()[1:]
        if None not in rest:
            k = 1
            for d in rest:
                k *= d
            outputs = nd.reshape(inputs, [-1, k])
        else:
            outputs = nd.reshape(inputs, nd.stack([nd.shape(inputs)[0], -1]))
        return _collect_outputs(outputs_collections, sc, outputs)


@add_arg_scope
def dropout(inputs, keep_prob=0.5, noise_shape=None, is_training=True,
            outputs_collections=None, scope=None, seed=None):
    """Dropout keeping ``keep_prob`` of the inputs when ``is_training`` (True by
    default, a bool or a boolean tensor)."""
    from nbdist.layers.base import smart_cond

    with nd.name_scope(scope, "Dropout") as sc:
        inputs = nd.convert_to_tensor(inputs)
        outputs = smart_cond(is_training,
                             lambda: nd.nn.dropout(inputs, keep_prob=keep_prob,
                                                   noise_shape=noise_shape,
                                                   seed=seed),
                             lambda: nd.identity(inputs))
        return _collect_outputs(outputs_collections, sc, outputs)


@add_arg_scope
def batch_norm(inputs, decay=0.999, center=True, scale=False, epsilon=0.001,
               activation_fn=None, param_initializers=None, param_regularizers=None,
               updates_collections=GraphKeys.UPDATE_OPS, is_training=True,
               reuse=None, variables_collections=None, outputs_collections=None,
               trainable=True, batch_weights=None, fused=None, data_format="NHWC",
               zero_debias_moving_mean=False, scope=None, renorm=False,
               renorm_clipping=None, renorm_decay=0.99, adjustment=None):
    """Slim's batch norm: ``BatchNorm/beta`` (and ``gamma`` when ``scale``),
    ``moving_mean``/``moving_variance`` updated with ``decay`` by ops put in
    ``updates_collections`` (``UPDATE_OPS``; None runs them with the output)."""
    if batch_weights is not None or renorm or adjustment is not None or \
            zero_debias_moving_mean:
        raise NotImplementedError("nbdist's batch_norm has no batch_weights, renorm, "
                                  "adjustment or zero_debias_moving_mean")
    from nbdist.layers.normalization import BatchNormalization

    inits = param_initializers or {}
    regs = param_regularizers or {}
    with nd.variable_scope(scope, "BatchNorm", reuse=reuse) as sc:
        inputs = nd.convert_to_tensor(inputs)
        rank = inputs.shape.ndims
        axis = 1 if data_format == "NCHW" and rank == 4 else -1
        layer = BatchNormalization(
            axis=axis, momentum=decay, epsilon=epsilon, center=center, scale=scale,
            beta_initializer=inits.get("beta"), gamma_initializer=inits.get("gamma"),
            moving_mean_initializer=inits.get("moving_mean"),
            moving_variance_initializer=inits.get("moving_variance"),
            beta_regularizer=regs.get("beta"), gamma_regularizer=regs.get("gamma"),
            trainable=trainable, name=sc.name, _scope=sc, _reuse=reuse,
            fused=None if fused is None else (fused and rank == 4))
        g = nd.get_default_graph()
        before = list(g.get_collection(GraphKeys.UPDATE_OPS))
        outputs = layer(inputs, training=is_training)
        for v, name in ((layer.gamma, "gamma"), (layer.beta, "beta"),
                        (layer.moving_mean, "moving_mean"),
                        (layer.moving_variance, "moving_variance")):
            if v is None:
                continue
            for c in [GraphKeys.MODEL_VARIABLES] + (
                    _var_collections(variables_collections, name) or []):
                if v not in g.get_collection(c):
                    g.add_to_collection(c, v)
        updates = layer.updates
        if updates_collections != GraphKeys.UPDATE_OPS:
            ref = g.get_collection_ref(GraphKeys.UPDATE_OPS)
            ref[:] = before
            if updates_collections is None:
                with nd.control_dependencies(updates):
                    outputs = nd.identity(outputs)
            else:
                for u in updates:
                    g.add_to_collection(updates_collections, u)
        if activation_fn is not None:
            outputs = activation_fn(outputs)
        return _collect_outputs(outputs_collections, sc.name, outputs)


@add_arg_scope
def layer_norm(inputs, center=True, scale=True, activation_fn=None, reuse=None,
               variables_collections=None, outputs_collections=None,
               trainable=True, begin_norm_axis=1, begin_params_axis=-1,
               scope=None):
    """Layer normalisation (Ba et al.): each example normalised over the axes
    from ``begin_norm_axis``, then scaled by ``gamma`` and shifted by ``beta``
    (``LayerNorm/beta``, ``LayerNorm/gamma`` over the axes from
    ``begin_params_axis``)."""
    with nd.variable_scope(scope, "LayerNorm", reuse=reuse) as sc:
        inputs = nd.convert_to_tensor(inputs)
        rank = inputs.shape.ndims
        if rank is None:
            raise ValueError(f"Inputs {inputs.name} has undefined rank.")
        begin_norm_axis %= rank
        begin_params_axis %= rank
        params_shape = inputs.shape.as_list()[begin_params_axis:]
        if None in params_shape:
            raise ValueError(f"Inputs {inputs.name} has undefined last dimensions "
                             f"{params_shape}.")
        dtype = inputs.dtype.base_dtype
        beta = gamma = None
        if center:
            beta = model_variable("beta", shape=params_shape, dtype=dtype,
                                  initializer=nd.zeros_initializer(),
                                  collections=_var_collections(
                                      variables_collections, "beta"),
                                  trainable=trainable)
        if scale:
            gamma = model_variable("gamma", shape=params_shape, dtype=dtype,
                                   initializer=nd.ones_initializer(),
                                   collections=_var_collections(
                                       variables_collections, "gamma"),
                                   trainable=trainable)
        mean, variance = nd.nn.moments(inputs, list(range(begin_norm_axis, rank)),
                                       keep_dims=True)
        outputs = nd.nn.batch_normalization(inputs, mean, variance, offset=beta,
                                            scale=gamma, variance_epsilon=1e-12)
        if activation_fn is not None:
            outputs = activation_fn(outputs)
        return _collect_outputs(outputs_collections, sc.name, outputs)


@add_arg_scope
def one_hot_encoding(labels, num_classes, on_value=1.0, off_value=0.0,
                     outputs_collections=None, scope=None):
    """``one_hot(labels, num_classes)`` as float32."""
    with nd.name_scope(scope, "OneHotEncoding") as sc:
        outputs = nd.one_hot(labels, num_classes, on_value=on_value,
                             off_value=off_value)
        return _collect_outputs(outputs_collections, sc, outputs)


def _layer_name(layer):
    if hasattr(layer, "__name__"):
        return layer.__name__
    if hasattr(layer, "func") and hasattr(layer.func, "__name__"):
        return layer.func.__name__
    return None


def repeat(inputs, repetitions, layer, *args, **kwargs):
    """``layer`` applied ``repetitions`` times, in scopes ``<scope>/<scope>_1`` ..."""
    scope = kwargs.pop("scope", None)
    with nd.variable_scope(scope, "Repeat"):
        outputs = nd.convert_to_tensor(inputs)
        scope = scope or _layer_name(layer) or "repeat"
        for i in range(repetitions):
            kwargs["scope"] = f"{scope}_{i + 1}"
            outputs = layer(outputs, *args, **kwargs)
        return outputs


def stack(inputs, layer, stack_args, **kwargs):
    """``layer`` applied once per entry of ``stack_args`` (each a tuple of
    positional arguments or one argument), in scopes ``<scope>_1`` ..."""
    scope = kwargs.pop("scope", None)
    if not isinstance(stack_args, (list, tuple)):
        msg = "stack_args need to be a list or tuple"
        raise ValueError(msg)  # noqa: TRY004 - TF's error class
    with nd.variable_scope(scope, "Stack"):
        outputs = nd.convert_to_tensor(inputs)
        scope = scope or _layer_name(layer) or "stack"
        for i, args in enumerate(stack_args):
            kwargs["scope"] = f"{scope}_{i + 1}"
            args = args if isinstance(args, (list, tuple)) else [args]
            outputs = layer(outputs, *args, **kwargs)
        return outputs
