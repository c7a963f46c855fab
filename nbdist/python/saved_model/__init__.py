"""``tensorflow.python.saved_model``: its modules are ``nbdist.saved_model``'s
own (the same module objects), under TF's names and TF's ``*_impl`` aliases.

>>> from nbdist.python.saved_model import builder_impl, tag_constants
>>> import nbdist as nd
>>> tag_constants is nd.saved_model.tag_constants
True
"""

from __future__ import annotations

from nbdist.python._forward import alias_modules

alias_modules(__name__, {
    "builder": "nbdist.saved_model.builder",
    "builder_impl": "nbdist.saved_model.builder",
    "constants": "nbdist.saved_model.constants",
    "loader": "nbdist.saved_model.loader",
    "loader_impl": "nbdist.saved_model.loader",
    "signature_constants": "nbdist.saved_model.signature_constants",
    "signature_def_utils": "nbdist.saved_model.signature_def_utils",
    "signature_def_utils_impl": "nbdist.saved_model.signature_def_utils",
    "tag_constants": "nbdist.saved_model.tag_constants",
    "utils": "nbdist.saved_model.utils",
    "utils_impl": "nbdist.saved_model.utils",
})
