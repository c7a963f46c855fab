"""``RunConfig`` (TF 1.15's ``estimator/run_config.py``): how an ``Estimator``
runs, and which task of which cluster it is, read from ``TF_CONFIG``.

``TF_CONFIG`` is JSON ``{"cluster": {job: [addresses]}, "task": {"type": ...,
"index": ...}}``; a cluster must have exactly one ``chief`` (or, in the older
layout, one ``master``). The ``evaluator`` task stands outside the training
cluster: its ``cluster_spec`` is empty and its ``master`` local.

>>> import json, os
>>> import nbdist as nd
>>> os.environ["TF_CONFIG"] = json.dumps({
...     "cluster": {"chief": ["h0:2222"], "ps": ["h1:2222"],
...                 "worker": ["h2:2222", "h3:2222"]},
...     "task": {"type": "worker", "index": 1}})
>>> config = nd.estimator.RunConfig()
>>> config.master, config.num_ps_replicas, config.num_worker_replicas
('grpc://h3:2222', 1, 3)
>>> config.is_chief, config.global_id_in_cluster
(False, 2)
>>> del os.environ["TF_CONFIG"]
"""

from __future__ import annotations

import copy
import logging
import os

from nbdist.distribute.strategies.distribute_coordinator_context import (
    get_current_worker_context,
)
from nbdist.estimator.model_fn import fn_args
from nbdist.proto.config_pb2 import ConfigProto
from nbdist.runtime import env
from nbdist.runtime.cluster_spec import ClusterSpec

__all__ = ["RunConfig", "TaskType"]

_log = logging.getLogger("nbdist.estimator")
_USE_DEFAULT = object()
_REPLACEABLE = [
    "model_dir", "tf_random_seed", "save_summary_steps", "save_checkpoints_steps",
    "save_checkpoints_secs", "session_config", "keep_checkpoint_max",
    "keep_checkpoint_every_n_hours", "log_step_count_steps", "train_distribute",
    "device_fn", "protocol", "eval_distribute", "experimental_distribute",
    "experimental_max_worker_delay_secs", "session_creation_timeout_secs",
]
_SAVE_CKPT_ERR = (
    "`save_checkpoints_steps` and `save_checkpoints_secs` cannot be both set.")
_LOCAL_MASTER = ""
_GRPC_SCHEME = "grpc://"


class TaskType:
    MASTER = "master"
    PS = "ps"
    WORKER = "worker"
    CHIEF = "chief"
    EVALUATOR = "evaluator"


def _tf_config() -> dict:
    """This task's ``TF_CONFIG``: made from the current worker context (a task's
    thread of a ``%%cluster`` cell or ``run_distribute_coordinator``: the
    environment is the process's, shared by its threads), else the
    environment's. The evaluator, when the cluster has one, stands outside it."""
    context = get_current_worker_context()
    if context is None or not context.cluster_spec or not context.task_type:
        return env.tf_config()
    cluster = context.cluster_spec.as_dict()
    cluster.pop(TaskType.EVALUATOR, None)
    return {"cluster": cluster,
            "task": {"type": context.task_type, "index": context.task_id or 0}}


def _session_master(cluster_spec, task_type, task_id, tf_config):
    if "session_master" in tf_config:
        return tf_config["session_master"]
    jobs = cluster_spec.jobs
    if len(jobs) == 1 and len(cluster_spec.job_tasks(jobs[0])) == 1:
        return _LOCAL_MASTER  # a one-task cluster runs in process
    return _GRPC_SCHEME + cluster_spec.job_tasks(task_type)[task_id]


def _eval_session_master(task_type, tf_config):
    if task_type == TaskType.EVALUATOR:
        return tf_config.get("eval_session_master", _LOCAL_MASTER)
    return _LOCAL_MASTER


def _count_worker(cluster_spec, chief_task_type):
    jobs = cluster_spec.as_dict()
    return len(jobs.get(TaskType.WORKER, [])) + len(jobs.get(chief_task_type, []))


