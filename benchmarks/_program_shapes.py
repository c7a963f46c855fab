"""The TF1 programs ``bench_programs.py`` runs, one function per shape, each
written once and run in a child process with ``tf`` bound to ``nbdist`` or to
``tensorflow.compat.v1`` (the "replace ``tf.`` by ``nd.``" promise), and the
files their input pipelines read.

Imports NumPy and the standard library at the top, so TensorFlow's interpreter
loads it too; the framework is imported by ``child``.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np
from _cluster_tasks import answer_window_while_stepping

BATCH = 128
BATCHES = 16
N_WORKERS = 3
STEP_ON_S = 600.0  # the most a whole-run worker steps on after its steps
QUEUE_FILES, QUEUE_RECORDS = 2, 1000  # the queue and dataset shapes' TFRecord files


def import_tf(framework: str):
    if framework == "tf":
        import tensorflow.compat.v1 as tf

        tf.disable_eager_execution()
        return tf
    import nbdist as nd

    return nd


def model(tf, x, y, summaries="all"):
    """The MLP of bench_training (784-256-10), its loss and summaries (``"all"``:
    three scalars and a histogram; ``"two"``: the loss and the accuracy)."""
    w1 = tf.Variable(tf.truncated_normal([784, 256], stddev=0.05), name="w1")
    b1 = tf.Variable(tf.zeros([256]), name="b1")
    w2 = tf.Variable(tf.truncated_normal([256, 10], stddev=0.05), name="w2")
    b2 = tf.Variable(tf.zeros([10]), name="b2")
    hidden = tf.nn.relu(tf.matmul(x, w1) + b1)
    logits = tf.matmul(hidden, w2) + b2
    loss = tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
    )
    accuracy = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.float32))
    tf.summary.scalar("loss", loss)
    tf.summary.scalar("accuracy", accuracy)
    if summaries == "all":
        tf.summary.scalar("hidden_mean", tf.reduce_mean(hidden))
        tf.summary.histogram("w2", w2)
    return loss


def batches(index: int):
    rng = np.random.default_rng(index)
    xs = rng.standard_normal((BATCHES, BATCH, 784)).astype(np.float32)
    ys = rng.integers(0, 10, (BATCHES, BATCH)).astype(np.int64)
    return xs, ys


def supervisor_program(tf, server, spec, index: int, logdir: str, warmup: float,
                       summaries="all", chief_writes=True):
    """Between-graph training under a Supervisor, summaries written every step
    (the chief by ``sv.summary_computed`` when ``chief_writes``, else every
    worker with its own ``FileWriter``)."""
    is_chief = index == 0
    with on_ps(tf, spec, index):
        global_step = tf.train.get_or_create_global_step()
        x = tf.placeholder(tf.float32, [None, 784])
        y = tf.placeholder(tf.int64, [None])
        loss = model(tf, x, y, summaries)
        train_op = tf.train.GradientDescentOptimizer(0.01).minimize(
            loss, global_step=global_step)
        summary_op = tf.summary.merge_all()
    sv = tf.train.Supervisor(is_chief=is_chief, logdir=logdir, summary_op=None,
                             global_step=global_step)
    writer = None if is_chief and chief_writes else tf.summary.FileWriter(
        os.path.join(logdir, f"worker{index}"))
    config = worker_config(tf, index)
    xs, ys = batches(index)
    wait_for_go(index)
    with sv.managed_session(server.target, config=config) as sess:
        print("session", flush=True)

        def step(i):
            summary, gstep, _ = sess.run([summary_op, global_step, train_op],
                                         {x: xs[i % BATCHES], y: ys[i % BATCHES]})
            if writer is None:
                sv.summary_computed(sess, summary, gstep)
            else:
                writer.add_summary(summary, gstep)

        drive(profiled(step, index), warmup)


def summaries_program(tf, server, spec, index, logdir, warmup):
    """Issue 39's third program: every worker fetches a merged summary of two
    scalars each step and writes it with its own ``FileWriter.add_summary``."""
    supervisor_program(tf, server, spec, index, logdir, warmup, summaries="two",
                       chief_writes=False)


def queue_program(tf, server, spec, index: int, logdir: str, warmup: float):
    """A Supervisor program reading TFRecord files through TF1's queue pipeline:
    ``string_input_producer`` -> ``TFRecordReader`` -> ``parse_single_example``
    -> ``decode_raw`` -> ``shuffle_batch`` (2 threads), queue runners started
    by the Supervisor."""
    files = sorted(str(p) for p in Path(logdir).glob("records-*.tfrecord"))
    with on_ps(tf, spec, index):
        global_step = tf.train.get_or_create_global_step()
        _, serialized = tf.TFRecordReader().read(tf.train.string_input_producer(files))
        parsed = tf.parse_single_example(serialized, {
            "image_raw": tf.FixedLenFeature([], tf.string),
            "label": tf.FixedLenFeature([], tf.int64)})
        image = tf.cast(tf.decode_raw(parsed["image_raw"], tf.uint8), tf.float32)
        image.set_shape([784])
        x, y = tf.train.shuffle_batch([image / 255.0, parsed["label"]], 64,
                                      num_threads=2, capacity=1000,
                                      min_after_dequeue=500)
        loss = model(tf, x, y, summaries="two")
        train_op = tf.train.GradientDescentOptimizer(0.01).minimize(
            loss, global_step=global_step)
    train_from_queues(tf, server, index, logdir, warmup, global_step, train_op)


def train_from_queues(tf, server, index, logdir, warmup, global_step, train_op):
    """Run ``train_op`` (its input from queues) in a Supervisor's managed
    session, whose queue runners it starts."""
    sv = tf.train.Supervisor(is_chief=index == 0, logdir=logdir, summary_op=None,
                             global_step=global_step, save_model_secs=0)
    wait_for_go(index)
    with sv.managed_session(server.target, config=worker_config(tf, index)) as sess:
        print("session", flush=True)
        drive(profiled(lambda i: sess.run(train_op), index), warmup)
        sv.request_stop()


def worker_config(tf, index: int):
    """The session config of worker ``index``: it sees the ps and itself."""
    return tf.ConfigProto(device_filters=["/job:ps", f"/job:worker/task:{index}"])


def on_ps(tf, spec, index: int):
    """The device scope of worker ``index``'s graph: variables on the ps."""
    return tf.device(tf.train.replica_device_setter(
        cluster=spec, worker_device=f"/job:worker/task:{index}"))


