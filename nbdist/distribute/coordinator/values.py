"""What ``ClusterCoordinator`` hands back: ``RemoteValue`` and ``PerWorkerValues``.

A ``RemoteValue`` is the future of one scheduled function (or of one worker's
resource, such as its dataset iterator). Its status (``RemoteValueStatus``):

* ``NOT_READY`` — queued or running; also while it is queued again because
  its worker failed (it will run elsewhere).
* ``READY`` — finished: ``fetch()`` returns the function's outputs as NumPy
  values, or raises the function's own error.
* ``ABORTED`` — it will not run: it was cancelled because an earlier function
  raised or a parameter server failed (``fetch()`` raises ``CancelledError``
  "…Please reschedule the function."); or, for a per-worker resource, its
  worker failed (``READY`` again once the worker is back and the resource
  rebuilt).

    >>> rv = RemoteValue()
    >>> rv._set_value(3)
    >>> rv.fetch(), rv.status
    (3, <RemoteValueStatus.READY: 'READY'>)

``PerWorkerValues`` holds one value per worker; passed to
``ClusterCoordinator.schedule``, the function receives the value of the
worker it runs on.
"""

from __future__ import annotations

import enum
import threading

from nbdist import errors

__all__ = ["PerWorkerValue", "PerWorkerValues", "RemoteValue", "RemoteValueStatus"]


class RemoteValueStatus(enum.Enum):
    NOT_READY = "NOT_READY"
    READY = "READY"
    ABORTED = "ABORTED"


class RemoteValue:
    """The value of a function scheduled with ``ClusterCoordinator.schedule``.

    ``fetch()`` blocks until the function has run and returns its outputs
    (NumPy values in the function's output structure); ``get()`` is the same.
    See the module docstring for the states.
    """

    __slots__ = ("__weakref__", "_done", "_error", "_name", "_ready", "_status",
                 "_value")

    def __init__(self, name: str = ""):
        # A held lock, released when the value is set: cheaper than an Event
        # (one is made per scheduled function).
        self._ready = threading.Lock()
        self._ready.acquire()
        self._done = False
        self._status = RemoteValueStatus.NOT_READY
        self._value = None
        self._error = None
        self._name = name

    @property
    def status(self) -> RemoteValueStatus:
        return self._status

    def fetch(self, timeout: float | None = None):
        """The function's outputs (NumPy). Blocks until it has run; raises its
        error, or ``CancelledError`` when it was cancelled or its worker's
        resource is lost; ``DeadlineExceededError`` after ``timeout`` s."""
        if not self._done:
            if not self._ready.acquire(timeout=-1 if timeout is None else timeout):
                raise errors.DeadlineExceededError(
                    None, None,
                    f"RemoteValue{self._label()} not ready after {timeout} s")
            self._ready.release()
        if self._error is not None:
            raise self._error
        return self._value

    def get(self, timeout: float | None = None):
        """Same as ``fetch()`` (values are NumPy on the coordinator)."""
        return self.fetch(timeout)

    def _label(self) -> str:
        return f" of {self._name}" if self._name else ""

    # -- set by the coordinator (under its lock) ------------------------------------
    def _set(self, status, value, error):
        self._value, self._error, self._status = value, error, status
        if not self._done:
            self._done = True
            self._ready.release()

    def _set_value(self, value):
        self._set(RemoteValueStatus.READY, value, None)

    def _set_error(self, error: BaseException):
        self._set(RemoteValueStatus.READY, None, error)

    def _set_aborted(self, error: BaseException):
        self._set(RemoteValueStatus.ABORTED, None, error)

    def __repr__(self) -> str:
        return f"<RemoteValue{self._label()} {self._status.value}>"


class PerWorkerResource(RemoteValue):
    """A worker's copy of a per-worker resource (its dataset iterator). Its
    value, once READY, is the client-side handle (an ``nd.data.Iterator``);
    the resource itself lives on the worker."""

    __slots__ = ("handle",)

    def __init__(self, handle, name: str = ""):
        super().__init__(name)
        self.handle = handle


class PerWorkerValues:
    """One value per worker (``values[i]`` for worker i). A function scheduled
    with one as an argument receives the value of the worker it runs on.

    >>> PerWorkerValues((1, 2))
    PerWorkerValues((1, 2))
    """

    def __init__(self, values):
        self._values = tuple(values)

    @property
    def values(self) -> tuple:
        return self._values

    def __len__(self):
        return len(self._values)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._values!r})"


PerWorkerValue = PerWorkerValues  # TF 2.9+ spelling
