"""``nd.layers.BatchNormalization`` / ``batch_normalization``, as TF1's: variables
``gamma``, ``beta`` (trainable), ``moving_mean``, ``moving_variance`` (not), the
moving statistics updated by ops in ``UPDATE_OPS`` (run them with the train op:
``with nd.control_dependencies(nd.get_collection(nd.GraphKeys.UPDATE_OPS))``).

>>> import nbdist as nd
>>> with nd.Graph().as_default():
...     y = nd.layers.batch_normalization(nd.ones([4, 3]), training=True)
...     len(nd.get_collection(nd.GraphKeys.UPDATE_OPS))
2
"""

from __future__ import annotations

import nbdist as nd
from nbdist.layers.base import InputSpec, Layer, constant_value, get_initializer


class BatchNormalization(Layer):
    """Normalises over all axes but ``axis`` with the batch's statistics when
    ``training`` (a bool or a boolean tensor), else with the moving ones;
    ``moving = moving * momentum + batch * (1 - momentum)`` on each training
    step. ``fused`` (default: when the input is 4-D with the channel axis last
    or second) uses one ``FusedBatchNormV3`` op; as in TF, the fused op's
    moving variance takes the unbiased (Bessel-corrected) batch variance, the
    non-fused one the biased variance.
    """

    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True,
                 scale=True, beta_initializer=None, gamma_initializer=None,
                 moving_mean_initializer=None, moving_variance_initializer=None,
                 beta_regularizer=None, gamma_regularizer=None,
                 beta_constraint=None, gamma_constraint=None, renorm=False,
                 renorm_clipping=None, renorm_momentum=0.99, fused=None,
                 trainable=True, virtual_batch_size=None, adjustment=None,
                 name=None, **kwargs):
        super().__init__(trainable=trainable, name=name, **kwargs)
        if renorm or virtual_batch_size is not None or adjustment is not None:
            raise NotImplementedError("nbdist's BatchNormalization has no renorm, "
                                      "virtual_batch_size or adjustment")
        self.axis = axis
        self.momentum = float(momentum)
        self.epsilon = float(epsilon)
        self.center, self.scale = center, scale
        self.beta_initializer = get_initializer(beta_initializer) or \
            nd.zeros_initializer()
        self.gamma_initializer = get_initializer(gamma_initializer) or \
            nd.ones_initializer()
        self.moving_mean_initializer = get_initializer(moving_mean_initializer) or \
            nd.zeros_initializer()
        self.moving_variance_initializer = get_initializer(
            moving_variance_initializer) or nd.ones_initializer()
        self.beta_regularizer, self.gamma_regularizer = (beta_regularizer,
                                                         gamma_regularizer)
        self.beta_constraint, self.gamma_constraint = (beta_constraint,
                                                       gamma_constraint)
        self.fused = fused

    def build(self, input_shape):
        dims = nd.TensorShape(input_shape).as_list()
        if dims is None:
            raise ValueError("Input has undefined rank.")
        ndims = len(dims)
        axis = self.axis if isinstance(self.axis, int) else self.axis[0]
        if isinstance(self.axis, (list, tuple)) and len(self.axis) != 1:
            raise NotImplementedError("BatchNormalization over several axes")
        if not -ndims <= axis < ndims:
            raise ValueError(f"Invalid axis: {self.axis}")
        self._axis = axis % ndims
        if self.fused is None:
            self.fused = ndims == 4 and self._axis in (1, 3)
        if self.fused and not (ndims == 4 and self._axis in (1, 3)):
            raise ValueError(f"Unsupported axis/rank for fused batch norm: axis "
                             f"{self.axis} of a rank-{ndims} input (fused needs a "
                             "4-D input normalised along axis 1 or 3)")
        depth = dims[self._axis]
        if depth is None:
            raise ValueError(f"Input has undefined `axis` dimension. Input shape: "
                             f"{dims}")
        self.input_spec = InputSpec(ndim=ndims, axes={self._axis: depth})
        self.gamma = self.beta = None
        if self.scale:
            self.gamma = self.add_weight(
                "gamma", shape=[depth], initializer=self.gamma_initializer,
                regularizer=self.gamma_regularizer, constraint=self.gamma_constraint)
        if self.center:
            self.beta = self.add_weight(
                "beta", shape=[depth], initializer=self.beta_initializer,
                regularizer=self.beta_regularizer, constraint=self.beta_constraint)
        self.moving_mean = self.add_weight(
            "moving_mean", shape=[depth], initializer=self.moving_mean_initializer,
            trainable=False)
        self.moving_variance = self.add_weight(
            "moving_variance", shape=[depth],
            initializer=self.moving_variance_initializer, trainable=False)
        self.built = True

    def _assign_moving_average(self, variable, value, momentum):
        with nd.name_scope(None, "AssignMovingAvg") as scope, \
                nd.colocate_with(variable.op):
            decay = nd.subtract(nd.constant(1.0, variable.dtype.base_dtype),
                                momentum, name="decay")
            delta = nd.multiply(nd.subtract(variable, nd.cast(value,
                                                              variable.dtype)),
                                decay)
            return nd.assign_sub(variable, delta, name=scope)

    def call(self, inputs, training=False):
        training_value = constant_value(training)
        depth = inputs.shape.as_list()[self._axis]
        dt = inputs.dtype.base_dtype
        if self.fused:
            out, mean, variance = self._fused(inputs, training, depth)
        else:
            out, mean, variance = self._plain(inputs, training)
        if training_value is False:
            return out
        if training_value is None:
            momentum = nd.where(nd.cast(training, nd.bool), nd.constant(
                self.momentum, dt), nd.constant(1.0, dt))
        else:
            momentum = nd.constant(self.momentum, dt)
        self.add_update(self._assign_moving_average(self.moving_mean, mean,
                                                    momentum))
        self.add_update(self._assign_moving_average(self.moving_variance, variance,
                                                    momentum))
        return out

    def _fused(self, inputs, training, depth):
        dt = inputs.dtype.base_dtype
        gamma = self.gamma if self.gamma is not None else nd.ones([depth], dt)
        beta = self.beta if self.beta is not None else nd.zeros([depth], dt)
        fmt = "NHWC" if self._axis == 3 else "NCHW"

        def train():
            return nd.nn.fused_batch_norm(inputs, gamma, beta, epsilon=self.epsilon,
                                          data_format=fmt, is_training=True)

        def infer():
            return nd.nn.fused_batch_norm(inputs, gamma, beta, self.moving_mean,
                                          self.moving_variance,
                                          epsilon=self.epsilon, data_format=fmt,
                                          is_training=False)

        value = constant_value(training)
        if value is not None:
            return train() if value else infer()
        return tuple(nd.cond(nd.cast(training, nd.bool), train, infer))

    def _plain(self, inputs, training):
        ndims = inputs.shape.ndims
        axes = [i for i in range(ndims) if i != self._axis]
        bshape = [1] * ndims
        bshape[self._axis] = inputs.shape.as_list()[self._axis]

        def shaped(t):
            if t is None or self._axis == ndims - 1:
                return t
            return nd.reshape(t, bshape)

        value = constant_value(training)
        if value is False:
            mean, variance = self.moving_mean, self.moving_variance
            use_mean, use_var = mean, variance
        else:
            mean, variance = nd.nn.moments(inputs, axes)
            if value is None:
                pred = nd.cast(training, nd.bool)
                use_mean = nd.where(pred, mean, nd.identity(self.moving_mean))
                use_var = nd.where(pred, variance, nd.identity(self.moving_variance))
            else:
                use_mean, use_var = mean, variance
        out = nd.nn.batch_normalization(inputs, shaped(use_mean), shaped(use_var),
                                        shaped(self.beta), shaped(self.gamma),
                                        self.epsilon)
        return out, mean, variance


