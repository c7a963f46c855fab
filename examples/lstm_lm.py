"""A between-graph LSTM language model: 1 ps and 2 workers.

Every worker builds the same graph with ``replica_device_setter``: the
embedding, the LSTM's ``rnn/basic_lstm_cell/kernel`` and ``bias`` (TF 1.15's
names, so a TF checkpoint of the same model loads) and the softmax live on the
ps; ``nd.nn.dynamic_rnn`` — one ``while_loop`` over a ``TensorArray`` of the
time steps — runs on the worker, reading the weights from the ps once a step,
and the gradients through the loop go back to the ps. The corpus is
synthetic: sentences that count up from a random start in a random stride
(``3 5 7 9 ...``, modulo the vocabulary), so the next token is predictable
only by a model that remembers the stride from earlier tokens.

    python examples/lstm_lm.py --steps=60

Each worker prints its loss (per-token cross-entropy, ln(VOCAB) = 3.0 at the
start) and perplexity as they fall.
"""

from __future__ import annotations

import argparse
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np

import nbdist as nd

VOCAB, STRIDES, EMBED, HIDDEN = 20, (1, 2, 3), 16, 32

_print_lock = threading.Lock()


def log(msg: str):
    with _print_lock:
        print(msg, flush=True)


def make_batch(rng, batch: int, steps: int):
    """Inputs and next-token targets, ``[batch, steps]`` each."""
    start = rng.integers(0, VOCAB, (batch, 1))
    stride = rng.choice(STRIDES, (batch, 1))
    seq = (start + stride * np.arange(steps + 1)) % VOCAB
    return seq[:, :-1].astype(np.int32), seq[:, 1:].astype(np.int32)


class LanguageModel(NamedTuple):
    """The tensors and ops of one worker's graph."""

    tokens: nd.Tensor  # int32 [batch, steps]: the inputs
    targets: nd.Tensor  # int32 [batch, steps]: the next tokens
    cell: nd.nn.rnn_cell.BasicLSTMCell
    logits: nd.Tensor  # [batch * steps, vocab]
    loss: nd.Tensor  # per-token cross-entropy
    global_step: nd.Variable
    train_op: nd.Operation


def build(cluster, task_index: int, steps: int, learning_rate: float,
          vocab: int = VOCAB) -> LanguageModel:
    """The model on ``/job:worker/task:<task_index>``, its variables on the
    ps of ``cluster`` (a notebook's corpus brings its own ``vocab``)."""
    with nd.device(nd.train.replica_device_setter(
            worker_device=f"/job:worker/task:{task_index}", cluster=cluster)):
        tokens = nd.placeholder(nd.int32, [None, steps], name="tokens")
        targets = nd.placeholder(nd.int32, [None, steps], name="targets")
        embedding = nd.get_variable("embedding", [vocab, EMBED])
        cell = nd.nn.rnn_cell.BasicLSTMCell(HIDDEN)
        outputs, _ = nd.nn.dynamic_rnn(cell, nd.nn.embedding_lookup(embedding, tokens),
                                       dtype=nd.float32)
        softmax_w = nd.get_variable("softmax_w", [HIDDEN, vocab])
        softmax_b = nd.get_variable("softmax_b", [vocab],
                                    initializer=nd.zeros_initializer())
        logits = nd.matmul(nd.reshape(outputs, [-1, HIDDEN]), softmax_w) + softmax_b
        loss = nd.reduce_mean(nd.nn.sparse_softmax_cross_entropy_with_logits(
            labels=nd.reshape(targets, [-1]), logits=logits))
        global_step = nd.train.get_or_create_global_step()
        train_op = nd.train.AdamOptimizer(learning_rate).minimize(
            loss, global_step=global_step)
    return LanguageModel(tokens, targets, cell, logits, loss, global_step, train_op)


def train_worker(master, cluster, task_index: int, flags) -> list[float]:
    rng = np.random.default_rng(task_index)
    graph = nd.Graph()
    with graph.as_default():
        model = build(cluster, task_index, flags.num_steps, flags.learning_rate)
        tokens, targets, loss = model.tokens, model.targets, model.loss
        global_step, train_op = model.global_step, model.train_op
        if task_index == 0:
            for v in model.cell.trainable_variables:
                log(f"{v.op.name} {v.shape} on {v.device}")
    config = nd.ConfigProto(device_filters=["/job:ps",
                                            f"/job:worker/task:{task_index}"])
    seen = []
    with graph.as_default(), nd.train.MonitoredTrainingSession(
            master=master, is_chief=(task_index == 0), config=config,
            hooks=[nd.train.StopAtStepHook(last_step=flags.steps)],
            log_step_count_steps=None) as sess:
        local = 0
        while not sess.should_stop():
            x, y = make_batch(rng, flags.batch_size, flags.num_steps)
            _, lv, gs = sess.run([train_op, loss, global_step],
                                 {tokens: x, targets: y})
            local += 1
            seen.append(lv)
            if local == 1 or local % flags.log_every == 0:
                log(f"worker {task_index} step {local} global_step {gs} "
                    f"perplexity {np.exp(lv):.2f} loss {lv:.4f}")
    log(f"worker {task_index} done after {local} local steps")
    return seen


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--steps", type=int, default=60, help="global steps in all")
    p.add_argument("--num_steps", type=int, default=10, help="tokens per sequence")
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--learning_rate", type=float, default=0.02)
    p.add_argument("--log_every", type=int, default=10)
    flags = p.parse_args(argv)
    # Between-graph: each worker builds its own graph and runs its own loop (a
    # thread here; one process per worker on real machines).
    with nd.LocalCluster(ps=1, workers=flags.workers) as cluster, \
            ThreadPoolExecutor(flags.workers) as pool:
        futures = [pool.submit(train_worker, cluster.target("worker", i),
                               cluster.cluster_spec, i, flags)
                   for i in range(flags.workers)]
        results = [f.result() for f in futures]
    first = np.mean([r[0] for r in results])
    last = np.mean([np.mean(r[-3:]) for r in results])
    log(f"mean loss of the first steps {first:.4f}, of the last steps {last:.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
