"""``nd.layers.Layer``: TF1's ``tf.layers.Layer`` (the legacy, variable-scope based
layer): variables live in a variable scope named after the layer (``dense``,
``dense_1`` ...), ops in the name scope of the same name, and the layer keeps
its variables, regularisation losses and updates.

>>> import nbdist as nd
>>> with nd.Graph().as_default():
...     layer = nd.layers.Dense(3)
...     y = layer(nd.zeros([2, 4]))
...     [v.name for v in layer.trainable_variables]
['dense/kernel:0', 'dense/bias:0']
"""

from __future__ import annotations

import re

import numpy as np

import nbdist as nd
from nbdist.framework.ops import GraphKeys, Tensor

REGULARIZATION_LOSSES = "regularization_losses"


def to_snake_case(name: str) -> str:
    s = re.sub(r"(.)([A-Z][a-z0-9]+)", r"\1_\2", name)
    s = re.sub(r"([a-z])([A-Z])", r"\1_\2", s).lower()
    return s if not s.startswith("_") else "private" + s


def _unique_layer_name(base: str) -> str:
    """``dense``, ``dense_1`` ...: per graph, as Keras' ``unique_object_name``."""
    counts = nd.get_default_graph().__dict__.setdefault("_layer_name_counts", {})
    n = counts.get(base, 0)
    counts[base] = n + 1
    return base if n == 0 else f"{base}_{n}"


def constant_value(pred):
    """``pred`` as a Python bool when it is known at graph-build time, else None."""
    if isinstance(pred, (bool, np.bool_, int, np.integer)):
        return bool(pred)
    if isinstance(pred, Tensor):
        if pred.op.type == "Const":
            return bool(np.asarray(pred.op.get_attr("value")).reshape(()))
        return None
    if isinstance(pred, nd.Variable):
        return None
    raise TypeError(f"`pred` must be a Tensor or a Python bool, got {pred!r}")


def smart_cond(pred, true_fn, false_fn, name=None):
    """``true_fn()`` or ``false_fn()`` chosen now when ``pred`` is a Python bool
    or a constant, else an ``nd.cond`` (TF's ``tf_utils.smart_cond``)."""
    value = constant_value(pred)
    if value is not None:
        return true_fn() if value else false_fn()
    return nd.cond(pred, true_fn, false_fn, name=name)


class InputSpec:
    """What a layer accepts: ``ndim``, ``min_ndim``, ``axes`` ({axis: size})."""

    def __init__(self, dtype=None, shape=None, ndim=None, max_ndim=None,
                 min_ndim=None, axes=None):
        self.dtype, self.shape = dtype, shape
        self.ndim = len(shape) if shape is not None else ndim
        self.max_ndim, self.min_ndim = max_ndim, min_ndim
        self.axes = axes or {}


