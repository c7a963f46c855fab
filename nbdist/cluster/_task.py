"""Entry point of a ``LocalCluster`` task: ``nbdist-server`` that dies with its parent.

``python -m nbdist.cluster._task --parent_pid=P <nbdist-server flags>``

Once the server listens, a background thread loads the op definitions and
kernels (what the first ``RegisterGraph`` would otherwise load, about 0.1 s
of CPU), so that it overlaps with the client's own start-up instead of
delaying the first step.
"""

from __future__ import annotations

import os
import sys
import threading
import time

_WARM_UP_WAIT_SECS = 30.0


def _watch_parent(parent_pid: int):
    # Reparenting (to init or a subreaper) means the parent died, even by SIGKILL;
    # nothing portable notifies a child of that, so it polls.
    while True:
        if os.getppid() != parent_pid:
            os._exit(0)
        time.sleep(0.25)


class _BannerWatch:
    """Wraps stdout; sets ``listening`` when the server prints its banner."""

    def __init__(self, stream, listening: threading.Event):
        self._stream = stream
        self._listening = listening

    def write(self, text):
        n = self._stream.write(text)
        if " listening on " in text:
            self._listening.set()
        return n

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _warm_up(listening: threading.Event):
    listening.wait(_WARM_UP_WAIT_SECS)
    try:
        from nbdist.executor.kernel import get_kernel_factory
        from nbdist.framework import op_library

        op_library.load_all()
        get_kernel_factory("NoOp")
    except Exception:  # noqa: BLE001, S110 - the first RegisterGraph loads them
        pass


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parent = None
    rest = []
    for a in argv:
        if a.startswith("--parent_pid="):
            parent = int(a.split("=", 1)[1])
        else:
            rest.append(a)
    if parent is not None:
        if os.getppid() != parent:
            return 0
        threading.Thread(target=_watch_parent, args=(parent,), daemon=True,
                         name="nbdist-parent-watch").start()
    listening = threading.Event()
    if sys.stdout is not None:
        sys.stdout = _BannerWatch(sys.stdout, listening)
    threading.Thread(target=_warm_up, args=(listening,), daemon=True,
                     name="nbdist-warm-up").start()
    from nbdist.server import main as server_main

    return server_main(rest)


if __name__ == "__main__":
    sys.exit(main())
