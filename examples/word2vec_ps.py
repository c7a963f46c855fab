"""A distributed word2vec (skip-gram with NCE): the program parameter servers
were made for.

Two ps tasks hold the embedding table and the NCE weights, each split in two
shards by ``fixed_size_partitioner(2)`` and spread over the ps by
``replica_device_setter``; two workers train between-graph (each builds the
graph and runs its own loop), looking up only the rows of their batch. The
loss is ``nd.nn.nce_loss`` with the log-uniform sampler (word ids are sorted
by frequency, as the sampler assumes), so a step touches the batch's words and
a few sampled ones: their gradients are ``IndexedSlices`` and the ps applies
them as sparse updates of those rows.

The corpus is synthetic: ``TOPICS`` topics of ``VOCAB / TOPICS`` words; a
sentence draws its words from one topic with Zipf frequencies. Words of one
topic share their contexts, so training should bring them together: at the
end the script prints how often a word's nearest neighbours are of its topic.

    python examples/word2vec_ps.py --steps=400

Each worker prints its loss as it falls.
"""

from __future__ import annotations

import argparse
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

import nbdist as nd

VOCAB, TOPICS, DIM, WINDOW = 400, 8, 24, 2
FREQUENT = 80

_print_lock = threading.Lock()


def log(msg: str):
    with _print_lock:
        print(msg, flush=True)


def topic_of(word):
    # Word ids are sorted by frequency: word w is the (w // TOPICS)-th most
    # frequent word of topic w % TOPICS.
    return np.asarray(word) % TOPICS


def make_corpus(rng, sentences: int = 3000, length: int = 12):
    per_topic = VOCAB // TOPICS
    rank_p = 1.0 / np.arange(1, per_topic + 1)
    rank_p /= rank_p.sum()
    topics = rng.integers(0, TOPICS, sentences)
    ranks = rng.choice(per_topic, (sentences, length), p=rank_p)
    return ranks * TOPICS + topics[:, None]


def skipgram_batch(rng, corpus, batch: int):
    """``batch`` (center, context) pairs at most WINDOW words apart."""
    rows = rng.integers(0, corpus.shape[0], batch)
    pos = rng.integers(0, corpus.shape[1], batch)
    offset = rng.choice([o for o in range(-WINDOW, WINDOW + 1) if o], batch)
    ctx = np.clip(pos + offset, 0, corpus.shape[1] - 1)
    ctx = np.where(ctx == pos, pos - np.sign(offset), ctx)
    return (corpus[rows, pos].astype(np.int32),
            corpus[rows, ctx].astype(np.int64)[:, None])


def build(cluster, task_index: int, flags):
    with nd.device(nd.train.replica_device_setter(
            worker_device=f"/job:worker/task:{task_index}", cluster=cluster)):
        centers = nd.placeholder(nd.int32, [None], name="centers")
        contexts = nd.placeholder(nd.int64, [None, 1], name="contexts")
        embeddings = nd.get_variable(
            "embeddings", [VOCAB, DIM],
            initializer=nd.random_uniform_initializer(-0.5, 0.5, seed=1),
            partitioner=nd.fixed_size_partitioner(2))
        nce_w = nd.get_variable(
            "nce_weights", [VOCAB, DIM],
            initializer=nd.truncated_normal_initializer(stddev=DIM ** -0.5, seed=2),
            partitioner=nd.fixed_size_partitioner(2))
        nce_b = nd.get_variable("nce_biases", [VOCAB],
                                initializer=nd.zeros_initializer())
        loss = nd.reduce_mean(nd.nn.nce_loss(
            weights=nce_w, biases=nce_b, labels=contexts,
            inputs=nd.nn.embedding_lookup(embeddings, centers),
            num_sampled=flags.num_sampled, num_classes=VOCAB))
        global_step = nd.train.get_or_create_global_step()
        opt = nd.train.GradientDescentOptimizer(flags.learning_rate)
        grads = opt.compute_gradients(loss)
        train_op = opt.apply_gradients(grads, global_step=global_step)
    return centers, contexts, embeddings, loss, global_step, train_op, grads


def train_worker(master, cluster, task_index: int, corpus, flags) -> list[float]:
    rng = np.random.default_rng(10 + task_index)
    graph = nd.Graph()
    with graph.as_default():
        centers, contexts, embeddings, loss, global_step, train_op, grads = build(
            cluster, task_index, flags)
        with nd.device(f"/job:worker/task:{task_index}"):
            whole = embeddings.as_tensor()
        if task_index == 0:
            for v in list(embeddings) + [v for _, v in grads
                                         if v.op.name.startswith("nce_weights")]:
                log(f"{v.op.name} {v.shape} on {v.device}")
            sparse = [v.op.name for g, v in grads if isinstance(g, nd.IndexedSlices)]
            log(f"sparse (IndexedSlices) gradients: {', '.join(sparse)}")
    config = nd.ConfigProto(device_filters=["/job:ps",
                                            f"/job:worker/task:{task_index}"])
    seen = []
    with graph.as_default(), nd.train.MonitoredTrainingSession(
            master=master, is_chief=(task_index == 0), config=config,
            hooks=[nd.train.StopAtStepHook(last_step=flags.steps)],
            log_step_count_steps=None) as sess:
        local = 0
        while not sess.should_stop():
            c, x = skipgram_batch(rng, corpus, flags.batch_size)
            _, lv, gs = sess.run([train_op, loss, global_step],
                                 {centers: c, contexts: x})
            local += 1
            seen.append(lv)
            if local == 1 or local % flags.log_every == 0:
                log(f"worker {task_index} step {local} global_step {gs} loss {lv:.4f}")
    log(f"worker {task_index} done after {local} local steps")
    if task_index == 0:
        # The ps tasks keep the trained variables: read the whole table.
        with graph.as_default(), nd.Session(master, config=config) as sess:
            table = sess.run(whole)
        unit = table / np.linalg.norm(table, axis=1, keepdims=True)
        sims = unit @ unit.T
        np.fill_diagonal(sims, -np.inf)
        frequent = np.arange(FREQUENT)
        nearest = np.argsort(-sims[frequent], axis=1)[:, :5]
        share = np.mean(topic_of(nearest) == topic_of(frequent)[:, None])
        log(f"nearest neighbours of the {FREQUENT} most frequent words in the same "
            f"topic: {share:.0%} (chance {1 / TOPICS:.0%})")
    return seen


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--steps", type=int, default=400, help="global steps in all")
    p.add_argument("--batch_size", type=int, default=128)
    p.add_argument("--num_sampled", type=int, default=16)
    p.add_argument("--learning_rate", type=float, default=1.0)
    p.add_argument("--log_every", type=int, default=50)
    flags = p.parse_args(argv)
    corpus = make_corpus(np.random.default_rng(0))
    # Between-graph: each worker builds its own graph and runs its own loop (a
    # thread here; one process per worker on real machines).
    with nd.LocalCluster(ps=2, workers=flags.workers) as cluster, \
            ThreadPoolExecutor(flags.workers) as pool:
        futures = [pool.submit(train_worker, cluster.target("worker", i),
                               cluster.cluster_spec, i, corpus, flags)
                   for i in range(flags.workers)]
        results = [f.result() for f in futures]
    first = np.mean([np.mean(r[:5]) for r in results])
    last = np.mean([np.mean(r[-5:]) for r in results])
    log(f"mean loss of the first steps {first:.4f}, of the last steps {last:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
