"""``train_and_evaluate`` (TF 1.15's ``estimator/training.py``): one call that
trains and evaluates an ``Estimator``, locally or as one task of a cluster.

Without a cluster in ``TF_CONFIG`` it trains and evaluates after each new
checkpoint (at most every ``throttle_secs``). With one, each process runs its
task's part: a ``ps`` serves variables until it is stopped, the ``chief`` and
``worker`` tasks start their server and train between-graph (variables on the
ps through ``replica_device_setter``, the chief writing checkpoints and
summaries), and the ``evaluator`` evaluates each new checkpoint, runs the
exporters, and returns once it has evaluated the final step.

>>> import nbdist as nd
>>> spec = nd.estimator.EvalSpec(lambda: None, steps=None, throttle_secs=0)
>>> spec.steps, spec.start_delay_secs, spec.exporters
(None, 120, ())
"""

from __future__ import annotations

import collections
import ipaddress
import logging
import socket
import time

from nbdist.distribute.strategies.distribute_coordinator_context import (
    get_current_worker_context,
)
from nbdist.estimator import exporter as exporter_lib
from nbdist.estimator.estimator import Estimator
from nbdist.estimator.model_fn import validate_hooks
from nbdist.estimator.run_config import TaskType
from nbdist.framework.ops import GraphKeys
from nbdist.proto.config_pb2 import ConfigProto
from nbdist.proto.server_def_pb2 import ServerDef
from nbdist.runtime import env
from nbdist.runtime.server_lib import Server
from nbdist.train.hooks import CheckpointSaverListener, SecondOrStepTimer

__all__ = ["EvalSpec", "TrainSpec", "train_and_evaluate"]

_log = logging.getLogger("nbdist.estimator")
_MAX_DELAY_SECS = 60
_DELAY_SECS_PER_WORKER = 5
_TRAINER_JOBS = (TaskType.CHIEF, TaskType.MASTER, TaskType.WORKER)


def _validate_input_fn(input_fn):
    if not callable(input_fn):
        raise TypeError(f"`input_fn` must be callable, given: {input_fn}")


def _validate_hooks(hooks):
    return validate_hooks(
        hooks, "All hooks must be `SessionRunHook` instances, given: {}")


def _validate_exporters(exporters):
    if not exporters:
        return ()
    if isinstance(exporters, exporter_lib.Exporter):
        exporters = [exporters]
    try:
        exporters = list(exporters)
    except TypeError:
        exporters = None
    if exporters is None or not all(isinstance(e, exporter_lib.Exporter)
                                    for e in exporters):
        raise TypeError("`exporters` must be an Exporter, an iterable of Exporter, "
                        f"or `None`, found {exporters}.")
    names = [e.name for e in exporters]
    for e in exporters:
        if not e.name:
            raise ValueError("An Exporter cannot have a name that is `None` or "
                             f"empty. All exporter names: {names}")
        if not isinstance(e.name, str):
            raise ValueError(
                f"An Exporter must have a string name. Given: {type(e.name)}")
    if len(set(names)) != len(names):
        raise ValueError("`exporters` must have unique names. Such a name cannot "
                         f"be `None`. All exporter names: {names}")
    return tuple(exporters)


class TrainSpec(collections.namedtuple("TrainSpec",
                                       ["input_fn", "max_steps", "hooks"])):
    """What ``train_and_evaluate`` trains on: ``input_fn``, up to global step
    ``max_steps`` (None: until the input ends), with extra ``hooks``.

    >>> import nbdist as nd
    >>> nd.estimator.TrainSpec(lambda: None, max_steps=0)
    Traceback (most recent call last):
    ...
    ValueError: Must specify max_steps > 0, given: 0
    """

    def __new__(cls, input_fn, max_steps=None, hooks=None):
        _validate_input_fn(input_fn)
        if max_steps is not None and max_steps <= 0:
            raise ValueError(f"Must specify max_steps > 0, given: {max_steps}")
        return super().__new__(cls, input_fn, max_steps, _validate_hooks(hooks))


