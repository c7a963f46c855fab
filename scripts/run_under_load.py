#!/usr/bin/env python3
"""`run_under_load.py [pytest args]`: pytest beside two busy loops; its exit code."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPINNERS = 2


def _spin() -> None:
    while True:
        pass


def _stop(proc) -> None:
    if proc.pid is not None and proc.exitcode is None:
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.join(10)


def _exit_code(returncode: int) -> int:
    # Killed by signal N: exit 128 + N, as a shell reports it.
    return 128 - returncode if returncode < 0 else returncode


def main(argv: list[str]) -> int:
    # Spawned, not forked: the spinners share nothing with this process.
    ctx = multiprocessing.get_context("spawn")
    spinners = [ctx.Process(target=_spin, daemon=True) for _ in range(SPINNERS)]
    pytest = None

    def on_term(signum, frame):
        if pytest is not None and pytest.poll() is None:
            pytest.terminate()
        sys.exit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    try:
        for p in spinners:
            p.start()
        pids = ", ".join(str(p.pid) for p in spinners)
        print(f"run_under_load: {SPINNERS} busy loops, pids {pids}", flush=True)
        pytest = subprocess.Popen([sys.executable, "-m", "pytest", *argv], cwd=ROOT)
        return _exit_code(pytest.wait())
    except KeyboardInterrupt:
        # Ctrl-C reached pytest too (same process group): let it report, bounded.
        if pytest is None:
            return 130
        try:
            return _exit_code(pytest.wait(30))
        except subprocess.TimeoutExpired:
            pytest.kill()
            return _exit_code(pytest.wait())
    finally:
        for p in spinners:
            _stop(p)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
