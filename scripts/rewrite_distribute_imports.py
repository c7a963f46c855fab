#!/usr/bin/env python3
"""Rewrites imports of the ``nbdist.distribute`` modules that moved into
sub-packages (issue 20), so a branch written against the flat layout merges:

    python scripts/rewrite_distribute_imports.py $(git ls-files '*.py' '*.ipynb')

Re-runnable: an already rewritten file is left as is. ``nest`` and
``func_graph`` moved to ``nbdist.graph`` (shared with control flow); control
flow's own ``flatten``/``pack_sequence_as``/``trace``/``to_function_def``
(``nbdist.graph.control_flow_graph``) are ``nbdist.graph.nest``,
``nbdist.graph.func_graph`` and ``nbdist.graph.function_def`` now (not
rewritten here: few importers, fix them by hand).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

MOVED = {
    "coordinator": ["cluster_coordinator", "coordinator_state", "closure_batching",
                    "task_liveness", "values"],
    "tracing": ["function", "function_ops", "tensor_spec", "session_cache"],
    "data": ["data_ops", "file_datasets"],
    "strategies": ["parameter_server_strategy", "collective_all_reduce_strategy",
                   "distribute_coordinator", "distribute_coordinator_context",
                   "input_context", "partitioners"],
}
TO_GRAPH = ["func_graph", "nest"]


def rewrite(text: str) -> str:
    for sub, modules in MOVED.items():
        for m in modules:
            text = re.sub(rf"nbdist\.distribute\.{m}\b",
                          f"nbdist.distribute.{sub}.{m}", text)
            text = re.sub(rf"from nbdist\.distribute import {m}\b",
                          f"from nbdist.distribute.{sub} import {m}", text)
            text = re.sub(rf"nbdist/distribute/{m}\.py",
                          f"nbdist/distribute/{sub}/{m}.py", text)
    for m in TO_GRAPH:
        text = re.sub(rf"nbdist\.distribute\.{m}\b", f"nbdist.graph.{m}", text)
        text = re.sub(rf"from nbdist\.distribute import {m}\b",
                      f"from nbdist.graph import {m}", text)
    return text


def main(paths) -> int:
    for p in paths:
        path = Path(p)
        old = path.read_text()
        new = rewrite(old)
        if new != old:
            path.write_text(new)
            print("rewrote", p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
