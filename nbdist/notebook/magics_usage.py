"""How ``%cluster`` commands say no: one line (``UsageError``), never a
traceback. Shared by the verb modules (``magics_start``, ``magics_status``,
``magics_run``)."""

from __future__ import annotations

from IPython.core.error import UsageError

__all__ = ["need_cluster", "no_args", "one_line", "task_arg"]


def one_line(e: BaseException) -> str:
    """The first line of ``e``'s message (its type's name when it has none)."""
    text = str(e).strip() or type(e).__name__
    return text.splitlines()[0]


def need_cluster(magics):
    """The running cluster of ``magics``; a UsageError when there is none."""
    if magics.running is None:
        raise UsageError(
            "no cluster is running: start one with %cluster start or %cluster local"
        )
    return magics.running


def no_args(args, command):
    """A UsageError when ``%cluster command`` was given positional arguments."""
    if args.args:
        raise UsageError(
            f"%cluster {command} takes no task or expression; got "
            f"'{' '.join(args.args)}'"
        )


def task_arg(args, command) -> str:
    """The one task ``%cluster command`` names (``worker:1``)."""
    if len(args.args) != 1:
        raise UsageError(
            f"%cluster {command} needs one task, e.g. %cluster {command} worker:1"
        )
    return args.args[0]
