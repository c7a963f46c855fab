"""The all-reduce algorithms of ``runtime.collective``, chosen by size as NCCL
and Gloo choose theirs.

- **direct** (a member sends at most ``direct_bytes`` in all, or the group has
  two members): every member sends its tensor to every other and reduces them
  all in rank order: one round instead of the ring's 2(N-1), and every member
  computes the same bits. Two members move the same bytes as the ring would.
- **halves** (two members on one host, a tensor of ``_HUGE_BYTES`` or more):
  each member pushes the half its peer owns, naming where in its result (a
  ``shared_flat``) the peer writes the answer; each reduces its own half
  straight from the pushed chunk and writes it into both results. Per member
  3.5 passes over the tensor's bytes where direct takes 5 (the all-reduce is
  bound by memory traffic on one host: ``docs/architecture.md``).
- **shares** (three or more members on one host, a large tensor): scatter's
  two rounds, but each member writes its reduced segment straight into every
  peer's result (the spans their pushes named) and the second round only says
  so: ~4.7 passes per member for three members where scatter takes ~6.7.
- **scatter** (the rest): reduce-scatter and all-gather in two rounds, every
  member sending to every other, with the ring's bytes.
- **ring** (when asked): reduce-scatter then all-gather over the flattened
  tensor, cut into pieces of ``segment_bytes`` per member that run on a pool
  (``pipeline`` at once), so a large tensor pipelines; each member sends and
  receives 2(N-1)/N of the tensor, the least any algorithm moves; for any
  size when the op's ``communication_hint`` is ``"ring"``.

A chunk from a peer on this host is pushed and reduced where it landed, in the
sender's shared-memory segment, straight into the result: ``np.add(chunk,
mine, out=result)`` (``framed.collective_push``); from elsewhere it is pulled.
What a member sends is copied as it is sent, so it may send from its result.
"""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from nbdist import errors
from nbdist.runtime.collective_buffers import fresh_flat, shared_flat, shared_span

__all__ = ["all_reduce"]

_HUGE_BYTES = 1 << 21
_KEPT_RESULTS = 8  # instances whose last result buffer is kept for reuse
_CACHED_BLOCK_BYTES = 1 << 20  # reduced, then copied while still in the caches


def _result_like(owner, run, flat: np.ndarray, shared: bool = False) -> np.ndarray:
    """The result buffer. A large one is the buffer of this instance's last run
    when nothing references it any more (what TF's allocator would hand back:
    memory already faulted in, which a fresh 64 MiB array pays ~40% of a
    reduction for), else a new one on transparent huge pages; ``shared``: on
    a memfd a peer on this host can write (``collective_buffers.shared_flat``)."""
    if flat.nbytes < _HUGE_BYTES and not shared:
        return np.empty_like(flat)
    key = (run.group.group_key, run.instance_key)
    cache = owner.result_buffers
    with owner._lock:
        kept = cache.pop(key, None)
    # Referenced only by ``kept`` and getrefcount's argument: no view of it lives.
    if kept is not None and sys.getrefcount(kept) <= 2 and \
            kept.dtype == flat.dtype and kept.shape == flat.shape and \
            (not shared or shared_span(kept) is not None):
        out = kept
    else:
        out = (shared_flat if shared else fresh_flat)(flat.dtype, flat.size)
    del kept
    with owner._lock:
        cache[key] = out
        while len(cache) > _KEPT_RESULTS:
            cache.pop(next(iter(cache)))
    return out


def algorithm(nbytes: int, n: int, direct_bytes: int, hint: str = "auto",
              shares_memory: bool = False) -> str:
    """"direct", "halves", "scatter", "shares" or "ring" for an all-reduce of
    ``nbytes`` over ``n`` members: the ring (or scatter) when asked
    (``communication_hint``) or when it moves less; two members move the same
    bytes either way, and direct is one step. A large tensor whose members
    share memory (``shares_memory``: chunks to every peer are pushed on this
    host) goes by halves (two members) or shares (more)."""
    if hint in ("ring", "scatter"):
        return hint
    if shares_memory and nbytes >= _HUGE_BYTES:
        return "halves" if n == 2 else "shares"
    return "direct" if n == 2 or nbytes * (n - 1) <= direct_bytes else "scatter"