def batch_normalization(inputs, axis=-1, momentum=0.99, epsilon=1e-3, center=True,
                        scale=True, beta_initializer=None, gamma_initializer=None,
                        moving_mean_initializer=None,
                        moving_variance_initializer=None, beta_regularizer=None,
                        gamma_regularizer=None, beta_constraint=None,
                        gamma_constraint=None, training=False, trainable=True,
                        name=None, reuse=None, renorm=False, renorm_clipping=None,
                        renorm_momentum=0.99, fused=None, virtual_batch_size=None,
                        adjustment=None):
    """The functional form of ``BatchNormalization``; the moving averages are
    updated by the ops it adds to ``UPDATE_OPS`` (when ``training`` may be true).
    """
    layer = BatchNormalization(
        axis=axis, momentum=momentum, epsilon=epsilon, center=center, scale=scale,
        beta_initializer=beta_initializer, gamma_initializer=gamma_initializer,
        moving_mean_initializer=moving_mean_initializer,
        moving_variance_initializer=moving_variance_initializer,
        beta_regularizer=beta_regularizer, gamma_regularizer=gamma_regularizer,
        beta_constraint=beta_constraint, gamma_constraint=gamma_constraint,
        renorm=renorm, renorm_clipping=renorm_clipping,
        renorm_momentum=renorm_momentum, fused=fused, trainable=trainable,
        virtual_batch_size=virtual_batch_size, adjustment=adjustment, name=name,
        _scope=name, _reuse=reuse)
    return layer(inputs, training=training)



