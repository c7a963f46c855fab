"""A TF1 queue input pipeline trained between-graph on 1 ps + 2 workers, as real
processes (``programs/queue_pipeline_between_graph.py``): TFRecord file ->
``string_input_producer(num_epochs=2)`` -> ``TFRecordReader`` ->
``parse_single_example`` -> ``decode_raw`` -> ``train.batch`` with variables on
the ps, ``MonitoredTrainingSession`` opened twice per worker. Each pass must end
on both workers with the input's OutOfRange (before queues and readers were per
session, a second session found the first one's closed queues and one worker
hung).

Oracle: TF 2.21 on the same program: 50 steps per worker per pass (200
records, 2 epochs, batches of 8). The ``epochs`` counter is a local variable
that ``replica_device_setter`` places on the ps, so the workers share it (TF's
own log shows ``CountUpTo`` received from the ps) and each worker's local init
resets it: a worker reads whole epochs (a multiple of 25 batches), how many
depends on when each runs its init, and the cluster reads at least 2 epochs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT, free_port

import nbdist as nd

PROGRAM = Path(__file__).parent / "programs" / "queue_pipeline_between_graph.py"
DONE_WAIT_S = 180  # both passes of both workers, on a loaded machine


def _records(path):
    with nd.python_io.TFRecordWriter(str(path)) as w:
        for i in range(200):
            feature = {
                "x": nd.train.Feature(bytes_list=nd.train.BytesList(
                    value=[np.arange(4, dtype=np.uint8).tobytes()])),
                "y": nd.train.Feature(int64_list=nd.train.Int64List(value=[i % 2]))}
            w.write(nd.train.Example(features=nd.train.Features(
                feature=feature)).SerializeToString())


class _Output:
    """A process's stdout lines; ``done`` is set at its ``done`` line or EOF."""

    def __init__(self, proc):
        self.lines: list[str] = []
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._read, args=(proc,), daemon=True)
        self._thread.start()

    def _read(self, proc):
        for line in proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.strip() == "done":
                break
        self.done.set()


@pytest.mark.slow
def test_two_sessions_over_a_queue_pipeline_end_on_both_workers(tmp_path):
    data = tmp_path / "data.tfr"
    _records(data)
    spec = json.dumps({"ps": [f"127.0.0.1:{free_port()}"],
                       "worker": [f"127.0.0.1:{free_port()}" for _ in range(2)]})
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, str(PROGRAM), spec, job, str(i),
                               str(data)], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
             for job, i in (("ps", 0), ("worker", 0), ("worker", 1))]
    try:
        outs = [_Output(p) for p in procs[1:]]
        deadline = time.monotonic() + DONE_WAIT_S  # one budget for both workers
        ended = [o.done.wait(max(0.0, deadline - time.monotonic())) for o in outs]
        logs = ["\n".join(o.lines[-30:]) for o in outs]
        assert all(ended), logs
        steps = []
        for o, log in zip(outs, logs):
            assert o.lines and o.lines[-1] == "done", log
            passes = [line.split() for line in o.lines if line.startswith("pass ")]
            assert [w[1] for w in passes] == ["0", "1"], log
            steps.append([int(w[3]) for w in passes])
        # Whole epochs only (no batch lost at the end of the input), and the
        # cluster read the 2 epochs at least once.
        assert all(n % 25 == 0 for per_worker in steps for n in per_worker), steps
        assert sum(map(sum, steps)) >= 50, steps
    finally:
        for p in procs[1:]:
            if p.poll() is None:
                p.stdin.close()  # lets a finished worker exit
        for p in procs:
            try:
                p.wait(10 if p is not procs[0] else 0.1)
            except subprocess.TimeoutExpired:
                os.kill(p.pid, signal.SIGKILL)
                p.wait(10)
            p.stdout.close()
            if not p.stdin.closed:
                p.stdin.close()
