"""nbdist on a multi-node SLURM: three nodes, one job, tasks spread over them
(issue "SLURM across nodes, proven here"), nothing mocked.

Three network-namespace hosts (``tests/netns.py``), each a SLURM node
(``n1``..``n3``, ``NodeAddr`` its host's address, 2 CPUs) with a ``slurmd``
of its own; ``slurmctld`` and ``munged`` in the root namespace
(``tests/slurm.py``: ``SlurmNodes``). This process, the notebook, is in the
root namespace, behind the hosts' bridge.

* ``nd.SlurmCluster(ps=1, workers=4, bind="0.0.0.0", config=<token>)``: SLURM
  gives the job ``n[1-3]`` (compressed); its 5 tasks sit on all three nodes,
  each at its node's address; ``SlurmClusterResolver`` in a step of the same
  job lays the tasks out on the same nodes. The trainer (tests/cluster/test_multihost.py's:
  softmax regression, Adagrad, variables on the ps) with the 4 workers taking
  turns equals one process applying the same steps, to 1e-6.
* ``%cluster connect --slurm JOBID`` from the root namespace: its ClusterView
  shows the 5 tasks running at their nodes' addresses.
* ``shutdown()`` (``scancel``): the job leaves ``squeue`` and no process but
  ``slurmd`` is left on any node.
* TLS: ``NBDIST_TLS_*`` where the job is submitted, a certificate for the
  three node addresses: a session across nodes verifies it, plaintext clients
  get nowhere.
* A node whose ``slurmd`` is SIGKILLed mid-job: SLURM marks it DOWN ("Not
  responding") and ends the job NODE_FAIL; the ClusterViews of the owning
  ``SlurmCluster`` and of ``%cluster connect --slurm`` show the node's task
  failed with SLURM's reason, the others exited with the job's.

Runs as root (CI does, with .ci/run's packages): where that is so and
something is missing, the tests fail, naming it; elsewhere they are skipped.
"""

from __future__ import annotations

import os
import re
import secrets
import signal
import sys
import time
from pathlib import Path

import netns
import numpy as np
import pytest
import slurm as slurm_fixture
from helpers import ROOT, wait_for
from test_magics_connect import ip  # noqa: F401 - IPython's test shell

import nbdist as nd
from nbdist.cluster.resolvers import expand_hostlist

pytestmark = pytest.mark.slow

START_TIMEOUT_S = 90.0
STEPS = 20  # global steps of the trainer, worker k % 4 runs step k
NODES = ("n1", "n2", "n3")
NODE_FAIL_TIMEOUT_S = 60.0  # SlurmdTimeout is 6 s; slurmctld pings every ~2 s


def _unavailable() -> str | None:
    return netns.unavailable() or slurm_fixture.unavailable()


@pytest.fixture(scope="module")
def token():
    return secrets.token_hex(16)


@pytest.fixture(scope="module")
def cluster3(token):
    """3 namespace hosts, a SLURM node on each; ``SLURM_CONF`` and
    ``NBDIST_TOKEN`` set in ``os.environ`` meanwhile (SLURM's clients, the
    magics and this process's sessions use them)."""
    if why := _unavailable():
        if os.environ.get("CI") == "true" or (
                sys.platform.startswith("linux") and os.geteuid() == 0):
            pytest.fail(f"the multi-node SLURM cannot run here: {why}")
        pytest.skip(f"no multi-node SLURM: {why}")
    old = {k: os.environ.get(k) for k in ("SLURM_CONF", "NBDIST_TOKEN")}
    with netns.Hosts(3) as hosts, slurm_fixture.SlurmNodes(hosts, cpus=2) as s:
        os.environ.update(SLURM_CONF=s.conf, NBDIST_TOKEN=token)
        try:
            yield s
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def start(slurm, token, tmp_path, name: str) -> nd.SlurmCluster:
    # log_dir: a directory every node shares (here, one file system).
    return nd.SlurmCluster(
        ps=1, workers=4, partition="debug", time="10:00", bind="0.0.0.0",
        config=nd.ConfigProto(auth_token=token), log_dir=str(tmp_path / name),
        progress=False, start_timeout=START_TIMEOUT_S, job_name=name)


