"""Code above the framework uses the graph only through its public API.

What is checked, precisely. The *framework privates* are the names that start
with one underscore (not dunders) which ``Graph``, ``FuncGraph``, ``Operation``
or ``Tensor`` define: attributes and methods of the classes (and their bases
below ``object``) and the attributes of live instances (a ``FuncGraph`` holding
one op with one output, so per-instance state such as ``_ops_list``,
``_captures``, ``_attrs``, ``_dtype`` is in the list). A *reach* is an
attribute access ``obj._name`` (read, write, call or ``del``), or a call
``getattr/hasattr/setattr/delattr(obj, "_name", ...)`` with the name as a
string literal, in a module under a checked package, where ``_name`` is a framework private and ``obj`` is not
the name ``self`` or ``cls`` and not a name the module binds to an imported
module (``from nbdist.framework import ops as _ops`` -> ``_ops._x`` is a module
attribute, checked apart below). Names are read with ``ast``, so a reach in a
function body or a lambda counts as one at module level does.

The rule goes by name, so it cannot tell a framework object from another
class's object whose private has the same name; ``NOT_FRAMEWORK`` lists those
accesses (file, text) with what the object is.

A second rule: no module under a checked package imports a private name of a
``nbdist.framework`` module (``from nbdist.framework.ops import _static_value``)
or reads one through a module alias (``_ops._default_graph_stack``).

Each rule also runs once against a planted violation, so it is known to fail.
"""

from __future__ import annotations

import ast

import pytest
from helpers import ROOT

PACKAGE = ROOT / "nbdist"
# Packages above the framework that must use its public API only.
CHECKED = ["distribute"]
# (file, access) the name rule flags whose object is not a framework one.
NOT_FRAMEWORK = {
    ("nbdist/distribute/coordinator/cluster_coordinator.py", "pwd._graph"):
        "a PerWorkerDataset's own graph, read by the coordinator that made it",
    ("nbdist/distribute/strategies/parameter_server_strategy.py", "new._lock"):
        "the strategy's copy, in the strategy's own __deepcopy__",
}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def framework_privates() -> frozenset[str]:
    from nbdist.framework.constant_op import constant
    from nbdist.framework.func_graph import FuncGraph
    from nbdist.framework.ops import Graph, Operation, Tensor

    names = set()
    for cls in (Graph, FuncGraph, Operation, Tensor):
        for klass in cls.__mro__[:-1]:
            names.update(n for n in vars(klass) if _is_private(n))
    fg = FuncGraph("probe")
    with fg.as_default():
        t = constant(1.0, name="probe")
    for obj in (Graph(), fg, t.op, t):
        names.update(n for n in vars(obj) if _is_private(n))
    return frozenset(names)


def _module_aliases(tree: ast.Module) -> dict[str, str]:
    """Names the module binds to imported modules -> the module's dotted name."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                aliases[a.asname or a.name.split(".")[0]] = (
                    a.name if a.asname else a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if _is_module(full):
                    aliases[a.asname or a.name] = full
    return aliases


def _is_module(dotted: str) -> bool:
    parts = dotted.split(".")
    if parts[0] != "nbdist":
        return False
    path = ROOT.joinpath(*parts)
    return path.is_dir() or path.with_suffix(".py").is_file()


_ATTR_FUNCTIONS = ("getattr", "hasattr", "setattr", "delattr")


def reaches(source: str, privates: frozenset[str]) -> list[tuple[int, str]]:
    """``(line, text)`` of every reach into a framework private in ``source``."""
    tree = ast.parse(source)
    aliases = _module_aliases(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            base, attr = node.value, node.attr
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
              and node.func.id in _ATTR_FUNCTIONS and len(node.args) >= 2
              and isinstance(node.args[1], ast.Constant)
              and isinstance(node.args[1].value, str)):
            base, attr = node.args[0], node.args[1].value
        else:
            continue
        if attr not in privates or (isinstance(base, ast.Name) and (
                base.id in ("self", "cls") or base.id in aliases)):
            continue
        found.append((node.lineno, f"{ast.unparse(base)}.{attr}"))
    return sorted(found)


def framework_module_privates(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every private name of a framework module it uses."""
    tree = ast.parse(source)
    aliases = {k: v for k, v in _module_aliases(tree).items()
               if v.startswith("nbdist.framework")}
    found = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.ImportFrom) and node.module
                and node.module.startswith("nbdist.framework")):
            found.extend((node.lineno, f"from {node.module} import {a.name}")
                         for a in node.names if _is_private(a.name))
        elif (isinstance(node, ast.Attribute) and _is_private(node.attr)
              and isinstance(node.value, ast.Name) and node.value.id in aliases):
            found.append((node.lineno, f"{node.value.id}.{node.attr}"))
    return sorted(found)


def _checked_files():
    for pkg in CHECKED:
        yield from sorted((PACKAGE / pkg).rglob("*.py"))


def _report(rule) -> list[str]:
    out = []
    for path in _checked_files():
        rel = str(path.relative_to(ROOT))
        for line, text in rule(path.read_text()):
            if (rel, text) not in NOT_FRAMEWORK:
                out.append(f"{rel}:{line}: {text}")
    return out


def test_no_reach_into_graph_operation_tensor_privates():
    privates = framework_privates()
    found = _report(lambda src: reaches(src, privates))
    assert not found, ("modules above the framework reach into private attributes "
                       "of Graph/FuncGraph/Operation/Tensor; add a public method "
                       "in nbdist/framework instead:\n" + "\n".join(found))


def test_no_private_name_of_a_framework_module():
    found = _report(framework_module_privates)
    assert not found, ("modules above the framework use private names of "
                       "framework modules:\n" + "\n".join(found))


@pytest.mark.parametrize("source, expected", [
    # An op's attrs and a graph's op list through a variable: reaches.
    ("def f(op, g):\n    op._attrs['x'] = 1\n    return g._ops_list\n",
     [(2, "op._attrs"), (3, "g._ops_list")]),
    # A chained reach and a call of a private method.
    ("def f(t):\n    t.op._set_device('/cpu:0')\n", [(2, "t.op._set_device")]),
    # The name as a string: getattr and friends.
    ("def f(g):\n    return getattr(g, '_functions', {})\n", [(2, "g._functions")]),
    # self/cls, module aliases and private names the framework does not define
    # are not reaches.
    (("from nbdist.framework import ops as _ops\n"
      "class A:\n    def f(self, x):\n"
      "        return self._attrs, _ops._graph_of(x), x._my_own\n"),
     []),
])
def test_reach_rule_finds_planted_violations(source, expected):
    assert reaches(source, framework_privates()) == expected


def test_module_rule_finds_planted_violations():
    source = ("from nbdist.framework import ops as _ops\n"
              "from nbdist.framework.ops import _static_value, Graph\n"
              "x = _ops._default_graph_stack\n")
    assert framework_module_privates(source) == [
        (2, "from nbdist.framework.ops import _static_value"),
        (3, "_ops._default_graph_stack")]
