"""The port shims (issue 12): ``nd.compat.v1``, ``nd.app`` (absl flags),
``nd.contrib.training``, ``nd.train.Supervisor``, and
``ParameterServerStrategy``'s dataset methods with a ``ClusterCoordinator``.

* ``compat.v1`` forwards to the very objects of ``nd`` (also names added
  later); a TF1 program written against it computes what NumPy computes.
* ``nd.app.run`` parses flags, tolerates undefined ones, calls ``main`` and
  exits with its value (in a child process: absl's state is per process).
* ``Supervisor``: trains N steps equal to NumPy gradient descent; a second
  Supervisor in the same logdir restores them; a non-chief waits for the
  chief; its checkpoint and summary threads run; errors reach ``stop``.
* ``distribute_datasets_from_function`` (TF's ``ClusterCoordinator`` example)
  on 1 ps + 2 in-process workers: every worker reads its own copy.
* ``examples/trainer_app.py`` (``nd.app.flags``, ``Supervisor``,
  ``nd.app.run``) as 1 ps + 2 worker processes prints a falling loss.
"""

from __future__ import annotations

import importlib.util
import logging
import re
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT, free_port, local_cluster
from test_training_cluster import Proc

import nbdist as nd
from nbdist import errors
from nbdist.distribute.coordinator.cluster_coordinator import ClusterCoordinator
from nbdist.distribute.strategies.parameter_server_strategy import (
    ParameterServerStrategy,
)
from nbdist.proto import summary_pb2

TRAINER_APP = ROOT / "examples" / "trainer_app.py"


# -- compat.v1 -----------------------------------------------------------------------
def test_compat_v1_names_are_the_objects_of_nd():
    v1 = nd.compat.v1
    for name in ("Session", "placeholder", "get_variable", "variable_scope",
                 "global_variables_initializer", "ConfigProto", "constant", "matmul",
                 "Variable", "Graph", "device", "float32", "GraphKeys",
                 "InteractiveSession", "Server", "ClusterSpec", "gradients"):
        assert getattr(v1, name) is getattr(nd, name), name
    for module in ("train", "nn", "data", "distribute", "errors", "random"):
        assert getattr(v1, module) is getattr(nd, module), module
    assert v1.train.Supervisor is nd.train.Supervisor
    assert v1.train.replica_device_setter is nd.train.replica_device_setter
    assert v1.errors.OutOfRangeError is errors.OutOfRangeError
    assert v1.app is nd.app and v1.flags is nd.app.flags
    assert {"Session", "train", "logging", "disable_v2_behavior"} <= set(dir(v1))


def test_compat_v1_follows_names_added_later(monkeypatch):
    marker = object()
    monkeypatch.setattr(nd, "a_name_added_later", marker, raising=False)
    assert nd.compat.v1.a_name_added_later is marker


def test_compat_v1_switches_and_missing_names():
    v1 = nd.compat.v1
    assert v1.disable_v2_behavior() is None
    assert v1.disable_eager_execution() is None
    assert v1.executing_eagerly() is False
    with pytest.raises(NotImplementedError, match="no eager mode"):
        v1.enable_eager_execution()
    assert v1.estimator is nd.estimator  # built in wave 4 (issue 35)
    # A name left out on purpose (api_coverage's native-library rule).
    with pytest.raises(AttributeError, match="tf.compat.v1.load_op_library"):
        v1.load_op_library  # noqa: B018


def test_a_tf1_program_through_compat_v1_matches_numpy():
    tf = nd.compat.v1
    tf.disable_v2_behavior()
    x_val = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    with tf.Graph().as_default():
        x = tf.placeholder(tf.float32, [None, 2], name="x")
        with tf.variable_scope("layer"):
            w = tf.get_variable("w", [2, 1], initializer=tf.constant_initializer(0.5))
        y = tf.nn.relu(tf.matmul(x, w) - 1.0)
        with tf.Session(config=tf.ConfigProto()) as sess:
            sess.run(tf.global_variables_initializer())
            out = sess.run(y, {x: x_val})
    assert w.name == "layer/w:0"
    np.testing.assert_allclose(out, np.maximum(x_val @ np.full((2, 1), 0.5) - 1.0, 0))


