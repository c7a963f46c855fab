"""TF1 program shapes side by side with TensorFlow. Run on demand:

    python benchmarks/bench_programs.py --tf_python /work/tfvenv/bin/python
    python benchmarks/bench_programs.py --quick --no_tf --shapes supervisor
    python benchmarks/bench_programs.py --hosts netns ...   # root: 3 netns hosts

Prints ONE table: global steps/s of nbdist and of TensorFlow
(``tensorflow.compat.v1``, eager off, run by ``--tf_python``) and their
ratio, for each program shape:

- ``trainer``: the classic between-graph ``trainer.py`` of
  ``bench_training.py`` (feed_dict, ``replica_device_setter``; 1 ps + 2
  workers), reused as it is;
- ``supervisor``: a ``tf.train.Supervisor`` program (1 ps + 3 workers) that
  fetches a merged summary (``tf.summary.merge_all()``: three scalars and a
  histogram), the global step and the train op every step and writes the
  summary every step (the chief with ``sv.summary_computed``, the others with
  their own ``FileWriter.add_summary``);
- ``sync``: a ``MonitoredTrainingSession`` program (1 ps + 3 workers) with a
  ``SyncReplicasOptimizer`` (3 replicas to aggregate) and the hooks
  ``StopAtStepHook``, ``CheckpointSaverHook`` (every 500 steps) and
  ``SummarySaverHook`` (every 100 steps) on the chief.

- ``queue``: a Supervisor program (1 ps + 2 workers) reading two TFRecord
  files through TF1's queue pipeline (``string_input_producer`` ->
  ``TFRecordReader`` -> ``parse_single_example`` -> ``decode_raw`` ->
  ``shuffle_batch``, 2 threads; queue runners started by the Supervisor);
- ``summaries``: the ``supervisor`` program (1 ps + 3 workers) with two
  scalars, every worker (the chief too) writing them each step with its own
  ``FileWriter.add_summary``;
- ``embedding``: a Supervisor program (1 ps + 2 workers) reading one Example
  per shard file through ``WholeFileReader`` queues, ``parse_single_example``
  with two ``VarLenFeature``s padded by ``sparse_to_dense``, into
  ``shuffle_batch`` (2 threads), averaging ``embedding_lookup``s of two
  embedding variables on the ps (Adagrad: sparse updates there);
- ``dataset``: a ``MonitoredTrainingSession`` program (1 ps + 2 workers)
  whose input is ``tf.data``: ``TFRecordDataset`` -> ``map(parse)`` ->
  ``shuffle`` -> ``batch`` -> ``repeat``, ``make_one_shot_iterator``.

Each program is written once (in ``_program_shapes.py``; the trainer in
``bench_training.py``) and run with ``tf`` bound to ``nbdist`` or
to ``tensorflow.compat.v1``: the "replace ``tf.`` by ``nd.``" promise.

Hosts: ``--hosts local`` (default) runs every task on 127.0.0.1;
``--hosts netns`` (Linux, root) runs them on three network-namespace hosts
joined by a bridge (``tests/netns.py``; task k on host k mod 3), all of
which is removed at exit. There nbdist's tasks are told to listen on their
host's address (``BENCH_BIND``): nbdist's ``Server`` listens on 127.0.0.1
unless its ``ServerDef.bind_address`` says otherwise, where TF's listens on
every interface, and TF1's ``Server(cluster, job_name, task_index)`` has no
argument for it.

Measurement as ``bench_training.py`` (``_cluster_tasks``): after every worker
warmed up, a window of ``--seconds`` is timed and each worker counts the
steps it finished inside it; their sum is the global steps (divided by the
replicas to aggregate for ``sync``, whose global step moves once per three
worker steps). The frameworks alternate, ``--repeats`` rounds, medians shown.
``--whole_run STEPS`` times whole runs instead, as a user times a program:
from starting the processes to the exit of the last worker (imports, server
and session start-up included; ``sync``: to the last worker's end of its
steps, as its workers step on for the others still stepping), each worker
running STEPS steps; it prints
each worker's steps/s while stepping and the CPU seconds of every task per
step (``RUSAGE_CHILDREN``: start-up included; steadier than wall time on a
shared machine). Its tasks run in the caller's environment (no
``OMP_NUM_THREADS=1``), as a program started by hand does. ``--quick`` is one
short round: about 10-15 s per shape without TF; each TF
run adds TF's import (8 s per process on an idle 2-core machine, 30-40 s for
four processes at once on a loaded one). ``--profile DIR`` writes each
worker's cProfile table of 200 steps.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _children import free_port, importable, load_note, print_table
from _cluster_tasks import Task, time_window
from _program_shapes import INPUT_FILES, N_WORKERS, child

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
START_TIMEOUT_S = 150.0
SHAPES = {
    "trainer": ("trainer.py (feed_dict, replica_device_setter)", 2),
    "supervisor": ("Supervisor + merged summary every step", N_WORKERS),
    "sync": ("MonitoredTrainingSession + SyncReplicas + hooks", N_WORKERS),
    "queue": ("Supervisor + TFRecord queue pipeline", 2),
    "summaries": ("Supervisor, every worker writes 2 scalars", N_WORKERS),
    "embedding": ("Supervisor + WholeFileReader queues + ps embeddings", 2),
    "dataset": ("MonitoredTrainingSession + tf.data TFRecordDataset", 2),
}
FRAMEWORKS = ("nbdist", "tf")
# whole runs whose workers step on after their steps (synchronous replicas
# wait for each other's gradients): timed to the last worker's "done"
STEP_ON = ("sync",)


# -- the parent ----------------------------------------------------------------------------
# BLAS one thread per process in the timed-window mode, as bench_training; the
# whole-run mode runs the programs in the environment a user has.
BLAS_ONE_THREAD = {var: "1" for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                                        "MKL_NUM_THREADS")}


def child_env(extra: dict) -> dict:
    return dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2", **extra)


def start_tasks(shape, framework, python, hosts, warmup, env_extra, tasks):
    """Start the ps and the workers of ``shape`` (appended to ``tasks``), wait
    for the ps and the chief's session and release the other workers; the
    workers and the log directory."""
    n_workers = SHAPES[shape][1]
    place = [hosts[k % len(hosts)] for k in range(1 + n_workers)]
    cluster = {"ps": [f"{place[0][0]}:{free_port()}"],
               "worker": [f"{a}:{free_port()}" for a, _ in place[1:]]}
    if FIREWALLED:
        allow_ports(cluster)
    logdir = tempfile.mkdtemp(prefix=f"bench_{shape}_{framework}_")
    if shape in INPUT_FILES:
        INPUT_FILES[shape](logdir)

    def task(k, job, index):
        cmd = [__file__, "--child", shape, framework, json.dumps(cluster), job,
               str(index), logdir, str(warmup)]
        env = child_env(env_extra)
        if "BENCH_PROFILE" in env:  # one directory per shape
            env["BENCH_PROFILE"] = os.path.join(env["BENCH_PROFILE"], shape)
            os.makedirs(env["BENCH_PROFILE"], exist_ok=True)
        if place[k][1]:  # a netns host: listen on its address (see child)
            env["BENCH_BIND"] = place[k][0]
        return Task(f"{job}{index}", [*place[k][1], python, *cmd], env, cwd=ROOT)

    deadline = time.monotonic() + START_TIMEOUT_S
    tasks.append(task(0, "ps", 0))
    workers = [task(1 + i, "worker", i) for i in range(n_workers)]
    tasks += workers
    tasks[0].expect("ready", deadline)
    if shape != "trainer":  # see wait_for_go
        workers[0].expect("session", deadline)
        for w in workers[1:]:
            w.expect("built", deadline)
            w.proc.stdin.write("go\n")
            w.proc.stdin.flush()
    return workers, logdir, deadline


def run_once(shape, framework, python, hosts, seconds, warmup):
    """Global steps/s of one run; ``hosts`` is a list of (address, command
    prefix) and task k (the ps first, then the workers) runs on host k mod n."""
    tasks: list[Task] = []
    logdir = None
    try:
        workers, logdir, deadline = start_tasks(shape, framework, python, hosts,
                                                warmup, BLAS_ONE_THREAD, tasks)
        reports, _ = time_window(workers, {t.name: t.pid for t in tasks}, seconds,
                                 deadline)
        for w, r in zip(workers, reports):
            if shape == "trainer" and not float(r[3]) < float(r[2]):  # "n loss l0 l1"
                raise RuntimeError(f"{w.name}: loss went {r[2]} -> {r[3]}")
        steps = sum(int(r[0]) for r in reports)
        if shape == "sync":
            steps /= N_WORKERS
        if not steps:
            raise RuntimeError(f"{framework} {shape}: no step inside the window")
        return steps / seconds
    finally:
        for t in reversed(tasks):
            t.stop()
        if logdir:
            shutil.rmtree(logdir, ignore_errors=True)


def run_whole(shape, framework, python, hosts, steps):
    """One whole run as a user times a program: from starting the processes to
    the exit of the last worker (the ps, which never exits, is stopped then),
    each worker running ``steps`` steps. (wall s, every worker's steps/s while
    it stepped, CPU s of every task over the run, start-up included)."""
    tasks: list[Task] = []
    logdir = None
    cpu0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    try:
        env = {"BENCH_STEPS": str(steps)}
        if shape in STEP_ON:
            env["BENCH_STEP_ON"] = "1"
        workers, logdir, deadline = start_tasks(
            shape, framework, python, hosts, 0.0, env, tasks)
        deadline += 30 * steps / 100  # start-up, then at least 100 steps / 30 s
        rates = [float(w.expect("done", deadline)[0]) for w in workers]
        t_done = time.monotonic()
        if shape not in STEP_ON:
            for w in workers:
                w.proc.wait(max(1.0, deadline - time.monotonic()))
        wall = time.monotonic() - t0
        print(f"  (start-up and steps {t_done - t0:.1f} s, exits "
              f"{wall - (t_done - t0):.1f} s)", file=sys.stderr, flush=True)
    finally:
        for t in reversed(tasks):
            t.stop()
        if logdir:
            shutil.rmtree(logdir, ignore_errors=True)
    cpu1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    return wall, rates, cpu


def use_single_port() -> None:
    """Each task listens on one TCP port, its gRPC port, and serves the TCP
    peer path there too (``NBDIST_SINGLE_PORT=1``; for tasks on one host too,
    the same-host path off): the children inherit the environment; TF ignores
    it."""
    os.environ.update(NBDIST_SINGLE_PORT="1", NBDIST_SAME_HOST="0",
                      NBDIST_PEER_TCP="always")


# The netns hosts' firewalls (``--single_port --hosts netns``): the host names,
# each dropping new inbound TCP connections but to the cluster ports of the runs.
FIREWALLED: list[str] = []
_FW = ("inet", "nbdist_single_port")


def _nft(host: str, *args: str) -> str:
    import subprocess

    return subprocess.run(["ip", "netns", "exec", host, "nft", *args], check=True,
                          capture_output=True, text=True, timeout=30).stdout


def firewall(hosts) -> None:
    """In each netns host (``tests/netns.Host``): new inbound TCP connections are
    dropped (and counted) unless to a port ``allow_ports`` named: a task's gRPC
    port. Replies to the host's own connections pass (connection tracking)."""
    for h in hosts:
        _nft(h.name, "add", "table", *_FW)
        _nft(h.name, "add", "set", *_FW, "ports", "{ type inet_service; }")
        _nft(h.name, "add", "chain", *_FW, "input",
             "{ type filter hook input priority 0; policy accept; }")
        for rule in ("ct state established,related accept",
                     "tcp dport @ports accept",
                     "meta l4proto tcp counter drop"):
            _nft(h.name, "add", "rule", *_FW, "input", "iifname", "eth0",
                 *rule.split())
        FIREWALLED.append(h.name)