class Layer:
    """Base of the TF1 layers: subclasses define ``build(input_shape)`` (making
    variables with ``add_weight``) and ``call(inputs, ...)``.

    ``name`` names the variable scope (made unique per graph when not given:
    ``dense``, ``dense_1`` ...); ``_reuse``/``_scope`` are the functional
    forms' ``reuse=`` and scope.
    """

    def __init__(self, trainable=True, name=None, dtype=None, _scope=None,
                 _reuse=None, activity_regularizer=None, **kwargs):
        unknown = set(kwargs) - {"input_shape", "batch_input_shape", "weights",
                                 "autocast", "_keras_style"}
        if unknown:
            raise TypeError(f"Keyword argument not understood: {min(unknown)}")
        self.trainable = trainable
        self.built = False
        self.input_spec = None
        self.activity_regularizer = activity_regularizer
        self._reuse = _reuse
        self._scope_arg = _scope
        self._dtype = None if dtype is None else nd.as_dtype(dtype)
        if name is None:
            base = to_snake_case(type(self).__name__)
            self._name = _unique_layer_name(base)
            self._base_name = base
        else:
            if not isinstance(name, str):
                raise TypeError(f"name must be a string, got {name!r}")
            self._name = self._base_name = name
        self._scope = None
        self._name_scope_str = None
        self._trainable_weights: list = []
        self._non_trainable_weights: list = []
        self._losses: list = []
        self._updates: list = []
        self._graph = None

    # -- properties --------------------------------------------------------------
    @property
    def name(self):
        return self._name

    @property
    def dtype(self):
        return None if self._dtype is None else self._dtype.name

    @property
    def scope_name(self):
        if self._scope is None:
            raise ValueError(f"No name available for layer scope because the layer "
                             f"\"{self._name}\" has not been used yet. The scope name "
                             "is determined the first time the layer instance is "
                             "called.")
        return self._scope.name

    @property
    def trainable_weights(self):
        return list(self._trainable_weights) if self.trainable else []

    @property
    def non_trainable_weights(self):
        if self.trainable:
            return list(self._non_trainable_weights)
        return list(self._trainable_weights) + list(self._non_trainable_weights)

    @property
    def weights(self):
        return self.trainable_weights + self.non_trainable_weights

    trainable_variables = trainable_weights
    non_trainable_variables = non_trainable_weights
    variables = weights

    @property
    def losses(self):
        return list(self._losses)

    @property
    def updates(self):
        return list(self._updates)

    def get_weights(self):
        return nd.get_default_session().run(self.weights)

    # -- building blocks ---------------------------------------------------------
    def add_loss(self, losses, inputs=None):
        losses = losses if isinstance(losses, (list, tuple)) else [losses]
        for loss in losses:
            if loss is None:
                continue
            self._losses.append(loss)
            nd.add_to_collection(REGULARIZATION_LOSSES, loss)

    def add_update(self, updates, inputs=None):
        updates = updates if isinstance(updates, (list, tuple)) else [updates]
        for u in updates:
            self._updates.append(u)
            nd.add_to_collection(GraphKeys.UPDATE_OPS, u)

    def add_weight(self, name, shape, dtype=None, initializer=None,
                   regularizer=None, trainable=None, constraint=None,
                   partitioner=None, use_resource=None, getter=None, **kwargs):
        """Gets or makes the variable ``<scope>/<name>`` (``get_variable`` in the
        layer's scope; reused when the layer is called again)."""
        dtype = nd.as_dtype(dtype or self._dtype or nd.float32)
        if trainable is None:
            trainable = True
        trainable = trainable and self.trainable
        g = nd.get_default_graph()
        store = g.__dict__.setdefault("_var_store", {})
        reuse = self.built or self._reuse
        with nd.variable_scope(self._scope, reuse=reuse, auxiliary_name_scope=False):
            full = self._scope.name + "/" + name
            existed = full in store
            var = nd.get_variable(name, shape=shape, dtype=dtype,
                                  initializer=initializer, trainable=trainable,
                                  constraint=constraint, partitioner=partitioner)
        if regularizer is not None and not existed and not self.built:
            with g.name_scope(name + "/Regularizer"):
                loss = regularizer(var)
            if loss is not None:
                self.add_loss(loss)
        if trainable:
            if var not in self._trainable_weights:
                self._trainable_weights.append(var)
        elif var not in self._non_trainable_weights:
            self._non_trainable_weights.append(var)
        return var

    add_variable = add_weight

    def build(self, input_shape):
        self.built = True

    def call(self, inputs, **kwargs):
        return inputs

    def compute_output_shape(self, input_shape):
        raise NotImplementedError

    def _set_scope(self):
        if self._scope is not None:
            return
        if self._reuse:
            ctx = nd.variable_scope(self._scope_arg if self._scope_arg is not None
                                    else self._base_name)
        else:
            ctx = nd.variable_scope(self._scope_arg, default_name=self._base_name)
        with ctx as scope:
            self._scope = scope
            self._name_scope_str = nd.get_default_graph().get_name_scope() + "/"

    def __call__(self, inputs, *args, **kwargs):
        g = nd.get_default_graph()
        if self._graph is not None and self._graph is not g:
            raise ValueError(f"Layer {self._name} was built in another graph")
        self._graph = g
        self._set_scope()
        if not isinstance(inputs, (list, tuple)):
            inputs = nd.convert_to_tensor(inputs)
            if self._dtype is None and inputs.dtype.is_floating:
                self._dtype = inputs.dtype.base_dtype
        with g.name_scope(self._name_scope_str):
            self._check_input(inputs)
            if not self.built:
                shape = (inputs.shape if isinstance(inputs, Tensor)
                         else [i.shape for i in inputs])
                self.build(shape)
                self.built = True
            outputs = self.call(inputs, *args, **kwargs)
            if self.activity_regularizer is not None:
                with g.name_scope("ActivityRegularizer"):
                    self.add_loss(self.activity_regularizer(outputs))
        return outputs

    apply = __call__

    def _check_input(self, inputs):
        spec = self.input_spec
        if spec is None or not isinstance(inputs, Tensor):
            return
        rank = inputs.shape.ndims
        if rank is None:
            return
        if spec.ndim is not None and rank != spec.ndim:
            raise ValueError(f"Input 0 of layer {self._name} is incompatible with the "
                             f"layer: expected ndim={spec.ndim}, found ndim={rank}. "
                             f"Full shape received: {inputs.shape.as_list()}")
        if spec.min_ndim is not None and rank < spec.min_ndim:
            raise ValueError(f"Input 0 of layer {self._name} is incompatible with the "
                             f"layer: expected min_ndim={spec.min_ndim}, found "
                             f"ndim={rank}. Full shape received: "
                             f"{inputs.shape.as_list()}")
        for axis, size in spec.axes.items():
            got = inputs.shape.as_list()[axis]
            if got is not None and size is not None and got != size:
                raise ValueError(f"Input 0 of layer {self._name} is incompatible with "
                                 f"the layer: expected axis {axis} of input shape to "
                                 f"have value {size} but received input with shape "
                                 f"{inputs.shape.as_list()}")


def get_initializer(init):
    """An initializer from an object, a class or a Keras-style name."""
    if init is None or callable(init) and not isinstance(init, type):
        return init
    if isinstance(init, type):
        return init()
    names = {"zeros": nd.zeros_initializer, "ones": nd.ones_initializer,
             "glorot_uniform": nd.glorot_uniform_initializer}
    if isinstance(init, str) and init in names:
        return names[init]()
    raise ValueError(f"Unknown initializer: {init!r}")


def get_activation(activation):
    if activation is None or callable(activation):
        return activation
    fns = {"relu": nd.nn.relu, "sigmoid": nd.nn.sigmoid, "tanh": nd.nn.tanh,
           "softmax": nd.nn.softmax, "elu": nd.nn.elu, "linear": None}
    if activation in fns:
        return fns[activation]
    raise ValueError(f"Unknown activation function: {activation!r}")
