"""Queues and readers with no ``shared_name`` belong to one session, as TF's
(its kernels for them live per session): a new session on a server starts with
fresh, open queues, while variables stay shared. What a between-graph program
that opens ``MonitoredTrainingSession`` twice over a queue pipeline relies on
(before, the second pass found the first pass's closed queues and hung).

Oracles: TF 2.21 (``tf.compat.v1``) on the same programs: a second session
sees an empty queue and the first session's variable value; the 1 ps + 2
workers program does 50 steps per worker per pass (200 records, 2 epochs,
batches of 8) there; its epochs counter is shared on the ps, so how the epochs
split between workers depends on when each runs its local init."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT, free_port

import nbdist as nd

PROGRAM = Path(__file__).parent / "programs" / "queue_pipeline_ps.py"


def test_unshared_queue_and_reader_are_per_session_on_a_server():
    server = nd.train.Server.create_local_server()
    with nd.Graph().as_default():
        q = nd.FIFOQueue(10, nd.float32)
        shared = nd.FIFOQueue(10, nd.float32, shared_name="shared_q")
        v = nd.Variable(0.0)
        reader = nd.IdentityReader()
        names = nd.FIFOQueue(10, nd.string)
        fill = names.enqueue_many([["a", "b"]])
        key, _ = reader.read(names)
        first = nd.Session(server.target)
        first.run([q.enqueue(1.0), shared.enqueue(2.0), v.assign(3.0), fill])
        assert first.run(key) == b"a"
        first.run(q.close())
        second = nd.Session(server.target)
        assert second.run(q.size()) == 0  # its own queue, open
        second.run(q.enqueue(4.0))
        assert second.run(q.dequeue()) == 4.0
        assert second.run(shared.size()) == 1  # shared by name
        assert second.run(v) == 3.0  # variables are the task's
        second.run(names.enqueue_many([["c"]]))
        assert second.run(reader.num_records_produced()) == 0
        assert second.run(key) == b"c"
        assert first.run(q.size()) == 1  # its 1.0, untouched by the second session
        assert first.run(reader.num_records_produced()) == 1
        first.close()
        second.close()


def _records(path):
    with nd.python_io.TFRecordWriter(str(path)) as w:
        for i in range(200):
            feature = {
                "x": nd.train.Feature(bytes_list=nd.train.BytesList(
                    value=[np.arange(4, dtype=np.uint8).tobytes()])),
                "y": nd.train.Feature(int64_list=nd.train.Int64List(value=[i % 2]))}
            w.write(nd.train.Example(features=nd.train.Features(
                feature=feature)).SerializeToString())


@pytest.mark.slow
def test_queue_pipeline_between_graph_two_passes(tmp_path):
    data = tmp_path / "data.tfr"
    _records(data)
    spec = json.dumps({"ps": [f"127.0.0.1:{free_port()}"],
                       "worker": [f"127.0.0.1:{free_port()}" for _ in range(2)]})
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, str(PROGRAM), spec, job, str(i),
                               str(data)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
             for job, i in (("ps", 0), ("worker", 0), ("worker", 1))]
    try:
        outs = [p.communicate(timeout=150)[0] for p in procs[1:]]
        steps = []
        for p, out in zip(procs[1:], outs):
            assert p.returncode == 0, out
            lines = [line.split() for line in out.splitlines() if " steps " in line]
            assert [(w[0], w[1]) for w in lines] == [("pass", "0"), ("pass", "1")], out
            steps.append([int(w[3]) for w in lines])
        # Both passes end (before, the second hung on the first's closed queues).
        # The epochs counter is a local variable placed on the ps, so the two
        # workers share it as in TF: each reads whole epochs (25 batches), and
        # each pass reads at least the 2 epochs; TF's run gave 50 per worker.
        for per_pass in zip(*steps):
            assert all(n % 25 == 0 for n in per_pass), steps
            assert 50 <= sum(per_pass) <= 100, steps
    finally:
        for p in procs:
            if p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
            p.wait(10)
            p.stdout.close()