def test_compat_v1_logging_drives_the_nbdist_logger(caplog):
    log = nd.compat.v1.logging
    logger = logging.getLogger("nbdist")
    level = logger.level
    try:
        log.set_verbosity(log.INFO)
        assert log.get_verbosity() == log.INFO == logging.INFO
        with caplog.at_level(logging.INFO, logger="nbdist"):
            log.info("step %d", 3)
            log.debug("hidden")
            for _ in range(5):
                log.log_first_n(log.WARN, "first", 2)
        messages = [r.getMessage() for r in caplog.records if r.name == "nbdist"]
        assert messages == ["step 3", "first", "first"]
    finally:
        logger.setLevel(level)


def test_contrib_training_aliases():
    ct = nd.contrib.training
    assert ct.GreedyLoadBalancingStrategy is nd.train.GreedyLoadBalancingStrategy
    assert ct.byte_size_load_fn is nd.train.byte_size_load_fn


# -- nd.app -------------------------------------------------------------------------
_APP_SCRIPT = """
import sys
import nbdist as nd
nd.app.flags.DEFINE_integer("n", 1, "a number")
nd.app.flags.DEFINE_string("who", "nobody", "a name")
def main(argv):
    print("argv", argv[1:], "n", nd.app.flags.FLAGS.n, "who", nd.app.flags.FLAGS.who)
    return nd.app.flags.FLAGS.n
nd.app.run()
"""


def test_app_run_parses_flags_calls_main_and_exits_with_its_value():
    p = subprocess.run([sys.executable, "-c", _APP_SCRIPT, "--n=7", "--who=ps",
                        "--undefined_flag=1", "rest"], capture_output=True, text=True,
                       timeout=120, cwd=ROOT, check=False)
    assert p.returncode == 7, p.stderr
    assert "argv ['--undefined_flag=1', 'rest'] n 7 who ps" in p.stdout, p.stdout


# -- Supervisor --------------------------------------------------------------------------
LR = 0.1
_RNG = np.random.default_rng(5)
X = _RNG.standard_normal((16, 3)).astype(np.float32)
Y = (X @ np.array([[1.0], [-2.0], [0.5]], np.float32) + 0.3).astype(np.float32)


def linear_model(device=None):
    """A linear regression trained by gradient descent on (X, Y)."""
    with nd.device(device):
        w = nd.Variable(np.zeros((3, 1), np.float32), name="w")
        b = nd.Variable(0.0, name="b")
        step = nd.train.get_or_create_global_step()
    loss = nd.reduce_mean(nd.square(nd.matmul(nd.constant(X), w) + b - Y))
    train_op = nd.train.GradientDescentOptimizer(LR).minimize(loss, global_step=step)
    return w, b, step, train_op


def numpy_gd(steps):
    w, b = np.zeros((3, 1), np.float64), 0.0
    for _ in range(steps):
        err = X @ w + b - Y
        w, b = w - LR * 2 * X.T @ err / len(X), b - LR * 2 * err.mean()
    return w, b


def test_supervisor_trains_and_a_second_supervisor_restores(tmp_path):
    steps = 7
    with nd.Graph().as_default():
        w, b, step, train_op = linear_model()
        sv = nd.train.Supervisor(logdir=str(tmp_path), save_model_secs=0)
        assert sv.is_chief and sv.global_step is step and sv.saver is not None
        with sv.managed_session() as sess:
            for _ in range(100):  # bounded; stops after ``steps``
                if sv.should_stop():
                    break
                sess.run(train_op)
                if sess.run(step) >= steps:
                    sv.request_stop()
            first = sess.run([w, b])
            sv.saver.save(sess, sv.save_path, global_step=step)
        assert nd.get_default_graph().finalized
    w_np, b_np = numpy_gd(steps)
    np.testing.assert_allclose(first[0], w_np, rtol=1e-5, atol=1e-6)
    assert first[1] == pytest.approx(b_np, rel=1e-5)
    assert (tmp_path / "graph.pbtxt").exists()

    with nd.Graph().as_default():
        w, b, step, train_op = linear_model()
        sv = nd.train.Supervisor(logdir=str(tmp_path), save_model_secs=0)
        with sv.managed_session() as sess:
            restored = sess.run([w, b, step])
            sess.run(train_op)
            after = sess.run([w, b])
    np.testing.assert_array_equal(restored[0], first[0])
    assert restored[1] == first[1] and restored[2] == steps
    w_np, b_np = numpy_gd(steps + 1)
    np.testing.assert_allclose(after[0], w_np, rtol=1e-5, atol=1e-6)


