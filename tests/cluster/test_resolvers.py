"""Cluster resolvers; expected values from TF's tfconfig_cluster_resolver_test.py,
slurm_cluster_resolver_test.py and cluster_resolver_test.py."""

from __future__ import annotations

import json
import os

import pytest
from google.protobuf import text_format

from nbdist.runtime import env
from nbdist.cluster.resolvers import (
    ClusterResolver,
    SimpleClusterResolver,
    SlurmClusterResolver,
    TFConfigClusterResolver,
    expand_hostlist,
    expand_tasks_per_node,
    format_master_url,
)
from nbdist.proto import cluster_pb2
from nbdist.runtime.cluster_spec import ClusterSpec

PS_WORKER = {
    "ps": ["ps0:2222", "ps1:2222"],
    "worker": ["worker0:2222", "worker1:2222", "worker2:2222"],
}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in list(os.environ):
        if name.startswith("SLURM_") or name in ("TF_CONFIG", "CUDA_VISIBLE_DEVICES"):
            monkeypatch.delenv(name)


def _set_tf_config(monkeypatch, config) -> None:
    text = config if isinstance(config, str) else json.dumps(config)
    monkeypatch.setenv("TF_CONFIG", text)


def _assert_cluster(cluster_spec: ClusterSpec, expected_text: str) -> None:
    expected = text_format.Parse(expected_text, cluster_pb2.ClusterDef())
    assert cluster_spec.as_cluster_def() == expected
    assert ClusterSpec(cluster_spec).as_cluster_def() == expected
    assert ClusterSpec(cluster_spec.as_cluster_def()).as_cluster_def() == expected
    assert ClusterSpec(cluster_spec.as_dict()).as_cluster_def() == expected


# -- env helper ------------------------------------------------------------------


def test_tf_config_unset_or_blank_is_empty(monkeypatch):
    assert env.tf_config() == {}
    monkeypatch.setenv("TF_CONFIG", "  ")
    assert env.tf_config() == {}


def test_tf_config_malformed(monkeypatch):
    monkeypatch.setenv("TF_CONFIG", "{not json")
    with pytest.raises(ValueError, match="TF_CONFIG is not valid JSON"):
        env.tf_config()
    monkeypatch.setenv("TF_CONFIG", "[1, 2]")
    with pytest.raises(ValueError, match="TF_CONFIG must be a JSON object"):
        env.tf_config()


def test_slurm_var_fallbacks(monkeypatch):
    monkeypatch.setenv("SLURM_NTASKS", "4")
    assert env.slurm_var("STEP_NUM_TASKS", "NTASKS") == "4"
    monkeypatch.setenv("SLURM_STEP_NUM_TASKS", "2")
    assert env.slurm_var("STEP_NUM_TASKS", "NTASKS") == "2"
    assert env.slurm_env() == {"SLURM_NTASKS": "4", "SLURM_STEP_NUM_TASKS": "2"}
    with pytest.raises(RuntimeError, match="SLURM_PROCID not found in environment"):
        env.slurm_var("PROCID")


# -- base and SimpleClusterResolver ----------------------------------------------


def test_format_master_url():
    assert format_master_url("h:1") == "h:1"
    assert format_master_url("h:1", "grpc") == "grpc://h:1"
    assert format_master_url("h:1", "") == "h:1"


def test_base_is_abstract_and_has_defaults():
    with pytest.raises(TypeError):
        ClusterResolver()

    class Fixed(ClusterResolver):
        def cluster_spec(self):
            return ClusterSpec({})

        def master(self, task_type=None, task_id=None, rpc_layer=None):
            return ""

    r = Fixed()
    assert (r.task_type, r.task_id, r.rpc_layer, r.environment) == (
        None,
        None,
        None,
        "",
    )
    assert r.num_accelerators() == {}
    r.task_type, r.task_id, r.rpc_layer = "worker", 2, "grpc"
    assert (r.task_type, r.task_id, r.rpc_layer) == ("worker", 2, "grpc")


def test_simple_resolver():
    cluster = ClusterSpec(PS_WORKER)
    r = SimpleClusterResolver(cluster, master="grpc://master:2222")
    assert r.cluster_spec() is cluster
    assert r.master() == "grpc://master:2222"
    assert (r.task_type, r.task_id, r.rpc_layer, r.environment) == (
        None,
        None,
        None,
        "",
    )
    assert r.num_accelerators() == {}


