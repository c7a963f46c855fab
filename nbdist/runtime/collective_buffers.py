"""Result buffers of large all-reduces (``collective_ring``): fresh ones on
transparent huge pages, and shared ones on a memfd a peer on this host may map
and write (the framed link's pushes name a span of one: ``into``).

Transport-neutral: the core runtime allocates them; a link that shares memory
hands a ``SharedResult``'s descriptor to its peer.

>>> import numpy as np
>>> flat = shared_flat(np.dtype("float32"), 4)
>>> result, offset = shared_span(flat[2:])
>>> offset, len(result) >= 16, shared_span(np.zeros(4)) is None
(8, True, True)
"""

from __future__ import annotations

import fcntl
import itertools
import mmap
import os
import weakref

import numpy as np

__all__ = ["SharedResult", "fresh_flat", "shared_flat", "shared_span"]

_MADV_HUGEPAGE = getattr(mmap, "MADV_HUGEPAGE", None)


def fresh_flat(dtype: np.dtype, size: int) -> np.ndarray:
    """A 1-d array on its own anonymous mapping (transparent huge pages when
    the kernel has them), for a large all-reduce result. Every view of it has
    it as its ``base``, so its reference count tells whether anything still
    uses its memory (``collective_ring`` reuses it when nothing does)."""
    m = mmap.mmap(-1, max(1, size * dtype.itemsize),
                  flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    if _MADV_HUGEPAGE is not None:
        m.madvise(_MADV_HUGEPAGE)
    return np.frombuffer(m, dtype=dtype, count=size)


class SharedResult(mmap.mmap):
    """A ``shared_flat``'s memory: a memfd mapped here, whose descriptor (kept
    open while the mapping lives) a push hands to peers on this host. Sealed
    against shrinking (a peer writing into it never faults past its end)."""

    def __del__(self):
        # Peers keep its descriptor for the next push naming it (a few per
        # connection): its pages are freed now, not when they let go.
        try:
            self.madvise(mmap.MADV_REMOVE)
        except (AttributeError, OSError, ValueError):
            pass


_result_ids = itertools.count(1)


def shared_flat(dtype: np.dtype, size: int) -> np.ndarray:
    """A 1-d array on a memfd a peer on this host may map and write (an
    all-reduce result the peer fills half of). Views of it have it as their
    ``base``, as ``fresh_flat``'s do."""
    nbytes = max(1, size * dtype.itemsize)
    fd = os.memfd_create("nbdist-result", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, nbytes)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)
        m = SharedResult(fd, nbytes, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE)
    except BaseException:
        os.close(fd)
        raise
    m.fd, m.result_id = fd, next(_result_ids)
    weakref.finalize(m, os.close, fd)
    arr = np.frombuffer(m, dtype=dtype, count=size)
    m.address = arr.ctypes.data
    return arr


def shared_span(view: np.ndarray) -> tuple[SharedResult, int] | None:
    """(the ``SharedResult`` under a contiguous view of a ``shared_flat``, the
    view's byte offset in it), or None when it lies elsewhere."""
    base = view.base if isinstance(view.base, np.ndarray) else view
    owner = getattr(base.base, "obj", None)
    if not isinstance(owner, SharedResult) or not view.flags.c_contiguous:
        return None
    return owner, view.ctypes.data - owner.address
