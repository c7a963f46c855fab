"""No code branches on the kind of transport or link outside the packages that
are one (issue 38): the framed codec (``runtime/framed``) runs over a link
policy object and never asks which one; ``runtime/samehost`` (a Unix socket and
memfd segments) and ``runtime/tcp`` (a TCP stream, TLS in a TLS cluster) each
speak of their own link only; the core runtime imports no transport.

What is forbidden, read with ``ast`` (docstrings and comments are free to name
transports), in every module of ``nbdist`` outside the *link packages*
(``runtime/samehost``, ``runtime/tcp``, ``runtime/grpc``) and ``runtime/env.py``
(the table of environment variables, ``NBDIST_SAME_HOST`` and its kin):

1. naming a link kind: a string constant that is ``"samehost"``, ``"tcp"`` or
   ``"unix"`` (any case), except in the registry's table of built-in peer paths
   (``transports._BUILT_IN_PATHS``); an identifier (variable, attribute,
   function, class, argument, keyword) containing ``tcp``, ``unix`` or
   ``samehost``/``same_host`` (``is_tcp``, ``tcp_bind``, ``_same_host``,
   ``SameHostChannel``; the ``socket`` module's own constants, such as
   ``socket.IPPROTO_TCP`` for a name lookup, are not counted);
2. looking at a socket's kind: ``AF_UNIX``, ``SO_PEERCRED``, or comparing a
   ``.family`` attribute with an ``AF_*`` constant;
3. importing a link package (``nbdist.runtime.samehost``, ``nbdist.runtime.tcp``:
   they are reached through ``runtime.transports`` only), and, for the core
   runtime (``nbdist.runtime`` outside its transport packages), importing any
   transport package (``runtime/grpc``, ``runtime/inproc`` too).

Inside the link packages, each speaks of its own link only: ``runtime/samehost``
names no ``tcp``, ``runtime/tcp`` names no ``unix``/``samehost`` and uses no
``AF_UNIX`` (rules 1 and 2 with the other link's words). Each rule is also run
against a planted violation, so it is known to fail.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from helpers import ROOT
from test_layers import module_files

PACKAGE = ROOT / "nbdist"
RUNTIME = "nbdist.runtime"
# Link packages and the words of the links they are not.
LINKS = {
    "nbdist.runtime.samehost": ("tcp",),
    "nbdist.runtime.tcp": ("unix", "samehost"),
    "nbdist.runtime.grpc": None,  # the protocol itself: free to name its peers
}
TRANSPORT_PACKAGES = (*LINKS, "nbdist.runtime.inproc")
EXEMPT = ("nbdist.runtime.env",)
WORDS = ("samehost", "tcp", "unix")
SOCKET_KINDS = ("AF_UNIX", "SO_PEERCRED")
REGISTRY = ("nbdist.runtime.transports", "_BUILT_IN_PATHS")


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _package(module: str, packages) -> str | None:
    return next((p for p in packages if _within(module, p)), None)


def _identifiers(node) -> list[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    if isinstance(node, ast.keyword) and node.arg:
        return [node.arg]
    if isinstance(node, ast.alias):
        return [(node.asname or node.name).rpartition(".")[2]]
    return []


def _socket_constant(node) -> bool:
    """``socket.IPPROTO_TCP`` and its kin: the socket API's names."""
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
        and node.value.id == "socket" and node.attr.isupper() and \
        node.attr not in SOCKET_KINDS