def test_simple_resolver_master_overrides_and_rpc_layer():
    r = SimpleClusterResolver(
        ClusterSpec(PS_WORKER),
        task_type="worker",
        task_id=1,
        rpc_layer="grpc",
        environment="google",
        num_accelerators={"GPU": 8},
    )
    assert r.master() == "grpc://"  # no master given: the rpc layer and ""
    assert r.master("worker", 2) == "grpc://worker2:2222"
    assert r.master("ps", 0, rpc_layer="test") == "test://ps0:2222"
    assert r.master("worker") == "grpc://"  # both type and id are needed
    assert (r.task_type, r.task_id, r.environment) == ("worker", 1, "google")
    assert r.num_accelerators() == {"GPU": 8}
    r.task_type, r.task_id, r.rpc_layer = "ps", 0, None
    assert (r.task_type, r.task_id, r.rpc_layer) == ("ps", 0, None)
    assert r.master("ps", 1) == "ps1:2222"


def test_simple_resolver_type_checks():
    with pytest.raises(TypeError, match="cluster_spec must be a `ClusterSpec`"):
        SimpleClusterResolver({"worker": ["a:1"]})
    with pytest.raises(TypeError, match="master must be a string"):
        SimpleClusterResolver(ClusterSpec({}), master=None)


# -- TFConfigClusterResolver -------------------------------------------------------


def test_tfconfig_normal_cluster_spec_read(monkeypatch):
    _set_tf_config(
        monkeypatch, {"cluster": PS_WORKER, "task": {"type": "ps", "index": 0}}
    )
    _assert_cluster(
        TFConfigClusterResolver().cluster_spec(),
        """
        job { name: 'ps' tasks { key: 0 value: 'ps0:2222' }
                         tasks { key: 1 value: 'ps1:2222' } }
        job { name: 'worker' tasks { key: 0 value: 'worker0:2222' }
                             tasks { key: 1 value: 'worker1:2222' }
                             tasks { key: 2 value: 'worker2:2222' } }
        """,
    )


def test_tfconfig_sparse_cluster_spec_read(monkeypatch):
    _set_tf_config(
        monkeypatch,
        """
        {"cluster": {"ps": ["ps0:2222", "ps1:2222"], "worker": {"1": "worker1:2222"}},
         "task": {"type": "worker", "index": 1}}
        """,
    )
    r = TFConfigClusterResolver()
    _assert_cluster(
        r.cluster_spec(),
        """
        job { name: 'ps' tasks { key: 0 value: 'ps0:2222' }
                         tasks { key: 1 value: 'ps1:2222' } }
        job { name: 'worker' tasks { key: 1 value: 'worker1:2222' } }
        """,
    )
    assert r.master() == "worker1:2222"


def test_tfconfig_automatic_master_read(monkeypatch):
    _set_tf_config(
        monkeypatch, {"cluster": PS_WORKER, "task": {"type": "ps", "index": 0}}
    )
    assert TFConfigClusterResolver().master() == "ps0:2222"


def test_tfconfig_specified_task_type_and_index_master_read(monkeypatch):
    _set_tf_config(
        monkeypatch, {"cluster": PS_WORKER, "task": {"type": "ps", "index": 0}}
    )
    assert TFConfigClusterResolver().master("worker", 1) == "worker1:2222"


def test_tfconfig_session_master_read(monkeypatch):
    _set_tf_config(
        monkeypatch,
        {
            "cluster": PS_WORKER,
            "session_master": "sessionmaster:2222",
            "task": {"type": "ps", "index": 0},
        },
    )
    assert TFConfigClusterResolver().master() == "sessionmaster:2222"


def test_tfconfig_rpc_layer_read(monkeypatch):
    _set_tf_config(
        monkeypatch,
        {"cluster": PS_WORKER, "rpc_layer": "grpc", "task": {"type": "ps", "index": 0}},
    )
    r = TFConfigClusterResolver()
    assert r.master() == "grpc://ps0:2222"
    assert (r.task_type, r.task_id, r.rpc_layer) == ("ps", 0, "grpc")
    assert r.master(rpc_layer="test") == "test://ps0:2222"


