"""The README's two commands stay true: CI runs the README's test command."""

from __future__ import annotations

import re

from helpers import ROOT


def _bash_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", text, re.S)]


def test_readme_gives_exactly_two_commands_and_ci_runs_the_test_one():
    readme = (ROOT / "README.md").read_text()
    first_screen = readme[: readme.index("## A first program")]
    blocks = _bash_blocks(first_screen)
    assert len(blocks) == 2, blocks
    tour, tests = blocks
    assert "nbdist.tour" in tour
    assert "pytest" in tests and ".[test]" in tests
    ci = (ROOT / ".ci" / "run").read_text()
    assert tests in ci, "the CI script must run the README's test command verbatim"