def allow_ports(cluster: dict) -> None:
    """Opens the cluster's task ports in every firewalled host."""
    ports = sorted({int(a.rpartition(":")[2]) for tasks in cluster.values()
                    for a in tasks})
    for host in FIREWALLED:
        _nft(host, "add", "element", *_FW, "ports",
             "{ " + ", ".join(map(str, ports)) + " }")


def dropped() -> dict[str, str]:
    """Each firewalled host's count of dropped connection attempts."""
    out = {}
    for host in FIREWALLED:
        text = _nft(host, "list", "chain", *_FW, "input")
        out[host] = " ".join(w for w in text.split("counter", 1)[1].split()[:4])
    return out


def use_tls(directory: str, addresses) -> None:
    """nbdist's tasks use TLS (gRPC and the TCP peer path): ``NBDIST_TLS_*``
    naming a throwaway CA's certificate for ``addresses``, written to
    ``directory``; the children inherit it, TF ignores it (it has no TLS)."""
    from bench_samehost_tls import write_pki

    os.environ.update(write_pki(directory, addresses))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=5.0, help="timed window per run")
    p.add_argument("--warmup", type=float, default=2.0, help="seconds before it")
    p.add_argument("--repeats", type=int, default=3, help="runs per framework/shape")
    p.add_argument("--quick", action="store_true", help="one short round")
    p.add_argument("--shapes", default=",".join(SHAPES), help="subset of "
                   + ",".join(SHAPES))
    p.add_argument("--hosts", default="local", choices=("local", "netns"))
    p.add_argument("--tf_python", default=sys.executable,
                   help="the Python that imports tensorflow")
    p.add_argument("--no_tf", action="store_true", help="nbdist only")
    p.add_argument("--single_port", action="store_true", help="nbdist's tasks "
                   "listen on one TCP port each, their gRPC port, the TCP peer "
                   "path served there too (a firewall, one Service port per task)")
    p.add_argument("--tls", action="store_true", help="nbdist with TLS (its "
                   "certificates made on the fly), TF in plaintext (it has none)")
    p.add_argument("--profile", metavar="DIR", help="write each "
                   "worker's cProfile table of steps 50-249 to DIR/<shape>/worker<i>.txt "
                   "(use a --seconds long enough for 250 steps)")
    p.add_argument("--whole_run", type=int, metavar="STEPS", help="the whole-run "
                   "mode: each worker runs STEPS steps; wall time from start to "
                   "the last worker's exit, each worker's steps/s, CPU per step")
    args = p.parse_args(argv)
    if args.profile:
        os.makedirs(args.profile, exist_ok=True)
        os.environ["BENCH_PROFILE"] = os.path.abspath(args.profile)  # children
    if args.quick:
        args.seconds, args.warmup, args.repeats = 1.5, 0.5, 1
    if args.single_port:
        use_single_port()
    shapes = [s for s in args.shapes.split(",") if s]
    if bad := [s for s in shapes if s not in SHAPES]:
        p.error(f"unknown shapes {bad}: expected some of {list(SHAPES)}")
    frameworks = {"nbdist": sys.executable}
    if not args.no_tf and importable(args.tf_python, "tensorflow"):
        frameworks["tf"] = args.tf_python
    elif not args.no_tf:
        print(f"(no TF column: {args.tf_python} does not import tensorflow; "
              "--tf_python names one that does)")

    with contextlib.ExitStack() as stack:
        if args.hosts == "netns":
            sys.path.insert(0, str(ROOT / "tests"))
            import netns

            if reason := netns.unavailable():
                p.error(reason)
            if args.single_port and not shutil.which("nft"):
                p.error("--single_port --hosts netns firewalls the hosts with "
                        "nftables: apt-get install nftables")
            made = stack.enter_context(netns.Hosts(3))
            if args.single_port:
                firewall(made)
            hosts = [(h.address, ["ip", "netns", "exec", h.name]) for h in made]
        else:
            hosts = [("127.0.0.1", [])]
        if args.tls:
            use_tls(stack.enter_context(tempfile.TemporaryDirectory()),
                    [a for a, _ in hosts])
        load0 = os.getloadavg()[0]
        if args.whole_run:
            return whole_run_table(shapes, frameworks, hosts, args, load0)
        rates: dict = {}
        failures: dict = {}  # (framework, shape) -> runs that failed
        for shape in shapes:
            for _ in range(args.repeats):
                for fw, python in frameworks.items():
                    t_run = time.monotonic()
                    try:
                        rate = run_once(shape, fw, python, hosts, args.seconds,
                                        args.warmup)
                    except (RuntimeError, BrokenPipeError) as e:  # (a worker
                        # that died mid-window) the other runs still count
                        print(f"  {shape} {fw}: failed: {e!r}", file=sys.stderr,
                              flush=True)
                        failures[(fw, shape)] = failures.get((fw, shape), 0) + 1
                        continue
                    print(f"  {shape} {fw}: {rate:.0f} steps/s "
                          f"(run took {time.monotonic() - t_run:.0f} s)",
                          file=sys.stderr, flush=True)
                    rates.setdefault((fw, shape), []).append(rate)
        if FIREWALLED:
            print("(each netns host dropped new TCP connections but to the tasks' "
                  f"ports; dropped: {dropped()})")

    def rate(fw, shape):
        runs = rates.get((fw, shape))
        return statistics.median(runs) if runs else None

    where = "3 netns hosts" if args.hosts == "netns" else "one host"
    if args.single_port:
        where += ", single port"

    def cell(fw, shape, value):
        failed = failures.get((fw, shape), 0)
        shown = "-" if value is None else f"{value:.0f}"
        return shown + (f" ({failed} of {args.repeats} failed)" if failed else "")

    rows = []
    for shape in shapes:
        nb, tf = rate("nbdist", shape), rate("tf", shape)
        rows.append((f"{SHAPES[shape][0]} [{where}]",
                     cell("nbdist", shape, nb),
                     cell("tf", shape, tf) if "tf" in frameworks else "-",
                     "-" if tf is None or nb is None else f"{nb / tf:.2f}x"))
    head = ("program", "nbdist steps/s", "TF steps/s", "nbdist / TF")
    print_table(head, rows)
    print(f"(median of {args.repeats} alternating runs, {args.seconds:g} s windows; "
          f"{load_note(load0)}: figures from a busy machine are noisy)")
    if args.tls:
        print("(nbdist with TLS: gRPC and its TCP peer path; TF in plaintext)")
    return 0


