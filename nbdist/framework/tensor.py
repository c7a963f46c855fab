"""``Tensor`` (one output of an ``Operation``) and ``GraphKeys`` (standard
collection names), kept apart from ``ops`` so that the graph module stays small;
``from nbdist.framework.ops import Tensor, GraphKeys`` keeps working.
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.default_session import run_with_default_session
from nbdist.framework.tensor_shape import TensorShape, as_shape


class GraphKeys:
    """Standard collection names, as ``tf.GraphKeys``."""

    GLOBAL_VARIABLES = "variables"
    LOCAL_VARIABLES = "local_variables"
    MODEL_VARIABLES = "model_variables"
    TRAINABLE_VARIABLES = "trainable_variables"
    GLOBAL_STEP = "global_step"
    QUEUE_RUNNERS = "queue_runners"
    SAVERS = "savers"
    INIT_OP = "init_op"
    LOCAL_INIT_OP = "local_init_op"
    READY_OP = "ready_op"
    READY_FOR_LOCAL_INIT_OP = "ready_for_local_init_op"
    SUMMARIES = "summaries"
    SUMMARY_OP = "summary_op"
    TRAIN_OP = "train_op"
    LOSSES = "losses"
    UPDATE_OPS = "update_ops"
    VARIABLES = GLOBAL_VARIABLES
    # Layers, losses, metrics, moving averages and tables.
    REGULARIZATION_LOSSES = "regularization_losses"
    METRIC_VARIABLES = "metric_variables"
    MOVING_AVERAGE_VARIABLES = "moving_average_variables"
    TABLE_INITIALIZERS = "table_initializer"
    LOCAL_RESOURCES = "local_resources"
    ACTIVATIONS = "activations"
    WEIGHTS = "weights"
    BIASES = "biases"


class Tensor:
    """One output of an ``Operation``: ``op``, ``value_index``, ``dtype``, ``shape``.

    >>> import nbdist as nd
    >>> t = nd.constant([1.0, 2.0])
    >>> t.name, t.shape.as_list()
    ('Const:0', [2])
    """

    __array_priority__ = 100

    def __init__(self, op, value_index: int, dtype: dtypes.DType,
                 shape: TensorShape):
        self._op = op
        self._value_index = value_index
        self._dtype = dtype
        self._shape = shape

    op = property(lambda self: self._op)
    value_index = property(lambda self: self._value_index)
    dtype = property(lambda self: self._dtype)
    graph = property(lambda self: self._op._graph)
    device = property(lambda self: self._op.device)

    @property
    def name(self) -> str:
        return f"{self._op.name}:{self._value_index}"

    @property
    def shape(self) -> TensorShape:
        return self._shape

    def get_shape(self) -> TensorShape:
        return self._shape

    def set_shape(self, shape):
        self._shape = self._shape.merge_with(as_shape(shape))

    def consumers(self) -> list:
        return [op for op in self._op._graph._ops_list
                if any(t is self for t in op._inputs)]

    def eval(self, feed_dict=None, session=None):
        """The value of this tensor in ``session`` (default: the default session)."""
        return run_with_default_session(self, feed_dict, session)

    def __repr__(self) -> str:
        return (f"<nd.Tensor '{self.name}' shape={self._shape} "
                f"dtype={self._dtype.name}>")

    def __hash__(self) -> int:
        return id(self)

    def __bool__(self):
        raise TypeError("Using a `nd.Tensor` as a Python `bool` is not allowed. "
                        "Use `if t is not None:` or run it in a session first.")

    def __iter__(self):
        raise TypeError("'Tensor' object is not iterable: use nd.unstack.")

    def __len__(self):
        raise TypeError("len is not well defined for a symbolic Tensor: use "
                        "nd.shape or tensor.shape")

    def __array__(self, dtype=None, copy=None):
        raise TypeError(f"Cannot convert a symbolic Tensor ({self.name}) to a "
                        "numpy array: run it in a Session.")

    def _as_node_def_input(self) -> str:
        if self._value_index == 0:
            return self._op.name
        return f"{self._op.name}:{self._value_index}"
