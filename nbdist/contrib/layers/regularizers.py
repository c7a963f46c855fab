"""Weight regularizers of TF1's ``tf.contrib.layers``: functions of a weight
tensor returning a scalar penalty, for ``get_variable(regularizer=)`` and the
layers' ``weights_regularizer``/``kernel_regularizer``."""

from __future__ import annotations

import numbers

import nbdist as nd

REGULARIZATION_LOSSES = "regularization_losses"


def _check_scale(scale, what):
    if isinstance(scale, numbers.Integral):
        msg = f"scale cannot be an integer: {scale}"
        raise ValueError(msg)  # noqa: TRY004 - TF's error class
    if isinstance(scale, numbers.Real):
        if scale < 0.0:
            raise ValueError(f"Setting a scale less than 0 on a regularizer: "
                             f"{scale}.")
        if scale == 0.0:
            return False
    return True


def l1_regularizer(scale, scope=None):
    """``scale * sum(|w|)``; a scale of 0 gives a regularizer returning None."""
    if not _check_scale(scale, "l1"):
        return lambda _: None

    def l1(weights):
        with nd.name_scope(scope, "l1_regularizer") as name:
            s = nd.convert_to_tensor(scale, dtype=weights.dtype.base_dtype,
                                     name="scale")
            return nd.multiply(s, nd.reduce_sum(nd.abs(weights)), name=name)

    return l1


def l2_regularizer(scale, scope=None):
    """``scale * sum(w ** 2) / 2`` (``scale * nn.l2_loss(w)``)."""
    if not _check_scale(scale, "l2"):
        return lambda _: None

    def l2(weights):
        with nd.name_scope(scope, "l2_regularizer") as name:
            s = nd.convert_to_tensor(scale, dtype=weights.dtype.base_dtype,
                                     name="scale")
            return nd.multiply(s, nd.nn.l2_loss(weights), name=name)

    return l2


def sum_regularizer(regularizer_list, scope=None):
    """The sum of the (non-None) penalties of ``regularizer_list``."""
    regularizer_list = [r for r in regularizer_list if r]
    if not regularizer_list:
        return None

    def total(weights):
        with nd.name_scope(scope, "sum_regularizer"):
            penalties = [p for p in (r(weights) for r in regularizer_list)
                         if p is not None]
            return nd.add_n(penalties) if penalties else None

    return total


def l1_l2_regularizer(scale_l1=1.0, scale_l2=1.0, scope=None):
    """``l1_regularizer(scale_l1) + l2_regularizer(scale_l2)``."""
    if isinstance(scale_l1, numbers.Real) and isinstance(scale_l2, numbers.Real) \
            and scale_l1 == 0 and scale_l2 == 0:
        return lambda _: None
    return sum_regularizer([l1_regularizer(scale_l1), l2_regularizer(scale_l2)],
                           scope=scope)


def apply_regularization(regularizer, weights_list=None):
    """The sum of ``regularizer`` over ``weights_list`` (default: the ``weights``
    collection), also added to ``REGULARIZATION_LOSSES``."""
    if not weights_list:
        weights_list = nd.get_collection("weights")
    if not weights_list:
        raise ValueError("No weights to regularize.")
    with nd.name_scope("get_regularization_penalty") as scope:
        penalties = [regularizer(w) for w in weights_list]
        penalties = [p if p is not None else nd.constant(0.0) for p in penalties]
        summed = nd.add_n(penalties, name=scope)
        nd.add_to_collection(REGULARIZATION_LOSSES, summed)
        return summed
