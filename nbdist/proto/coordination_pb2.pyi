from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class TaskState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TASKSTATE_UNSPECIFIED: _ClassVar[TaskState]
    TASKSTATE_DISCONNECTED: _ClassVar[TaskState]
    TASKSTATE_CONNECTED: _ClassVar[TaskState]
    TASKSTATE_ERROR: _ClassVar[TaskState]
TASKSTATE_UNSPECIFIED: TaskState
TASKSTATE_DISCONNECTED: TaskState
TASKSTATE_CONNECTED: TaskState
TASKSTATE_ERROR: TaskState

class CoordinationConfig(_message.Message):
    __slots__ = ("heartbeat_interval_ms", "heartbeat_timeout_ms", "max_events")
    HEARTBEAT_INTERVAL_MS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_EVENTS_FIELD_NUMBER: _ClassVar[int]
    heartbeat_interval_ms: int
    heartbeat_timeout_ms: int
    max_events: int
    def __init__(self, heartbeat_interval_ms: _Optional[int] = ..., heartbeat_timeout_ms: _Optional[int] = ..., max_events: _Optional[int] = ...) -> None: ...

class TaskStateInfo(_message.Message):
    __slots__ = ("task", "state", "incarnation", "address", "pid", "error_message", "last_heartbeat_us", "steps_served", "cpu_seconds")
    TASK_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_US_FIELD_NUMBER: _ClassVar[int]
    STEPS_SERVED_FIELD_NUMBER: _ClassVar[int]
    CPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    task: str
    state: TaskState
    incarnation: int
    address: str
    pid: int
    error_message: str
    last_heartbeat_us: int
    steps_served: int
    cpu_seconds: float
    def __init__(self, task: _Optional[str] = ..., state: _Optional[_Union[TaskState, str]] = ..., incarnation: _Optional[int] = ..., address: _Optional[str] = ..., pid: _Optional[int] = ..., error_message: _Optional[str] = ..., last_heartbeat_us: _Optional[int] = ..., steps_served: _Optional[int] = ..., cpu_seconds: _Optional[float] = ...) -> None: ...

class RegisterTaskRequest(_message.Message):
    __slots__ = ("task", "incarnation", "address", "pid")
    TASK_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    PID_FIELD_NUMBER: _ClassVar[int]
    task: str
    incarnation: int
    address: str
    pid: int
    def __init__(self, task: _Optional[str] = ..., incarnation: _Optional[int] = ..., address: _Optional[str] = ..., pid: _Optional[int] = ...) -> None: ...

class RegisterTaskResponse(_message.Message):
    __slots__ = ("leader_incarnation", "config")
    LEADER_INCARNATION_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    leader_incarnation: int
    config: CoordinationConfig
    def __init__(self, leader_incarnation: _Optional[int] = ..., config: _Optional[_Union[CoordinationConfig, _Mapping]] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("task", "incarnation", "steps_served", "cpu_seconds")
    TASK_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    STEPS_SERVED_FIELD_NUMBER: _ClassVar[int]
    CPU_SECONDS_FIELD_NUMBER: _ClassVar[int]
    task: str
    incarnation: int
    steps_served: int
    cpu_seconds: float
    def __init__(self, task: _Optional[str] = ..., incarnation: _Optional[int] = ..., steps_served: _Optional[int] = ..., cpu_seconds: _Optional[float] = ...) -> None: ...

class HeartbeatResponse(_message.Message):
    __slots__ = ("leader_incarnation",)
    LEADER_INCARNATION_FIELD_NUMBER: _ClassVar[int]
    leader_incarnation: int
    def __init__(self, leader_incarnation: _Optional[int] = ...) -> None: ...

class ReportErrorRequest(_message.Message):
    __slots__ = ("task", "error_code", "error_message")
    TASK_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    task: str
    error_code: int
    error_message: str
    def __init__(self, task: _Optional[str] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ...) -> None: ...

class ReportErrorResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetTaskStateRequest(_message.Message):
    __slots__ = ("task",)
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, task: _Optional[_Iterable[str]] = ...) -> None: ...

class GetTaskStateResponse(_message.Message):
    __slots__ = ("task_state",)
    TASK_STATE_FIELD_NUMBER: _ClassVar[int]
    task_state: _containers.RepeatedCompositeFieldContainer[TaskStateInfo]
    def __init__(self, task_state: _Optional[_Iterable[_Union[TaskStateInfo, _Mapping]]] = ...) -> None: ...

