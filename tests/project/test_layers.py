"""The house rules of ``nbdist/``: imports follow the layer order of the spec, no
module is part of an import circle, only ``runtime/grpc`` touches grpc, no
transport package imports another and only a transport package imports its
libraries, the framework imports no op family, and no file (generated code
aside) passes 800 lines.

Imports are read with ``ast`` (every ``import`` in a module, also those inside
functions), so a lazy import that dodges a circle counts as the circle it is.
Each rule is also run once against a planted violation, so it is known to fail.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers import ROOT

PACKAGE = ROOT / "nbdist"
MAX_LINES = 800

# The spec's layers, lowest first: framework, ops <- executor <- runtime <-
# runtime/grpc <- cluster <- train/distribute <- notebook. A module may import its
# own layer and those below it. ``nbdist`` itself (the public facade:
# ``nbdist/__init__.py``, ``nn.py``, ``random.py``, ``data.py``, ``_api_ops.py``)
# sits above everything.
LAYERS = [
    ("nbdist.proto", 0),
    ("nbdist.errors", 0),
    ("nbdist.framework", 1),
    ("nbdist.ops", 1),
    ("nbdist.executor", 2),
    ("nbdist.runtime.grpc", 4),
    ("nbdist.runtime", 3),
    ("nbdist.cluster", 5),
    ("nbdist.server", 5),  # the nbdist-server command
    ("nbdist.train", 6),
    ("nbdist.distribute", 6),
    ("nbdist.notebook", 7),
    ("nbdist.tour", 7),
]
FACADE = 8
GRPC_PACKAGE = "nbdist.runtime.grpc"
# Transport packages (peers in ``runtime.transports``) and the libraries only
# they may import: gRPC; the TCP path's TLS.
TRANSPORTS = {
    GRPC_PACKAGE: ("grpc",),
    "nbdist.runtime.samehost": (),
    "nbdist.runtime.tcp": ("ssl",),
    "nbdist.runtime.inproc": (),
}
# Libraries of the framed codec (not a transport: the link packages import it),
# and the modules that may import them: its epoll and shared-memory mappings,
# and the all-reduce's result buffers a peer on this host maps.
SHARED_LIBRARIES = {
    "select": ("nbdist.runtime.framed",),
    "mmap": ("nbdist.runtime.framed", "nbdist.runtime.collective_buffers"),
}


def layer_of(module: str) -> int:
    for prefix, layer in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return layer
    return FACADE


def module_files(root: Path = PACKAGE) -> dict[str, Path]:
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imported_modules(name: str, path: Path, known) -> list[tuple[str, int]]:
    """(imported module, line) for every import in ``path``, relative ones resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            for a in node.names:
                full = f"{base}.{a.name}"
                out.append((full if full in known else base, node.lineno))
    return out


def import_graph(files: dict[str, Path]):
    """{module: {imported nbdist module: line}} over nbdist's own modules."""
    graph = {}
    for name, path in files.items():
        if name.startswith("nbdist.proto"):
            continue
        edges = graph.setdefault(name, {})
        for target, line in imported_modules(name, path, files):
            while target not in files and "." in target:
                target = target.rpartition(".")[0]
            if target in files and target != name and target.startswith("nbdist"):
                edges.setdefault(target, line)
    return graph


def layer_violations(graph) -> list[str]:
    return [
        f"{src} (layer {layer_of(src)}) imports {dst} (layer {layer_of(dst)}) "
        f"at line {line}"
        for src, edges in sorted(graph.items())
        for dst, line in sorted(edges.items())
        if layer_of(dst) > layer_of(src)
    ]


def circles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def grpc_outside_transport(files: dict[str, Path]) -> list[str]:
    out = []
    for name, path in files.items():
        if name.startswith(("nbdist.proto", GRPC_PACKAGE)):
            continue
        for target, line in imported_modules(name, path, files):
            if target == "grpc" or target.startswith(("grpc.", GRPC_PACKAGE)) or (
                target.endswith("_pb2_grpc")
            ):
                out.append(f"{name} imports {target} at line {line}")
    return out


def _package_of(module: str) -> str | None:
    for package in TRANSPORTS:
        if module == package or module.startswith(package + "."):
            return package
    return None


def transports_importing_each_other(files: dict[str, Path]) -> list[str]:
    """A transport package importing another: they meet in ``runtime.transports``
    and ``runtime.router``, never directly."""
    out = []
    for name, path in files.items():
        own = _package_of(name)
        if own is None:
            continue
        for target, line in imported_modules(name, path, files):
            other = _package_of(target)
            if other is not None and other != own:
                out.append(f"{name} imports {target} at line {line}")
    return out


