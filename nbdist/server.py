"""``nbdist-server``: run one task of a cluster until SIGTERM or SIGINT.

As TensorFlow's ``grpc_tensorflow_server.py``::

    nbdist-server --cluster_spec=ps|localhost:2222,worker|localhost:2223 \\
                  --job_name=ps --task_index=0

or with no cluster flags, from ``TF_CONFIG`` (``cluster`` and ``task``), as
any launcher that sets it (e.g. a Kubeflow TFJob) expects. ``--bind`` picks
the interface (default 127.0.0.1; ``0.0.0.0`` for every interface). The
token and TLS files come from ``NBDIST_TOKEN`` and ``NBDIST_TLS_*``. Once
listening it prints one line::

    nbdist-server /job:ps/replica:0/task:0 listening on 127.0.0.1:2222 (pid 4242)

Also ``python -m nbdist.server``. Exit status: 0 after SIGTERM/SIGINT, 1 when
the server cannot start (one line on stderr), 2 for bad flags.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="nbdist-server", description="Runs one task of an nbdist cluster."
    )
    p.add_argument(
        "--cluster_spec",
        default="",
        help="JOB|HOST:PORT(;HOST:PORT)*(,JOB|...)*, e.g. "
        "'ps|h:2222,worker|h:2223;h:2224'; default: TF_CONFIG",
    )
    p.add_argument("--job_name", default="", help="this task's job")
    p.add_argument(
        "--task_index",
        "--task_id",
        dest="task_index",
        type=int,
        default=None,
        help="this task's index in its job",
    )
    p.add_argument(
        "--bind", default=None, help="interface to listen on (default 127.0.0.1)"
    )
    p.add_argument(
        "--num_cpus", type=int, default=1, help="CPU devices of this task (default 1)"
    )
    return p


def _cluster(args, parser):
    from nbdist.runtime.cluster_spec import ClusterSpec

    if args.cluster_spec:
        try:
            cluster = ClusterSpec.from_string(args.cluster_spec)
        except ValueError as e:
            parser.error(f"--cluster_spec: {e}")
        job, index = args.job_name, args.task_index
    else:
        from nbdist.cluster.resolvers import TFConfigClusterResolver

        try:
            resolver = TFConfigClusterResolver()
            cluster = resolver.cluster_spec()
            job = args.job_name or resolver.task_type
            index = args.task_index if args.task_index is not None else resolver.task_id
        except ValueError as e:
            parser.error(str(e))
        if not cluster:
            parser.error(
                "give --cluster_spec, --job_name and --task_index, or set TF_CONFIG"
            )
    if not job:
        parser.error("--job_name is required (or task.type in TF_CONFIG)")
    if index is None:
        index = 0
    if job not in cluster.jobs:
        parser.error(f"job {job!r} is not in the cluster (jobs: {cluster.jobs})")
    if index not in cluster.task_indices(job):
        parser.error(
            f"task {index} is not in job {job!r} (tasks: {cluster.task_indices(job)})"
        )
    return cluster, job, index


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    cluster, job, index = _cluster(args, parser)

    from nbdist import errors
    from nbdist.proto import config_pb2, server_def_pb2
    from nbdist.runtime.server_lib import Server

    server_def = server_def_pb2.ServerDef(
        cluster=cluster.as_cluster_def(),
        job_name=job,
        task_index=index,
        protocol="grpc",
        bind_address=args.bind or "",
    )
    server_def.default_session_config.CopyFrom(
        config_pb2.ConfigProto(device_count={"CPU": max(1, args.num_cpus)})
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        server = Server(server_def)
    except (errors.OpError, ValueError, OSError) as e:
        print(f"nbdist-server: {e}", file=sys.stderr, flush=True)
        return 1
    print(
        f"nbdist-server {server.task_name} listening on {server.bind_address} "
        f"(pid {os.getpid()})",
        flush=True,
    )
    while not stop.wait(0.5):
        pass
    server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
