"""``nd.random``: the TF2-style names of the random ops (``nd.random.normal`` ...).

>>> import nbdist as nd
>>> nd.random.set_seed(1)
>>> x = nd.random.uniform([2], seed=3)
>>> x.shape.as_list()
[2]
"""

from __future__ import annotations

from nbdist.framework.ops import set_random_seed
from nbdist.ops.random_ops import (
    random_normal,
    random_shuffle,
    random_uniform,
    truncated_normal,
)

normal = random_normal
uniform = random_uniform
shuffle = random_shuffle
set_seed = set_random_seed

__all__ = ["normal", "uniform", "shuffle", "truncated_normal", "set_seed",
           "set_random_seed", "random_normal", "random_uniform", "random_shuffle"]

# TF1's tf.random also holds the candidate samplers.
from nbdist.ops.candidate_sampling_ops import (  # noqa: E402
    all_candidate_sampler,
    fixed_unigram_candidate_sampler,
    learned_unigram_candidate_sampler,
    log_uniform_candidate_sampler,
    uniform_candidate_sampler,
)

__all__ += ["all_candidate_sampler", "fixed_unigram_candidate_sampler",
            "learned_unigram_candidate_sampler", "log_uniform_candidate_sampler",
            "uniform_candidate_sampler"]

# TF1's tf.random: the other distributions and the stateless samplers.
from nbdist.framework.ops import get_seed  # noqa: E402
from nbdist.ops.random_distribution_ops import (  # noqa: E402
    categorical,
    gamma,
    multinomial,
    poisson,
    stateless_categorical,
    stateless_multinomial,
    stateless_parameterized_truncated_normal,
    stateless_truncated_normal,
)
from nbdist.ops.random_distribution_ops import (  # noqa: E402
    stateless_random_binomial as stateless_binomial,
)
from nbdist.ops.random_distribution_ops import (  # noqa: E402
    stateless_random_gamma as stateless_gamma,
)
from nbdist.ops.random_distribution_ops import (  # noqa: E402
    stateless_random_normal as stateless_normal,
)
from nbdist.ops.random_distribution_ops import (  # noqa: E402
    stateless_random_poisson as stateless_poisson,
)
from nbdist.ops.random_distribution_ops import (  # noqa: E402
    stateless_random_uniform as stateless_uniform,
)

__all__ += ["categorical", "gamma", "get_seed", "multinomial", "poisson",
            "stateless_binomial", "stateless_categorical", "stateless_gamma",
            "stateless_multinomial", "stateless_normal",
            "stateless_parameterized_truncated_normal", "stateless_poisson",
            "stateless_truncated_normal", "stateless_uniform"]

# TF's stateful Generator API and the stateless seed helpers.
from nbdist.ops.random_distribution_ops import fold_in, split  # noqa: E402
from nbdist.ops.stateful_random_ops import (  # noqa: E402
    Algorithm,
    Generator,
    create_rng_state,
    get_global_generator,
    set_global_generator,
)

__all__ += ["Algorithm", "Generator", "create_rng_state", "fold_in",
            "get_global_generator", "set_global_generator", "split"]
