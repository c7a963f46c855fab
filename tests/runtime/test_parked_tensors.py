"""``ParkedTensors``: every value parked and not yet pulled counts against the
task's ``max_parked_bytes``, however parks on several threads interleave."""

from __future__ import annotations

import sys
import threading

import numpy as np

from nbdist.executor.limits import Limits
from nbdist.executor.rendezvous import Rendezvous
from nbdist.runtime.tensor_store import ParkedTensors

PARKS_PER_THREAD = 1500


def test_values_parked_at_once_on_two_threads_all_count_against_the_cap():
    # A park's entry and its value must appear together: another park checking
    # the cap meanwhile forgot an entry whose value was not sent yet, and that
    # value was then held outside the count (and past the TTL) until the
    # rendezvous expired it.
    store = ParkedTensors("/job:w/replica:0/task:0/device:CPU:0", 7, Rendezvous(),
                          limits=Limits(max_parked_bytes=1 << 40))
    keys: list[list] = [[], []]
    value = np.zeros(4, np.float32)
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=lambda out=out: out.extend(
            store.park(value) for _ in range(PARKS_PER_THREAD))) for out in keys]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        sys.setswitchinterval(before)
    parked = {(p.step_id, p.key) for p in store._parked}
    held = {(step_id, key) for out in keys for key, step_id in out}
    assert len(held) == 2 * PARKS_PER_THREAD
    assert held == parked, f"{len(held - parked)} held values not counted"