def _registry_nodes(tree) -> set[int]:
    """ids of the nodes of the registry's table of built-in peer paths."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == REGISTRY[1] for t in targets):
                out |= {id(n) for n in ast.walk(node)}
    return out


def _imports(module: str, tree) -> list[tuple[str, int]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")[: len(module.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            out += [(f"{base}.{a.name}", node.lineno) for a in node.names]
    return out


def branches(files: dict[str, Path]) -> list[str]:
    """Every place that names, inspects or imports a transport kind where it
    may not (the rules of the module docstring)."""
    out = []
    for module, path in files.items():
        if module.startswith("nbdist.proto") or module in EXEMPT:
            continue
        link = _package(module, LINKS)
        if link is not None and LINKS[link] is None:
            continue
        words = WORDS if link is None else LINKS[link]
        pattern = re.compile("|".join(w if link is not None or w != "samehost"
                                      else "same_?host" for w in words),
                             re.IGNORECASE)
        tree = ast.parse(path.read_text(), str(path))
        registry = _registry_nodes(tree) if module == REGISTRY[0] else set()
        for node in ast.walk(tree):
            line = getattr(node, "lineno", 0)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                    node.value.lower() in words and id(node) not in registry:
                out.append(f"{module}:{line} names the link {node.value!r}")
            for name in _identifiers(node):
                if pattern.search(name) and id(node) not in registry and \
                        not _socket_constant(node):
                    out.append(f"{module}:{line} names {name!r}")
                if name in SOCKET_KINDS and (link is None or "unix" in words):
                    out.append(f"{module}:{line} looks at a socket's kind ({name})")
            sides = (node.left, *node.comparators) if isinstance(
                node, ast.Compare) else ()
            if link is None and any(isinstance(n, ast.Attribute) and
                                    n.attr == "family" for n in sides) and any(
                    name.startswith("AF_") for n in sides for name in _identifiers(n)):
                out.append(f"{module}:{line} compares a socket's family")
        if link is not None:
            continue
        core = _within(module, RUNTIME) and _package(module, TRANSPORT_PACKAGES) is None
        forbidden = TRANSPORT_PACKAGES if core else tuple(
            p for p, other in LINKS.items() if other is not None)
        for target, line in _imports(module, tree):
            package = _package(target, forbidden)
            if package is not None:
                out.append(f"{module}:{line} imports {target} (of {package})")
    return sorted(set(out))


def test_no_transport_kind_branch_outside_the_link_packages():
    assert branches(module_files()) == []


# -- the rules catch a planted violation --------------------------------------------
@pytest.fixture
def planted(tmp_path):
    """A copy of nbdist's runtime tree (sources read from the real files) to edit."""
    root = tmp_path / "nbdist"
    for name, path in module_files().items():
        if name.startswith(RUNTIME):
            dest = root / path.relative_to(PACKAGE)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(path.read_text())
    return root


def _plant(root: Path, relative: str, code: str) -> list[str]:
    path = root / relative
    path.write_text(path.read_text() + "\n" + code + "\n")
    return branches(module_files(root))


@pytest.mark.parametrize("code, found", [
    ("def f(conn):\n    return 'tcp' if conn else 'unix'", "names the link 'tcp'"),
    ("def f(service):\n    return service.is_tcp", "names 'is_tcp'"),
    ("def f(tcp_bind=None):\n    return tcp_bind", "names 'tcp_bind'"),
    ("import socket\ndef f(s):\n    return s.family == socket.AF_INET",
     "compares a socket's family"),
    ("import socket\nKIND = socket.AF_UNIX", "looks at a socket's kind (AF_UNIX)"),
    ("from nbdist.runtime.samehost import socket_name",
     "imports nbdist.runtime.samehost.socket_name (of nbdist.runtime.samehost)"),
])
def test_a_planted_branch_in_the_framed_codec_is_caught(planted, code, found):
    out = _plant(planted, "runtime/framed/service.py", code)
    assert any(v.startswith("nbdist.runtime.framed.service:") and found in v
               for v in out), out


def test_a_planted_transport_import_in_the_core_runtime_is_caught(planted):
    out = _plant(planted, "runtime/collective_ring.py",
                 "from nbdist.runtime.inproc import InProcServer")
    assert any("imports nbdist.runtime.inproc.InProcServer" in v for v in out), out


def test_a_link_package_naming_the_other_link_is_caught(planted):
    out = _plant(planted, "runtime/samehost/__init__.py",
                 "def tune_tcp(sock):\n    return sock")
    assert any(v.startswith("nbdist.runtime.samehost:") and "'tune_tcp'" in v
               for v in out), out
    out = _plant(planted, "runtime/tcp/__init__.py",
                 "import socket\nUNIXY = socket.AF_UNIX")
    assert any(v.startswith("nbdist.runtime.tcp:") and "AF_UNIX" in v
               for v in out), out


def test_the_registry_table_may_name_the_paths(planted):
    """The one place that maps peer-path names to their modules."""
    assert not [v for v in branches(module_files(planted))
                if v.startswith("nbdist.runtime.transports:")]
