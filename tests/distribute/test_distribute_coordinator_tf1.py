"""``run_distribute_coordinator``'s worker contexts as TensorFlow's
distribute_coordinator_test.py defines them: (task, master_target,
num_workers, is_chief, distributed_mode) for between-graph, in-graph, local
and evaluator tasks of a STANDALONE_CLIENT, with in-process servers as the
workers (chief and evaluator addresses are never dialled).
"""

from __future__ import annotations

import threading

import pytest

import nbdist as nd
from nbdist.distribute.strategies import distribute_coordinator as dc
from nbdist.distribute.strategies.distribute_coordinator_context import (
    get_current_worker_context,
)


class Extended:
    def __init__(self, between_graph):
        self.experimental_between_graph = between_graph
        self.experimental_should_init = None
        self.should_checkpoint = None
        self.should_save_summary = None


class MockStrategy:
    """Configured per task: the first worker (or the chief) initialises,
    checkpoints and writes summaries."""

    def __init__(self, between_graph=False):
        self.extended = Extended(between_graph)

    def configure(self, session_config=None, cluster_spec=None, task_type=None,
                  task_id=None):
        first = task_type in (None, "chief") or task_id == 0
        if cluster_spec and "chief" in cluster_spec.jobs:
            first = task_type in (None, "chief")
        self.extended.experimental_should_init = first
        self.extended.should_checkpoint = first
        self.extended.should_save_summary = first


@pytest.fixture(scope="module")
def workers():
    servers = [nd.Server.create_local_server() for _ in range(3)]
    yield [s.target.replace("grpc://", "") for s in servers]
    for s in servers:
        s.stop()


def dump_contexts(strategy_factory, cluster_spec, **kwargs):
    got, lock = {}, threading.Lock()

    def worker_fn(strategy):
        ctx = get_current_worker_context()
        with lock:
            got.setdefault(str(ctx.task_type), []).append(
                (ctx.task_id, ctx.master_target, ctx.num_workers, ctx.is_chief,
                 ctx.distributed_mode))

    dc.run_distribute_coordinator(worker_fn, strategy_factory(),
                                  cluster_spec=cluster_spec, **kwargs)
    return {k: sorted(v, key=lambda c: c[0] or 0) for k, v in got.items()}


def test_in_graph_with_an_evaluator_evaluates_locally(workers):
    cluster = {"worker": workers, "evaluator": ["fake_evaluator:1"]}
    got = dump_contexts(MockStrategy, cluster, rpc_layer=None)
    assert got == {"None": [(None, workers[0], 3, True, True)],
                   "evaluator": [(0, "", 3, True, False)]}


def test_between_graph_with_a_chief(workers):
    cluster = {"worker": workers, "chief": ["fake_chief:1"]}
    got = dump_contexts(lambda: MockStrategy(between_graph=True), cluster,
                        rpc_layer="grpc")
    assert got["chief"] == [(0, "grpc://fake_chief:1", 4, True, True)]
    assert got["worker"] == [(i, "grpc://" + w, 4, False, True)
                             for i, w in enumerate(workers)]


def test_between_graph_evaluator_gets_the_eval_strategy_unconfigured(workers):
    cluster = {"worker": workers[:1], "evaluator": ["fake_evaluator:1"]}
    seen = []

    def eval_fn(strategy):
        ctx = get_current_worker_context()
        seen.append((strategy, ctx.task_type, ctx.master_target, ctx.is_chief,
                     ctx.has_barrier))
        ctx.wait_for_other_workers()  # no barrier: returns at once

    dc.run_distribute_coordinator(lambda s: None, MockStrategy(between_graph=True),
                                  eval_fn=eval_fn, cluster_spec=cluster)
    assert seen == [(None, "evaluator", "", True, False)]


def test_local_context_without_a_cluster():
    assert dump_contexts(MockStrategy, None) == {"None": [(None, "", 0, True, False)]}
