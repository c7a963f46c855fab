"""``nd.contrib.framework``: TF1's ``tf.contrib.framework`` core: ``arg_scope``
and ``add_arg_scope``, the global step, and slim's variable helpers.

>>> import nbdist as nd
>>> with nd.Graph().as_default():
...     w = nd.contrib.framework.model_variable("w", [2])
...     nd.get_collection(nd.GraphKeys.MODEL_VARIABLES) == [w]
True
"""

from __future__ import annotations

from nbdist.contrib.framework.arg_scope import (
                                                add_arg_scope,
                                                arg_scope,
                                                arg_scoped_arguments,
                                                current_arg_scope,
                                                has_arg_scope,
)
from nbdist.contrib.framework.variables import (
                                                assert_or_get_global_step,
                                                get_local_variables,
                                                get_model_variables,
                                                get_trainable_variables,
                                                get_unique_variable,
                                                get_variables,
                                                get_variables_by_name,
                                                get_variables_by_suffix,
                                                get_variables_to_restore,
                                                global_variable,
                                                local_variable,
                                                model_variable,
                                                variable,
)
from nbdist.train.training_util import (
                                                assert_global_step,
                                                create_global_step,
                                                get_global_step,
                                                get_or_create_global_step,
)

__all__ = [
                                                "add_arg_scope",
                                                "arg_scope",
                                                "arg_scoped_arguments",
                                                "assert_global_step",
                                                "assert_or_get_global_step",
                                                "create_global_step",
                                                "current_arg_scope",
                                                "get_global_step",
                                                "get_local_variables",
                                                "get_model_variables",
                                                "get_or_create_global_step",
                                                "get_trainable_variables",
                                                "get_unique_variable",
                                                "get_variables",
                                                "get_variables_by_name",
                                                "get_variables_by_suffix",
                                                "get_variables_to_restore",
                                                "global_variable",
                                                "has_arg_scope",
                                                "local_variable",
                                                "model_variable",
                                                "variable",
]
