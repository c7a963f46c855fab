"""Smoke test of benchmarks/bench_programs.py: the MonitoredTrainingSession +
SyncReplicasOptimizer program (with StopAtStepHook, CheckpointSaverHook and
SummarySaverHook) runs as written on a 1 ps + 3 worker LocalCluster-style set
of processes on one host and its workers step in the timed window
(``--quick --no_tf``: TensorFlow is never imported)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from helpers import ROOT


def test_sync_replicas_program_steps_in_the_window():
    r = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_programs.py"), "--quick",
         "--no_tf", "--shapes", "sync"],
        cwd=ROOT, env=dict(os.environ), capture_output=True, text=True, timeout=240,
        check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    row = next(line for line in r.stdout.splitlines()
               if line.startswith("MonitoredTrainingSession"))
    fields = [f.strip() for f in row.split("|")]
    assert re.fullmatch(r"\d+", fields[1]) and int(fields[1]) > 0, row
    assert fields[2:] == ["-", "-"], row  # no TF columns with --no_tf
