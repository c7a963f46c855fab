"""The scripts of ``examples/`` run, with small step counts (issue 4).

Each example starts its own ``LocalCluster`` (or, for ``trainer.py`` by hand,
see ``test_training_cluster.py``) as a child process of the script; a script
that hangs is SIGKILLed by PID and its cluster's tasks die with it.
``replicated_variables.py`` is also imported and checked against one process
applying averaged gradients.
"""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest
from helpers import ROOT

import nbdist as nd

EXAMPLES = ROOT / "examples"

pytestmark = pytest.mark.slow


def run_example(name, *args, timeout=240):
    """Runs ``examples/<name>``; returns its output (stdout and stderr)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(var, "1")
    p = subprocess.Popen([sys.executable, str(EXAMPLES / name), *args], cwd=ROOT,
                         env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.kill(p.pid, signal.SIGKILL)
        out, _ = p.communicate(timeout=30)
        raise AssertionError(f"{name} did not finish in {timeout} s:\n{out}") from None
    assert p.returncode == 0, f"{name} exited with {p.returncode}:\n{out}"
    return out


def losses(out, who=""):
    """The losses printed on lines starting with ``who``, in order."""
    return [float(m.group(1)) for m in re.finditer(
        rf"^{re.escape(who)}.*loss (\S+)$", out, re.MULTILINE)]


@pytest.mark.timeout(300)
def test_trainer_py_through_a_local_cluster():
    out = run_example("trainer.py", "--local_cluster", "--num_workers=2",
                      "--train_steps=120", "--log_every=20")
    steps = [int(n) for n in re.findall(r"^worker \d done after (\d+) local steps",
                                        out, re.MULTILINE)]
    assert len(steps) == 2 and sum(steps) >= 120, out
    for i in range(2):
        ls = losses(out, f"worker {i} ")
        assert len(ls) >= 2 and ls[-1] < ls[0], out
    # The first step of all (either worker's, once the chief initialised)
    # starts from zero weights: ln(10).
    first = re.search(r"global_step 0 loss (\S+)$", out, re.MULTILINE)
    assert first and float(first.group(1)) == pytest.approx(np.log(10), abs=1e-3), out


@pytest.mark.timeout(300)
def test_in_graph_replication():
    out = run_example("in_graph_replication.py", "--workers=2", "--steps=60",
                      "--log_every=10")
    # One tower per worker task, one client.
    assert re.search(r"^tower_0/hidden/MatMul on /job:worker/task:0$", out, re.MULTILINE), out
    assert re.search(r"^tower_1/hidden/MatMul on /job:worker/task:1$", out, re.MULTILINE), out
    ls = losses(out, "step ")
    assert len(ls) == 7, out
    assert ls[-1] < 0.6 * ls[0], out
    assert re.search(r"^step 60 global_step 59 ", out, re.MULTILINE), out  # one update a step


@pytest.mark.timeout(300)
def test_sync_replicas_example():
    out = run_example("sync_replicas.py", "--local_cluster", "--num_workers=2",
                      "--train_steps=20", "--log_every=5")
    # In lockstep: every worker contributed to each of the 20 updates.
    assert re.findall(r"^worker \d done after (\d+) local steps", out, re.MULTILINE) == \
        ["20", "20"], out
    assert re.search(r"^global_step 20$", out, re.MULTILINE), out
    for i in range(2):
        ls = losses(out, f"worker {i} ")
        assert ls[0] == pytest.approx(np.log(10), abs=1e-3), out
        assert ls[-1] < 0.7, out


@pytest.mark.timeout(300)
def test_replicated_variables_example():
    out = run_example("replicated_variables.py", "--local_cluster", "--num_workers=2",
                      "--train_steps=20", "--log_every=5")
    assert re.findall(r"^worker \d done after (\d+) local steps", out, re.MULTILINE) == \
        ["20", "20"], out
    assert "local copies identical on all workers: True" in out, out
    for i in range(2):
        ls = losses(out, f"worker {i} ")
        assert ls[0] == pytest.approx(np.log(10), abs=1e-3), out  # same start
        assert ls[-1] < 0.7, out


def _import_example(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}",
                                                  EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _softmax_grads(w, b, x, y):
    logits = x @ w + b
    logits = logits - logits.max(axis=1, keepdims=True)
    p = np.exp(logits)
    p /= p.sum(axis=1, keepdims=True)
    p[np.arange(len(y)), y] -= 1.0
    p /= len(y)
    return x.T @ p, p.sum(axis=0)


@pytest.mark.timeout(300)
def test_replicated_variables_equal_averaged_sgd():
    """Two workers with fixed batches: the local copies (and the shadows) end
    exactly where one process applying the averaged gradients ends."""
    ex = _import_example("replicated_variables")
    steps, lr = 5, 0.5
    rng = np.random.default_rng(3)
    data = [[(rng.standard_normal((16, ex.DIM)).astype(np.float32),
              rng.integers(0, ex.NUM_CLASSES, 16).astype(np.int32))
             for _ in range(steps)] for _ in range(2)]
    finals, errors = {}, []

    with nd.LocalCluster(ps=1, workers=2, progress=False, start_timeout=60) as cluster:
        def worker(i):
            try:
                finals[i] = ex.train_worker(cluster.target("worker", i), i, 2, steps,
                                            iter(data[i]), learning_rate=lr,
                                            log_every=steps, timeout_s=60)
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=worker, args=(i,), daemon=True)
                   for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(180)
        assert not any(t.is_alive() for t in threads)
        assert not errors, errors
        with nd.Graph().as_default():
            with nd.device(ex.PS):
                gs = nd.train.get_or_create_global_step()
                with nd.name_scope("shadow"):
                    shadows = [nd.Variable(np.zeros((ex.DIM, ex.NUM_CLASSES),
                                                    np.float32), name="w"),
                               nd.Variable(np.zeros(ex.NUM_CLASSES, np.float32),
                                           name="b")]
            with nd.Session(cluster.target("worker", 0)) as s:
                step, w_ps, b_ps = s.run([gs] + shadows)
    w = np.zeros((ex.DIM, ex.NUM_CLASSES), np.float32)
    b = np.zeros(ex.NUM_CLASSES, np.float32)
    for k in range(steps):
        g = [_softmax_grads(w, b, *data[i][k]) for i in range(2)]
        w = w - lr * (g[0][0] + g[1][0]) / 2
        b = b - lr * (g[0][1] + g[1][1]) / 2
    assert int(step) == steps
    for i in range(2):
        np.testing.assert_allclose(finals[i][0], w, rtol=0, atol=1e-5)
        np.testing.assert_allclose(finals[i][1], b, rtol=0, atol=1e-5)
    np.testing.assert_array_equal(finals[0][0], finals[1][0])
    np.testing.assert_array_equal(w_ps, finals[0][0])
    np.testing.assert_array_equal(b_ps, finals[0][1])


@pytest.mark.timeout(300)
def test_allreduce_trainer_keeps_mirrored_copies_equal():
    out = run_example("allreduce_trainer.py", "--local", "--num_workers=2",
                      "--steps=30", "--log_every=10")
    for i in range(2):
        ls = losses(out, f"worker {i} ")
        assert len(ls) == 4 and ls[-1] < 0.7 * ls[0], out
    digests = re.findall(r"^worker \d weights (\S+)$", out, re.MULTILINE)
    assert len(digests) == 2 and digests[0] == digests[1], out


@pytest.mark.timeout(300)
def test_partitioned_embedding_trains_across_ps_and_restores_repartitioned():
    out = run_example("partitioned_embedding.py", "--ps=2", "--shards=4",
                      "--restore_shards=3", "--steps=40", "--log_every=20")
    devices = re.findall(r"^embedding/part_\d \(1250, 16\) on (\S+)$", out, re.MULTILINE)
    assert devices == ["/job:ps/task:0", "/job:ps/task:1"] * 2, out
    ls = losses(out, "step ")
    assert len(ls) == 3 and ls[-1] < ls[0], out
    assert re.search(r"^restored 4 shards into 3: equal$", out, re.MULTILINE), out


@pytest.mark.timeout(300)
def test_word2vec_ps_trains_sharded_embeddings_with_sparse_updates():
    out = run_example("word2vec_ps.py", "--steps=300", "--log_every=50")
    placed = re.findall(r"^(\w+/part_\d) \(200, 24\) on (\S+)$", out, re.MULTILINE)
    assert placed == [("embeddings/part_0", "/job:ps/task:0"),
                      ("embeddings/part_1", "/job:ps/task:1"),
                      ("nce_weights/part_0", "/job:ps/task:0"),
                      ("nce_weights/part_1", "/job:ps/task:1")], out
    assert re.search(r"^sparse \(IndexedSlices\) gradients: embeddings/part_0, "
                     r"embeddings/part_1, nce_weights/part_0, nce_weights/part_1, "
                     r"nce_biases$", out, re.MULTILINE), out
    for i in range(2):
        ls = losses(out, f"worker {i} ")
        assert len(ls) >= 2 and ls[-1] < 0.5 * ls[0], out
    share = re.search(r"in the same topic: (\d+)% \(chance 12%\)", out)
    assert share and int(share.group(1)) > 20, out


@pytest.mark.timeout(300)
def test_lstm_lm_between_graph_loss_falls():
    out = run_example("lstm_lm.py", "--steps=60", "--log_every=10")
    assert re.search(r"^rnn/basic_lstm_cell/kernel \(48, 128\) on /job:ps/task:0$",
                     out, re.MULTILINE), out
    steps = [int(n) for n in re.findall(r"^worker \d done after (\d+) local steps",
                                        out, re.MULTILINE)]
    assert len(steps) == 2 and sum(steps) >= 60, out
    # Before any update the model is near chance: ln(VOCAB).
    start = re.search(r"global_step 0 perplexity \S+ loss (\S+)$", out, re.MULTILINE)
    assert start and float(start.group(1)) == pytest.approx(np.log(20), abs=0.2), out
    last = float(re.search(r"of the last steps (\S+)$", out, re.MULTILINE).group(1))
    assert last < 0.5 * np.log(20), out
