"""Every decoder of untrusted bytes, fed inputs mutated from valid ones
(``targets.TARGETS``: the framed wire of the peer paths, both sides of their
handshake, gRPC request messages, GraphDef import, Example parsing, TFRecord
files, TF checkpoints' index).

For each input the decoder decodes it or refuses it with its documented error
(``Target.documented``); anything else is a finding. It must also end within
hypothesis's deadline (no hang: socket decoders read a closed input) and
allocate at most ``MEMORY_BOUND`` (traced by ``tracemalloc``; NumPy's arrays
are traced too), whatever sizes the input claims.

The example budget is fixed (``EXAMPLES`` per decoder, ``BUDGET`` where a
decoder is slower; derandomized: CI sees the same inputs every run);
``scripts/fuzz.py`` explores further, coverage guided, on demand.
"""

from __future__ import annotations

import tracemalloc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from targets import LIMIT_BYTES, TARGETS

EXAMPLES = 60
# A checkpoint is read from a file written per example: fewer, so that each
# decoder stays within a few seconds in CI.
BUDGET = {"checkpoint": 30}
MEMORY_BOUND = 16 * LIMIT_BYTES  # a decoder may hold a few copies of its limit


@st.composite
def mutated(draw, seeds: list[bytes]) -> bytes:
    """A seed with a few byte flips, insertions, deletions, a truncation, or
    a 64-bit field set to an extreme."""
    data = bytearray(draw(st.sampled_from(seeds)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "insert", "delete", "truncate", "big"]))
        at = draw(st.integers(0, max(0, len(data) - 1)))
        if kind == "flip" and data:
            data[at] ^= 1 << draw(st.integers(0, 7))
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "delete":
            del data[at:at + draw(st.integers(1, 16))]
        elif kind == "truncate":
            del data[at:]
        elif kind == "big":
            data[at:at + 8] = draw(st.sampled_from(
                [b"\xff" * 8, b"\x7f" + b"\xff" * 7, b"\x00" * 8, b"\x80" * 8]))
    return bytes(data)


@pytest.mark.parametrize("name", sorted(TARGETS))
def test_a_decoder_takes_mutated_input_or_refuses_it_as_documented(name):
    target = TARGETS[name]
    seeds = target.seeds()
    for seed in seeds:  # the seeds themselves pass (a handshake's is refused:
        target.feed(seed)  # its proof is for other nonces)

    @settings(max_examples=BUDGET.get(name, EXAMPLES), deadline=5000,
              derandomize=True, database=None,
              suppress_health_check=[HealthCheck.too_slow])
    @given(mutated(seeds))
    def check(data):
        tracemalloc.start()
        try:
            target.feed(data)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak <= MEMORY_BOUND, f"{name} allocated {peak} bytes"

    check()
