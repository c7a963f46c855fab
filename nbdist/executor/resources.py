"""The resource manager: variables, queues and iterators by container and name.

As TF's ResourceMgr, the default container is the task's job name
(``"localhost"`` for ``Session("")``); a server's resources are shared by all its
sessions (except those with ``isolate_session_state``, which get their own
managers) until ``cleanup`` drops a container.
"""

from __future__ import annotations

import threading

import numpy as np

from nbdist import errors

DEFAULT_CONTAINER = "localhost"


class VariableResource:
    """A variable's value. Updates replace the array (never mutate in place), so a
    value already read or fetched never changes under its reader."""

    __slots__ = ("name", "dtype", "shape", "_value", "lock")

    def __init__(self, name: str, dtype, shape):
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self._value: np.ndarray | None = None
        self.lock = threading.Lock()

    @property
    def value(self) -> np.ndarray | None:
        return self._value

    @value.setter
    def value(self, new):
        # Stored arrays are frozen: a fetch copies them, nobody writes them.
        if new is not None:
            new = np.asarray(new)
            if new.flags.writeable:
                new.flags.writeable = False
        self._value = new

    def read(self) -> np.ndarray:
        v = self._value
        if v is None:
            raise errors.FailedPreconditionError(
                None, self.name, f"Attempting to use uninitialized value {self.name}")
        return v

    @property
    def nbytes(self) -> int:
        v = self._value
        return 0 if v is None else int(v.nbytes)


class ResourceMgr:
    """container -> (kind, name) -> resource, thread-safe. An op with no
    ``container`` attr uses ``default_container``."""

    def __init__(self, default_container: str = DEFAULT_CONTAINER):
        self._lock = threading.Lock()
        self._containers: dict[str, dict] = {}
        self.default_container = default_container or DEFAULT_CONTAINER

    def lookup_or_create(self, container: str, kind: str, name: str, factory):
        container = container or self.default_container
        with self._lock:
            c = self._containers.setdefault(container, {})
            res = c.get((kind, name))
            if res is None:
                res = factory()
                c[(kind, name)] = res
            return res

    def lookup(self, container: str, kind: str, name: str):
        with self._lock:
            c = self._containers.get(container or self.default_container, {})
            return c.get((kind, name))

    def cleanup(self, container: str | None = None):
        """Drops every resource of ``container`` (all containers if None)."""
        with self._lock:
            if container is None:
                dropped = [r for c in self._containers.values() for r in c.values()]
                self._containers.clear()
            else:
                dropped = list(self._containers.pop(container, {}).values())
        for r in dropped:
            close = getattr(r, "close_for_cleanup", None)
            if close is not None:
                close()

    def containers(self) -> list[str]:
        with self._lock:
            return sorted(self._containers)

    def resources(self, kind: str | None = None) -> list:
        with self._lock:
            return [(cn, k, n, r) for cn, c in self._containers.items()
                    for (k, n), r in c.items() if kind is None or k == kind]