def _validate_task_type_and_task_id(cluster_spec, task_env, chief_task_type):
    if chief_task_type not in cluster_spec.jobs:
        raise ValueError(
            f'If "cluster" is set in TF_CONFIG, it must have one "{chief_task_type}" '
            "node.")
    if len(cluster_spec.job_tasks(chief_task_type)) > 1:
        raise ValueError(
            f'The "cluster" in TF_CONFIG must have only one "{chief_task_type}" node.')
    task_type = task_env.get("type")
    task_id = task_env.get("index")
    if not task_type:
        raise ValueError('If "cluster" is set in TF_CONFIG, task type must be set.')
    if task_id is None:
        raise ValueError('If "cluster" is set in TF_CONFIG, task index must be set.')
    task_id = int(task_id)
    if task_id < 0:
        raise ValueError("Task index must be non-negative number.")
    if task_type == TaskType.EVALUATOR:
        return task_type, task_id
    note = "\n\nNote that these values may be coming from the TF_CONFIG environment "
    note += "variable."
    if task_type not in cluster_spec.jobs:
        raise ValueError(f"{task_type} is not a valid task_type in the cluster_spec:"
                         f"\n{cluster_spec}{note}")
    if not 0 <= task_id < len(cluster_spec.job_tasks(task_type)):
        raise ValueError(f"{task_id} is not a valid task_id for task_type "
                         f"{task_type} in the cluster_spec:\n{cluster_spec}{note}")
    return task_type, task_id


def _global_id_in_cluster(cluster_spec, task_type, task_id, chief_task_type):
    # The chief first, then other jobs by name, the ps last (TF's numbering).
    order = [chief_task_type] + [t for t in sorted(cluster_spec.jobs)
                                 if t not in (chief_task_type, TaskType.PS)]
    if TaskType.PS in cluster_spec.jobs:
        order.append(TaskType.PS)
    next_id = 0
    for t in order:
        if t == task_type:
            return next_id + task_id
        next_id += len(cluster_spec.job_tasks(t))
    raise RuntimeError(f"Internal Error: `task_type` ({task_type}) is not in "
                       f"cluster_spec ({cluster_spec}).")


def _model_dir(tf_config, model_dir):
    if model_dir == "":
        raise ValueError("model_dir should be non-empty.")
    in_config = tf_config.get("model_dir")
    if in_config == "":
        raise ValueError("model_dir in TF_CONFIG should be non-empty.")
    if in_config and model_dir and in_config != model_dir:
        raise ValueError(
            "`model_dir` provided in RunConfig construct, if set, must have the "
            "same value as the model_dir in TF_CONFIG. "
            f'model_dir: {model_dir}\nTF_CONFIG["model_dir"]: {in_config}.\n')
    return model_dir or in_config


_CHECKS = [  # (property, condition on a set value, TF's message)
    ("model_dir", lambda v: v, "model_dir should be non-empty"),
    ("save_summary_steps", lambda v: v >= 0, "save_summary_steps should be >= 0"),
    ("save_checkpoints_steps", lambda v: v >= 0,
     "save_checkpoints_steps should be >= 0"),
    ("save_checkpoints_secs", lambda v: v >= 0,
     "save_checkpoints_secs should be >= 0"),
    ("session_config", lambda v: isinstance(v, ConfigProto),
     "session_config must be instance of ConfigProto"),
    ("keep_checkpoint_max", lambda v: v >= 0, "keep_checkpoint_max should be >= 0"),
    ("keep_checkpoint_every_n_hours", lambda v: v > 0,
     "keep_checkpoint_every_n_hours should be > 0"),
    ("log_step_count_steps", lambda v: v > 0, "log_step_count_steps should be > 0"),
    ("tf_random_seed", lambda v: isinstance(v, int), "tf_random_seed must be integer."),
    ("experimental_max_worker_delay_secs", lambda v: isinstance(v, int),
     "experimental_max_worker_delay_secs must be an integer if set."),
    ("session_creation_timeout_secs", lambda v: v > 0,
     "session_creation_timeout_secs should be > 0"),
    ("device_fn", lambda v: callable(v) and set(fn_args(v)) == {"op"},
     'device_fn must be callable with exactly one argument "op".'),
    ("protocol", lambda v: v in ("grpc", "grpc+verbs"),
     "protocol should be grpc or grpc+verbs"),
]