def test_tfconfig_parameter_overrides(monkeypatch):
    _set_tf_config(
        monkeypatch,
        {"cluster": PS_WORKER, "rpc_layer": "grpc", "task": {"type": "ps", "index": 1}},
    )
    r = TFConfigClusterResolver(task_type="ps", task_id=0)
    assert r.master() == "grpc://ps0:2222"
    assert (r.task_type, r.task_id) == ("ps", 0)

    r.task_type = "worker"
    r.task_id = 1
    r.rpc_layer = "test"
    assert r.master() == "test://worker1:2222"
    assert (r.task_type, r.task_id, r.rpc_layer) == ("worker", 1, "test")

    # Setting an override back to None falls back on TF_CONFIG again.
    r.task_type = r.task_id = r.rpc_layer = None
    assert (r.task_type, r.task_id, r.rpc_layer) == ("ps", 1, "grpc")


def test_tfconfig_casts(monkeypatch):
    _set_tf_config(
        monkeypatch,
        {
            "cluster": {"123456": ["ps0:2222", "ps1:2222"], "worker": ["w0:2222"]},
            "task": {"type": 123456, "index": "1"},
        },
    )
    r = TFConfigClusterResolver()
    assert r.task_type == "123456"
    assert r.task_id == 1
    assert r.master() == "ps1:2222"


def test_tfconfig_zero_items_master_read(monkeypatch):
    _set_tf_config(monkeypatch, "{}")
    r = TFConfigClusterResolver()
    assert r.master() == ""
    assert r.cluster_spec() == ClusterSpec({})
    assert (r.task_type, r.task_id, r.rpc_layer) == (None, None, None)


def test_tfconfig_unset_is_empty():
    r = TFConfigClusterResolver()
    assert not r.cluster_spec()
    assert r.master() == ""


def test_tfconfig_one_item_master_read(monkeypatch):
    _set_tf_config(monkeypatch, {"cluster": {"worker": ["worker0:2222"]}})
    assert TFConfigClusterResolver().master() == ""
    # Even with an rpc layer and a task: a one-task cluster runs in process.
    _set_tf_config(
        monkeypatch,
        {
            "cluster": {"worker": ["worker0:2222"]},
            "rpc_layer": "grpc",
            "task": {"type": "worker", "index": 0},
        },
    )
    assert TFConfigClusterResolver().master() == ""


def test_tfconfig_rereads_environment_each_call(monkeypatch):
    r = TFConfigClusterResolver()
    assert r.task_type is None
    _set_tf_config(
        monkeypatch, {"cluster": PS_WORKER, "task": {"type": "worker", "index": 2}}
    )
    assert (r.task_type, r.task_id, r.master()) == ("worker", 2, "worker2:2222")
    _set_tf_config(
        monkeypatch,
        {"cluster": {"chief": ["c:1"]}, "task": {"type": "chief", "index": 0}},
    )
    assert r.cluster_spec().as_dict() == {"chief": ["c:1"]}
    assert r.task_type == "chief"


def test_tfconfig_evaluator_outside_cluster_runs_locally(monkeypatch):
    _set_tf_config(
        monkeypatch,
        {
            "cluster": {
                "chief": ["host0:2222"],
                "worker": ["host1:2222", "host2:2222", "host3:2222"],
                "ps": ["host4:2222", "host5:2222"],
            },
            "rpc_layer": "grpc",
            "task": {"type": "evaluator", "index": 0},
        },
    )
    r = TFConfigClusterResolver()
    assert (r.task_type, r.task_id) == ("evaluator", 0)
    assert "evaluator" not in r.cluster_spec().jobs
    assert r.master() == ""
    # Asking for a training task still resolves it.
    assert r.master("chief", 0) == "grpc://host0:2222"


def test_tfconfig_evaluator_inside_cluster_gets_its_address(monkeypatch):
    _set_tf_config(
        monkeypatch,
        {
            "cluster": {"worker": ["w0:2222", "w1:2222"], "evaluator": ["e0:2222"]},
            "rpc_layer": "grpc",
            "task": {"type": "evaluator", "index": 0},
        },
    )
    assert TFConfigClusterResolver().master() == "grpc://e0:2222"


def test_tfconfig_unknown_task(monkeypatch):
    _set_tf_config(
        monkeypatch, {"cluster": PS_WORKER, "task": {"type": "chief", "index": 0}}
    )
    with pytest.raises(ValueError, match="No such job in cluster: 'chief'"):
        TFConfigClusterResolver().master()
    _set_tf_config(
        monkeypatch, {"cluster": PS_WORKER, "task": {"type": "ps", "index": 7}}
    )
    with pytest.raises(ValueError, match="No task with index 7 in job 'ps'"):
        TFConfigClusterResolver().master()


