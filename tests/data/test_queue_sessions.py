"""Queues and readers with no ``shared_name`` belong to one session, as TF's
(its kernels for them live per session): a new session on a server starts with
fresh, open queues, while variables stay shared. What a between-graph program
that opens ``MonitoredTrainingSession`` twice over a queue pipeline relies on
(before, the second pass found the first pass's closed queues and hung).

Oracle: TF 2.21 (``tf.compat.v1``) on the same program: a second session sees an
empty queue and the first session's variable value. (A 1 ps + 2 workers run of
the two-pass program still hangs on one worker in some runs: the issue's note.)"""

from __future__ import annotations

import nbdist as nd


def test_unshared_queue_and_reader_are_per_session_on_a_server():
    server = nd.train.Server.create_local_server()
    with nd.Graph().as_default():
        q = nd.FIFOQueue(10, nd.float32)
        shared = nd.FIFOQueue(10, nd.float32, shared_name="shared_q")
        v = nd.Variable(0.0)
        reader = nd.IdentityReader()
        names = nd.FIFOQueue(10, nd.string)
        fill = names.enqueue_many([["a", "b"]])
        key, _ = reader.read(names)
        first = nd.Session(server.target)
        first.run([q.enqueue(1.0), shared.enqueue(2.0), v.assign(3.0), fill])
        assert first.run(key) == b"a"
        first.run(q.close())
        second = nd.Session(server.target)
        assert second.run(q.size()) == 0  # its own queue, open
        second.run(q.enqueue(4.0))
        assert second.run(q.dequeue()) == 4.0
        assert second.run(shared.size()) == 1  # shared by name
        assert second.run(v) == 3.0  # variables are the task's
        second.run(names.enqueue_many([["c"]]))
        assert second.run(reader.num_records_produced()) == 0
        assert second.run(key) == b"c"
        assert first.run(q.size()) == 1  # its 1.0, untouched by the second session
        assert first.run(reader.num_records_produced()) == 1
        first.close()
        second.close()
