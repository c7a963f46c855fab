"""``nbdist-server``: run one task of a cluster until SIGTERM or SIGINT.

As TensorFlow's ``grpc_tensorflow_server.py``::

    nbdist-server --cluster_spec=ps|localhost:2222,worker|localhost:2223 \\
                  --job_name=ps --task_index=0

or with no cluster flags, from ``TF_CONFIG`` (``cluster`` and ``task``), as
any launcher that sets it (e.g. a Kubeflow TFJob) expects. ``--bind`` picks
the interface (default 127.0.0.1; ``0.0.0.0`` for every interface).
``--max_request_bytes``, ``--max_tensor_bytes`` and the other fields of
``ConfigProto.server_limits`` bound what one request may cost (bytes; see
``nbdist.executor.limits``). The token and TLS files come from
``NBDIST_TOKEN`` and ``NBDIST_TLS_*``. Once listening it prints one line::

    nbdist-server /job:ps/replica:0/task:0 listening on 127.0.0.1:2222 (pid 4242)

Also ``python -m nbdist.server``. SIGTERM or SIGINT stops the server: its
running steps are cancelled and the process exits 0 within 5 s, without
waiting for a kernel that ignores cancellation; a second signal exits at once
with status 128 + the signal's number. Exit status: 0 after SIGTERM/SIGINT, 1
when the server cannot start (one line on stderr) or its stop got stuck in a
kernel holding the interpreter (every thread's traceback on stderr), 2 for bad
flags.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import sys
import threading
import time

__all__ = ["main"]

_STOP_BOUND_S = 3.5  # SIGTERM to exit, at most (the promise is 5 s)
_SIGNAL_POLL_S = 0.1  # how soon the main thread sees a signal another thread got
_STOP_GRACE_S = 2.5  # for calls in flight to end once their steps are cancelled

# What one request may cost this server (ConfigProto.server_limits, bytes).
_LIMITS = (
    "max_request_bytes",
    "max_tensor_bytes",
    "max_graph_constant_bytes",
    "max_pushed_bytes_per_client",
    "max_pushed_bytes",
    "max_parked_bytes",
    "max_key_value_bytes",
)


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
        "--bind", default=None, help="interface to listen on (default 127.0.0.1); "
        "beyond loopback a token (NBDIST_TOKEN) is required"
    )
    p.add_argument(
        "--allow_insecure_bind", action="store_true",
        help="listen beyond loopback without a token (anyone who reaches the port "
        "can run any op, read any variable and shut the task down)",
    )
    p.add_argument(
        "--num_cpus", type=int, default=1, help="CPU devices of this task (default 1)"
    )
    p.add_argument(
        "--num_gpus", type=int, default=0,
        help="virtual GPU devices of this task, run on the CPU (default 0)",
    )
    for name in _LIMITS:
        p.add_argument(
            f"--{name}", type=int, default=0, metavar="BYTES",
            help=f"ConfigProto.server_limits.{name} (0: the default)",
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


def _on_signals() -> threading.Event:
    """The first SIGTERM/SIGINT sets the event; a second one exits at once."""
    stop = threading.Event()

    def handle(signum, frame):
        if stop.is_set():
            os._exit(128 + signum)
        stop.set()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    return stop


def _stop_and_exit(server):
    """Stops ``server`` (its running steps are cancelled) and exits 0 within
    ``_STOP_BOUND_S``, even when a kernel ignores cancellation: the threads
    still running then are not waited for."""
    # A watchdog that needs no GIL, for a kernel that holds it: exit 1 with
    # every thread's traceback on stderr.
    faulthandler.dump_traceback_later(_STOP_BOUND_S + 0.8, exit=True)
    print(f"nbdist-server {server.task_name} stopping (a second signal exits at "
          "once)", flush=True)
    stopper = threading.Thread(target=server.stop, args=(_STOP_GRACE_S,),
                               name="nbdist-stop", daemon=True)
    stopper.start()
    bound = time.monotonic() + _STOP_BOUND_S
    while stopper.is_alive() and time.monotonic() < bound:
        stopper.join(_SIGNAL_POLL_S)  # in slices: a second signal acts at once
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _loopback(host: str) -> bool:
    import ipaddress

    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve beyond this machine


def _insecure_bind(args) -> str | None:
    """The refusal to print when ``--bind`` reaches beyond loopback without a
    token (a loud warning, and None, with ``--allow_insecure_bind``)."""
    from nbdist.runtime import env

    if not args.bind or _loopback(args.bind) or env.token():
        return None
    message = (f"listening on {args.bind} without a token: anyone who can reach "
               "this port can run any op, read every variable and stop the task. "
               "Set NBDIST_TOKEN (the same on every task and client), and TLS "
               "(NBDIST_TLS_*) on untrusted networks")
    if args.allow_insecure_bind:
        print(f"nbdist-server: WARNING: {message}.", file=sys.stderr, flush=True)
        return None
    return f"nbdist-server: refusing to start: {message}; or pass " \
           "--allow_insecure_bind."


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
        config_pb2.ConfigProto(device_count={"CPU": max(1, args.num_cpus),
                                             "GPU": max(0, args.num_gpus)})
    )
    for name in _LIMITS:
        if getattr(args, name) < 0:
            parser.error(f"--{name} must be a positive number of bytes")
        setattr(server_def.default_session_config.server_limits, name,
                getattr(args, name))
    refusal = _insecure_bind(args)
    if refusal:
        print(refusal, file=sys.stderr, flush=True)
        return 2
    stop = _on_signals()
    try:
        server = Server(server_def)
    except (errors.OpError, ValueError, OSError) as e:
        print(f"nbdist-server: {e}", file=sys.stderr, flush=True)
        return 1
    from nbdist.runtime.tap_record import switch_for

    # TrafficView's records: on with NBDIST_TAP_EVENTS=1, switched while the
    # cluster runs by "tap_control" events (%cluster traffic on|off).
    tap_publisher = switch_for(server)
    print(
        f"nbdist-server {server.task_name} listening on {server.bind_address} "
        f"(pid {os.getpid()})",
        flush=True,
    )
    # In slices: the kernel may hand a signal to any thread (grpc has many),
    # and Python runs its handler only when the main thread next wakes.
    while not stop.wait(_SIGNAL_POLL_S):
        pass
    if tap_publisher is not None:
        tap_publisher.close()
    _stop_and_exit(server)


if __name__ == "__main__":
    sys.exit(main())