class RunConfig:
    """Where an ``Estimator`` writes, how often it checkpoints and summarizes,
    and (from ``TF_CONFIG``) which task of which cluster this process is.

    ``save_checkpoints_steps`` and ``save_checkpoints_secs`` exclude each other;
    with neither given, a checkpoint is written every 600 seconds. Replace
    fields of a copy with ``replace(**kwargs)``.

    >>> import nbdist as nd
    >>> config = nd.estimator.RunConfig(save_checkpoints_steps=10)
    >>> config.save_checkpoints_secs, config.task_type, config.is_chief
    (None, 'worker', True)
    >>> config.replace(save_checkpoints_secs=5).save_checkpoints_steps is None
    True
    """

    def __init__(self, model_dir=None, tf_random_seed=None, save_summary_steps=100,
                 save_checkpoints_steps=_USE_DEFAULT,
                 save_checkpoints_secs=_USE_DEFAULT, session_config=None,
                 keep_checkpoint_max=5, keep_checkpoint_every_n_hours=10000,
                 log_step_count_steps=100, train_distribute=None, device_fn=None,
                 protocol=None, eval_distribute=None, experimental_distribute=None,
                 experimental_max_worker_delay_secs=None,
                 session_creation_timeout_secs=7200):
        steps_default = save_checkpoints_steps is _USE_DEFAULT
        secs_default = save_checkpoints_secs is _USE_DEFAULT
        if steps_default and secs_default:
            save_checkpoints_steps, save_checkpoints_secs = None, 600
        elif secs_default:
            save_checkpoints_secs = None
        elif steps_default:
            save_checkpoints_steps = None
        elif save_checkpoints_steps is not None and save_checkpoints_secs is not None:
            raise ValueError(_SAVE_CKPT_ERR)
        tf_config = _tf_config()
        if tf_config:
            _log.info("TF_CONFIG environment variable: %s", tf_config)
        model_dir = os.fspath(model_dir) if model_dir is not None else None
        RunConfig._replace(
            self, model_dir=_model_dir(tf_config, model_dir),
            tf_random_seed=tf_random_seed, save_summary_steps=save_summary_steps,
            save_checkpoints_steps=save_checkpoints_steps,
            save_checkpoints_secs=save_checkpoints_secs,
            session_config=session_config, keep_checkpoint_max=keep_checkpoint_max,
            keep_checkpoint_every_n_hours=keep_checkpoint_every_n_hours,
            log_step_count_steps=log_step_count_steps,
            train_distribute=train_distribute, device_fn=device_fn,
            protocol=protocol, eval_distribute=eval_distribute,
            experimental_distribute=experimental_distribute,
            experimental_max_worker_delay_secs=experimental_max_worker_delay_secs,
            session_creation_timeout_secs=session_creation_timeout_secs)
        self._init_distributed_setting_from_environment_var(tf_config)
        if not self._session_config and self._cluster_spec:
            RunConfig._replace(self, session_config=self._distributed_session_config())

    def _distributed_session_config(self):
        # Chief and workers talk only to the ps (and themselves), as TF sets it.
        filters = {
            TaskType.MASTER: ["/job:ps", "/job:master"],
            TaskType.CHIEF: ["/job:ps", "/job:chief"],
            TaskType.WORKER: ["/job:ps", f"/job:worker/task:{self._task_id}"],
            TaskType.PS: ["/job:ps", "/job:worker", "/job:chief", "/job:master"],
        }.get(self._task_type)
        if filters is None:
            return None
        return ConfigProto(allow_soft_placement=True, device_filters=filters)

    def _init_distributed_setting_from_environment_var(self, tf_config):
        service = tf_config.get("service")
        if service is not None and not isinstance(service, dict):
            raise TypeError('If "service" is set in TF_CONFIG, it must be a dict. '
                            f"Given {type(service)}")
        self._service = service
        self._cluster_spec = ClusterSpec(tf_config.get("cluster", {}))
        task_env = tf_config.get("task", {})
        if self._cluster_spec and TaskType.MASTER in self._cluster_spec.jobs:
            self._init_with_master(tf_config, task_env)
        elif self._cluster_spec:
            self._task_type, self._task_id = _validate_task_type_and_task_id(
                self._cluster_spec, task_env, TaskType.CHIEF)
            self._evaluation_master = _eval_session_master(self._task_type, tf_config)
            if self._task_type != TaskType.EVALUATOR:
                self._set_training_cluster(tf_config, TaskType.CHIEF)
            else:
                self._cluster_spec = ClusterSpec({})
                self._master = _LOCAL_MASTER
                self._num_ps_replicas = 0
                self._num_worker_replicas = 0
                self._global_id_in_cluster = None
            self._is_chief = self._task_type == TaskType.CHIEF
        else:
            self._task_type = task_env.get("type", TaskType.WORKER)
            self._task_id = int(task_env.get("index", 0))
            self._global_id_in_cluster = 0
            if self._task_type != TaskType.WORKER:
                raise ValueError(
                    'If "cluster" is not set in TF_CONFIG, task type must be WORKER.')
            if self._task_id != 0:
                raise ValueError(
                    'If "cluster" is not set in TF_CONFIG, task index must be 0.')
            self._master = tf_config.get("session_master", _LOCAL_MASTER)
            self._evaluation_master = tf_config.get("eval_session_master",
                                                    _LOCAL_MASTER)
            self._is_chief = True
            self._num_ps_replicas = 0
            self._num_worker_replicas = 1

    def _set_training_cluster(self, tf_config, chief_task_type):
        spec = self._cluster_spec
        self._master = _session_master(spec, self._task_type, self._task_id,
                                       tf_config)
        self._num_ps_replicas = len(spec.as_dict().get(TaskType.PS, []))
        self._num_worker_replicas = _count_worker(spec, chief_task_type)
        self._global_id_in_cluster = _global_id_in_cluster(
            spec, self._task_type, self._task_id, chief_task_type)

    def _init_with_master(self, tf_config, task_env):
        if TaskType.CHIEF in self._cluster_spec.jobs:
            raise ValueError("If `master` node exists in `cluster`, job `chief` is "
                             "not supported.")
        self._task_type, self._task_id = _validate_task_type_and_task_id(
            self._cluster_spec, task_env, TaskType.MASTER)
        if self._task_type == TaskType.EVALUATOR:
            raise ValueError("If `master` node exists in `cluster`, task_type "
                             "`evaluator` is not supported.")
        self._set_training_cluster(tf_config, TaskType.MASTER)
        self._evaluation_master = _eval_session_master(self._task_type, tf_config)
        self._is_chief = self._task_type == TaskType.MASTER

    cluster_spec = property(lambda self: self._cluster_spec)
    device_fn = property(lambda self: self._device_fn)
    evaluation_master = property(lambda self: self._evaluation_master)
    is_chief = property(lambda self: self._is_chief)
    master = property(lambda self: self._master)
    num_ps_replicas = property(lambda self: self._num_ps_replicas)
    num_worker_replicas = property(lambda self: self._num_worker_replicas)
    task_id = property(lambda self: self._task_id)
    task_type = property(lambda self: self._task_type)
    global_id_in_cluster = property(lambda self: self._global_id_in_cluster)
    experimental_max_worker_delay_secs = property(
        lambda self: self._experimental_max_worker_delay_secs)
    tf_random_seed = property(lambda self: self._tf_random_seed)
    save_summary_steps = property(lambda self: self._save_summary_steps)
    save_checkpoints_secs = property(lambda self: self._save_checkpoints_secs)
    save_checkpoints_steps = property(lambda self: self._save_checkpoints_steps)
    session_config = property(lambda self: self._session_config)
    keep_checkpoint_max = property(lambda self: self._keep_checkpoint_max)
    keep_checkpoint_every_n_hours = property(
        lambda self: self._keep_checkpoint_every_n_hours)
    session_creation_timeout_secs = property(
        lambda self: self._session_creation_timeout_secs)
    log_step_count_steps = property(lambda self: self._log_step_count_steps)
    model_dir = property(lambda self: self._model_dir)
    service = property(lambda self: self._service)
    train_distribute = property(lambda self: self._train_distribute)
    eval_distribute = property(lambda self: self._eval_distribute)
    experimental_distribute = property(lambda self: self._experimental_distribute)
    protocol = property(lambda self: self._protocol)

    def replace(self, **kwargs):
        """A copy with the given properties replaced (only TF's replaceable ones:
        ``model_dir``, ``save_checkpoints_steps`` ...); setting one of the two
        checkpoint intervals clears the other."""
        return RunConfig._replace(copy.deepcopy(self), **kwargs)

    @staticmethod
    def _replace(config, **kwargs):
        for key, value in kwargs.items():
            if key not in _REPLACEABLE:
                raise ValueError(f"Replacing {key} is not supported. Allowed "
                                 f"properties are {_REPLACEABLE}.")
            setattr(config, "_" + key, value)
        steps, secs = config.save_checkpoints_steps, config.save_checkpoints_secs
        if "save_checkpoints_steps" in kwargs and "save_checkpoints_secs" in kwargs:
            if steps is not None and secs is not None:
                raise ValueError(_SAVE_CKPT_ERR)
        elif "save_checkpoints_steps" in kwargs and steps is not None:
            config._save_checkpoints_secs = None
        elif "save_checkpoints_secs" in kwargs and secs is not None:
            config._save_checkpoints_steps = None
        for name, ok, message in _CHECKS:
            value = getattr(config, name)
            if value is not None and not ok(value):
                raise ValueError(message)
        return config