def test_supervisor_non_chief_waits_for_the_chief(servers):
    spec = local_cluster(ps=1, worker=2)
    targets = [servers(spec, "ps", 0).target] + [
        servers(spec, "worker", i).target for i in range(2)]
    results, errs = {}, []
    waiting = threading.Event()

    class Watch(logging.Handler):
        def emit(self, record):
            if "Waiting for model to be ready" in record.getMessage():
                waiting.set()

    def run(i):
        try:
            with nd.Graph().as_default():
                w, b, _, _ = linear_model("/job:ps/task:0")
                sv = nd.train.Supervisor(is_chief=(i == 0), logdir=None,
                                         recovery_wait_secs=0.2)
                config = nd.ConfigProto(device_filters=["/job:ps",
                                                        f"/job:worker/task:{i}"])
                with sv.managed_session(targets[1 + i], config=config) as sess:
                    results[i] = sess.run([w, b])
        except BaseException as e:  # noqa: BLE001 - reported below
            errs.append(e)

    handler = Watch()
    logger = logging.getLogger("nbdist")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        worker = threading.Thread(target=run, args=(1,), daemon=True)
        worker.start()
        assert waiting.wait(60), "the non-chief never waited for the model"
        assert worker.is_alive()
        chief = threading.Thread(target=run, args=(0,), daemon=True)
        chief.start()
        for t in (chief, worker):
            t.join(120)
            assert not t.is_alive()
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    assert not errs, errs
    for i in range(2):
        np.testing.assert_array_equal(results[i][0], np.zeros((3, 1), np.float32))


def test_supervisor_non_chief_needs_variables_placed():
    with nd.Graph().as_default():
        nd.Variable(1.0, name="unplaced")
        with pytest.raises(ValueError, match="unplaced"):
            nd.train.Supervisor(is_chief=False)


def test_supervisor_threads_save_and_write_summaries(tmp_path):
    class Writer:
        def __init__(self):
            self.added, self.closed, self.event = [], False, threading.Event()

        def add_summary(self, summary, global_step):
            self.added.append((summary, global_step))
            self.event.set()

        def close(self):
            self.closed = True

    writer = Writer()
    with nd.Graph().as_default():
        *_, train_op = linear_model()
        summary = nd.constant(b"summary bytes")
        sv = nd.train.Supervisor(logdir=str(tmp_path), summary_op=summary,
                                 summary_writer=writer, save_model_secs=3600,
                                 save_summaries_secs=3600)
        with sv.managed_session() as sess:
            assert writer.event.wait(60)  # the first runs at once
            deadline = time.monotonic() + 60
            # A file appearing has no event to wait on: look again.
            while nd.train.latest_checkpoint(str(tmp_path)) is None:
                assert time.monotonic() < deadline, "no checkpoint from the thread"
                time.sleep(0.05)
            sess.run(train_op)
    assert writer.added[0] == (b"summary bytes", 0)
    assert writer.closed
    assert nd.train.latest_checkpoint(str(tmp_path)).endswith("model.ckpt-0")


