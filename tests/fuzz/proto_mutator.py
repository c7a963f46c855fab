"""A structure-aware mutator for protobuf messages, on protobuf's descriptors.

``scripts/fuzz.py --structured`` gives it to atheris as the custom mutator of
the decoders that read a protobuf message (``Target.message``): each input is
parsed as that message (an input that does not parse is replaced by a seed),
changed at the field level and serialized again, so the decoder sees only
well-formed messages of its type and the fuzzing reaches the checks behind
protobuf's parser instead of stopping at it. It works for any message type
(it reads only ``DESCRIPTOR``), which is what ``atheris-libprotobuf-mutator``
would do, in Python.

    mutator = ProtoMutator(master_pb2.RunStepRequest, seeds)
    data = mutator(data, max_size=4096, seed=7)  # a RunStepRequest, changed

One mutation is one of: a scalar changed (an edge value, a nearby one, a
random one), an enum switched to another of its values, a repeated element
added, duplicated, deleted or changed, a map key added or deleted, an optional
or oneof field set or cleared, bytes and strings changed by ``mutate_bytes``
(``atheris.Mutate`` under atheris), or the same inside a sub-message chosen at
random. Everything random comes from ``random.Random(seed)`` and
``mutate_bytes``, so the same seed gives the same output.
"""

from __future__ import annotations

import math
import random
import struct
from collections.abc import Callable, Sequence

from google.protobuf.descriptor import FieldDescriptor as FD
from google.protobuf.message import DecodeError, Message

MAX_DEPTH = 24  # protobuf's own recursion limit is 100; deeper adds nothing here
TRIES = 8  # mutations tried before an input is left unchanged (a no-op is rare)

_INT_RANGES = {
    FD.CPPTYPE_INT32: (-(1 << 31), (1 << 31) - 1),
    FD.CPPTYPE_INT64: (-(1 << 63), (1 << 63) - 1),
    FD.CPPTYPE_UINT32: (0, (1 << 32) - 1),
    FD.CPPTYPE_UINT64: (0, (1 << 64) - 1),
}
# A repeated field's default_value is [], so an element starts from these.
_ZERO = {FD.CPPTYPE_BOOL: False, FD.CPPTYPE_ENUM: 0, FD.CPPTYPE_FLOAT: 0.0,
         FD.CPPTYPE_DOUBLE: 0.0, FD.CPPTYPE_STRING: "",
         **{t: 0 for t in _INT_RANGES}}
_FLOATS = (0.0, -0.0, 1.0, -1.0, 0.5, 1e-45, 1e-308, 3.4e38, 1e300,
           math.inf, -math.inf, math.nan)


def _random_bytes_mutation(data: bytes, max_size: int, rng: random.Random) -> bytes:
    """Byte edits for when there is no libFuzzer (tests): flip, insert, erase."""
    b = bytearray(data)
    action = rng.randrange(4)
    if action == 0 and b:
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
    elif action == 1 and len(b) < max_size:
        b.insert(rng.randint(0, len(b)), rng.randrange(256))
    elif action == 2 and b:
        i = rng.randrange(len(b))
        del b[i:i + rng.randint(1, 4)]
    else:
        b = bytearray(rng.randbytes(rng.randint(0, min(max_size, 16))))
    return bytes(b[:max_size])