def job_fields(slurm, job_id: str) -> dict[str, str]:
    return dict(re.findall(r"(\w+)=(\S*)",
                           slurm.run(["scontrol", "show", "job", "-o", job_id])))


def screenshot(view, name: str, where: Path | None = None):
    """With ``NBDIST_UPDATE_SCREENSHOTS=1`` (as tests/browser/test_browser.py), the
    view's static face as Chromium draws it, in docs/screenshots/ (or
    ``where``); nothing in a plain test run."""
    if os.environ.get("NBDIST_UPDATE_SCREENSHOTS") != "1":
        return
    from slurm_screenshot import screenshot_cluster_view

    screenshot_cluster_view(view.snapshot(),
                            (where or ROOT / "docs" / "screenshots") / name)


# A step of the cluster's own job (--overlap: its CPUs are taken) prints, per
# SLURM task, where SLURM put it and where SlurmClusterResolver lays it out.
RESOLVER = """
import os
from nbdist.cluster.resolvers import SlurmClusterResolver
r = SlurmClusterResolver(jobs={"ps": 1, "worker": 4}, port_base=8888)
spec = r.cluster_spec()
print(os.environ["SLURM_PROCID"], os.environ["SLURMD_NODENAME"],
      os.environ["SLURM_STEP_NODELIST"], r.task_type, r.task_id,
      spec.task_address(r.task_type, r.task_id).rsplit(":", 1)[0])
"""


def test_sinfo_shows_three_idle_nodes(cluster3):
    rows = cluster3.run(["sinfo", "-h", "-N", "-o", "%N %t %c"]).split("\n")
    assert sorted(r for r in rows if r) == [f"{n} idle 2" for n in NODES]
    addresses = cluster3.run(["sinfo", "-h", "-N", "-o", "%N %o"]).split()
    assert dict(zip(addresses[::2], addresses[1::2])) == {
        n: cluster3.host(n).address for n in NODES}