def _events(logdir):
    """The ``Event`` protos of every event file in ``logdir`` (TFRecord framing:
    length, its CRC, data, its CRC)."""
    out = []
    for path in sorted(Path(logdir).glob("events.out.tfevents.*")):
        data = path.read_bytes()
        pos = 0
        while pos + 12 <= len(data):
            (length,) = struct.unpack("<Q", data[pos:pos + 8])
            out.append(summary_pb2.Event.FromString(data[pos + 12:pos + 12 + length]))
            pos += 12 + length + 4
    return out


def test_supervisor_default_summaries_go_to_an_event_file_in_logdir(tmp_path):
    with nd.Graph().as_default():
        *_, train_op = linear_model()
        nd.summary.scalar("answer", nd.constant(42.0))
        sv = nd.train.Supervisor(logdir=str(tmp_path), save_model_secs=0)
        assert sv.summary_op is not None and sv.summary_writer is not None
        with sv.managed_session() as sess:
            sess.run(train_op)
    # The summary thread ran once at the start; stop() flushed and closed.
    events = _events(tmp_path)
    assert any(e.HasField("graph_def") for e in events)
    values = [(e.step, v.tag, v.simple_value) for e in events
              for v in e.summary.value]
    assert values == [(0, "answer", 42.0)]


def test_managed_session_stops_quietly_at_out_of_range_and_reraises_others():
    with nd.Graph().as_default():
        linear_model()
        sv = nd.train.Supervisor(save_model_secs=0)
        with sv.managed_session():
            raise errors.OutOfRangeError(None, None, "end of data")
        assert sv.should_stop()
        with pytest.raises(ValueError, match="boom"), sv.managed_session():
            raise ValueError("boom")


# -- ParameterServerStrategy datasets --------------------------------------------------
@pytest.fixture
def ps_strategy(servers):
    """A ParameterServerStrategy and its ClusterCoordinator on 1 ps + 2 workers,
    in-process servers on 127.0.0.1."""
    spec = local_cluster(ps=1, worker=2)
    for job in ("ps", "worker"):
        for i in range(len(spec[job])):
            servers(spec, job, i)
    strategy = nd.distribute.experimental.ParameterServerStrategy(
        nd.train.ClusterSpec(spec))
    coordinator = ClusterCoordinator(strategy)
    yield strategy, coordinator
    coordinator.close()


