"""The optimizer a canned estimator is given by name, instance or callable
(TF 1.15's ``canned/optimizers.py``)."""

from __future__ import annotations

import nbdist as nd

_OPTIMIZER_CLS_NAMES = {
    "Adagrad": "AdagradOptimizer",
    "Adam": "AdamOptimizer",
    "Ftrl": "FtrlOptimizer",
    "RMSProp": "RMSPropOptimizer",
    "SGD": "GradientDescentOptimizer",
}


def get_optimizer_instance(opt, learning_rate=None):
    """``opt`` as an optimizer: a name of ``_OPTIMIZER_CLS_NAMES`` (built with
    ``learning_rate``), an optimizer, or a callable returning one.

    >>> import nbdist as nd
    >>> from nbdist.estimator.canned.optimizers import get_optimizer_instance
    >>> type(get_optimizer_instance("Ftrl", 0.1)).__name__
    'FtrlOptimizer'
    """
    if isinstance(opt, str):
        if opt in _OPTIMIZER_CLS_NAMES:
            if not learning_rate:
                raise ValueError("learning_rate must be specified when opt is string.")
            return getattr(nd.train, _OPTIMIZER_CLS_NAMES[opt])(
                learning_rate=learning_rate)
        raise ValueError(f"Unsupported optimizer name: {opt}. Supported names are: "
                         f"{tuple(sorted(_OPTIMIZER_CLS_NAMES))}")
    if callable(opt) and not isinstance(opt, nd.train.Optimizer):
        opt = opt()
    if not isinstance(opt, nd.train.Optimizer):
        raise ValueError(f"The given object is not an Optimizer instance. Given: {opt}")
    return opt
