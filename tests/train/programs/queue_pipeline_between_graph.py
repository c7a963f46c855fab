"""A TF1 queue input pipeline trained between-graph (1 ps + workers), as public
programs write it: ``string_input_producer(num_epochs=2)`` -> ``TFRecordReader``
-> ``parse_single_example`` -> ``decode_raw`` -> ``train.batch`` under
``replica_device_setter(worker_device="/job:worker/task:N/cpu:0")``, run in
``MonitoredTrainingSession`` twice (two passes over the data, each ended by the
input's OutOfRange). Prints ``pass P steps N`` per pass, then ``done``, and
keeps its server up until its stdin closes (a worker's next session needs
every task of the cluster, in TF as here).

    python queue_pipeline_between_graph.py '<cluster json>' ps|worker INDEX FILE
"""

import json
import sys

import nbdist as nd

tf = nd.compat.v1
spec, job, idx, path = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
cluster = tf.train.ClusterSpec(json.loads(spec))
server = tf.train.Server(cluster, job_name=job, task_index=idx)
if job == "ps":
    server.join()
setter = tf.train.replica_device_setter(
    worker_device=f"/job:worker/task:{idx}/cpu:0", cluster=cluster)
with tf.device(setter):
    files = tf.train.string_input_producer([path], num_epochs=2)
    _, record = tf.TFRecordReader().read(files)
    feats = tf.parse_single_example(record, {
        "x": tf.FixedLenFeature([], tf.string),
        "y": tf.FixedLenFeature([], tf.int64)})
    x = tf.reshape(tf.cast(tf.decode_raw(feats["x"], tf.uint8), tf.float32), [4])
    xb, yb = tf.train.batch([x, feats["y"]], batch_size=8)
    w = tf.get_variable("w", [4, 2])
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=tf.cast(yb, tf.int32), logits=tf.matmul(xb, w)))
    step = tf.train.get_or_create_global_step()
    train = tf.train.GradientDescentOptimizer(0.01).minimize(loss, global_step=step)
for p in range(2):
    steps = 0
    with tf.train.MonitoredTrainingSession(master=server.target,
                                           is_chief=(idx == 0)) as sess:
        while not sess.should_stop():
            sess.run(train)
            steps += 1
    print("pass", p, "steps", steps, flush=True)
print("done", flush=True)
sys.stdin.read()