class ProtoMutator:
    """``fn(data, max_size, seed) -> bytes`` for ``atheris.Setup(custom_mutator=)``.

    ``message_type`` is a generated message class; ``seeds`` are serialized
    messages of it (the fallback for an input that does not parse);
    ``mutate_bytes(data, max_size)`` changes bytes fields (default: seeded
    flips, inserts and erasures).

        >>> m = ProtoMutator(example_pb2.Example, [seed_bytes])
        >>> example_pb2.Example.FromString(m(b"not a proto", 1024, 3))  # parses
    """

    def __init__(self, message_type: type[Message], seeds: Sequence[bytes],
                 mutate_bytes: Callable[[bytes, int], bytes] | None = None):
        self.message_type = message_type
        self.seeds = list(seeds) or [b""]
        self.mutate_bytes = mutate_bytes

    def __call__(self, data: bytes, max_size: int, seed: int) -> bytes:
        rng = random.Random(seed)
        msg = self.message_type()
        try:
            msg.ParseFromString(data)
        except DecodeError:
            msg.ParseFromString(rng.choice(self.seeds))
        before = msg.SerializeToString(deterministic=True)
        for _ in range(TRIES):
            trial = self.message_type()
            trial.CopyFrom(msg)
            for _ in range(rng.choice((1, 1, 1, 2, 3))):
                _Mutation(rng, self._bytes(rng), _strings(trial)).message(trial, 0)
            out = trial.SerializeToString(deterministic=True)
            if out != before:
                break
        return self._fit(trial, out, max_size, rng)

    def _bytes(self, rng: random.Random) -> Callable[[bytes, int], bytes]:
        if self.mutate_bytes is not None:
            return self.mutate_bytes
        return lambda data, max_size: _random_bytes_mutation(data, max_size, rng)

    @staticmethod
    def _fit(msg: Message, out: bytes, max_size: int, rng: random.Random) -> bytes:
        """``out``, or ``msg`` with fields dropped until it fits ``max_size``."""
        for _ in range(64):
            if len(out) <= max_size:
                return out
            _shrink(msg, rng)
            out = msg.SerializeToString(deterministic=True)
        return out if len(out) <= max_size else b""  # b"": the empty message


def _is_map(fd) -> bool:
    return fd.message_type is not None and fd.message_type.GetOptions().map_entry


def _strings(msg: Message) -> list[str]:
    """The strings in ``msg`` (names that refer to one another, as a GraphDef's
    node inputs do): a mutation reuses them as often as it invents one."""
    found: list[str] = []
    stack = [(msg, 0)]
    while stack and len(found) < 256:
        m, depth = stack.pop()
        for fd, value in m.ListFields():
            if _is_map(fd):
                found.extend(k for k in value if isinstance(k, str))
                values = value.values()
            else:
                values = value if fd.is_repeated else [value]
            for v in values:
                if isinstance(v, str):
                    found.append(v)
                elif isinstance(v, Message) and depth < MAX_DEPTH:
                    stack.append((v, depth + 1))
    return found


def _shrink(msg: Message, rng: random.Random) -> None:
    """Drops one thing from ``msg``: a repeated element or a field, at some depth."""
    for _ in range(MAX_DEPTH):
        fields = msg.ListFields()
        if not fields:
            return
        fd, value = rng.choice(fields)
        if fd.is_repeated and len(value) > 1 and not _is_map(fd):
            del value[rng.randrange(len(value))]
            return
        if (fd.cpp_type == FD.CPPTYPE_MESSAGE and not fd.is_repeated
                and rng.random() < 0.5):
            msg = value
            continue
        msg.ClearField(fd.name)
        return