def all_reduce(owner, run, flat: np.ndarray, merge, segment_bytes: int,
               direct_bytes: int, pipeline: int, hint: str = "auto") -> np.ndarray:
    """``flat`` reduced by ``merge`` across ``run``'s group."""
    n = run.group.size
    peers = [m for m in run.group.members if m != owner.task]
    how = algorithm(flat.nbytes, n, direct_bytes, hint,
                    all(run.pushes(p) for p in peers))
    shared = how in ("halves", "shares")
    out = _result_like(owner, run, flat, shared)
    per_member = max(1, segment_bytes // max(1, flat.itemsize))
    try:
        if how == "halves":
            # Pieces twice direct's (a 64 MiB tensor is one per half): on one
            # host both phases are bound by the same memory, so smaller
            # pieces buy no overlap, only hand-offs (~15% slower measured).
            _halves(owner, run, flat, out, merge, 2 * per_member, pipeline)
            return out
        if how == "direct":
            # Pieces of one message each when large (pipelined); one when small.
            per_piece = (flat.size if flat.nbytes * (n - 1) <= direct_bytes
                         else per_member)
            piece_fn = _direct
        else:
            per_piece = per_member * n * (2 if how == "shares" else 1)  # as halves'
            piece_fn = {"ring": _ring_piece, "scatter": _scatter_piece,
                        "shares": _shares_piece}[how]
        bounds = range(0, flat.size, per_piece)
        if len(bounds) == 1:
            piece_fn(run, 0, flat, out, merge)
        else:
            _map_pieces(owner, run, pipeline, piece_fn, [
                (i, flat[b:b + per_piece], out[b:b + per_piece], merge)
                for i, b in enumerate(bounds)])
    except BaseException:
        if shared:  # a peer may still be writing into it: never handed out again
            with owner._lock:
                owner.result_buffers.pop((run.group.group_key, run.instance_key), None)
        raise
    return out


def _direct(run, piece: int, flat, out, merge) -> None:
    """Every member sends ``flat`` to every other and folds them all in rank
    order (every member computes the same bits)."""
    me = run.owner.task
    tag = f"p{piece}direct"
    sent = [run.put(dst, tag, flat) for dst in run.group.members if dst != me]
    try:
        _fold_direct(run, piece, tag, flat, out, merge)
        for finish in sent:
            finish()
    finally:
        for finish in sent:
            finish.abandon()  # (after an error: the peers withdraw the chunks)


def _fold_direct(run, piece, tag, flat, out, merge) -> None:
    """``out`` = the members' tensors merged in rank order. The first two are
    merged in one pass (``merge(x0, x1, out=out)``, no copy of ``x0`` first):
    when this member is one of them, inside the take of the other."""
    me = run.owner.task
    members = run.group.members

    def take(src, consume):
        run.take(src, tag, flat, consume, "direct", 0, piece)

    if me == members[0]:
        take(members[1], lambda chunk: merge(flat, chunk, out=out))
    elif me == members[1]:
        take(members[0], lambda chunk: merge(chunk, flat, out=out))
    else:
        take(members[0], lambda chunk: np.copyto(out, chunk))
        take(members[1], lambda chunk: merge(out, chunk, out=out))
    for src in members[2:]:
        if src == me:
            merge(out, flat, out=out)
        else:
            take(src, lambda chunk: merge(out, chunk, out=out))


def _halves(owner, run, flat, out, merge, per_piece: int, pipeline: int) -> None:
    """Two members: member r owns half r of the tensor. It pushes its part of
    the other half to the peer, naming the same span of its result; it reduces
    the peer's part of its own half (rank order) into its result and, before
    answering, into the span the peer named: both results hold both halves,
    each computed once. In pieces of ``per_piece`` elements, pipelined."""
    me = run.owner.task
    first = me == run.group.members[0]
    cut = flat.size // 2
    own, other = (slice(0, cut), slice(cut, None)) if first else \
        (slice(cut, None), slice(0, cut))
    own_flat, own_out = flat[own], out[own]
    other_flat, other_out = flat[other], out[other]
    count = max(1, -(-(flat.size - cut) // per_piece))  # the same on both

    def bounds(length, i):
        return slice(length * i // count, length * (i + 1) // count)

    pieces = []
    for i in range(count):
        o, t = bounds(own_flat.size, i), bounds(other_flat.size, i)
        pieces.append((i, own_flat[o], own_out[o], other_flat[t], other_out[t], merge))
    if count == 1:
        _halves_piece(run, *pieces[0])
    else:
        _map_pieces(owner, run, pipeline, _halves_piece, pieces)


def _halves_piece(run, piece, mine, mine_out, theirs, theirs_out, merge) -> None:
    peer = run.group.left()  # (the other member)
    first = run.owner.task == run.group.members[0]
    tag = f"p{piece}direct"  # as direct's: a member running direct fails on shape

    def consume(chunk, into):
        # Block by block, so the copy reads the reduced block from the cache.
        step = max(1, _CACHED_BLOCK_BYTES // max(1, mine.itemsize))
        for b in range(0, mine.size, step):
            block = slice(b, b + step)
            if first:
                merge(mine[block], chunk[block], out=mine_out[block])
            else:
                merge(chunk[block], mine[block], out=mine_out[block])
            np.copyto(into[block], mine_out[block])

    finish = run.put(peer, tag, theirs, into=theirs_out)
    try:
        run.take(peer, tag, mine, consume, "direct", 0, piece, answer=True)
        finish()
    finally:
        finish.abandon()


def _map_pieces(owner, run, pipeline: int, piece_fn, pieces) -> None:
    # Threads of this collective's own: in a pool shared by the task's
    # collectives, a step's concurrent all-reduces could fill it on one task
    # with pieces of one and on its peer with pieces of another, each waiting
    # for chunks the other task's pool never gets to (a hang seen under load).
    pool = ThreadPoolExecutor(min(pipeline, len(pieces)),
                              thread_name_prefix=f"nbdist-collective{owner.task}")
    futures = [pool.submit(piece_fn, run, *p) for p in pieces]
    try:
        for f in futures:
            f.result()
    except Exception as e:
        error = e if isinstance(e, errors.OpError) else errors.InternalError(
            None, None, f"{run.what}: {type(e).__name__}: {e}")
        run.step.cancel(error)  # the other pieces stop waiting
        for f in futures:
            f.exception()
        raise
    finally:
        pool.shutdown(wait=False)


def _step(finish, take, *args) -> None:
    """One ring step: the chunk taken from the left while ours goes right."""
    try:
        take(*args)
        finish()
    finally:
        finish.abandon()


def _ring_piece(run, piece: int, data: np.ndarray, out: np.ndarray, merge) -> None:
    """Reduce-scatter then all-gather of ``data`` into ``out``: at step k a member
    sends one segment right and receives one from the left, reduced with its
    own segment straight into ``out``, which is what it sends next."""
    g = run.group
    n, r = g.size, g.rank
    cuts = [len(data) * j // n for j in range(n + 1)]
    right, left = g.right(), g.left()

    def seg(buf, i):
        return buf[cuts[i]:cuts[i + 1]]

    moving = seg(data, r)  # the input's own segment r goes first
    for k in range(n - 1):  # reduce-scatter: segment r+1 ends complete here
        finish = run.put(right, f"p{piece}rs{k}", moving)
        i = (r - k - 1) % n
        own, dst = seg(data, i), seg(out, i)
        _step(finish, run.take, left, f"p{piece}rs{k}", own,
              lambda chunk, own=own, dst=dst: merge(chunk, own, out=dst),
              "reduce-scatter", k, piece)
        moving = dst
    for k in range(n - 1):  # all-gather of the complete segments
        finish = run.put(right, f"p{piece}ag{k}", moving)
        i = (r - k) % n
        dst = seg(out, i)
        _step(finish, run.take, left, f"p{piece}ag{k}", dst,
              lambda chunk, dst=dst: np.copyto(dst, chunk),
              "all-gather", k, piece)
        moving = dst


def _scatter_piece(run, piece: int, data: np.ndarray, out: np.ndarray,
                   merge) -> None:
    """Reduce-scatter and all-gather of ``data`` into ``out`` in two rounds:
    member j receives segment j from every other member and reduces them (in
    rank order) into its result, then sends the reduced segment to every other.
    The ring's bytes (2(N-1)/N of the tensor per member), in 2 rounds instead
    of 2(N-1): on one host every member reaches every other directly."""
    g = run.group
    n, r = g.size, g.rank
    cuts = [len(data) * j // n for j in range(n + 1)]

    def seg(buf, i):
        return buf[cuts[i]:cuts[i + 1]]

    mine = seg(out, r)
    tag = f"p{piece}rs0"
    sent = [run.put(g.members[j], tag, seg(data, j)) for j in range(n) if j != r]
    try:
        for j in range(n):
            if j == r:
                part = seg(data, r)
                if j == 0:
                    np.copyto(mine, part)
                else:
                    merge(mine, part, out=mine)
                continue
            run.take(g.members[j], tag, seg(data, r),
                     (lambda c: np.copyto(mine, c)) if j == 0 else (
                         lambda c: merge(mine, c, out=mine)),
                     "reduce-scatter", 0, piece)
        for finish in sent:
            finish()
    finally:
        for finish in sent:
            finish.abandon()
    tag = f"p{piece}ag0"
    sent = [run.put(g.members[j], tag, mine) for j in range(n) if j != r]
    try:
        for j in range(n):
            if j != r:
                dst = seg(out, j)
                run.take(g.members[j], tag, dst,
                         lambda c, dst=dst: np.copyto(dst, c), "all-gather", 0, piece)
        for finish in sent:
            finish()
    finally:
        for finish in sent:
            finish.abandon()


_WRITTEN = np.zeros(0, np.uint8)  # shares' all-gather: "your segment is written"


def _shares_piece(run, piece: int, data: np.ndarray, out: np.ndarray,
                  merge) -> None:
    """Scatter's rounds, members on one host with shared results: member j
    receives segment j from every other member, each push naming the span of
    the pusher's result for it; j reduces them in rank order and writes the
    reduced segment into its own result and every named span (the last fold
    block by block, each block copied while in the caches), then tells each
    peer so with an empty push. Per member ~4.7 passes over the tensor's
    bytes for three members where scatter's copy-in/copy-out all-gather
    takes ~6.7."""
    g = run.group
    n, r = g.size, g.rank
    cuts = [len(data) * j // n for j in range(n + 1)]

    def seg(buf, i):
        return buf[cuts[i]:cuts[i + 1]]

    mine, own = seg(out, r), seg(data, r)
    intos: list[np.ndarray] = []

    def fold(part, j):
        if j == 0:
            np.copyto(mine, part)
        elif j < n - 1:
            merge(mine, part, out=mine)
        else:  # the last: every peer's span is known by now
            step = max(1, _CACHED_BLOCK_BYTES // max(1, mine.itemsize))
            for b in range(0, mine.size, step):
                block = slice(b, b + step)
                merge(mine[block], part[block], out=mine[block])
                for into in intos:
                    np.copyto(into[block], mine[block])

    def folding(j):
        def consume(chunk, into):
            intos.append(into)
            fold(chunk, j)
        return consume

    tag = f"p{piece}rs0"
    sent = [run.put(g.members[j], tag, seg(data, j), into=seg(out, j))
            for j in range(n) if j != r]
    try:
        for j in range(n):
            if j == r:
                fold(own, j)
            else:
                run.take(g.members[j], tag, own, folding(j), "reduce-scatter", 0,
                         piece, answer=True)
        for finish in sent:
            finish()
    finally:
        for finish in sent:
            finish.abandon()
        del intos[:]  # (views of the peers' results)
    tag = f"p{piece}ag0"
    sent = [run.put(g.members[j], tag, _WRITTEN) for j in range(n) if j != r]
    try:
        for j in range(n):
            if j != r:
                run.take(g.members[j], tag, _WRITTEN, lambda c: None, "all-gather", 0,
                         piece, moved=seg(out, j).nbytes)
        for finish in sent:
            finish()
    finally:
        for finish in sent:
            finish.abandon()
