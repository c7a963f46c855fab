"""Fixtures shared by the tests: in-process ``Server``s on 127.0.0.1,
``nbdist-server`` processes (spawned, never forked; always killed by PID), a
fresh default graph and a Jupyter kernel spec. Everything that is not a fixture
is in ``helpers.py``.

Tests live in one directory per layer (``tests/<layer>/test_*.py``); loading
this file puts tests/ and every such directory on ``sys.path``, so that
``import helpers`` and imports of another test module by basename work from
any of them (see ``helpers.put_test_dirs_on_path``).
"""

from __future__ import annotations

import sys

import helpers
import pytest
from helpers import ServerProcess, cluster_string, write_kernel_spec

helpers.put_test_dirs_on_path()


@pytest.fixture(autouse=True)
def _fresh_default_graph_after_each_test():
    """Each test hands the next a fresh default graph (TF's test case resets it
    in setUp too): a variable one test placed on ``/job:ps`` must not reach a
    later test's default-graph ``Session``."""
    yield
    nd = sys.modules.get("nbdist")
    if nd is not None:
        try:
            nd.reset_default_graph()
        except AssertionError:  # a graph left as default by the test: not ours
            pass


@pytest.fixture
def spawn():
    """``spawn(job, index, cluster, **kw)`` starts an nbdist-server process for
    one task of ``cluster``; every process is SIGKILLed by PID at teardown."""
    procs: list[ServerProcess] = []

    def start(job: str, index: int, cluster: dict, extra=(), **kw) -> ServerProcess:
        args = [
            f"--cluster_spec={cluster_string(cluster)}",
            f"--job_name={job}",
            f"--task_index={index}",
            *extra,
        ]
        p = ServerProcess(args, **kw)
        procs.append(p)
        return p

    start.procs = procs
    yield start
    for p in procs:
        p.kill()


@pytest.fixture
def servers():
    """``servers(cluster, job, index, **kw)`` starts an in-process ``Server``;
    all are stopped at teardown."""
    import nbdist as nd

    started = []

    def start(cluster, job, index, **kw):
        s = nd.Server(cluster, job_name=job, task_index=index, **kw)
        started.append(s)
        return s

    yield start
    for s in reversed(started):
        s.stop()


@pytest.fixture
def graph():
    """A fresh default graph for the test."""
    import nbdist as nd

    g = nd.Graph()
    with g.as_default():
        yield g




@pytest.fixture
def kernel_name(tmp_path, monkeypatch):
    """A kernel spec for this interpreter, in a temporary JUPYTER_PATH."""
    name = write_kernel_spec(tmp_path)
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))
    return name
