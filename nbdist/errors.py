"""Error classes of nbdist (``nd.errors``), with gRPC's canonical codes.

An error raised on a remote task reaches the client as the same class, with
the op name and the task in its message.
"""

from __future__ import annotations

OK = 0
CANCELLED = 1
UNKNOWN = 2
INVALID_ARGUMENT = 3
DEADLINE_EXCEEDED = 4
NOT_FOUND = 5
ALREADY_EXISTS = 6
PERMISSION_DENIED = 7
RESOURCE_EXHAUSTED = 8
FAILED_PRECONDITION = 9
ABORTED = 10
OUT_OF_RANGE = 11
UNIMPLEMENTED = 12
INTERNAL = 13
UNAVAILABLE = 14
DATA_LOSS = 15
UNAUTHENTICATED = 16


class OpError(Exception):
    """A failure while running an op: ``node_def``, ``op``, ``message``,
    ``error_code``.

    As in TF, a ``Session`` sets ``op`` to the ``Operation`` of its graph that
    failed (and ``node_def`` to its NodeDef); an error that names no op of the
    session's graph has the name (or None) there.

    >>> try:
    ...     raise InvalidArgumentError(None, None, "bad feed")
    ... except OpError as e:
    ...     e.error_code
    3
    """

    error_code_default = UNKNOWN

    def __init__(self, node_def, op, message: str, error_code: int | None = None):
        super().__init__(message)
        self._node_def = node_def
        self._op = op
        self._message = message
        self._error_code = (
            self.error_code_default if error_code is None else error_code
        )

    @property
    def message(self) -> str:
        return self._message

    @property
    def op(self):
        return self._op

    @property
    def node_def(self):
        return self._node_def

    @property
    def error_code(self) -> int:
        return self._error_code

    def __str__(self) -> str:
        # TF returns the message as is and so raises on None; str() of an
        # exception should never raise (loggers and tracebacks call it).
        return "" if self._message is None else str(self._message)

    def __reduce__(self):
        # An Operation does not cross processes: its name does.
        return (type(self), (self._node_def, getattr(self._op, "name", self._op),
                             self._message))


def _make(name: str, code: int) -> type[OpError]:
    def __init__(self, node_def, op, message, *args, **kwargs):
        OpError.__init__(self, node_def, op, message, code)

    return type(name, (OpError,), {"__init__": __init__, "error_code_default": code})


CancelledError = _make("CancelledError", CANCELLED)
UnknownError = _make("UnknownError", UNKNOWN)
InvalidArgumentError = _make("InvalidArgumentError", INVALID_ARGUMENT)
DeadlineExceededError = _make("DeadlineExceededError", DEADLINE_EXCEEDED)
NotFoundError = _make("NotFoundError", NOT_FOUND)
AlreadyExistsError = _make("AlreadyExistsError", ALREADY_EXISTS)
PermissionDeniedError = _make("PermissionDeniedError", PERMISSION_DENIED)
ResourceExhaustedError = _make("ResourceExhaustedError", RESOURCE_EXHAUSTED)
FailedPreconditionError = _make("FailedPreconditionError", FAILED_PRECONDITION)
AbortedError = _make("AbortedError", ABORTED)
OutOfRangeError = _make("OutOfRangeError", OUT_OF_RANGE)
UnimplementedError = _make("UnimplementedError", UNIMPLEMENTED)
InternalError = _make("InternalError", INTERNAL)
UnavailableError = _make("UnavailableError", UNAVAILABLE)
DataLossError = _make("DataLossError", DATA_LOSS)
UnauthenticatedError = _make("UnauthenticatedError", UNAUTHENTICATED)

_CODE_TO_CLASS = {
    cls.error_code_default: cls
    for cls in (
        CancelledError, UnknownError, InvalidArgumentError, DeadlineExceededError,
        NotFoundError, AlreadyExistsError, PermissionDeniedError,
        ResourceExhaustedError, FailedPreconditionError, AbortedError,
        OutOfRangeError, UnimplementedError, InternalError, UnavailableError,
        DataLossError, UnauthenticatedError,
    )
}


def exception_type_from_error_code(code: int) -> type[OpError]:
    return _CODE_TO_CLASS.get(int(code), UnknownError)


def error_code_from_exception_type(cls: type[OpError]) -> int:
    return cls.error_code_default


def make_error(code: int, message: str, op: str | None = None) -> OpError:
    """The error of class ``code`` (a canonical code) with ``message``."""
    return exception_type_from_error_code(code)(None, op, message)


class raise_exception_on_not_ok_status:  # noqa: N801 - TF's name
    """TF1's context manager around a C-API call: it yields a status holder
    (``code``, ``message``); a non-OK ``code`` set on it raises the matching
    ``OpError`` on exit.

    >>> import nbdist as nd
    >>> try:
    ...     with nd.errors.raise_exception_on_not_ok_status() as status:
    ...         status.code, status.message = nd.errors.NOT_FOUND, "no file"
    ... except nd.errors.NotFoundError as e:
    ...     print(e.message)
    no file
    """

    def __enter__(self):
        import types

        self.status = types.SimpleNamespace(code=OK, message="")
        return self.status

    def __exit__(self, exc_type, exc_value, tb):
        if exc_type is None and self.status.code != OK:
            raise make_error(self.status.code, self.status.message)
        return False
