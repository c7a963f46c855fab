"""Kernels of ``nbdist.ops.session_ops``: one store of kept tensors per
session and device, keyed by handle strings ``<node>;<n>;<device>``, as TF's
session state."""

from __future__ import annotations

import itertools
import threading

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import op_error, unshared_resources


class SessionTensorStore:
    """Handle -> kept value."""

    def __init__(self):
        self._lock = threading.Lock()
        self._values: dict[str, object] = {}
        self._ids = itertools.count()

    def keep(self, prefix: str, device: str, value) -> str:
        with self._lock:
            handle = f"{prefix};{next(self._ids)};{device}"
            self._values[handle] = value
        return handle

    def get(self, handle: str):
        with self._lock:
            return self._values.get(handle)

    def drop(self, handle: str) -> bool:
        with self._lock:
            return self._values.pop(handle, None) is not None


def _store(node) -> SessionTensorStore:
    # The session's own resources: a handle lives as long as its session.
    return unshared_resources(node, "").lookup_or_create(
        "", "session_tensor_store", "store", SessionTensorStore)


def _handle(node, value) -> str:
    h = np.asarray(value).item()
    return h.decode() if isinstance(h, bytes) else str(h)


@register_kernel("GetSessionHandle")
def get_session_handle_kernel(node):
    def compute(step, value):
        store = _store(node)
        return np.array(store.keep(node.name, node.device or "", value).encode(),
                        dtype=object)

    return compute


@register_kernel("GetSessionTensor")
def get_session_tensor_kernel(node):
    def compute(step, handle):
        h = _handle(node, handle)
        value = _store(node).get(h)
        if value is None:
            raise op_error(node, f"The tensor with handle '{h}' is not in the "
                                 "session store.")
        return value

    return compute


@register_kernel("DeleteSessionTensor")
def delete_session_tensor_kernel(node):
    def compute(step, handle):
        h = _handle(node, handle)
        if not _store(node).drop(h):
            raise op_error(node, f"The tensor with handle '{h}' is not in the "
                                 "session store.")

    return compute