def write_records(logdir: str) -> None:
    """The queue shape's TFRecord files (MNIST-shaped Examples) in ``logdir``."""
    from nbdist.executor import tf_record
    from nbdist.proto import example_pb2

    rng = np.random.default_rng(0)
    for k in range(QUEUE_FILES):
        with tf_record.TFRecordWriter(os.path.join(logdir,
                                                   f"records-{k}.tfrecord")) as w:
            for _ in range(QUEUE_RECORDS):
                ex = example_pb2.Example()
                f = ex.features.feature
                f["image_raw"].bytes_list.value.append(
                    rng.integers(0, 256, 784, dtype=np.uint8).tobytes())
                f["label"].int64_list.value.append(int(rng.integers(0, 10)))
                w.write(ex.SerializeToString())


def drive(run_step, warmup: float) -> None:
    """Step as the parent's mode says: ``BENCH_STEPS`` steps then ``done`` (the
    whole-run mode), or steps answering the timed window."""
    steps = int(os.environ.get("BENCH_STEPS") or 0)
    if not steps:
        answer_window_while_stepping(run_step, warmup)
        return
    t0 = time.monotonic()
    for i in range(steps):
        run_step(i)
    print(f"done {steps / (time.monotonic() - t0)}", flush=True)
    if os.environ.get("BENCH_STEP_ON"):
        # synchronous replicas: a worker that stopped would leave the others
        # waiting for its gradients; step on until the parent stops the task
        t_end = time.monotonic() + STEP_ON_S
        while time.monotonic() < t_end:
            run_step(steps)