class EvalSpec(collections.namedtuple("EvalSpec", [
        "input_fn", "steps", "name", "hooks", "exporters", "start_delay_secs",
        "throttle_secs"])):
    """How ``train_and_evaluate`` evaluates: ``steps`` batches of ``input_fn``
    (None: all of it) under ``name``, then the ``exporters``; the evaluator task
    starts after ``start_delay_secs`` and evaluates at most every
    ``throttle_secs``."""

    def __new__(cls, input_fn, steps=100, name=None, hooks=None, exporters=None,
                start_delay_secs=120, throttle_secs=600):
        _validate_input_fn(input_fn)
        if steps is not None and steps <= 0:
            raise ValueError(f"Must specify steps > 0, given: {steps}")
        if name is not None and not isinstance(name, str):
            raise TypeError(f"`name` must be string, given: {name}")
        if start_delay_secs < 0:
            raise ValueError(
                f"Must specify start_delay_secs >= 0, given: {start_delay_secs}")
        if throttle_secs < 0:
            raise ValueError(f"Must specify throttle_secs >= 0, given: {throttle_secs}")
        return super().__new__(cls, input_fn, steps, name, _validate_hooks(hooks),
                               _validate_exporters(exporters), start_delay_secs,
                               throttle_secs)


def _assert_eval_spec(eval_spec):
    if not isinstance(eval_spec, EvalSpec):
        raise TypeError("`eval_spec` must have type `tf.estimator.EvalSpec`. "
                        f"Got: {type(eval_spec)}")


def train_and_evaluate(estimator, train_spec, eval_spec):
    """Trains and evaluates ``estimator`` as this process's ``TF_CONFIG`` task
    (locally without one); see the module docstring. Locally, returns the last
    evaluation's metrics and the exporters' results; as a task of a cluster
    (the evaluator too) returns None, as TF 1.15 does: the evaluator's metrics
    are the summaries in ``estimator.eval_dir()`` (``nd.train.summary_iterator``,
    ``TrainingView(logdir=model_dir)`` draws them beside the training loss).

    >>> import nbdist as nd
    >>> nd.estimator.train_and_evaluate(None, None, None)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: `eval_spec` must have type `tf.estimator.EvalSpec`. Got: ...
    """
    _assert_eval_spec(eval_spec)
    executor = _TrainingExecutor(estimator, train_spec, eval_spec)
    config = estimator.config
    if config.task_type == TaskType.EVALUATOR and config.task_id > 0:
        raise ValueError(
            "For distributed training, there can only be one `evaluator` task "
            f"(with task id 0).  Given task id {config.task_id}")
    return executor.run()


class _EvalStatus:
    EVALUATED = "evaluated"
    MISSING_CHECKPOINT = "missing checkpoint"
    NO_NEW_CHECKPOINT = "no new checkpoint"


_EvalResult = collections.namedtuple("EvalResult",
                                     ["status", "metrics", "checkpoint_path"],
                                     defaults=(None, None))


class _Evaluator:
    """Evaluates the newest checkpoint once per checkpoint, then exports."""

    def __init__(self, estimator, eval_spec, max_training_steps):
        self._estimator = estimator
        self._eval_spec = eval_spec
        self._max_training_steps = max_training_steps
        self._previous_ckpt_path = None
        self._last_warning_time = 0.0
        self.is_final_export_triggered = False

    def evaluate_and_export(self):
        latest = self._estimator.latest_checkpoint()
        if not latest:
            self._warn("Estimator is not trained yet. Will start an evaluation "
                       "when a checkpoint is ready.")
            return _EvalResult(_EvalStatus.MISSING_CHECKPOINT), []
        if latest == self._previous_ckpt_path:
            self._warn("No new checkpoint ready for evaluation. Skip the current "
                       "evaluation pass as evaluation results are expected to be "
                       "same for the same checkpoint.")
            return _EvalResult(_EvalStatus.NO_NEW_CHECKPOINT), []
        metrics = self._estimator.evaluate(
            self._eval_spec.input_fn, steps=self._eval_spec.steps,
            name=self._eval_spec.name, checkpoint_path=latest,
            hooks=self._eval_spec.hooks)
        result = _EvalResult(_EvalStatus.EVALUATED, metrics, latest)
        is_final = bool(self._max_training_steps) and (
            metrics[GraphKeys.GLOBAL_STEP] >= self._max_training_steps)
        export_results = [
            exporter.export(
                estimator=self._estimator,
                export_path=f"{self._estimator.model_dir}/export/{exporter.name}",
                checkpoint_path=latest, eval_result=metrics,
                is_the_final_export=is_final)
            for exporter in self._eval_spec.exporters]
        self.is_final_export_triggered |= is_final
        self._previous_ckpt_path = latest
        self._last_warning_time = 0.0
        return result, export_results

    def _warn(self, message):
        # At most every 10 minutes, as TF: the evaluator polls for checkpoints.
        now = time.time()
        if now - self._last_warning_time > 600:
            _log.warning(message)
            self._last_warning_time = now