def test_tfconfig_no_task_section(monkeypatch):
    _set_tf_config(monkeypatch, {"cluster": PS_WORKER})
    with pytest.raises(ValueError, match="TF_CONFIG has no task.type"):
        TFConfigClusterResolver().master()
    assert TFConfigClusterResolver().master("worker", 0) == "worker0:2222"


def test_tfconfig_environment(monkeypatch):
    assert TFConfigClusterResolver().environment is None
    _set_tf_config(monkeypatch, {"cluster": PS_WORKER, "environment": "cloud"})
    assert TFConfigClusterResolver().environment == "cloud"
    assert TFConfigClusterResolver(environment="google").environment == "google"


def test_tfconfig_num_accelerators_is_empty(monkeypatch):
    _set_tf_config(
        monkeypatch, {"cluster": PS_WORKER, "task": {"type": "ps", "index": 0}}
    )
    assert TFConfigClusterResolver().num_accelerators() == {}


# -- Slurm helpers -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("hostlist", "hosts"),
    [
        ("n1", ["n1"]),
        ("n[1,3]", ["n1", "n3"]),
        ("n[1-3]", ["n1", "n2", "n3"]),
        (
            "n[1-2],m5,o[3-4,6,7-9]",
            ["n1", "n2", "m5", "o3", "o4", "o6", "o7", "o8", "o9"],
        ),
        (
            "n[0001-0003],m5,o[009-011]",
            ["n0001", "n0002", "n0003", "m5", "o009", "o010", "o011"],
        ),
        ("node[01-03,07]", ["node01", "node02", "node03", "node07"]),
        ("a[1-2]b,c", ["a1b", "a2b", "c"]),
        (
            "rack[1-2]-n[01-02]",
            ["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"],
        ),
        ("t02n13,t02n41,t02n43", ["t02n13", "t02n41", "t02n43"]),
        ("n[3],n[3]", ["n3", "n3"]),  # order kept, no deduplication
    ],
)
def test_expand_hostlist(hostlist, hosts):
    assert expand_hostlist(hostlist) == hosts


@pytest.mark.parametrize(
    "hostlist",
    ["n[1-2", "n1-2]", "n[[1]]", "n[a-b]", "n[3-1]", "n[]", "a,,b", "n[1-2-3]"],
)
def test_expand_hostlist_malformed(hostlist):
    with pytest.raises(ValueError, match="Invalid hostlist format"):
        expand_hostlist(hostlist)


@pytest.mark.parametrize(
    ("text", "counts"),
    [
        ("2", [2]),
        ("2,1,3", [2, 1, 3]),
        ("3(x2),2,1", [3, 3, 2, 1]),
        ("3(x2),2,11(x4)", [3, 3, 2, 11, 11, 11, 11]),
        ("13(x10)", [13] * 10),
        ("2(x3),1", [2, 2, 2, 1]),
    ],
)
def test_expand_tasks_per_node(text, counts):
    assert expand_tasks_per_node(text) == counts


@pytest.mark.parametrize("text", ["", "x", "2(3)", "2(x)", "2,,1"])
def test_expand_tasks_per_node_malformed(text):
    with pytest.raises(ValueError, match="Invalid tasks-per-node list format"):
        expand_tasks_per_node(text)


# -- SlurmClusterResolver ---------------------------------------------------------------


def _slurm(monkeypatch, **variables) -> None:
    for name, value in variables.items():
        monkeypatch.setenv("SLURM_" + name, value)


THREE_NODES = {
    "PROCID": "0",
    "STEP_NUM_TASKS": "3",
    "STEP_NODELIST": "t02n13,t02n41,t02n43",
}


def test_slurm_simple_retrieval_from_env(monkeypatch):
    _slurm(monkeypatch, STEP_TASKS_PER_NODE="1(x3)", **THREE_NODES)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    r = SlurmClusterResolver()
    _assert_cluster(
        r.cluster_spec(),
        """
        job { name: 'worker' tasks { key: 0 value: 't02n13:8888' }
                             tasks { key: 1 value: 't02n41:8888' }
                             tasks { key: 2 value: 't02n43:8888' } }
        """,
    )
    assert r.master("worker", 0, rpc_layer="grpc") == "grpc://t02n13:8888"
    assert r.num_accelerators() == {"GPU": 1}
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "0"
    assert (r.task_type, r.task_id) == ("worker", 0)
    assert r.get_task_info() == ("worker", 0)
    assert r.master() == "grpc://t02n13:8888"
    assert r.environment == ""


