"""``WholeFileReader``: one record per file, counted as TF counts it, and a
runner thread reading one file does not hold up another thread's read of
another file through the same reader (its lock is not held across the I/O).

Oracles: TF 2.21's counters (checked with ``tf.compat.v1``: after each of
three reads ``num_records_produced`` and ``num_work_units_completed`` are 1/1,
2/2, 3/3; a missing file raises ``NotFoundError`` and counts nothing), and a
FIFO as a file that cannot be read until the test writes it.
"""

from __future__ import annotations

import os
import threading

import pytest
from helpers import wait_for

import nbdist as nd


def reader_graph(paths):
    q = nd.FIFOQueue(10, nd.string)
    enqueue = q.enqueue_many([paths])
    reader = nd.WholeFileReader()
    key, value = reader.read(q)
    counts = [reader.num_records_produced(), reader.num_work_units_completed()]
    return q, enqueue, key, value, counts


def test_each_read_completes_its_file_as_tf_counts_it(tmp_path):
    paths = []
    for i in range(3):
        (tmp_path / f"f{i}").write_bytes(b"x%d" % i)
        paths.append(str(tmp_path / f"f{i}"))
    with nd.Graph().as_default():
        q, enqueue, key, value, counts = reader_graph(paths)
        missing = q.enqueue([str(tmp_path / "missing")])
        with nd.Session() as s:
            s.run(enqueue)
            for i in range(3):
                assert s.run([key, value]) == [paths[i].encode(), b"x%d" % i]
                assert s.run(counts) == [i + 1, i + 1]
            s.run(missing)
            with pytest.raises(nd.errors.NotFoundError):
                s.run(value)
            assert s.run(counts) == [3, 3]


def test_a_blocked_file_does_not_hold_up_another_thread(tmp_path):
    """Thread A's file is a FIFO nobody writes yet: A waits in its read.
    Thread B's read of a plain file through the same reader returns meanwhile
    (with the lock held across A's I/O it would wait for A)."""
    fifo, plain = tmp_path / "fifo", tmp_path / "plain"
    os.mkfifo(fifo)
    plain.write_bytes(b"plain")
    with nd.Graph().as_default():
        q, enqueue, _, value, counts = reader_graph([str(fifo), str(plain)])
        size = q.size()
        got = {}
        with nd.Session() as s:
            s.run(enqueue)

            def read(name):
                got[name] = s.run(value)

            a = threading.Thread(target=read, args=("a",), daemon=True)
            a.start()
            wait_for(lambda: s.run(size) == 1, 30, "thread A to take the FIFO")
            b = threading.Thread(target=read, args=("b",), daemon=True)
            b.start()
            b.join(timeout=30)
            b_done = not b.is_alive()
            with open(fifo, "wb") as w:  # lets A (and a waiting B) finish
                w.write(b"fifo")
            a.join(timeout=30)
            b.join(timeout=30)
            assert b_done, "B waited for A's file"
            assert got == {"a": b"fifo", "b": b"plain"}
            assert s.run(counts) == [2, 2]
