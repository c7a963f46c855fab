"""``nd.initializers``: TF1's ``tf.initializers`` (``tf.compat.v1.initializers``).

>>> import nbdist as nd
>>> nd.initializers.zeros is nd.zeros_initializer
True
>>> with nd.Graph().as_default(), nd.Session() as s:
...     v = nd.get_variable("w", [2, 2], initializer=nd.initializers.identity())
...     s.run(nd.initializers.global_variables())
...     s.run(v).tolist()
[[1.0, 0.0], [0.0, 1.0]]
"""

from __future__ import annotations

from nbdist.ops.init_ops import (constant_initializer as constant,
                                 glorot_normal_initializer as glorot_normal,
                                 glorot_uniform_initializer as glorot_uniform,
                                 he_normal, he_uniform,
                                 identity_initializer as identity, lecun_normal,
                                 lecun_uniform, ones_initializer as ones,
                                 orthogonal_initializer as orthogonal,
                                 random_normal_initializer as random_normal,
                                 random_uniform_initializer as random_uniform,
                                 truncated_normal_initializer as truncated_normal,
                                 uniform_unit_scaling_initializer as
                                 uniform_unit_scaling,
                                 variance_scaling_initializer as variance_scaling,
                                 zeros_initializer as zeros)
from nbdist.ops.variables import (global_variables_initializer as
                                  global_variables,
                                  local_variables_initializer as local_variables,
                                  variables_initializer as variables)

__all__ = ["constant", "global_variables", "glorot_normal", "glorot_uniform",
           "he_normal", "he_uniform", "identity", "lecun_normal", "lecun_uniform",
           "local_variables", "ones", "orthogonal", "random_normal", "random_uniform",
           "truncated_normal", "uniform_unit_scaling", "variables",
           "variance_scaling", "zeros"]


def __getattr__(name):
    if name == "tables_initializer":
        import nbdist

        return nbdist.tables_initializer  # where nbdist has lookup tables
    raise AttributeError(f"module 'nbdist.initializers' has no attribute '{name}' "
                         f"(nbdist does not have tf.initializers.{name})")