def test_slurm_simple_successful_retrieval(monkeypatch):
    _slurm(monkeypatch, **THREE_NODES)
    r = SlurmClusterResolver(
        jobs={"ps": 1, "worker": 2},
        port_base=8888,
        tasks_per_node=1,
        gpus_per_node=1,
        gpus_per_task=1,
        auto_set_gpu=False,
    )
    _assert_cluster(
        r.cluster_spec(),
        """
        job { name: 'ps' tasks { value: 't02n13:8888' } }
        job { name: 'worker' tasks { key: 0 value: 't02n41:8888' }
                             tasks { key: 1 value: 't02n43:8888' } }
        """,
    )
    assert "CUDA_VISIBLE_DEVICES" not in os.environ


def test_slurm_simple_master_retrieval(monkeypatch):
    _slurm(monkeypatch, **THREE_NODES)
    r = SlurmClusterResolver(
        jobs={"ps": 1, "worker": 2},
        port_base=8888,
        tasks_per_node=1,
        gpus_per_node=1,
        gpus_per_task=1,
        auto_set_gpu=False,
    )
    r.task_type = "worker"
    r.task_id = 1
    assert r.master() == "grpc://t02n43:8888"
    r.rpc_layer = "ab"
    assert r.master("ps", 0) == "ab://t02n13:8888"
    assert r.master("ps", 0, rpc_layer="test") == "test://t02n13:8888"
    # cluster_spec() does not clobber what the user set.
    r.cluster_spec()
    assert (r.task_type, r.task_id) == ("worker", 1)


def test_slurm_tasks_per_node_not_set(monkeypatch):
    _slurm(monkeypatch, STEP_TASKS_PER_NODE="1(x3)", **THREE_NODES)
    r = SlurmClusterResolver(
        jobs={"ps": 1, "worker": 2},
        port_base=8888,
        gpus_per_node=1,
        gpus_per_task=1,
        auto_set_gpu=False,
    )
    _assert_cluster(
        r.cluster_spec(),
        """
        job { name: 'ps' tasks { value: 't02n13:8888' } }
        job { name: 'worker' tasks { key: 0 value: 't02n41:8888' }
                             tasks { key: 1 value: 't02n43:8888' } }
        """,
    )
    assert (r.task_type, r.task_id) == ("ps", 0)


MULTI_TASK = {
    "PROCID": "1",
    "STEP_NUM_TASKS": "5",
    "STEP_TASKS_PER_NODE": "2(x2),1",
    "STEP_NODELIST": "t02n13,t02n41,t02n43",
}
MULTI_TASK_CLUSTER = """
    job { name: 'ps' tasks { value: 't02n13:8888' } }
    job { name: 'worker' tasks { key: 0 value: 't02n13:8889' }
                         tasks { key: 1 value: 't02n41:8888' }
                         tasks { key: 2 value: 't02n41:8889' }
                         tasks { key: 3 value: 't02n43:8888' } }
"""


def test_slurm_multi_task_per_node(monkeypatch):
    _slurm(monkeypatch, **MULTI_TASK)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    r = SlurmClusterResolver(
        jobs={"ps": 1, "worker": 4},
        port_base=8888,
        gpus_per_node=2,
        gpus_per_task=1,
        auto_set_gpu=True,
    )
    _assert_cluster(r.cluster_spec(), MULTI_TASK_CLUSTER)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1"
    assert (r.task_type, r.task_id) == ("worker", 0)
    assert r.master() == "grpc://t02n13:8889"


def test_slurm_multiple_gpus_per_task(monkeypatch):
    _slurm(monkeypatch, **MULTI_TASK)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    r = SlurmClusterResolver(
        jobs={"ps": 1, "worker": 4},
        port_base=8888,
        gpus_per_node=4,
        gpus_per_task=2,
        auto_set_gpu=True,
    )
    _assert_cluster(r.cluster_spec(), MULTI_TASK_CLUSTER)
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "2,3"
    assert r.num_accelerators() == {"GPU": 2}


