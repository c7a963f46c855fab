"""``RunConfig`` from ``TF_CONFIG``, the behaviours of TF 1.15's
``run_config_test.py``: each role of a chief/ps/worker cluster (and of the older
``master`` layout, the evaluator, a one-task cluster, no cluster at all) gets
TF's ``master``, ``is_chief``, replica counts, global id and device filters;
malformed ``TF_CONFIG`` gets TF's error; checkpoint intervals exclude each other
and ``replace`` validates as the constructor does.
"""

from __future__ import annotations

import json

import pytest

import nbdist as nd
from nbdist.estimator import RunConfig

CLUSTER = {"chief": ["host0:0"], "ps": ["host1:1", "host2:2"],
           "worker": ["host3:3", "host4:4", "host5:5"]}
MASTER_CLUSTER = {"master": ["host0:0"], "ps": ["host1:1"],
                  "worker": ["host3:3", "host4:4"]}


def set_tf_config(monkeypatch, **tf_config):
    monkeypatch.setenv("TF_CONFIG", json.dumps(tf_config))


# (TF_CONFIG, master, is_chief, num_ps, num_workers, global_id, device_filters)
ROLES = {
    "no TF_CONFIG": (None, "", True, 0, 1, 0, None),
    "chief": ({"cluster": CLUSTER, "task": {"type": "chief", "index": 0}},
              "grpc://host0:0", True, 2, 4, 0, ["/job:ps", "/job:chief"]),
    "worker 1": ({"cluster": CLUSTER, "task": {"type": "worker", "index": 1}},
                 "grpc://host4:4", False, 2, 4, 2, ["/job:ps", "/job:worker/task:1"]),
    "ps 1": ({"cluster": CLUSTER, "task": {"type": "ps", "index": "1"}},
             "grpc://host2:2", False, 2, 4, 5,
             ["/job:ps", "/job:worker", "/job:chief", "/job:master"]),
    "master": ({"cluster": MASTER_CLUSTER, "task": {"type": "master", "index": 0}},
               "grpc://host0:0", True, 1, 3, 0, ["/job:ps", "/job:master"]),
    "worker of master layout": (
        {"cluster": MASTER_CLUSTER, "task": {"type": "worker", "index": 0}},
        "grpc://host3:3", False, 1, 3, 1, ["/job:ps", "/job:worker/task:0"]),
    "one-task cluster": ({"cluster": {"chief": ["host0:0"]},
                          "task": {"type": "chief", "index": 0}},
                         "", True, 0, 1, 0, ["/job:ps", "/job:chief"]),
    "session_master": ({"cluster": CLUSTER, "task": {"type": "worker", "index": 0},
                        "session_master": "grpc://elsewhere:1"},
                       "grpc://elsewhere:1", False, 2, 4, 1,
                       ["/job:ps", "/job:worker/task:0"]),
}


@pytest.mark.parametrize("role", list(ROLES))
def test_tf_config_roles(monkeypatch, role):
    tf_config, master, is_chief, num_ps, num_workers, global_id, filters = ROLES[role]
    if tf_config is None:
        monkeypatch.delenv("TF_CONFIG", raising=False)
    else:
        set_tf_config(monkeypatch, **tf_config)
    config = RunConfig()
    task = (tf_config or {}).get("task", {"type": "worker", "index": 0})
    assert (config.task_type, config.task_id) == (task["type"], int(task["index"]))
    assert config.master == master and config.is_chief == is_chief
    assert (config.num_ps_replicas, config.num_worker_replicas) == (num_ps,
                                                                     num_workers)
    assert config.global_id_in_cluster == global_id
    assert config.evaluation_master == ""
    if tf_config is None:
        assert config.cluster_spec == {} and config.session_config is None
    else:
        assert config.cluster_spec == nd.train.ClusterSpec(tf_config["cluster"])
        assert list(config.session_config.device_filters) == filters
        assert config.session_config.allow_soft_placement


def test_the_evaluator_stands_outside_the_training_cluster(monkeypatch):
    set_tf_config(monkeypatch, cluster=CLUSTER, eval_session_master="grpc://ev:1",
                  task={"type": "evaluator", "index": 0})
    config = RunConfig()
    assert config.task_type == "evaluator" and not config.is_chief
    assert config.cluster_spec == {} and config.master == ""
    assert config.evaluation_master == "grpc://ev:1"
    assert (config.num_ps_replicas, config.num_worker_replicas) == (0, 0)
    assert config.global_id_in_cluster is None and config.session_config is None