class _NewCheckpointListenerForEvaluate(CheckpointSaverListener):
    """Evaluates after a checkpoint (not the first, at most every
    ``throttle_secs``) and after the last one."""

    def __init__(self, evaluator, eval_throttle_secs):
        self._evaluator = evaluator
        self._eval_throttle_secs = eval_throttle_secs
        self.eval_result, self.export_results = None, None

    def begin(self):
        self._timer = SecondOrStepTimer(every_secs=self._eval_throttle_secs)
        self._is_first_run = True

    def after_save(self, session, global_step_value):
        del session
        if self._is_first_run:
            self._is_first_run = False
            return
        if self._timer.should_trigger_for_step(global_step_value):
            self._evaluate(global_step_value)
        else:
            _log.info("Skip the current checkpoint eval due to throttle secs "
                      "(%s secs).", self._eval_throttle_secs)

    def end(self, session, global_step_value):
        del session
        if global_step_value != self._timer.last_triggered_step():
            self._evaluate(global_step_value)

    def _evaluate(self, global_step_value):
        self._timer.update_last_triggered_step(global_step_value)
        self.eval_result, self.export_results = self._evaluator.evaluate_and_export()
        if self.eval_result.status != _EvalStatus.EVALUATED:
            raise RuntimeError("There was no new checkpoint after the training. "
                               f"Eval status: {self.eval_result.status}")


def _resolves_to_loopback_only(host: str) -> bool:
    """Whether ``host`` is a loopback address, or a name (a one-node SLURM
    job's node, say) that resolves to loopback addresses only."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError:
        return False  # unknown here: it may name another machine
    return bool(infos) and all(
        ipaddress.ip_address(info[4][0].split("%")[0]).is_loopback for info in infos)


def _bind_address(config) -> str:
    """Where this task's server listens: its own host of the cluster when that
    is beyond loopback (TF listens on every interface), which nbdist allows
    only with the cluster's ``NBDIST_TOKEN`` set; else 127.0.0.1."""
    address = config.cluster_spec.task_address(config.task_type, config.task_id)
    host = address.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return ""
    if _resolves_to_loopback_only(host):
        return ""
    if not env.token():
        raise RuntimeError(
            f"Could not start server for /job:{config.task_type}/task:"
            f"{config.task_id} at {address}: a server reachable beyond loopback "
            "needs NBDIST_TOKEN set (the same on every task), so that only the "
            "cluster's tasks can run ops on it.")
    return host


