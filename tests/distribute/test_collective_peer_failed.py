"""A member of a collective whose peer failed before sending its chunk fails
within its step's timeout, with an error naming the peer and the collective
(its key: group and instance), and the pair runs together after."""

from __future__ import annotations

import time

import numpy as np
import pytest
from helpers import in_threads, local_cluster

import nbdist as nd
from nbdist import errors
from nbdist.ops import collective_ops

PEER = "/job:worker/replica:0/task:1"


@pytest.mark.parametrize("same_host", ["1", "0"])
def test_a_member_whose_peer_failed_fails_within_its_step_timeout(
        servers, monkeypatch, same_host):
    monkeypatch.setenv("NBDIST_SAME_HOST", same_host)
    spec = local_cluster(worker=2)
    tasks = [servers(spec, "worker", i) for i in range(2)]
    x = np.arange(8, dtype=np.float32)

    def member(i, instance, bad=False):
        with nd.Graph().as_default():
            value = nd.constant(x * (i + 1))
            if bad:  # this member's step fails before its collective
                value = nd.debugging.check_numerics(value / 0.0 * 0.0, "peer")
            total = collective_ops.all_reduce(value, 2, 1, instance)
            with nd.Session(tasks[i].target) as sess:
                return sess.run(total, options=nd.RunOptions(timeout_in_ms=1500))

    with pytest.raises(errors.InvalidArgumentError):
        member(1, 1, bad=True)
    start = time.monotonic()
    with pytest.raises(errors.DeadlineExceededError) as info:
        member(0, 1)
    elapsed = time.monotonic() - start
    message = info.value.message
    assert elapsed < 1.5 + 5.0, elapsed  # the step's timeout, and some scheduling
    # The peer, and the collective's key (group 1, instance 1), whether its
    # chunk was to be pushed (same host) or pulled (gRPC).
    assert PEER in message and "_collective/1/1/" in message, message
    if same_host == "1":  # a pushed chunk is waited for in the mailbox
        assert "(collective chunk " in message, message
    # The pair runs a collective together afterwards.
    for got in in_threads(2, lambda i: member(i, 2)):
        np.testing.assert_array_equal(got, x * 3)