def _cycle_prefixes(counts, cycle):
    return sorted(v for n in counts for v in (cycle * (n // len(cycle) + 1))[:n])


def test_distribute_datasets_from_function_with_the_coordinator(ps_strategy):
    """TF's ClusterCoordinator example: each worker reads its own copy."""
    strategy, coordinator = ps_strategy
    contexts = []

    def dataset_fn(input_context):
        contexts.append(input_context)
        return nd.data.Dataset.from_tensor_slices([1, 2, 3]).repeat()

    with strategy.scope():
        v = nd.Variable(initial_value=0, name="total")

    @nd.function
    def worker_fn(iterator):
        def replica_fn(x):
            v.assign_add(x)
            return x

        return strategy.run(replica_fn, args=(next(iterator),))

    per_worker_dataset = coordinator.create_per_worker_dataset(
        strategy.distribute_datasets_from_function(dataset_fn))
    per_worker_iterator = iter(per_worker_dataset)
    results = [coordinator.schedule(worker_fn, args=(per_worker_iterator,))
               for _ in range(8)]
    coordinator.join()
    values = [int(r.fetch()) for r in results]
    counts = [coordinator.stats.get(f"completed/worker:{i}", 0) for i in range(2)]
    assert sum(counts) == 8
    assert sorted(values) == _cycle_prefixes(counts, [1, 2, 3])
    with nd.Session(coordinator._strategy.extended.task_target("ps", 0),
                    config=nd.ConfigProto(device_filters=["/job:ps"])) as sess:
        assert int(sess.run(v)) == sum(values)
    [ctx] = contexts
    assert (ctx.num_input_pipelines, ctx.input_pipeline_id,
            ctx.num_replicas_in_sync) == (1, 0, 1)

    # The function form of the docs: a per-worker dataset function, decorated.
    @nd.function
    def per_worker_dataset_fn():
        return strategy.distribute_datasets_from_function(
            lambda _: nd.data.Dataset.from_tensor_slices([4, 4]).repeat())

    it = iter(coordinator.create_per_worker_dataset(per_worker_dataset_fn))
    assert int(coordinator.schedule(worker_fn, args=(it,)).fetch()) == 4


def test_experimental_distribute_dataset_gives_every_worker_all_of_it(ps_strategy):
    strategy, coordinator = ps_strategy

    @nd.function
    def worker_fn(iterator):
        return next(iterator)

    dataset = nd.data.Dataset.range(3).repeat()
    it = iter(coordinator.create_per_worker_dataset(
        strategy.experimental_distribute_dataset(dataset)))
    results = [coordinator.schedule(worker_fn, args=(it,)) for _ in range(6)]
    coordinator.join()
    counts = [coordinator.stats.get(f"completed/worker:{i}", 0) for i in range(2)]
    assert sorted(int(r.fetch()) for r in results) == _cycle_prefixes(
        counts, [0, 1, 2])


def test_strategy_dataset_methods_reject_what_is_not_a_dataset():
    spec = nd.train.ClusterSpec({"ps": ["localhost:1"], "worker": ["localhost:2"]})
    strategy = ParameterServerStrategy(spec)
    with pytest.raises(TypeError, match="dataset_fn must return an nd.data.Dataset, "
                                        "got list"):
        strategy.distribute_datasets_from_function(lambda ctx: [1, 2])
    with pytest.raises(TypeError, match="callable"):
        strategy.distribute_datasets_from_function([1, 2])
    with pytest.raises(TypeError, match="experimental_distribute_dataset"):
        strategy.experimental_distribute_dataset([1, 2])


# -- examples/trainer_app.py as processes ------------------------------------------------
def _import_trainer_app():
    spec = importlib.util.spec_from_file_location("trainer_app_example", TRAINER_APP)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_trainer_app_as_one_ps_and_two_worker_processes(tmp_path):
    common = [f"--ps_hosts=localhost:{free_port()}",
              f"--worker_hosts=localhost:{free_port()},localhost:{free_port()}",
              "--train_steps=60", "--log_every=10", f"--logdir={tmp_path}"]
    started = []
    try:
        ps = Proc([TRAINER_APP, *common, "--job_name=ps", "--task_index=0"])
        started.append(ps)
        ps.wait_for(r"^ps 0 serving at", 90)
        workers = {i: Proc([TRAINER_APP, *common, "--job_name=worker",
                            f"--task_index={i}"]) for i in (1, 0)}
        started += workers.values()
        for wp in workers.values():
            assert wp.wait(240) == 0, wp.output
        outputs = {i: wp.output for i, wp in workers.items()}
        assert ps.proc.poll() is None  # the ps serves until it is killed
    finally:
        for p in started:
            p.kill()
    steps = 0
    for i, out in outputs.items():
        losses = [float(x) for x in re.findall(rf"^worker {i} .*loss (\S+)$", out,
                                               re.MULTILINE)]
        local = int(re.search(rf"^worker {i} done after (\d+) local steps", out,
                              re.MULTILINE).group(1))
        steps += local
        # Near the noise floor (0.05 ** 2) at the end. Worker 1 may start late,
        # when the chief has trained the model already (or finished: no steps).
        assert len(losses) == (local >= 1) + local // 10, out  # --log_every=10
        if local:
            assert losses[-1] < 0.05, out
        if i == 0:
            assert len(losses) >= 2 and losses[-1] < 0.1 * losses[0], out
    assert steps >= 60
    # The chief's first step starts from zero weights (unless worker 1 was
    # quicker): its first loss is at most the mean square of its first batch.
    app = _import_trainer_app()
    _, y0 = app.make_batch(np.random.default_rng(0), 32)
    first = float(re.search(r"^worker 0 step 1 .*loss (\S+)$", outputs[0],
                            re.MULTILINE).group(1))
    assert first <= float(np.mean(y0 ** 2)) + 1e-3
    assert nd.train.latest_checkpoint(str(tmp_path)) is not None