def sync_program(tf, server, spec, index: int, logdir: str, warmup: float):
    """Synchronous replicas in a MonitoredTrainingSession with the usual hooks."""
    is_chief = index == 0
    with on_ps(tf, spec, index):
        global_step = tf.train.get_or_create_global_step()
        x = tf.placeholder(tf.float32, [None, 784])
        y = tf.placeholder(tf.int64, [None])
        loss = model(tf, x, y)
        opt = tf.train.SyncReplicasOptimizer(
            tf.train.GradientDescentOptimizer(0.01),
            replicas_to_aggregate=N_WORKERS, total_num_replicas=N_WORKERS)
        train_op = opt.minimize(loss, global_step=global_step)
        summary_op = tf.summary.merge_all()
    hooks = [opt.make_session_run_hook(is_chief),
             tf.train.StopAtStepHook(last_step=10**9)]
    chief_hooks = [
        tf.train.CheckpointSaverHook(logdir, save_steps=500),
        tf.train.SummarySaverHook(save_steps=100, output_dir=logdir,
                                  summary_op=summary_op),
    ]
    config = worker_config(tf, index)
    xs, ys = batches(index)
    wait_for_go(index)
    with tf.train.MonitoredTrainingSession(
            master=server.target, is_chief=is_chief, hooks=hooks,
            chief_only_hooks=chief_hooks, config=config,
            save_checkpoint_secs=None, save_summaries_steps=None,
            log_step_count_steps=None) as sess:
        print("session", flush=True)
        drive(profiled(
            lambda i: sess.run(train_op, {x: xs[i % BATCHES], y: ys[i % BATCHES]}),
            index), warmup)


def wait_for_go(index: int) -> None:
    """Non-chiefs wait for the parent's word that the chief's session is up, so
    that they find the model ready at once (TF's SessionManager would
    otherwise sleep its 30 s ``recovery_wait_secs``); not part of the program,
    a way to start every process (and its imports) at the same time."""
    if index:
        print("built", flush=True)
        sys.stdin.readline()


def profiled(run_step, index: int):
    """``run_step``, with steps 50-249 under cProfile when ``BENCH_PROFILE`` names
    a directory (``--profile``): their cumulative-time table goes to
    ``<shape>/worker<index>.txt`` there."""
    out = os.environ.get("BENCH_PROFILE")
    if not out:
        return run_step
    import cProfile
    import io
    import pstats

    profile = cProfile.Profile()

    def step(i):
        if i == 50:
            profile.enable()
        run_step(i)
        if i == 249:
            profile.disable()
            text = io.StringIO()
            stats = pstats.Stats(profile, stream=text)
            stats.sort_stats("cumulative").print_stats(45)
            Path(out, f"worker{index}.txt").write_text(text.getvalue())

    return step


EMBED_SHARDS, WORDS, TAGS = 400, 20, 5  # one Example per shard file, most ids each
VOCAB, N_TAGS, EMBED_DIM = 20000, 100, 32


def embedding_program(tf, server, spec, index: int, logdir: str, warmup: float):
    """Issue 39's second program: ``WholeFileReader`` queues over shard files of
    one Example each, ``parse_single_example`` with ``VarLenFeature``s padded
    by ``sparse_to_dense``, ``shuffle_batch``, and the averaged
    ``embedding_lookup``s of two embedding variables on the ps."""
    files = sorted(str(p) for p in Path(logdir).glob("shard-*.example"))
    with on_ps(tf, spec, index):
        global_step = tf.train.get_or_create_global_step()
        _, serialized = tf.WholeFileReader().read(
            tf.train.string_input_producer(files))
        parsed = tf.parse_single_example(serialized, {
            "words": tf.VarLenFeature(tf.int64),
            "tags": tf.VarLenFeature(tf.int64),
            "label": tf.FixedLenFeature([], tf.int64)})
        words, tags = (tf.sparse_to_dense(parsed[k].indices, [n], parsed[k].values)
                       for k, n in (("words", WORDS), ("tags", TAGS)))
        words, tags, y = tf.train.shuffle_batch(
            [words, tags, parsed["label"]], 32, num_threads=2, capacity=600,
            min_after_dequeue=300)

        def mean_embedding(name, ids, rows):
            table = tf.Variable(
                tf.random_uniform([rows, EMBED_DIM], -0.05, 0.05), name=name)
            mask = tf.cast(tf.not_equal(ids, 0), tf.float32)  # id 0 pads
            total = tf.reduce_sum(
                tf.nn.embedding_lookup(table, ids) * tf.expand_dims(mask, 2), 1)
            return total / tf.maximum(tf.reduce_sum(mask, 1, keepdims=True), 1.0)

        features = tf.concat([mean_embedding("words", words, VOCAB),
                              mean_embedding("tags", tags, N_TAGS)], 1)
        w = tf.Variable(tf.truncated_normal([2 * EMBED_DIM, 2], stddev=0.1), name="w")
        logits = tf.matmul(features, w)
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        train_op = tf.train.AdagradOptimizer(0.1).minimize(
            loss, global_step=global_step)
    train_from_queues(tf, server, index, logdir, warmup, global_step, train_op)