def transport_libraries_outside(files: dict[str, Path]) -> list[str]:
    """A transport's library imported outside its package."""
    owner = {lib: (package,) for package, libs in TRANSPORTS.items() for lib in libs}
    owner.update(SHARED_LIBRARIES)
    out = []
    for name, path in files.items():
        if name.startswith("nbdist.proto"):
            continue
        for target, line in imported_modules(name, path, files):
            lib = target.split(".")[0]
            if lib in owner and not any(name == p or name.startswith(p + ".")
                                        for p in owner[lib]):
                out.append(f"{name} imports {target} (of {', '.join(owner[lib])}) "
                           f"at line {line}")
    return out


def oversized(files: dict[str, Path]) -> list[str]:
    out = []
    for name, path in files.items():
        if name.startswith("nbdist.proto"):
            continue
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES:
            out.append(f"{name} ({path.name}): {lines} lines")
    return out


def framework_importing_ops(graph) -> list[str]:
    """``nbdist.framework`` (graphs, tensors, registries) importing an op family of
    ``nbdist.ops``: the op families build on the framework, never the reverse."""
    return [
        f"{src} imports {dst} at line {line}"
        for src, edges in sorted(graph.items())
        if src.startswith("nbdist.framework.")
        for dst, line in sorted(edges.items())
        if dst == "nbdist.ops" or dst.startswith("nbdist.ops.")
    ]


# -- the rules on nbdist ---------------------------------------------------------------
def test_imports_follow_the_layer_order():
    assert layer_violations(import_graph(module_files())) == []


def test_no_import_circles():
    assert circles(import_graph(module_files())) == []


def test_only_runtime_grpc_imports_grpc():
    assert grpc_outside_transport(module_files()) == []


def test_no_transport_package_imports_another():
    assert transports_importing_each_other(module_files()) == []


def test_only_the_transport_packages_import_their_libraries():
    assert transport_libraries_outside(module_files()) == []


def test_no_file_over_800_lines():
    assert oversized(module_files()) == []


def test_framework_imports_no_ops_module():
    assert framework_importing_ops(import_graph(module_files())) == []


# -- the rules catch a planted violation ---------------------------------------------------
@pytest.fixture
def planted(tmp_path):
    """A copy of nbdist's module tree (sources read from the real files) to edit."""
    root = tmp_path / "nbdist"
    for name, path in module_files().items():
        if name.startswith("nbdist.proto"):
            continue
        dest = root / path.relative_to(PACKAGE)
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(path.read_text())
    return root


def test_a_planted_upward_import_is_caught(planted):
    shapes = planted / "framework" / "tensor_shape.py"
    shapes.write_text(shapes.read_text() + "\nfrom nbdist.runtime import session\n")
    found = layer_violations(import_graph(module_files(planted)))
    assert any(v.startswith("nbdist.framework.tensor_shape (layer 1) imports "
                            "nbdist.runtime.session") for v in found), found


def test_a_planted_circle_is_caught(planted):
    (planted / "framework" / "planted_a.py").write_text(
        "def f():\n    from nbdist.framework import planted_b\n")
    (planted / "framework" / "planted_b.py").write_text(
        "from nbdist.framework.planted_a import f\n")
    found = circles(import_graph(module_files(planted)))
    assert ["nbdist.framework.planted_a", "nbdist.framework.planted_b"] in found, found


def test_a_planted_grpc_import_is_caught(planted):
    worker = planted / "runtime" / "worker.py"
    worker.write_text(worker.read_text() + "\nimport grpc\n")
    found = grpc_outside_transport(module_files(planted))
    assert any(v.startswith("nbdist.runtime.worker imports grpc") for v in found)


def test_a_planted_import_between_transports_is_caught(planted):
    service = planted / "runtime" / "samehost" / "__init__.py"
    service.write_text(service.read_text()
                       + "\nfrom nbdist.runtime.grpc import coding\n")
    found = transports_importing_each_other(module_files(planted))
    assert any(v.startswith("nbdist.runtime.samehost imports "
                            "nbdist.runtime.grpc.coding") for v in found), found


def test_a_planted_transport_library_import_is_caught(planted):
    master = planted / "runtime" / "master.py"
    master.write_text(master.read_text() + "\nimport select\n")
    found = transport_libraries_outside(module_files(planted))
    assert any(v.startswith("nbdist.runtime.master imports select (of "
                            "nbdist.runtime.framed)") for v in found), found


def test_a_planted_long_file_is_caught(planted):
    (planted / "framework" / "planted_long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    found = oversized(module_files(planted))
    assert "nbdist.framework.planted_long (planted_long.py): 801 lines" in found, found


def test_a_planted_framework_to_ops_import_is_caught(planted):
    dtypes = planted / "framework" / "dtypes.py"
    dtypes.write_text(dtypes.read_text() + "\nfrom nbdist.ops import math_ops\n")
    found = framework_importing_ops(import_graph(module_files(planted)))
    assert any(v.startswith("nbdist.framework.dtypes imports nbdist.ops.math_ops")
               for v in found), found