class BarrierRequest(_message.Message):
    __slots__ = ("barrier_id", "timeout_in_ms", "tasks", "source_task")
    BARRIER_ID_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_IN_MS_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_TASK_FIELD_NUMBER: _ClassVar[int]
    barrier_id: str
    timeout_in_ms: int
    tasks: _containers.RepeatedScalarFieldContainer[str]
    source_task: str
    def __init__(self, barrier_id: _Optional[str] = ..., timeout_in_ms: _Optional[int] = ..., tasks: _Optional[_Iterable[str]] = ..., source_task: _Optional[str] = ...) -> None: ...

class BarrierResponse(_message.Message):
    __slots__ = ("round",)
    ROUND_FIELD_NUMBER: _ClassVar[int]
    round: int
    def __init__(self, round: _Optional[int] = ...) -> None: ...

class CancelBarrierRequest(_message.Message):
    __slots__ = ("barrier_id", "source_task")
    BARRIER_ID_FIELD_NUMBER: _ClassVar[int]
    SOURCE_TASK_FIELD_NUMBER: _ClassVar[int]
    barrier_id: str
    source_task: str
    def __init__(self, barrier_id: _Optional[str] = ..., source_task: _Optional[str] = ...) -> None: ...

class CancelBarrierResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class KeyValueEntry(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: bytes
    def __init__(self, key: _Optional[str] = ..., value: _Optional[bytes] = ...) -> None: ...

class InsertKeyValueRequest(_message.Message):
    __slots__ = ("kv", "allow_overwrite")
    KV_FIELD_NUMBER: _ClassVar[int]
    ALLOW_OVERWRITE_FIELD_NUMBER: _ClassVar[int]
    kv: KeyValueEntry
    allow_overwrite: bool
    def __init__(self, kv: _Optional[_Union[KeyValueEntry, _Mapping]] = ..., allow_overwrite: _Optional[bool] = ...) -> None: ...

class InsertKeyValueResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetKeyValueRequest(_message.Message):
    __slots__ = ("key", "timeout_in_ms")
    KEY_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_IN_MS_FIELD_NUMBER: _ClassVar[int]
    key: str
    timeout_in_ms: int
    def __init__(self, key: _Optional[str] = ..., timeout_in_ms: _Optional[int] = ...) -> None: ...

class GetKeyValueResponse(_message.Message):
    __slots__ = ("kv",)
    KV_FIELD_NUMBER: _ClassVar[int]
    kv: KeyValueEntry
    def __init__(self, kv: _Optional[_Union[KeyValueEntry, _Mapping]] = ...) -> None: ...

class TryGetKeyValueRequest(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: str
    def __init__(self, key: _Optional[str] = ...) -> None: ...

class TryGetKeyValueResponse(_message.Message):
    __slots__ = ("kv", "found")
    KV_FIELD_NUMBER: _ClassVar[int]
    FOUND_FIELD_NUMBER: _ClassVar[int]
    kv: KeyValueEntry
    found: bool
    def __init__(self, kv: _Optional[_Union[KeyValueEntry, _Mapping]] = ..., found: _Optional[bool] = ...) -> None: ...

class DeleteKeyValueRequest(_message.Message):
    __slots__ = ("key",)
    KEY_FIELD_NUMBER: _ClassVar[int]
    key: str
    def __init__(self, key: _Optional[str] = ...) -> None: ...

class DeleteKeyValueResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Event(_message.Message):
    __slots__ = ("seq", "wall_time_us", "kind", "task", "json")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    WALL_TIME_US_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    JSON_FIELD_NUMBER: _ClassVar[int]
    seq: int
    wall_time_us: int
    kind: str
    task: str
    json: str
    def __init__(self, seq: _Optional[int] = ..., wall_time_us: _Optional[int] = ..., kind: _Optional[str] = ..., task: _Optional[str] = ..., json: _Optional[str] = ...) -> None: ...

class PublishEventsRequest(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[Event]
    def __init__(self, events: _Optional[_Iterable[_Union[Event, _Mapping]]] = ...) -> None: ...

class PublishEventsResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WatchEventsRequest(_message.Message):
    __slots__ = ("from_seq", "kinds")
    FROM_SEQ_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    from_seq: int
    kinds: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, from_seq: _Optional[int] = ..., kinds: _Optional[_Iterable[str]] = ...) -> None: ...
