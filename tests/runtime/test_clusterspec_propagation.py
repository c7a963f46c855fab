"""ClusterSpec propagation: ``ConfigProto(cluster_def=...)`` gives one session a
cluster of its own, naming servers that know nothing of it (TF's
server_lib_test ``testRestartedMaster`` and session_clusterspec_prop_test)."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd
from nbdist.proto import cluster_pb2


@pytest.fixture(scope="module")
def servers():
    """Three single-task servers, each ``/job:localhost/task:0`` of its own."""
    made = [nd.Server.create_local_server() for _ in range(3)]
    yield made
    for s in made:
        s.stop()


def _address(server) -> str:
    return server.target[len("grpc://"):]


def _cluster_def(master, worker) -> cluster_pb2.ClusterDef:
    cluster = cluster_pb2.ClusterDef()
    job = cluster.job.add()
    job.name = "master"
    job.tasks[0] = _address(master)
    job = cluster.job.add()
    job.name = "worker"
    job.tasks[0] = _address(worker)
    return cluster


def _config(master, worker, **kw) -> nd.ConfigProto:
    return nd.ConfigProto(cluster_def=_cluster_def(master, worker), **kw)


def test_list_devices_names_the_propagated_cluster(servers):
    master, worker, _ = servers
    with nd.Graph().as_default(), \
            nd.Session(master.target, config=_config(master, worker)) as sess:
        names = {d.name for d in sess.list_devices()}
    assert names == {"/job:master/replica:0/task:0/device:CPU:0",
                     "/job:worker/replica:0/task:0/device:CPU:0"}


def _share() -> dict:
    return {"experimental": nd.ConfigProto.Experimental(
        share_session_state_in_clusterspec_propagation=True)}


def test_ops_on_the_worker_job_run_on_the_other_server(servers):
    master, worker, _ = servers
    with nd.Graph().as_default():
        with nd.device("/job:worker/task:0"):
            v = nd.Variable(np.array([1.0, 2.0], np.float32), name="prop_v")
            doubled = v * 2.0
        with nd.Session(master.target, config=_config(master, worker, **_share())
                        ) as sess:
            sess.run(v.initializer)
            np.testing.assert_allclose(sess.run(doubled), [2.0, 4.0])
    # Sharing its state, the session left the variable on the worker's server,
    # not on the master's.
    with nd.Graph().as_default():
        plain = nd.Variable(np.zeros(2, np.float32), name="prop_v")
        with nd.Session(worker.target) as sess:
            np.testing.assert_allclose(sess.run(plain), [1.0, 2.0])
        with nd.Session(master.target) as sess, \
                pytest.raises(nd.errors.FailedPreconditionError):
            sess.run(plain)


def _one_task_config(server, **kw) -> nd.ConfigProto:
    cluster = cluster_pb2.ClusterDef()
    job = cluster.job.add()
    job.name = "worker"
    job.tasks[0] = _address(server)
    return nd.ConfigProto(cluster_def=cluster, **kw)


def test_propagated_sessions_keep_their_own_state_by_default(servers):
    server = servers[2]
    with nd.Graph().as_default():
        init = nd.placeholder(nd.int32, [])
        v = nd.Variable(init, name="prop_iso")
        sess1 = nd.Session(server.target, config=_one_task_config(server))
        sess2 = nd.Session(server.target, config=_one_task_config(server))
        sess1.run(v.initializer, {init: 37})
        assert sess1.run(v) == 37
        with pytest.raises(nd.errors.FailedPreconditionError):
            sess2.run(v)
        sess2.run(v.initializer, {init: 86})
        assert (sess1.run(v), sess2.run(v)) == (37, 86)
        sess2.close()
        assert sess1.run(v) == 37
        sess1.close()


def test_share_session_state_in_clusterspec_propagation(servers):
    server = servers[2]
    config = _one_task_config(server, **_share())
    with nd.Graph().as_default():
        init = nd.placeholder(nd.int32, [])
        v = nd.Variable(init, name="prop_shared")
        with nd.Session(server.target, config=config) as sess1, \
                nd.Session(server.target, config=config) as sess2:
            sess1.run(v.initializer, {init: 37})
            assert sess2.run(v) == 37


def test_master_need_not_be_task_0_and_stats_name_the_cluster(servers):
    a, b, c = servers
    cluster = cluster_pb2.ClusterDef()
    job = cluster.job.add()
    job.name = "renamed"
    for i, s in enumerate((c, b, a)):
        job.tasks[i] = _address(s)
    ones = np.ones(2, np.float32)
    with nd.Graph().as_default():
        feeds, products = [], []
        for i in (1, 2, 0):  # added out of task order
            with nd.device(f"/job:renamed/task:{i}"):
                f = nd.placeholder(nd.float32, [2])
                feeds.append(f)
                products.append(nd.constant(2.0, name=f"Const_{i}") * f)
        total = products[0] + products[1] + products[2]
        meta = nd.RunMetadata()
        with nd.Session(a.target, config=nd.ConfigProto(cluster_def=cluster)) as sess:
            out = sess.run(total, {f: ones for f in feeds},
                           options=nd.RunOptions(trace_level=nd.RunOptions.FULL_TRACE),
                           run_metadata=meta)
    np.testing.assert_allclose(out, 6 * ones)
    consts = {ds.device for ds in meta.step_stats.dev_stats
              for ns in ds.node_stats if ns.node_name.startswith("Const_")}
    assert consts == {f"/job:renamed/replica:0/task:{i}/device:CPU:0"
                      for i in range(3)}


def test_partial_run_over_a_propagated_cluster(servers):
    master, worker, _ = servers
    with nd.Graph().as_default():
        with nd.device("/job:master/task:0"):
            a = nd.placeholder(nd.float32, [])
        with nd.device("/job:worker/task:0"):
            b = nd.placeholder(nd.float32, [])
            c = nd.placeholder(nd.float32, [])
            r1 = a + b
        with nd.device("/job:master/task:0"):
            r2 = r1 * c
        with nd.Session(master.target, config=_config(master, worker)) as sess:
            h = sess.partial_run_setup([r1, r2], [a, b, c])
            assert sess.partial_run(h, r1, {a: 1.0, b: 2.0}) == 3.0
            assert sess.partial_run(h, r2, {c: 3.0}) == 9.0


def test_several_cpus_per_task(servers):
    config = nd.ConfigProto(device_count={"CPU": 2})
    with nd.Server.create_local_server(config=config) as s1, \
            nd.Server.create_local_server(config=config) as s2:
        cluster = cluster_pb2.ClusterDef()
        job = cluster.job.add()
        job.name = "worker"
        job.tasks[0] = _address(s1)
        job.tasks[1] = _address(s2)
        with nd.Graph().as_default():
            with nd.device("/job:worker/task:1/cpu:1"):
                x = nd.constant(17.0)
            with nd.device("/job:worker/task:0/cpu:1"):
                y = nd.constant(3.0)
            with nd.device("/job:worker/task:1/cpu:0"):
                s = x + y
            with nd.device("/job:worker/task:0/cpu:1"):
                t = y + x
            with nd.device("/job:worker/task:0/cpu:0"):
                total = s + t
            with nd.Session(s1.target,
                            config=nd.ConfigProto(cluster_def=cluster)) as sess:
                names = {d.name for d in sess.list_devices()}
                assert sess.run(total) == 40.0
    assert names == {f"/job:worker/replica:0/task:{t}/device:CPU:{c}"
                     for t in (0, 1) for c in (0, 1)}


def test_tensors_cross_between_the_propagated_tasks(servers):
    master, worker, _ = servers
    x_value = np.array([[1.0, -2.0], [3.0, 0.5]], np.float32)
    with nd.Graph().as_default():
        x = nd.placeholder(nd.float32, [2, 2])
        with nd.device("/job:worker/task:0"):
            y = nd.matmul(x, x) + 1.0
        with nd.device("/job:master/task:0"):
            z = nd.reduce_sum(y * 3.0)
        with nd.Session(master.target, config=_config(master, worker)) as sess:
            y_out, z_out = sess.run([y, z], {x: x_value})
    expected = x_value @ x_value + 1.0
    np.testing.assert_allclose(y_out, expected, rtol=1e-6)
    np.testing.assert_allclose(z_out, (expected * 3.0).sum(), rtol=1e-6)


def test_unplaced_ops_run_on_the_masters_task(servers):
    master, worker, _ = servers
    with nd.Graph().as_default():
        c = nd.constant(3.0) * 2.0
        with nd.Session(master.target, config=_config(master, worker)) as sess:
            meta = nd.RunMetadata()
            assert sess.run(c, options=nd.RunOptions(output_partition_graphs=True),
                            run_metadata=meta) == 6.0
    devices = {n.device for g in meta.partition_graphs for n in g.node}
    assert devices == {"/job:master/replica:0/task:0/device:CPU:0"}


def test_restarted_master_supersedes_the_old_masters_sessions(servers):
    master_old, worker, master_new = servers
    with nd.Graph().as_default():
        with nd.device("/job:worker/replica:0/task:0/device:CPU:0"):
            a = nd.constant([1.0])
            b = a + a
        sess_old = nd.Session(master_old.target, config=_config(master_old, worker))
        assert len(sess_old.list_devices()) == 2
        np.testing.assert_allclose(sess_old.run(b), [2.0])
        # Another server under the same task name (/job:master/task:0): to the
        # worker, that master restarted.
        sess_new = nd.Session(master_new.target, config=_config(master_new, worker))
        np.testing.assert_allclose(sess_new.run(b), [2.0])
        with pytest.raises(nd.errors.AbortedError, match="Session handle is not found"):
            sess_old.run(b)
        np.testing.assert_allclose(sess_new.run(b), [2.0])
        sess_old.close()
        sess_new.close()


def test_isolated_propagated_session_keeps_its_variables(servers):
    master, worker, _ = servers
    config = _config(master, worker, isolate_session_state=True)
    with nd.Graph().as_default():
        with nd.device("/job:worker/task:0"):
            v = nd.Variable(5.0, name="prop_isolated")
        with nd.Session(master.target, config=config) as sess:
            sess.run(v.initializer)
            assert sess.run(v) == 5.0
        with nd.Session(master.target, config=config) as other, \
                pytest.raises(nd.errors.FailedPreconditionError):
            other.run(v)


def test_cluster_def_must_name_the_sessions_server(servers):
    master, worker, third = servers
    with nd.Graph().as_default():
        nd.constant(1.0)
        with pytest.raises(nd.errors.InvalidArgumentError, match="does not name"):
            nd.Session(third.target, config=_config(master, worker)).run(
                nd.constant(2.0))


def test_in_process_session_rejects_cluster_def(servers):
    master, worker, _ = servers
    with nd.Graph().as_default():
        c = nd.constant(1.0)
        with pytest.raises(nd.errors.UnimplementedError, match="cluster_def"), \
                nd.Session(config=_config(master, worker)) as sess:
            sess.run(c)


def test_propagated_session_through_a_remote_master_client(servers):
    from nbdist.runtime.grpc.client import GrpcMasterClient

    master, worker, _ = servers
    config = _config(master, worker)
    with nd.Graph().as_default():
        with nd.device("/job:worker/task:0"):
            b = nd.constant([1.0, 2.0]) * 3.0
        sess = nd.Session("", config=config)
        # Over RPC even though the server is in this process.
        sess._master.close()
        sess._master = GrpcMasterClient(master.target, config)
        sess._target = master.target
        try:
            names = {d.name for d in sess.list_devices()}
            np.testing.assert_allclose(sess.run(b), [3.0, 6.0])
        finally:
            sess.close()
    assert names == {"/job:master/replica:0/task:0/device:CPU:0",
                     "/job:worker/replica:0/task:0/device:CPU:0"}


def test_bad_cluster_def_address_is_invalid_argument(servers):
    master, _, _ = servers
    cluster = _cluster_def(master, master)
    cluster.job[1].tasks[0] = "no port here"
    with nd.Graph().as_default():
        c = nd.constant(1.0)
        with nd.Session(master.target, config=nd.ConfigProto(cluster_def=cluster)
                        ) as sess, \
                pytest.raises(nd.errors.InvalidArgumentError, match="host:port"):
            sess.run(c)
