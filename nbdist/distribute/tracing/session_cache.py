"""``SessionCache``: one ``Session`` per target for one graph, made on first use,
so that running the graph again on a target is one RunStep of a graph the
target's tasks have registered already."""

from __future__ import annotations

import threading

from nbdist.runtime.session import Session

__all__ = ["SessionCache"]


class SessionCache:
    """The sessions of ``graph``, by target."""

    def __init__(self, graph):
        self._graph = graph
        self._sessions: dict = {}
        self._lock = threading.Lock()

    def __iter__(self):
        """The targets that have a session."""
        return iter(list(self._sessions))

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, target: str, config=None) -> Session:
        """The open session on ``target`` (made with ``config`` when there is none)."""
        s = self._sessions.get(target)
        if s is not None and not s._closed:
            return s
        with self._lock:
            s = self._sessions.get(target)
            if s is None or s._closed:
                s = self._sessions[target] = Session(target, graph=self._graph,
                                                     config=config)
            return s

    def forget(self, target: str, session: Session):
        """Drops ``session`` (its task restarted or vanished), unclosed, so the
        next ``get`` makes a new one."""
        with self._lock:
            if self._sessions.get(target) is session:
                del self._sessions[target]

    def release(self, target: str | None = None):
        """Closes the session on ``target`` (all of them when None)."""
        with self._lock:
            keys = list(self._sessions) if target is None else [target]
            dropped = [self._sessions.pop(k) for k in keys if k in self._sessions]
        for s in dropped:
            try:
                s.close()
            except Exception:  # noqa: BLE001, S110 - the task may be gone
                pass