def write_shards(logdir: str) -> None:
    """The embedding shape's shard files in ``logdir``: one serialized Example
    each, 1..WORDS word ids and 1..TAGS tag ids (never 0, the padding) and a
    label that a word decides, so the model has something to learn."""
    from nbdist.proto import example_pb2

    rng = np.random.default_rng(0)
    for k in range(EMBED_SHARDS):
        words = rng.integers(1, VOCAB, rng.integers(1, WORDS + 1))
        ex = example_pb2.Example()
        f = ex.features.feature
        f["words"].int64_list.value.extend(words.tolist())
        f["tags"].int64_list.value.extend(
            rng.integers(1, N_TAGS, rng.integers(1, TAGS + 1)).tolist())
        f["label"].int64_list.value.append(int(words[0] % 2))
        Path(logdir, f"shard-{k:04d}.example").write_bytes(ex.SerializeToString())


def dataset_program(tf, server, spec, index: int, logdir: str, warmup: float):
    """A ``MonitoredTrainingSession`` program fed by ``tf.data``: the queue
    shape's TFRecord files through ``TFRecordDataset`` -> ``map(parse)`` ->
    ``shuffle`` -> ``batch`` -> ``repeat`` and a one-shot iterator."""
    is_chief = index == 0
    files = sorted(str(p) for p in Path(logdir).glob("records-*.tfrecord"))

    def parse(serialized):
        parsed = tf.parse_single_example(serialized, {
            "image_raw": tf.FixedLenFeature([], tf.string),
            "label": tf.FixedLenFeature([], tf.int64)})
        image = tf.cast(tf.decode_raw(parsed["image_raw"], tf.uint8), tf.float32)
        return tf.reshape(image, [784]) / 255.0, parsed["label"]

    with on_ps(tf, spec, index):
        global_step = tf.train.get_or_create_global_step()
        dataset = (tf.data.TFRecordDataset(files).map(parse).shuffle(1000)
                   .batch(64).repeat())
        x, y = tf.data.make_one_shot_iterator(dataset).get_next()
        loss = model(tf, x, y, summaries="two")
        train_op = tf.train.GradientDescentOptimizer(0.01).minimize(
            loss, global_step=global_step)
    config = worker_config(tf, index)
    wait_for_go(index)
    with tf.train.MonitoredTrainingSession(
            master=server.target, is_chief=is_chief, config=config,
            hooks=[tf.train.StopAtStepHook(last_step=10**9)],
            save_checkpoint_secs=None, save_summaries_steps=None,
            log_step_count_steps=None) as sess:
        print("session", flush=True)
        drive(profiled(lambda i: sess.run(train_op), index), warmup)


PROGRAMS = {"supervisor": supervisor_program, "sync": sync_program,
            "queue": queue_program, "summaries": summaries_program,
            "embedding": embedding_program, "dataset": dataset_program}
# what each shape's input pipeline reads, written to its log directory first
INPUT_FILES = {"queue": write_records, "dataset": write_records,
               "embedding": write_shards}


def child(shape, framework, cluster, job, index, logdir, warmup):
    if framework == "nbdist" and os.environ.get("BENCH_BIND"):
        # nbdist's Server listens on 127.0.0.1 unless its ServerDef says
        # otherwise (TF's on every interface), and TF1's Server(spec, job, index)
        # has no way to say it: other hosts need the task's own address.
        from nbdist.runtime.grpc import server as grpc_server

        grpc_server.DEFAULT_BIND = os.environ["BENCH_BIND"]
    if shape == "trainer":  # bench_training's program, unchanged
        import bench_training

        stepper = bench_training.step_in_window  # profiled like the others
        if os.environ.get("BENCH_STEPS"):  # the whole-run mode: its steps, "done"

            def stepper(run_step, warmup_s):
                drive(run_step, warmup_s)
                return 0

        bench_training.step_in_window = (
            lambda run_step, warmup_s: stepper(profiled(run_step, index), warmup_s))
        bench_training.trainer(framework, cluster, job, index, warmup)
        return
    tf = import_tf(framework)
    spec = tf.train.ClusterSpec(cluster)
    server = tf.train.Server(spec, job_name=job, task_index=index)
    if job == "ps":
        print("ready", flush=True)
        server.join()
        return
    PROGRAMS[shape](tf, server, spec, index, logdir, warmup)