def test_slurm_cpu_only_default_leaves_cuda_alone(monkeypatch):
    _slurm(monkeypatch, **MULTI_TASK)
    r = SlurmClusterResolver(jobs={"ps": 1, "worker": 4})
    _assert_cluster(r.cluster_spec(), MULTI_TASK_CLUSTER)
    assert r.num_accelerators() == {}
    assert "CUDA_VISIBLE_DEVICES" not in os.environ


def test_slurm_default_job_is_all_workers(monkeypatch):
    _slurm(
        monkeypatch,
        PROCID="4",
        **{k: v for k, v in MULTI_TASK.items() if k != "PROCID"},
    )
    r = SlurmClusterResolver(port_base=2222)
    assert r.cluster_spec().as_dict() == {
        "worker": [
            "t02n13:2222",
            "t02n13:2223",
            "t02n41:2222",
            "t02n41:2223",
            "t02n43:2222",
        ]
    }
    assert (r.task_type, r.task_id) == ("worker", 4)
    assert r.master() == "grpc://t02n43:2222"


def test_slurm_hosts_are_sorted_by_name(monkeypatch):
    # As TF: nodes are laid out in sorted order, whatever Slurm's order.
    _slurm(
        monkeypatch,
        PROCID="0",
        STEP_NUM_TASKS="3",
        STEP_NODELIST="nb,na",
        STEP_TASKS_PER_NODE="1,2",
    )
    r = SlurmClusterResolver()
    assert r.cluster_spec().as_dict() == {"worker": ["na:8888", "na:8889", "nb:8888"]}


def test_slurm_bracketed_nodelist_and_job_level_fallbacks(monkeypatch):
    # In an sbatch script outside srun only the job-level variables exist.
    _slurm(
        monkeypatch,
        PROCID="2",
        NTASKS="6",
        JOB_NODELIST="node[01-03]",
        TASKS_PER_NODE="2(x3)",
    )
    r = SlurmClusterResolver(jobs={"chief": 1, "ps": 1, "worker": 4}, port_base=9000)
    assert r.cluster_spec().as_dict() == {
        "chief": ["node01:9000"],
        "ps": ["node01:9001"],
        "worker": ["node02:9000", "node02:9001", "node03:9000", "node03:9001"],
    }
    assert (r.task_type, r.task_id) == ("worker", 0)
    assert SlurmClusterResolver().cluster_spec().num_tasks("worker") == 6


def test_slurm_explicit_tasks_per_node_dict(monkeypatch):
    _slurm(monkeypatch, PROCID="1")
    r = SlurmClusterResolver(
        jobs={"worker": 3}, tasks_per_node={"b": 1, "a": 2}, rpc_layer=None
    )
    assert r.cluster_spec().as_dict() == {"worker": ["a:8888", "a:8889", "b:8888"]}
    assert r.master() == "a:8889"


def test_slurm_errors(monkeypatch):
    with pytest.raises(RuntimeError, match="SLURM_PROCID not found"):
        SlurmClusterResolver()
    _slurm(monkeypatch, **THREE_NODES)
    with pytest.raises(RuntimeError, match="SLURM_STEP_TASKS_PER_NODE or SLURM_TASKS"):
        SlurmClusterResolver()
    with pytest.raises(
        RuntimeError, match="Requested 4 tasks but only 3 were assigned"
    ):
        SlurmClusterResolver(jobs={"worker": 4}, tasks_per_node=1)
    with pytest.raises(
        RuntimeError, match="Requested more GPUs per node than available"
    ):
        SlurmClusterResolver(
            tasks_per_node=2, jobs={"worker": 6}, gpus_per_node=1, gpus_per_task=1
        )
    monkeypatch.setenv("SLURM_STEP_TASKS_PER_NODE", "1,1")
    with pytest.raises(RuntimeError, match="3 nodes .* tasks per node for 2"):
        SlurmClusterResolver()
    monkeypatch.setenv("SLURM_STEP_TASKS_PER_NODE", "1(x3)")
    monkeypatch.setenv("SLURM_PROCID", "3")
    with pytest.raises(RuntimeError, match="SLURM_PROCID=3 is outside the 3 tasks"):
        SlurmClusterResolver()


def test_distribute_cluster_resolver_reexports():
    from nbdist.distribute import cluster_resolver

    assert cluster_resolver.TFConfigClusterResolver is TFConfigClusterResolver
    assert cluster_resolver.SimpleClusterResolver is SimpleClusterResolver
    assert cluster_resolver.SlurmClusterResolver is SlurmClusterResolver
    assert cluster_resolver.ClusterResolver is ClusterResolver
