"""``proto_mutator``: the structure-aware mutator ``scripts/fuzz.py --structured``
gives atheris. For each message type a fuzz target reads, seeded mutations of
its seed must stay well-formed messages of that type, change the input, reach
fields inside sub-messages, and repeat for a repeated seed."""

from __future__ import annotations

import pytest
import targets
from proto_mutator import ProtoMutator

N = 200
MAX_SIZE = 1 << 14
PROTO_TARGETS = sorted(n for n, t in targets.TARGETS.items() if t.message)


def _changed_paths(a, b, path=()) -> set[tuple]:
    """The field paths where messages ``a`` and ``b`` differ (a field's path
    ends where its values differ; repeated and map fields compared by item)."""
    out: set[tuple] = set()
    for fd in a.DESCRIPTOR.fields:
        va, vb = getattr(a, fd.name), getattr(b, fd.name)
        here = path + (fd.name,)
        if fd.message_type is None:
            if list(va) != list(vb) if fd.is_repeated else va != vb:
                out.add(here)
        elif fd.message_type.GetOptions().map_entry:
            for k in set(va) | set(vb):
                if k not in va or k not in vb:
                    out.add(here)
                elif hasattr(va[k], "DESCRIPTOR"):
                    out |= _changed_paths(va[k], vb[k], here + (k,))
                elif va[k] != vb[k]:
                    out.add(here)
        elif fd.is_repeated:
            if len(va) != len(vb):
                out.add(here)
            for x, y in zip(va, vb):
                out |= _changed_paths(x, y, here)
        elif a.HasField(fd.name) != b.HasField(fd.name):
            out.add(here)
        else:
            out |= _changed_paths(va, vb, here)
    return out


@pytest.fixture(scope="module", params=PROTO_TARGETS)
def runs(request):
    target = targets.TARGETS[request.param]
    message = target.message()
    seed = target.seeds()[0]
    mutator = ProtoMutator(message, target.seeds())
    outs = [mutator(seed, MAX_SIZE, s) for s in range(N)]
    return message, seed, mutator, outs


def test_mutations_parse_back_and_fit(runs):
    message, _, _, outs = runs
    for out in outs:
        assert len(out) <= MAX_SIZE
        parsed = message.FromString(out)  # raises DecodeError if not well-formed
        assert parsed.SerializeToString(deterministic=True) == out


def test_mutations_change_the_input_and_reach_sub_messages(runs):
    message, seed, _, outs = runs
    original = message.FromString(seed)
    assert sum(out != seed for out in outs) >= 0.9 * N
    paths = set()
    for out in outs:
        paths |= _changed_paths(original, message.FromString(out))
    assert any(len(p) >= 3 for p in paths), paths  # a field of a sub-message's
    assert len(paths) >= 10, paths  # many fields, not one


def test_same_seed_same_output(runs):
    _, seed, mutator, outs = runs
    assert [mutator(seed, MAX_SIZE, s) for s in range(0, N, 20)] == outs[::20]


def test_input_that_does_not_parse_becomes_a_mutated_seed(runs):
    message, _, mutator, _ = runs
    for s in range(20):
        message.FromString(mutator(b"\xff\xff\xff", MAX_SIZE, s))


def test_output_is_cut_to_max_size(runs):
    message, seed, mutator, _ = runs
    for s in range(20):
        out = mutator(seed, 40, s)
        assert len(out) <= 40
        message.FromString(out)
