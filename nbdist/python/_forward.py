"""The one helper behind ``nbdist.python.*``: a module whose attributes are
looked up, on first use, in nbdist's own modules.

Each alias module is two lines:

    from nbdist.python._forward import forward
    __getattr__, __dir__ = forward(__name__, "tf.train.saver", ["nbdist.train"])

so ``from nbdist.python.training import saver; saver.Saver`` is
``nd.train.Saver``. A name none of the modules has is an AttributeError naming
the TF name nbdist lacks.
"""

from __future__ import annotations

import importlib
import sys


def forward(module_name: str, tf_name: str, sources: list[str]):
    """``(__getattr__, __dir__)`` for ``module_name``: names come from the first
    of ``sources`` (module names) that has them."""

    def __getattr__(name):  # noqa: N807 - a module's __getattr__
        if not name.startswith("__"):
            for source in sources:
                try:
                    return getattr(importlib.import_module(source), name)
                except AttributeError:
                    continue
        raise AttributeError(f"module '{module_name}' has no attribute '{name}' "
                             f"(nbdist does not have {tf_name}.{name})")

    def __dir__():  # noqa: N807
        names = set()
        for source in sources:
            names.update(n for n in dir(importlib.import_module(source))
                         if not n.startswith("_"))
        return sorted(names)

    return __getattr__, __dir__


def alias_modules(package: str, table: dict[str, str]) -> None:
    """Makes ``<package>.<name>`` *be* module ``table[name]``, the same object
    (in ``sys.modules`` and as the package's attribute), so patching a name on
    ``nbdist.core.protobuf.saver_pb2`` patches what nbdist itself uses.

    >>> import nbdist.core.protobuf.saver_pb2 as saver_pb2
    >>> from nbdist.proto import saver_pb2 as ours
    >>> saver_pb2 is ours
    True
    """
    pkg = sys.modules[package]
    for name, target in table.items():
        module = importlib.import_module(target)
        sys.modules[f"{package}.{name}"] = module
        setattr(pkg, name, module)