def whole_run_table(shapes, frameworks, hosts, args, load0) -> int:
    """The whole-run mode's rounds (frameworks alternating) and table."""
    runs: dict = {}
    for shape in shapes:
        for _ in range(args.repeats):
            for fw, python in frameworks.items():
                try:
                    wall, rates, cpu = run_whole(shape, fw, python, hosts,
                                                 args.whole_run)
                except RuntimeError as e:  # the other rows still count
                    print(f"  {shape} {fw}: failed: {e}", file=sys.stderr, flush=True)
                    continue
                print(f"  {shape} {fw}: {wall:.1f} s, workers "
                      f"{' '.join(f'{r:.0f}' for r in rates)} steps/s, "
                      f"{cpu:.1f} CPU s, load {os.getloadavg()[0]:.1f}",
                      file=sys.stderr, flush=True)
                runs.setdefault((fw, shape), []).append((wall, rates, cpu))
    where = "3 netns hosts" if args.hosts == "netns" else "one host"
    rows = []
    for shape in shapes:
        row = [f"{SHAPES[shape][0]} [{where}]"]
        best = {}
        for fw in frameworks:
            rs = runs.get((fw, shape))
            if not rs:
                row += ["failed", "-", "-"]
                continue
            wall, rates, cpu = min(rs, key=lambda r: r[0])  # least disturbed
            n_steps = args.whole_run * SHAPES[shape][1]
            best[fw] = (wall, min(r[2] for r in rs) / n_steps,
                        statistics.mean(rates))
            row += [f"{statistics.median(r[0] for r in rs):.1f} ({wall:.1f})",
                    "/".join(f"{r:.0f}" for r in rates),
                    f"{1000 * best[fw][1]:.1f}"]
        if "tf" in frameworks:
            if len(best) == 2:
                (nw, nc, nr), (tw, tc, tr) = best["nbdist"], best["tf"]
                row += [f"{tw / nw:.2f}x", f"{nr / tr:.2f}x", f"{tc / nc:.2f}x"]
            else:
                row += ["-", "-", "-"]
        rows.append(row)
    head = ["program"]
    for fw in frameworks:
        head += [f"{fw} wall s", f"{fw} worker steps/s", f"{fw} CPU ms/step"]
    if "tf" in frameworks:
        head += ["TF/nbdist wall", "nbdist/TF steps/s", "TF/nbdist CPU"]
    print_table(head, rows)
    print(f"(whole runs of {args.whole_run} steps per worker, start-up included; "
          f"wall: median (best) of {args.repeats} alternating runs, per-worker "
          f"steps/s and CPU (every task, start-up included, per step) of the best "
          f"run; steps/s ratio of the workers' mean; {load_note(load0)})")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        shape_, fw_, cluster_, job_, index_, logdir_, warmup_ = sys.argv[2:9]
        child(shape_, fw_, json.loads(cluster_), job_, int(index_), logdir_,
              float(warmup_))
    else:
        sys.exit(main())