BAD = [
    ({"cluster": {"ps": ["h:1"], "worker": ["h:2"]},
      "task": {"type": "ps", "index": 0}},
     ValueError, 'If "cluster" is set in TF_CONFIG, it must have one "chief" node.'),
    ({"cluster": {"chief": ["h:1", "h:2"]}, "task": {"type": "chief", "index": 0}},
     ValueError, 'The "cluster" in TF_CONFIG must have only one "chief" node.'),
    ({"cluster": CLUSTER, "task": {"index": 0}},
     ValueError, 'If "cluster" is set in TF_CONFIG, task type must be set.'),
    ({"cluster": CLUSTER, "task": {"type": "worker"}},
     ValueError, 'If "cluster" is set in TF_CONFIG, task index must be set.'),
    ({"cluster": CLUSTER, "task": {"type": "worker", "index": -1}},
     ValueError, "Task index must be non-negative number."),
    ({"cluster": CLUSTER, "task": {"type": "trainer", "index": 0}},
     ValueError, "trainer is not a valid task_type in the cluster_spec"),
    ({"cluster": CLUSTER, "task": {"type": "worker", "index": 3}},
     ValueError, "3 is not a valid task_id for task_type worker in the cluster_spec"),
    ({"task": {"type": "ps", "index": 0}},
     ValueError, 'If "cluster" is not set in TF_CONFIG, task type must be WORKER.'),
    ({"task": {"type": "worker", "index": 1}},
     ValueError, 'If "cluster" is not set in TF_CONFIG, task index must be 0.'),
    ({"cluster": {**MASTER_CLUSTER, "chief": ["h:9"]},
      "task": {"type": "master", "index": 0}},
     ValueError, "If `master` node exists in `cluster`, job `chief` is not supported."),
    ({"cluster": MASTER_CLUSTER, "task": {"type": "evaluator", "index": 0}},
     ValueError, "If `master` node exists in `cluster`, task_type `evaluator` is not "
                 "supported."),
    ({"cluster": CLUSTER, "task": {"type": "chief", "index": 0}, "service": "x"},
     TypeError, 'If "service" is set in TF_CONFIG, it must be a dict.'),
    ({"model_dir": ""}, ValueError, "model_dir in TF_CONFIG should be non-empty."),
]


@pytest.mark.parametrize("tf_config, error, message", BAD,
                         ids=[m[:40] for _, _, m in BAD])
def test_malformed_tf_config_gets_tfs_error(monkeypatch, tf_config, error, message):
    set_tf_config(monkeypatch, **tf_config)
    with pytest.raises(error) as info:
        RunConfig()
    assert message in str(info.value)


def test_model_dir_from_tf_config_must_agree(monkeypatch):
    set_tf_config(monkeypatch, model_dir="/tmp/from_tf_config")
    assert RunConfig().model_dir == "/tmp/from_tf_config"
    assert RunConfig(model_dir="/tmp/from_tf_config").model_dir == "/tmp/from_tf_config"
    with pytest.raises(ValueError, match="must have the same value as the model_dir "
                                         "in TF_CONFIG"):
        RunConfig(model_dir="/tmp/elsewhere")


def test_checkpoint_intervals_exclude_each_other(monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    default = RunConfig()
    assert default.save_checkpoints_steps is None
    assert default.save_checkpoints_secs == 600
    assert (default.save_summary_steps, default.keep_checkpoint_max,
            default.log_step_count_steps) == (100, 5, 100)
    assert RunConfig(save_checkpoints_steps=7).save_checkpoints_secs is None
    assert RunConfig(save_checkpoints_secs=7).save_checkpoints_steps is None
    with pytest.raises(ValueError, match="cannot be both set"):
        RunConfig(save_checkpoints_steps=1, save_checkpoints_secs=1)
    replaced = default.replace(save_checkpoints_steps=3)
    assert replaced.save_checkpoints_steps == 3
    assert replaced.save_checkpoints_secs is None
    assert default.save_checkpoints_secs == 600  # replace copies
    with pytest.raises(ValueError, match="cannot be both set"):
        default.replace(save_checkpoints_steps=1, save_checkpoints_secs=1)


@pytest.mark.parametrize("kwargs, message", [
    ({"model_dir": ""}, "model_dir should be non-empty"),
    ({"save_summary_steps": -1}, "save_summary_steps should be >= 0"),
    ({"keep_checkpoint_max": -1}, "keep_checkpoint_max should be >= 0"),
    ({"log_step_count_steps": 0}, "log_step_count_steps should be > 0"),
    ({"tf_random_seed": 1.5}, "tf_random_seed must be integer."),
    ({"session_config": "config"}, "session_config must be instance of ConfigProto"),
    ({"device_fn": lambda x, y: ""}, 'device_fn must be callable with exactly one '
                                     'argument "op".'),
    ({"protocol": "http"}, "protocol should be grpc or grpc+verbs"),
    ({"cluster_spec": {}}, "Replacing cluster_spec is not supported."),
])
def test_replace_validates(monkeypatch, kwargs, message):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    with pytest.raises(ValueError) as info:
        RunConfig().replace(**kwargs)
    assert message in str(info.value)