class _TrainingExecutor:
    """Runs the part of ``train_and_evaluate`` of this process's task."""

    def __init__(self, estimator, train_spec, eval_spec):
        if not isinstance(estimator, Estimator):
            raise TypeError("`estimator` must have type `tf.estimator.Estimator`. "
                            f"Got: {type(estimator)}")
        if not isinstance(train_spec, TrainSpec):
            raise TypeError("`train_spec` must have type `tf.estimator.TrainSpec`. "
                            f"Got: {type(train_spec)}")
        self._estimator = estimator
        self._train_spec = train_spec
        self._eval_spec = eval_spec

    def run(self):
        config = self._estimator.config
        if not config.cluster_spec and config.task_type != TaskType.EVALUATOR:
            _log.info("Running training and evaluation locally (non-distributed).")
            return self.run_local()
        if not config.task_type:
            raise ValueError(
                "`estimator.config` must have task_type set. This usually means "
                "TF_CONFIG environment is not set correctly.")
        if config.task_type == "local":
            raise ValueError(
                "`task.type` in TF_CONFIG cannot be `local`. Leaving `cluster` and "
                "`task` properties in TF_CONFIG absent triggers train and evaluate "
                "`Estimator` locally (non-distributed).")
        tasks = {"chief": self.run_chief, "worker": self.run_worker,
                 "master": self.run_master, "evaluator": self.run_evaluator,
                 "ps": self.run_ps}
        if config.task_type not in tasks:
            raise ValueError(f"Task type {config.task_type} is not supported. "
                             f"Supported task types are {sorted(tasks)}")
        # As TF 1.15: a task of a cluster returns nothing (its metrics are in
        # the evaluator's event files, ``estimator.eval_dir()``).
        tasks[config.task_type]()
        return None

    def run_chief(self):
        return self._start_distributed_training()

    def run_worker(self):
        return self._start_distributed_training()

    def run_master(self):
        evaluator = _Evaluator(self._estimator, self._eval_spec,
                               self._train_spec.max_steps)
        listener = _NewCheckpointListenerForEvaluate(evaluator,
                                                     self._eval_spec.throttle_secs)
        return self._start_distributed_training(saving_listeners=[listener])

    def run_evaluator(self):
        return self._start_continuous_evaluation()

    def run_ps(self):
        server = self._start_std_server(self._estimator.config)
        try:
            server.join()  # until the process is told to stop, as TF's ps
        finally:
            server.stop()

    def run_local(self):
        config = self._estimator.config
        _log.info("Start train and evaluate loop. The evaluate will happen after "
                  "every checkpoint. Checkpoint frequency is determined based on "
                  "RunConfig arguments: save_checkpoints_steps %s or "
                  "save_checkpoints_secs %s.", config.save_checkpoints_steps,
                  config.save_checkpoints_secs)
        evaluator = _Evaluator(self._estimator, self._eval_spec,
                               self._train_spec.max_steps)
        listener = _NewCheckpointListenerForEvaluate(evaluator,
                                                     self._eval_spec.throttle_secs)
        self._estimator.train(self._train_spec.input_fn,
                              max_steps=self._train_spec.max_steps,
                              hooks=list(self._train_spec.hooks),
                              saving_listeners=[listener])
        result = listener.eval_result or _EvalResult(_EvalStatus.MISSING_CHECKPOINT)
        return result.metrics, listener.export_results

    def _start_std_server(self, config):
        if not config.cluster_spec or not config.task_type or config.task_id is None:
            raise RuntimeError(
                "Could not start server; be sure to specify cluster_spec, "
                "task_type, and task in RunConfig or set the TF_CONFIG "
                "environment variable.")
        if not config.master:
            jobs = config.cluster_spec.jobs
            if (len(jobs) == 1 and len(config.cluster_spec.job_tasks(jobs[0])) == 1
                    and config.task_type in _TRAINER_JOBS):
                _log.info("Skip starting Tensorflow server as there is only one "
                          "node in the cluster.")
                return None
            raise RuntimeError("Could not start server; be sure to specify master "
                               "in RunConfig or set the TF_CONFIG environment "
                               "variable.")
        server_def = ServerDef(
            cluster=config.cluster_spec.as_cluster_def(), job_name=config.task_type,
            task_index=config.task_id, protocol=config.protocol or "grpc",
            default_session_config=ConfigProto(log_device_placement=False),
            bind_address=_bind_address(config))
        server = Server(server_def, start=False)
        server.start()
        return server

    def _start_distributed_training(self, saving_listeners=None):
        config = self._estimator.config
        # In a task's thread of a %%cluster cell the task's server is the
        # cluster's own process (as TF skips it where a launcher starts one).
        server = (None if get_current_worker_context() is not None
                  else self._start_std_server(config))
        delay = 0
        if config.task_type == TaskType.WORKER:
            max_delay = _MAX_DELAY_SECS
            if config.experimental_max_worker_delay_secs is not None:
                max_delay = int(config.experimental_max_worker_delay_secs)
            delay = min(max_delay, (config.task_id + 1) * _DELAY_SECS_PER_WORKER)
        if delay > 0:
            # TF staggers the workers' start so that they do not all update a
            # freshly initialized model at once.
            _log.info("Waiting %d secs before starting training.", delay)
            time.sleep(delay)
        try:
            self._estimator.train(self._train_spec.input_fn,
                                  max_steps=self._train_spec.max_steps,
                                  hooks=list(self._train_spec.hooks),
                                  saving_listeners=saving_listeners)
        finally:
            if server is not None:
                server.stop()

    def _start_continuous_evaluation(self):
        if self._eval_spec.start_delay_secs:
            _log.info("Waiting %f secs before starting eval.",
                      self._eval_spec.start_delay_secs)
            time.sleep(self._eval_spec.start_delay_secs)
        evaluator = _Evaluator(self._estimator, self._eval_spec,
                               self._train_spec.max_steps)
        latest = None
        while True:  # until the final step is evaluated, as TF's evaluator
            if latest is not None and latest.status == _EvalStatus.EVALUATED:
                step = latest.metrics.get(GraphKeys.GLOBAL_STEP)
                max_steps = self._train_spec.max_steps
                if step and max_steps and step >= max_steps:
                    _log.info("Exiting evaluation, global_step=%s >= train "
                              "max_steps=%s", step, max_steps)
                    return latest.metrics
            start = time.time()
            latest, _ = evaluator.evaluate_and_export()
            # The checkpoints are files another process writes: polled, at most
            # every throttle_secs, as TF's evaluator does.
            remaining = self._eval_spec.throttle_secs - (time.time() - start)
            if remaining > 0:
                time.sleep(remaining)
