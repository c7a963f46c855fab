"""``%cluster connect`` and ``%cluster start --slurm`` from the magics'
arguments. The cluster side (``AttachedCluster``, naming a cluster by a spec,
``TF_CONFIG`` or a SLURM job, checking that its tasks answer) lives in
``nbdist.cluster.attached``; this module reads the arguments and turns
failures into one line for the notebook.
"""

from __future__ import annotations

import re

from nbdist.cluster.attached import (
    CONNECT_TIMEOUT_S,
    SPEC_FORMS,
    AttachedCluster,
    ConnectError,
    connect,
    first_line,
    spec_from_slurm_job,
    spec_from_tf_config,
    spec_from_value,
)

__all__ = [
    "ConnectError",
    "SlurmStartError",
    "connect_from_args",
    "start_slurm",
    "take_tf_config",
]


# -- the magics' arguments --------------------------------------------------------
_QUOTED_TF_CONFIG = re.compile(r"--tf_config(?:=|\s+)(['\"])(.*?)\1(?=\s|$)")


def take_tf_config(line: str) -> tuple[str, str | None]:
    """(``line`` with a quoted ``--tf_config='{json}'`` made a bare
    ``--tf_config``, the JSON): IPython's argument splitting keeps quotes and
    splits inside them."""
    m = _QUOTED_TF_CONFIG.search(line)
    if m is None:
        return line, None
    return line[: m.start()] + "--tf_config" + line[m.end() :], m.group(2)


def connect_from_args(args, namespace: dict) -> tuple[AttachedCluster, list[str]]:
    """``%cluster connect``'s arguments -> ``connect(...)``'s result."""
    given = [x for x in (args.args, args.tf_config, args.slurm) if x]
    if len(given) != 1:
        raise ConnectError(f"%cluster connect needs one cluster: {SPEC_FORMS}")
    if (args.ps is not None or args.workers is not None) and not args.slurm:
        raise ConnectError("--ps and --workers are for %cluster connect --slurm JOBID")
    if args.slurm is True:
        raise ConnectError("%cluster connect --slurm needs the job id: --slurm JOBID")
    if args.slurm:
        jobs = {j: n for j, n in (("ps", args.ps), ("worker", args.workers)) if n}
        spec, source = spec_from_slurm_job(args.slurm, jobs)
        timeout = CONNECT_TIMEOUT_S if args.timeout is None else args.timeout
        if timeout <= 0:
            raise ConnectError("--timeout must be a positive number of seconds")
        cluster, silent = connect(spec, source, timeout)
        cluster.slurm_job = str(args.slurm)
        return cluster, silent
    elif args.tf_config:
        text = None if args.tf_config is True else args.tf_config
        spec, source = spec_from_tf_config(text)
    else:
        spec, source = spec_from_value(" ".join(args.args), namespace)
    timeout = CONNECT_TIMEOUT_S if args.timeout is None else args.timeout
    if timeout <= 0:
        raise ConnectError("--timeout must be a positive number of seconds")
    return connect(spec, source, timeout)


class SlurmStartError(RuntimeError):
    """A SLURM job that did not start; its message has the job's state and the
    tail of its log (several lines)."""


def start_slurm(args):
    """``%cluster start --slurm ...`` -> (the ``SlurmCluster``, its session
    target)."""
    if args.slurm is not True:
        raise ConnectError(
            f"%cluster start --slurm takes no job id (got '{args.slurm}'): "
            f"%cluster connect --slurm {args.slurm} attaches to a running job"
        )
    if args.chief or args.evaluator:
        raise ConnectError("--chief and --evaluator are not for --slurm")
    try:
        from nbdist.cluster.slurm_cluster import SlurmCluster
    except ImportError as e:
        raise ConnectError(f"SlurmCluster is not available: {first_line(e)}") from None
    ps = 1 if args.ps is None else args.ps
    workers = 2 if args.workers is None else args.workers
    try:
        cluster = SlurmCluster(
            ps=ps, workers=workers, partition=args.partition, time=args.time
        )
    except (ValueError, TypeError) as e:  # bad arguments: one line
        raise ConnectError(first_line(e)) from None
    except Exception as e:  # noqa: BLE001 - the job failed: its state and log
        raise SlurmStartError(str(e) or type(e).__name__) from None
    job = "worker" if workers else cluster.cluster_spec.jobs[0]
    return cluster, cluster.target(job, 0)
