"""Milliseconds become seconds (and back) only in ``nbdist/runtime/timeouts.py``.

A timeout that travels means the same thing whichever way it travels only if
one place converts it (``seconds_from_ms``, ``ms_from_seconds``,
``ms_as_seconds``, ``seconds_as_ms``, ``whole_ms``).

The rule: in ``nbdist/runtime`` and ``nbdist/cluster`` outside ``timeouts.py``,
no ``*``, ``/`` or ``//`` has a literal 1000 (``1000``, ``1000.0``, ``1e3``) or
0.001 (``0.001``, ``1e-3``) operand. Every such product or quotient in these
layers was an ms<->s conversion (their byte sizes are powers of two), so the
rule has no false positives there and catches a new conversion whatever its
operands are named.
"""

from __future__ import annotations

import ast
from pathlib import Path

import nbdist as nd

PACKAGE = Path(nd.__file__).parent
CHECKED = ("runtime", "cluster")
ALLOWED = PACKAGE / "runtime" / "timeouts.py"
_FACTORS = (1000, 0.001)


def _is_factor(node: ast.expr) -> bool:
    return (isinstance(node, ast.Constant) and type(node.value) in (int, float)
            and node.value in _FACTORS)


def hand_written_conversions(source: str, filename: str) -> list[str]:
    """``file:line: expression`` of each ms<->s conversion written by hand."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if (isinstance(node, ast.BinOp)
                and isinstance(node.op, (ast.Mult, ast.Div, ast.FloorDiv))
                and (_is_factor(node.left) or _is_factor(node.right))):
            found.append(f"{filename}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_rule_catches_the_forms_conversions_take():
    caught = hand_written_conversions(
        "a = x_ms / 1000.0\nb = int(left * 1000)\nc = (t1 - t0) * 1e3\n"
        "d = 1e-3 * ms\ne = ms // 1000\n", "example.py")
    assert sorted(int(c.split(":")[1]) for c in caught) == [1, 2, 3, 4, 5]
    # Neither a byte size nor a count is a conversion.
    assert hand_written_conversions(
        "n = 1 << 20\nk = n * 1024\ncap = 10000\nm = x + 1000\n", "x.py") == []


def test_no_hand_written_ms_conversion_outside_timeouts():
    found = []
    for layer in CHECKED:
        for path in sorted((PACKAGE / layer).rglob("*.py")):
            if path == ALLOWED:
                continue
            found += hand_written_conversions(path.read_text(encoding="utf-8"),
                                              str(path.relative_to(PACKAGE.parent)))
    assert not found, ("convert through nbdist/runtime/timeouts.py instead:\n"
                       + "\n".join(found))