@pytest.mark.timeout(240)
def test_slurm_cluster_spans_three_nodes_trains_as_one_host_and_scancel_cleans(
        cluster3, token, tmp_path, ip):  # noqa: F811
    from test_multihost import build, make_batch, oracle

    from nbdist.cluster.attached import AttachedCluster
    from nbdist.notebook import ClusterView

    slurm = cluster3
    w0, b0, loss0 = oracle(STEPS)
    t0 = time.monotonic()
    cluster = start(slurm, token, tmp_path, "nbdist-3n")
    try:
        started_s = time.monotonic() - t0
        job = cluster.job_id
        fields = job_fields(slurm, job)
        assert fields["NodeList"] == "n[1-3]", fields  # SLURM's compressed form
        assert expand_hostlist(fields["NodeList"]) == list(NODES)
        tasks = cluster.tasks
        # Block distribution: ps:0 and worker:0 on n1, workers 1, 2 on n2, 3 on n3.
        nodes = {f"{t.job}:{t.index}": t.node for t in tasks}
        assert nodes == {"ps:0": "n1", "worker:0": "n1", "worker:1": "n2",
                         "worker:2": "n2", "worker:3": "n3"}, nodes
        for t in tasks:
            assert t.state == "running" and t.host == slurm.host(t.node).address, t
        assert cluster.cluster_spec.as_dict() == {
            "ps": [tasks[0].address], "worker": [t.address for t in tasks[1:]]}

        # SlurmClusterResolver reads the same compressed node list and puts
        # every task on the node SLURM ran it on.
        out = slurm.run(["srun", f"--jobid={job}", "--overlap", "-n5", "-N3",
                         sys.executable, "-c", RESOLVER], timeout=60)
        rows = sorted(line.split() for line in out.splitlines() if line.strip())
        assert len(rows) == 5, out
        for rank, node, nodelist, task_type, task_id, host in rows:
            assert nodelist == "n[1-3]" and host == node, out
            assert nodes[f"{task_type}:{task_id}"] == node, out

        # The trainer, the 4 workers taking turns, each through its own
        # session to its own worker; this process is in the root namespace.
        results = []
        graphs = []
        for i in range(4):
            g = nd.Graph()
            with g.as_default():
                graphs.append((g, build(cluster.cluster_spec, i)))
        sessions = [
            nd.Session(cluster.target("worker", i), graph=g, config=nd.ConfigProto(
                device_filters=["/job:ps", f"/job:worker/task:{i}"],
                operation_timeout_in_ms=60_000))
            for i, (g, _) in enumerate(graphs)]
        try:
            with graphs[0][0].as_default():
                sessions[0].run(nd.global_variables_initializer())
            for k in range(STEPS):
                x, y, *_, global_step, train_op = graphs[k % 4][1]
                xs, ys = make_batch(k)
                sessions[k % 4].run(train_op, {x: xs, y: ys})
            xs, ys = make_batch(-1)
            for sess, (_, (x, y, w, b, loss, global_step, _)) in zip(sessions, graphs):
                results.append(sess.run([w, b, loss, global_step], {x: xs, y: ys}))
        finally:
            for sess in sessions:
                sess.close()
        for w, b, loss, step in results:  # every worker reads the same variables
            assert step == STEPS
            np.testing.assert_allclose(w, w0, rtol=0, atol=1e-6)
            np.testing.assert_allclose(b, b0, rtol=0, atol=1e-6)
            assert abs(loss - loss0) < 1e-5
        assert loss0 < np.log(10) - 0.3  # it learned

        # %cluster connect --slurm JOBID, from the root namespace.
        view = ip.run_line_magic("cluster", f"connect --slurm {job}")
        try:
            assert isinstance(view, ClusterView)
            attached = ip.user_ns["cluster"]
            assert isinstance(attached, AttachedCluster)
            assert attached.cluster_spec == cluster.cluster_spec
            assert view.wait_for(lambda s: s.summary() == "5 tasks: 5 running", 30), \
                repr(view)
            shown = {r.name: r.address for r in view.state.rows.values()}
            assert shown == {f"{t.job}:{t.index}": t.address for t in tasks}
            assert {a.rsplit(":", 1)[0] for a in shown.values()} == {
                slurm.host(n).address for n in NODES}
        finally:
            ip.run_line_magic("cluster", "disconnect")
        print(f"3 nodes: job {job} ({fields['NodeList']}) answered {started_s:.1f} s "
              f"after sbatch; held-out loss {results[0][2]:.6f} "
              f"(one process: {loss0:.6f})")
    finally:
        cluster.shutdown()
    # scancel: the job gone, nothing of it left on any node (slurmd only).
    assert not slurm.run(["squeue", "-h", "-j", job, "-o", "%i"], check=False).strip()
    for node in NODES:
        slurmd = slurm.slurmd(node).pid
        wait_for(lambda n=node, d=slurmd: slurm.pids(n) == [d], 30,
                 f"only slurmd left on {node}", interval=0.1)


