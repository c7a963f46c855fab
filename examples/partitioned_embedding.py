"""A partitioned embedding model: a table too big for one parameter server is
split into shards with ``get_variable(partitioner=...)``, spread over the ps tasks
by ``replica_device_setter``, looked up with ``nd.nn.embedding_lookup`` (each
shard's rows are gathered on its own ps, so only the rows a batch needs cross
the wire), checkpointed whole, and restored into a different number of shards.

    python examples/partitioned_embedding.py --ps=2 --shards=4 --restore_shards=3
"""

from __future__ import annotations

import argparse
import sys
import tempfile

import numpy as np

import nbdist as nd

VOCAB, DIM, CLASSES, BATCH = 5000, 16, 4, 128


def make_batches(count: int = 8):
    """Each word's class is fixed: word id mod CLASSES."""
    rng = np.random.default_rng(0)
    ids = [rng.integers(0, VOCAB, BATCH).astype(np.int32) for _ in range(count)]
    return [(i, (i % CLASSES).astype(np.int32)) for i in ids]


def build(cluster, shards: int):
    """The model with its table in ``shards`` shards; returns its pieces."""
    ids = nd.placeholder(nd.int32, [None], name="ids")
    labels = nd.placeholder(nd.int32, [None], name="labels")
    with nd.device(nd.train.replica_device_setter(cluster=cluster)):
        table = nd.get_variable(
            "embedding", [VOCAB, DIM],
            initializer=nd.random_normal_initializer(stddev=0.1, seed=1),
            partitioner=nd.fixed_size_partitioner(shards))
        w = nd.get_variable("w", [DIM, CLASSES],
                            initializer=nd.glorot_uniform_initializer(seed=2))
    logits = nd.matmul(nd.nn.embedding_lookup(table, ids), w)
    loss = nd.reduce_mean(nd.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits))
    return ids, labels, table, loss


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ps", type=int, default=2)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--restore_shards", type=int, default=3)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--log_every", type=int, default=20)
    args = parser.parse_args(argv)
    batches = make_batches()
    with nd.LocalCluster(ps=args.ps, workers=1) as cluster, \
            tempfile.TemporaryDirectory() as ckpt_dir:
        with nd.Graph().as_default():
            ids, labels, table, loss = build(cluster.cluster_spec, args.shards)
            train = nd.train.GradientDescentOptimizer(2.0).minimize(loss)
            saver = nd.train.Saver()
            for shard in table:
                print(f"{shard.op.name} {shard.shape} on {shard.device}", flush=True)
            with nd.Session(cluster.target("worker", 0)) as sess:
                sess.run(nd.global_variables_initializer())
                for step in range(args.steps + 1):
                    bx, by = batches[step % len(batches)]
                    if step % args.log_every == 0:
                        value = sess.run(loss, {ids: bx, labels: by})
                        print(f"step {step} loss {value:.4f}", flush=True)
                    if step < args.steps:
                        sess.run(train, {ids: bx, labels: by})
                trained = sess.run(table.as_tensor())
                path = saver.save(sess, f"{ckpt_dir}/model")
        # The servers keep variables across sessions: clear them, as a new job on
        # fresh servers would start, before building the other partitioning.
        nd.Session.reset(cluster.target("worker", 0))
        with nd.Graph().as_default():
            _, _, table, _ = build(cluster.cluster_spec, args.restore_shards)
            with nd.Session(cluster.target("worker", 0)) as sess:
                nd.train.Saver().restore(sess, path)
                restored = sess.run(table.as_tensor())
        same = np.array_equal(trained, restored)
        print(f"restored {args.shards} shards into {len(list(table))}: "
              f"{'equal' if same else 'DIFFERENT'}", flush=True)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
