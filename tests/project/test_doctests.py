"""Every example in nbdist's docstrings runs and prints what it says.

Each docstring's examples run as a user's program would (``__name__`` is
``__main__``, so shapes index to TF1's ``Dimension`` as they do for users) in a
fresh default graph, one test per module that has examples.
"""

from __future__ import annotations

import doctest
import importlib
import unittest
from pathlib import Path

import pytest

import nbdist as nd

PACKAGE = Path(nd.__file__).parent


def _modules_with_examples() -> list[str]:
    # By file, not pkgutil: several of nbdist's packages are namespace packages.
    names = []
    for source in PACKAGE.rglob("*.py"):
        if ">>> " not in source.read_text(encoding="utf-8"):
            continue
        parts = source.relative_to(PACKAGE.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return sorted(names)


MODULES = _modules_with_examples()


def test_the_examples_are_found():
    # The walk must see the package's examples (a broken walk would pass vacuously).
    assert len(MODULES) >= 90, MODULES
    assert "nbdist.runtime.service.admission" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run_as_written(name):
    module = importlib.import_module(name)
    suite = doctest.DocTestSuite(
        module,
        extraglobs={"__name__": "__main__"},
        setUp=lambda _: nd.reset_default_graph(),
        tearDown=lambda _: nd.reset_default_graph(),
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE,
    )
    result = unittest.TextTestRunner(stream=_Discard(), verbosity=0).run(suite)
    problems = [text for _, text in result.failures + result.errors]
    assert not problems, "\n".join(problems)


class _Discard:
    def write(self, _text):
        pass

    def flush(self):
        pass
