"""``Module`` (TF's ``tf.Module``): a named container of variables and other
modules. Its ``name_scope`` is made once, so every entry reuses it; the
variables, trainable variables and submodules are found by walking the
object's attributes (lists, tuples and dicts included), its own first.

>>> import nbdist as nd
>>> class Dense(nd.Module):
...     def __init__(self):
...         super().__init__(name="dense")
...         with self.name_scope:
...             self.w = nd.Variable(2.0, name="w")
...     @nd.Module.with_name_scope
...     def __call__(self, x):
...         return x * self.w
>>> layer = Dense()
>>> [v.name for v in layer.trainable_variables]
['dense/w:0']
>>> layer(nd.constant(3.0)).name
'dense/mul:0'
"""

from __future__ import annotations

import functools
import re

from nbdist.framework.ops import get_default_graph, name_scope
from nbdist.ops.variables import Variable

_CAMEL = re.compile(r"((?<=[a-z0-9])[A-Z]|(?!^)[A-Z](?=[a-z]))")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _ModuleNameScope:
    """A name scope entered again and again under the same absolute name."""

    def __init__(self, name: str):
        self.name = name
        self._stack = []

    def __enter__(self):
        cm = get_default_graph().name_scope(self.name)
        self._stack.append(cm)
        return cm.__enter__()

    def __exit__(self, *exc):
        return self._stack.pop().__exit__(*exc)


def _leaves(value):
    if isinstance(value, dict):
        for k in sorted(value, key=repr):
            yield from _leaves(value[k])
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _leaves(v)
    else:
        yield value


class Module:
    """A named container of variables and submodules (TF's ``tf.Module``)."""

    _TF_MODULE_IGNORED_PROPERTIES = frozenset()

    def __init__(self, name=None):
        if name is None:
            name = _CAMEL.sub(r"_\1", type(self).__name__).lower()
        elif not _IDENTIFIER.match(name):
            raise ValueError(f"'{name}' is not a valid module name. Module names must "
                             "be valid Python identifiers (e.g. a valid class name).")
        self._name = name
        with name_scope(name) as scope:
            self._scope = _ModuleNameScope(scope)

    @property
    def name(self) -> str:
        """The name given at construction (or the class name in snake case)."""
        return self._name

    @property
    def name_scope(self) -> _ModuleNameScope:
        """The module's name scope, the same on every entry (``.name`` ends in
        '/')."""
        return self._scope

    @property
    def variables(self) -> tuple:
        """Every variable of this module and its submodules."""
        return tuple(self._flatten(predicate=lambda v: isinstance(v, Variable)))

    @property
    def trainable_variables(self) -> tuple:
        """The trainable ones of ``variables``."""
        return tuple(self._flatten(
            predicate=lambda v: isinstance(v, Variable) and v.trainable))

    @property
    def non_trainable_variables(self) -> tuple:
        """The ones of ``variables`` that are not trainable."""
        return tuple(self._flatten(
            predicate=lambda v: isinstance(v, Variable) and not v.trainable))

    @property
    def submodules(self) -> tuple:
        """Every module held by this one, directly or through others."""
        return tuple(self._flatten(predicate=lambda v: isinstance(v, Module)))

    def _flatten(self, recursive=True, predicate=None):
        """The attributes' leaves that satisfy ``predicate``: this module's
        first (by attribute name), then each submodule's in turn."""
        predicate = predicate or (lambda v: True)
        seen, queue = {id(self)}, [self]
        while queue:
            module, later = queue.pop(0), []
            for key in sorted(vars(module)):
                if key in module._TF_MODULE_IGNORED_PROPERTIES or key == "_scope":
                    continue
                for leaf in _leaves(vars(module)[key]):
                    if predicate(leaf):
                        yield leaf
                    if (recursive and isinstance(leaf, Module)
                            and id(leaf) not in seen):
                        seen.add(id(leaf))
                        later.append(leaf)
            queue.extend(later)

    @classmethod
    def with_name_scope(cls, method):
        """Decorates a method to run inside the module's ``name_scope``."""
        @functools.wraps(method)
        def wrapped(self, *args, **kwargs):
            with self.name_scope:
                return method(self, *args, **kwargs)

        return wrapped


__all__ = ["Module"]