class _Mutation:
    """One field-level change to a message, drawing on ``rng``."""

    def __init__(self, rng: random.Random, mutate_bytes, strings: list[str]):
        self.rng = rng
        self.mutate_bytes = mutate_bytes
        self.strings = strings

    def message(self, msg: Message, depth: int) -> None:
        rng = self.rng
        desc = msg.DESCRIPTOR
        if not desc.fields:
            return
        present = [fd for fd, _ in msg.ListFields()]
        # Mostly a field that is there (the seed's structure, deeper), else any.
        fd = rng.choice(present if present and rng.random() < 0.7 else desc.fields)
        if fd.containing_oneof is not None and rng.random() < 0.1:
            msg.ClearField(fd.containing_oneof.name)
        elif _is_map(fd):
            self._map(getattr(msg, fd.name), fd, depth)
        elif fd.is_repeated:
            self._repeated(getattr(msg, fd.name), fd, depth)
        elif fd.cpp_type == FD.CPPTYPE_MESSAGE:
            if msg.HasField(fd.name) and rng.random() < 0.1:
                msg.ClearField(fd.name)
            else:
                sub = getattr(msg, fd.name)
                sub.SetInParent()  # sets it (and its oneof) even if it stays empty
                if depth < MAX_DEPTH:
                    self.message(sub, depth + 1)
        elif fd.has_presence and msg.HasField(fd.name) and rng.random() < 0.1:
            msg.ClearField(fd.name)
        else:
            setattr(msg, fd.name, self.scalar(fd, getattr(msg, fd.name)))

    def _repeated(self, values, fd, depth: int) -> None:
        rng = self.rng
        is_msg = fd.cpp_type == FD.CPPTYPE_MESSAGE
        action = rng.randrange(5) if len(values) else 0
        if action == 0:  # add a new element
            if is_msg:
                new = values.add()
                if depth < MAX_DEPTH:
                    self.message(new, depth + 1)
            else:
                values.append(self.scalar(fd, _ZERO[fd.cpp_type]))
        elif action == 1:  # duplicate one, at a random place
            i = rng.randrange(len(values))
            if is_msg:
                new = values.add()
                new.CopyFrom(values[i])
            else:
                values.insert(rng.randint(0, len(values)), values[i])
        elif action == 2:
            del values[rng.randrange(len(values))]
        elif action == 3 and len(values) > 1:  # move one (order matters to some)
            i, j = rng.sample(range(len(values)), 2)
            if is_msg:
                a, b = type(values[i])(), type(values[j])()
                a.CopyFrom(values[i])
                b.CopyFrom(values[j])
                values[i].CopyFrom(b)
                values[j].CopyFrom(a)
            else:
                values[i], values[j] = values[j], values[i]
        else:  # change one in place
            i = rng.randrange(len(values))
            if is_msg:
                if depth < MAX_DEPTH:
                    self.message(values[i], depth + 1)
            else:
                values[i] = self.scalar(fd, values[i])

    def _map(self, entries, fd, depth: int) -> None:
        rng = self.rng
        key_fd = fd.message_type.fields_by_name["key"]
        value_fd = fd.message_type.fields_by_name["value"]
        keys = sorted(entries)
        action = rng.randrange(3) if keys else 0
        if action == 0:  # a new key (or an existing one, changed)
            key = self.scalar(key_fd, rng.choice(keys) if keys else key_fd.default_value)
            if key_fd.cpp_type == FD.CPPTYPE_BOOL:
                key = bool(key)
            target = key
        elif action == 1:
            del entries[rng.choice(keys)]
            return
        else:
            target = rng.choice(keys)
        if value_fd.cpp_type == FD.CPPTYPE_MESSAGE:
            sub = entries[target]  # creates the entry when it is new
            if depth < MAX_DEPTH:
                self.message(sub, depth + 1)
        else:
            old = entries.get(target, value_fd.default_value)
            entries[target] = self.scalar(value_fd, old)

    def scalar(self, fd, old):
        """A new value for scalar field ``fd`` whose value is ``old``."""
        rng = self.rng
        t = fd.cpp_type
        if t == FD.CPPTYPE_BOOL:
            return not old
        if t == FD.CPPTYPE_ENUM:
            numbers = [v.number for v in fd.enum_type.values]
            others = [n for n in numbers if n != old] or numbers
            return rng.choice(others)
        if t in _INT_RANGES:
            lo, hi = _INT_RANGES[t]
            r = rng.random()
            if r < 0.3:
                v = rng.choice((0, 1, -1, lo, hi, 1 << rng.randrange(64)))
            elif r < 0.7:
                v = old + rng.choice((-1, 1)) * rng.randint(1, 16)
            else:
                v = rng.randint(lo, hi)
            return min(max(v, lo), hi)
        if t in (FD.CPPTYPE_FLOAT, FD.CPPTYPE_DOUBLE):
            r = rng.random()
            if r < 0.4:
                v = rng.choice(_FLOATS)
            elif r < 0.7:
                v = old * rng.choice((2.0, 0.5, -1.0)) + rng.choice((0.0, 1.0))
            else:
                v = rng.uniform(-1e6, 1e6)
            if t == FD.CPPTYPE_FLOAT and math.isfinite(v) and abs(v) > 3.4e38:
                v = math.copysign(math.inf, v)  # float32 saturates, not raises
            return struct.unpack("<f", struct.pack("<f", v))[0] \
                if t == FD.CPPTYPE_FLOAT else v
        if fd.type == FD.TYPE_STRING:
            old = old if isinstance(old, str) else ""
            if self.strings and rng.random() < 0.3:
                return rng.choice(self.strings)
            data = self.mutate_bytes(old.encode(), max(64, 2 * len(old) + 8))
            return data.decode("utf-8", "ignore")  # a string field holds UTF-8
        old = old if isinstance(old, bytes) else b""  # a repeated bytes' zero
        return self.mutate_bytes(old, max(64, 2 * len(old) + 8))
