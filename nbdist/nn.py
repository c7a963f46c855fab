"""``nd.nn``: activations, softmax, cross-entropies, dropout (as ``tf.nn``).

>>> import nbdist as nd
>>> y = nd.nn.relu(nd.constant([-1.0, 2.0]))
>>> with nd.Session() as s:
...     s.run(y).tolist()
[0.0, 2.0]
"""

from __future__ import annotations

from nbdist.ops.embedding_ops import embedding_lookup
from nbdist.ops.embedding_ops_sparse import (
    embedding_lookup_sparse,
    safe_embedding_lookup_sparse,
)
from nbdist.ops.nn_conv_ops import (
    atrous_conv2d,
    conv1d,
    conv2d,
    conv2d_backprop_filter,
    conv2d_backprop_input,
    conv2d_transpose,
    convolution,
    depthwise_conv2d,
    depthwise_conv2d_native,
    depthwise_conv2d_native_backprop_filter,
    depthwise_conv2d_native_backprop_input,
    separable_conv2d,
)
from nbdist.ops.nn_norm_ops import (
    batch_normalization,
    fused_batch_norm,
    local_response_normalization,
    lrn,
    top_k,
    weighted_cross_entropy_with_logits,
    zero_fraction,
)
from nbdist.ops.nn_ops import (
    bias_add,
    dropout,
    elu,
    in_top_k,
    l2_loss,
    l2_normalize,
    leaky_relu,
    log_softmax,
    moments,
    relu,
    relu6,
    sigmoid_cross_entropy_with_logits,
    softmax,
    softmax_cross_entropy_with_logits,
    softmax_cross_entropy_with_logits_v2,
    softplus,
    sparse_softmax_cross_entropy_with_logits,
    xw_plus_b,
)
from nbdist.ops.nn_pool_ops import (
    avg_pool,
    avg_pool2d,
    max_pool,
    max_pool2d,
    max_pool_with_argmax,
)
from nbdist.ops.candidate_sampling_ops import (  # noqa: E402
    all_candidate_sampler,
    compute_accidental_hits,
    fixed_unigram_candidate_sampler,
    learned_unigram_candidate_sampler,
    log_uniform_candidate_sampler,
    uniform_candidate_sampler,
)
from nbdist.ops.nn_sampled_losses import nce_loss, sampled_softmax_loss  # noqa: E402
from nbdist.ops import rnn_cell  # noqa: E402  (nd.nn.rnn_cell, as TF's module)
from nbdist.ops.rnn import (  # noqa: E402
    bidirectional_dynamic_rnn,
    dynamic_rnn,
    raw_rnn,
    static_bidirectional_rnn,
    static_rnn,
    static_state_saving_rnn,
)


def sigmoid(x, name=None):
    """1 / (1 + exp(-x))."""
    from nbdist.ops import math_ops

    return math_ops.sigmoid(x, name=name)


def tanh(x, name=None):
    """Hyperbolic tangent."""
    from nbdist.ops import math_ops

    return math_ops.tanh(x, name=name)


__all__ = [
    "bias_add",
    "dropout",
    "elu",
    "embedding_lookup",
    "embedding_lookup_sparse",
    "in_top_k",
    "l2_loss",
    "l2_normalize",
    "leaky_relu",
    "log_softmax",
    "moments",
    "relu",
    "relu6",
    "safe_embedding_lookup_sparse",
    "sigmoid",
    "sigmoid_cross_entropy_with_logits",
    "softmax",
    "softmax_cross_entropy_with_logits",
    "softmax_cross_entropy_with_logits_v2",
    "softplus",
    "sparse_softmax_cross_entropy_with_logits",
    "tanh",
    "xw_plus_b",
    "atrous_conv2d",
    "conv1d",
    "conv2d",
    "conv2d_backprop_filter",
    "conv2d_backprop_input",
    "conv2d_transpose",
    "convolution",
    "depthwise_conv2d",
    "depthwise_conv2d_native",
    "depthwise_conv2d_native_backprop_filter",
    "depthwise_conv2d_native_backprop_input",
    "separable_conv2d",
    "avg_pool",
    "max_pool",
    "max_pool_with_argmax",
    "avg_pool2d",
    "max_pool2d",
    "batch_normalization",
    "fused_batch_norm",
    "local_response_normalization",
    "lrn",
    "top_k",
    "weighted_cross_entropy_with_logits",
    "zero_fraction",
]

from nbdist.ops.elementary_math_ops import softsign  # noqa: E402  (tf.nn.softsign)

__all__.append("softsign")
# (``rnn_cell`` is a submodule, as TF's, not one of the functions listed here.)
__all__ += ["bidirectional_dynamic_rnn", "dynamic_rnn", "raw_rnn",
            "static_bidirectional_rnn", "static_rnn", "static_state_saving_rnn"]
__all__ += ["all_candidate_sampler", "compute_accidental_hits",
            "fixed_unigram_candidate_sampler", "learned_unigram_candidate_sampler",
            "log_uniform_candidate_sampler", "nce_loss", "sampled_softmax_loss",
            "uniform_candidate_sampler"]

from nbdist.ops import nn_activations_stats as _tf1_more  # noqa: E402
from nbdist.ops.nn_activations_stats import *  # noqa: E402,F403

__all__ += _tf1_more.__all__

from nbdist.ops import nn_conv3d_ops as _conv3d  # noqa: E402
from nbdist.ops.nn_conv3d_ops import *  # noqa: E402,F403

__all__ += _conv3d.__all__

from nbdist.ops import ctc_ops as _ctc  # noqa: E402
from nbdist.ops.ctc_ops import *  # noqa: E402,F403

__all__ += _ctc.__all__

from nbdist.ops.nn_morphology_ops import dilation2d, erosion2d  # noqa: E402

__all__ += ["dilation2d", "erosion2d"]

from nbdist.ops.nn_fractional_pool_ops import (  # noqa: E402
    fractional_avg_pool,
    fractional_max_pool,
)

__all__ += ["fractional_avg_pool", "fractional_max_pool"]

from nbdist.ops.nn_space_to_batch import with_space_to_batch  # noqa: E402

__all__ += ["with_space_to_batch"]
