"""``%cluster slow/partition/heal``: the magic's side of
``notebook.fault_control`` (through the live ``ClusterView`` when there is
one, so that each fault shows in its history)."""

from __future__ import annotations

from IPython.core.error import UsageError

from nbdist.notebook import fault_control

__all__ = ["heal", "partition", "slow"]


def _cluster(magics):
    if magics.running is None:
        raise UsageError("no cluster is running: start one with %cluster start")
    return magics.running


def slow(magics, args) -> None:
    """``%cluster slow TASK [PEER] DELAY``."""
    if len(args) not in (2, 3):
        raise UsageError("%cluster slow needs a task and a delay, e.g. %cluster slow "
                         "worker:1 20ms (or a link: %cluster slow worker:1 ps:0 5ms)")
    task, peer, delay = (args[0], None, args[1]) if len(args) == 2 else args
    view, cluster = magics.view, _cluster(magics)
    if view is not None:
        print(view.slow(task, delay, peer))
    else:
        print(fault_control.slow(cluster, task, delay, peer))


def partition(magics, args) -> None:
    """``%cluster partition TASK PEER``."""
    if len(args) != 2:
        raise UsageError("%cluster partition needs two tasks, e.g. %cluster "
                         "partition worker:1 ps:0")
    view, cluster = magics.view, _cluster(magics)
    if view is not None:
        print(view.partition(*args))
    else:
        print(fault_control.partition(cluster, *args))


def heal(magics, args) -> None:
    """``%cluster heal``."""
    if args:
        raise UsageError(f"%cluster heal takes no argument; got '{' '.join(args)}'")
    view, cluster = magics.view, _cluster(magics)
    print(view.heal() if view is not None else fault_control.heal(cluster))
