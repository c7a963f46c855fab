"""A queue runner's enqueue of one reader record, run k records at a time.

TF1 input pipelines enqueue one record per run: ``reader.read`` ->
``parse_single_example`` -> ``decode_raw`` ... -> ``queue.enqueue``. Each run
pays the session, executor and kernel dispatch for one record, and the
runner threads share one interpreter. When the enqueue's inputs come from one
``ReaderReadV2`` through ops that ``dataset_vectorize`` knows commute with
stacking (the parse of a scalar ``Example``, ``decode_raw``, casts,
elementwise arithmetic with constants, reshapes), ``batched_enqueue`` builds
beside it the same computation on vectors: ``ReaderReadUpToV2`` of k records,
the copied ops fed those k records, ``QueueEnqueueManyV2``. A runner thread
then reads k records in one run and enqueues them in a second.

The records, their order (one thread) and the errors stay those of the
one-record enqueue: a batch whose enqueue fails for any reason but a closed
queue is enqueued again record by record through the original enqueue op (its
reader outputs fed), which enqueues the records before the bad one and raises
what the one-record run raises. Anything not recognised keeps the one-record
loop.

Two differences remain, both at a stop: a thread checks the coordinator
every k records, not every record, and a reader error inside a read (a
corrupt TFRecord: ``DataLossError``) loses the records read before it in that
read of k, which the one-record loop would have enqueued before stopping on
the same error.
"""

from __future__ import annotations

from nbdist import errors
from nbdist.executor.kernels.dataset_vectorize import vectorizable_ranks
from nbdist.framework import dtypes
from nbdist.framework.constant_op import placeholder
from nbdist.framework.node_def import operation_to_node_def
from nbdist.framework.ops import convert_to_tensor, name_scope
from nbdist.ops import array_ops_join, array_ops_shape

_MAX_RECORDS = 32


def _chain(components, reader_op):
    """The ops between ``reader_op``'s outputs and ``components``, inputs
    first; None when another reader or a control input is among them."""
    order, seen = [], set()
    todo = [(t.op, False) for t in reversed(components)]
    while todo:
        op, done = todo.pop()
        if op is reader_op or (op.name in seen and not done):
            continue
        if done:
            order.append(op)
            continue
        if op._control_inputs or op.type in ("ReaderReadV2", "ReaderReadUpToV2"):
            return None
        seen.add(op.name)
        todo.append((op, True))
        todo.extend((t.op, False) for t in reversed(op._inputs))
    return order


def _reader_of(components):
    """The one ``ReaderReadV2`` the components are computed from, or None."""
    found, todo, seen = set(), [t.op for t in components], set()
    while todo:
        op = todo.pop()
        if op.name in seen:
            continue
        seen.add(op.name)
        if op.type == "ReaderReadV2":
            found.add(op)
            continue
        todo.extend(t.op for t in op._inputs)
    return found.pop() if len(found) == 1 else None


class BatchedEnqueue:
    """The vector form of one enqueue op (see the module docstring)."""

    def __init__(self, enqueue_op, reader_op, read_up_to, placeholders,
                 enqueue_many, records):
        self.enqueue_op, self.reader_op = enqueue_op, reader_op
        self.read_up_to, self.placeholders = read_up_to, placeholders
        self.enqueue_many, self.records = enqueue_many, records

    def make_step(self, sess, closed_types):
        """A function that enqueues up to ``records`` records per call and
        raises what the one-record run would raise."""
        read = sess.make_callable(list(self.read_up_to))
        outs = list(self.reader_op.outputs)
        many = sess.make_callable(self.enqueue_many, feed_list=self.placeholders)
        one = sess.make_callable(self.enqueue_op, feed_list=outs)

        def step():
            keys, values = read()
            try:
                many(keys, values)
            except closed_types:
                raise
            except errors.OpError:
                for k, v in zip(keys, values):  # the records one by one
                    one(k, v)

        return step


def batched_enqueue(enqueue_op, queue):
    """A ``BatchedEnqueue`` for ``enqueue_op`` (a ``QueueEnqueueV2`` into
    ``queue``) in its graph, or None (module docstring)."""
    if getattr(enqueue_op, "type", None) != "QueueEnqueueV2":
        return None  # another op, or a tensor to run
    g = enqueue_op.graph
    if g.finalized:
        return None
    components = list(enqueue_op._inputs[1:])
    reader_op = _reader_of(components)
    if reader_op is None:
        return None
    chain = _chain(components, reader_op)
    if chain is None:
        return None
    refs = [f"{reader_op.name}:0", f"{reader_op.name}:1"]
    ranks = vectorizable_ranks(refs, [operation_to_node_def(op) for op in chain],
                               [t._as_node_def_input() for t in components])
    if ranks is None:
        return None
    handle = enqueue_op._inputs[0]
    if handle is not getattr(queue, "queue_ref", handle):
        return None
    capacity = handle.op._attrs.get("capacity", -1)
    records = _MAX_RECORDS if capacity <= 0 else max(1, min(_MAX_RECORDS,
                                                            capacity // 4))
    with g.as_default(), name_scope(f"{enqueue_op.name}_batched"):
        return _build(g, enqueue_op, reader_op, chain, ranks, records)


def _build(g, enqueue_op, reader_op, chain, ranks, records):
    with g.device(reader_op.device):
        n = convert_to_tensor(records, dtype=dtypes.int64, name="num_records")
        read = g.create_op("ReaderReadUpToV2", [*reader_op._inputs, n], {},
                           name="ReaderReadUpToV2").outputs
        placeholders = [placeholder(t.dtype, [None], name=f"records_{i}")
                        for i, t in enumerate(reader_op.outputs)]
    new = dict(zip(reader_op.outputs, placeholders))
    for op in chain:
        if not any(f"{op.name}:{k}" in ranks for k in range(len(op.outputs))):
            continue  # from constants: the same tensors serve every record
        inputs = [new.get(t, t) for t in op._inputs]
        with g.device(op.device):
            if op.type == "Reshape":
                inputs[1] = _batched_shape(inputs[0], inputs[1])
            copy = g.create_op(op.type, inputs, dict(op._attrs), name=op.name)
        new.update(zip(op.outputs, copy.outputs))
    components = [new[t] for t in enqueue_op._inputs[1:]]
    with g.device(enqueue_op.device):
        many = g.create_op("QueueEnqueueManyV2", [enqueue_op._inputs[0], *components],
                           dict(enqueue_op._attrs), name="QueueEnqueueManyV2")
    return BatchedEnqueue(enqueue_op, reader_op, read, placeholders, many, records)


def _batched_shape(x, shape):
    """``[len(x)] + shape``: each row reshaped as its record was."""
    lead = array_ops_shape.shape(x, out_type=shape.dtype)[:1]
    return array_ops_join.concat([lead, shape], 0)
