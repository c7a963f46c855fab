"""A server's kernels, and an in-process session's, use one BLAS thread (tasks share their host's cores), unless
the user chose: ``OMP_NUM_THREADS``/``OPENBLAS_NUM_THREADS``/``MKL_NUM_THREADS``
in the environment, or ``ConfigProto.intra_op_parallelism_threads``."""

from __future__ import annotations

import pytest

import nbdist as nd
from nbdist.executor import blas_threads

VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


@pytest.fixture
def blas(monkeypatch):
    for var in VARS:
        monkeypatch.delenv(var, raising=False)
    before = blas_threads.get_threads()
    if not before:
        pytest.skip("no OpenBLAS or MKL loaded under NumPy")
    yield len(before)
    blas_threads.set_threads(before[0])


def threads_under_a_server(config=None):
    blas_threads.set_threads(2)
    server = nd.train.Server.create_local_server(config=config)
    try:
        return blas_threads.get_threads()
    finally:
        server.stop()


def test_a_server_sets_one_blas_thread(blas):
    assert threads_under_a_server() == [1] * blas


def test_intra_op_parallelism_threads_sets_the_count(blas):
    config = nd.ConfigProto(intra_op_parallelism_threads=2)
    assert threads_under_a_server(config) == [2] * blas


def test_the_environment_variables_leave_the_count_alone(blas, monkeypatch):
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    assert threads_under_a_server() == [2] * blas


def threads_under_a_session(config=None):
    blas_threads.set_threads(2)
    with nd.Session(graph=nd.Graph(), config=config):
        return blas_threads.get_threads()


@pytest.mark.parametrize("config, env, want", [
    (None, None, 1),  # an LSTM's small matmuls: 20x the CPU with a spinning pool
    (nd.ConfigProto(intra_op_parallelism_threads=2), None, 2),
    (None, "2", 2),
])
def test_an_in_process_session_sets_the_blas_threads(blas, monkeypatch, config,
                                                     env, want):
    if env is not None:
        monkeypatch.setenv("OMP_NUM_THREADS", env)
    assert threads_under_a_session(config) == [want] * blas