def _pki(addresses: list[str]) -> dict[str, bytes]:
    """A CA and one server certificate for every node address (its SANs)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.timezone.utc)

    def cert(subject, key, issuer, issuer_key, extension):
        return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
                .public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(extension, critical=False)
                .sign(issuer_key, hashes.SHA256()))

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(
        ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "nbdist test CA")])
    ca = cert(ca_name, ca_key, ca_name, ca_key,
              x509.BasicConstraints(ca=True, path_length=0))
    server = cert(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "nodes")]), key,
                  ca_name, ca_key, x509.SubjectAlternativeName(
                      [x509.IPAddress(ipaddress.ip_address(a)) for a in addresses]))
    pem = serialization.Encoding.PEM
    return {"ca": ca.public_bytes(pem), "cert": server.public_bytes(pem),
            "key": key.private_bytes(pem, serialization.PrivateFormat.PKCS8,
                                     serialization.NoEncryption())}


@pytest.mark.timeout(240)
def test_tls_across_nodes(cluster3, token, tmp_path, monkeypatch):
    """NBDIST_TLS_* set where the job is submitted (sbatch passes the
    environment on): every task serves TLS, sessions across nodes verify it,
    a plaintext client gets nowhere."""
    from nbdist.runtime import transports

    slurm = cluster3
    for name, pem in _pki([slurm.host(n).address for n in NODES]).items():
        (tmp_path / f"{name}.pem").write_bytes(pem)  # a directory every node sees
        monkeypatch.setenv(f"NBDIST_TLS_{name.upper()}", str(tmp_path / f"{name}.pem"))
    cluster = start(slurm, token, tmp_path, "nbdist-tls")
    try:
        assert {t.node for t in cluster.tasks} == set(NODES)
        with nd.Graph().as_default():
            with nd.device("/job:ps/task:0"):  # on n1
                v = nd.Variable(np.arange(4, dtype=np.float32), name="v")
            with nd.device("/job:worker/task:3"):  # on n3
                doubled = v * 2.0
            with nd.Session(cluster.target("worker", 3)) as sess:
                sess.run(v.initializer)
                np.testing.assert_array_equal(sess.run(doubled), [0, 2, 4, 6])
        for t in cluster.tasks:
            plain = transports.connect_worker(t.name, t.address, token=token,
                                              tls=False)
            try:
                with pytest.raises((nd.errors.UnavailableError,
                                    nd.errors.DeadlineExceededError)):
                    plain.get_status(timeout_s=2.0)
            finally:
                plain.close()
    finally:
        cluster.shutdown()


@pytest.mark.timeout(240)
def test_a_node_whose_slurmd_dies_shows_failed_with_slurms_reason(
        cluster3, token, tmp_path, ip):  # noqa: F811
    from nbdist.notebook import ClusterView

    slurm = cluster3
    cluster = start(slurm, token, tmp_path, "nbdist-fail")
    try:
        owned = ClusterView(cluster)
        attached = ip.run_line_magic("cluster", f"connect --slurm {cluster.job_id}")
        try:
            for view in (owned, attached):
                assert view.wait_for(
                    lambda s: s.summary() == "5 tasks: 5 running", 30), repr(view)
            screenshot(attached, "slurm-3-nodes.png")
            os.kill(slurm.slurmd("n3").pid, signal.SIGKILL)  # n3 dies to SLURM
            killed_at = time.monotonic()
            for view in (owned, attached):
                assert view.wait_for(lambda s: s.rows["worker:3"].state == "failed",
                                     NODE_FAIL_TIMEOUT_S), repr(view)
            seen_s = time.monotonic() - killed_at
            for view in (owned, attached):
                rows = view.state.rows
                failed = rows["worker:3"]
                assert failed.reason.startswith("node n3 DOWN"), failed
                assert "Not responding" in failed.reason, failed
                assert re.search(r"failed: node n3 DOWN\S*: Not responding",
                                 failed.history[-1][1]), failed.history
                for name in ("ps:0", "worker:0", "worker:1", "worker:2"):
                    assert rows[name].state == "exited", rows[name]
                    assert rows[name].reason.startswith("job NODE_FAIL"), rows[name]
                text = repr(view)
                assert "worker:3" in text and "failed (node n3 DOWN" in text, text
                assert "failed" in view._html() and "Not responding" in view._html()
            print(f"slurmd of n3 killed: worker:3 shown failed after {seen_s:.1f} s "
                  f"({owned.state.rows['worker:3'].reason})")
            screenshot(attached, "slurm-node-failed.png", tmp_path)
        finally:
            ip.run_line_magic("cluster", "disconnect")
            owned.close()
    finally:
        cluster.shutdown()
