from nbdist.proto import config_pb2 as _config_pb2
from nbdist.proto import device_attributes_pb2 as _device_attributes_pb2
from nbdist.proto import graph_pb2 as _graph_pb2
from nbdist.proto import named_tensor_pb2 as _named_tensor_pb2
from nbdist.proto import server_def_pb2 as _server_def_pb2
from nbdist.proto import step_stats_pb2 as _step_stats_pb2
from nbdist.proto import tensor_pb2 as _tensor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GetStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetStatusResponse(_message.Message):
    __slots__ = ("device_attributes", "task", "incarnation")
    DEVICE_ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    device_attributes: _containers.RepeatedCompositeFieldContainer[_device_attributes_pb2.DeviceAttributes]
    task: str
    incarnation: int
    def __init__(self, device_attributes: _Optional[_Iterable[_Union[_device_attributes_pb2.DeviceAttributes, _Mapping]]] = ..., task: _Optional[str] = ..., incarnation: _Optional[int] = ...) -> None: ...

class CreateWorkerSessionRequest(_message.Message):
    __slots__ = ("session_handle", "server_def", "isolate_session_state", "master_task", "master_incarnation", "request_id")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    SERVER_DEF_FIELD_NUMBER: _ClassVar[int]
    ISOLATE_SESSION_STATE_FIELD_NUMBER: _ClassVar[int]
    MASTER_TASK_FIELD_NUMBER: _ClassVar[int]
    MASTER_INCARNATION_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    server_def: _server_def_pb2.ServerDef
    isolate_session_state: bool
    master_task: str
    master_incarnation: int
    request_id: int
    def __init__(self, session_handle: _Optional[str] = ..., server_def: _Optional[_Union[_server_def_pb2.ServerDef, _Mapping]] = ..., isolate_session_state: _Optional[bool] = ..., master_task: _Optional[str] = ..., master_incarnation: _Optional[int] = ..., request_id: _Optional[int] = ...) -> None: ...

class CreateWorkerSessionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DeleteWorkerSessionRequest(_message.Message):
    __slots__ = ("session_handle", "request_id")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    request_id: int
    def __init__(self, session_handle: _Optional[str] = ..., request_id: _Optional[int] = ...) -> None: ...

class DeleteWorkerSessionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RegisterGraphRequest(_message.Message):
    __slots__ = ("session_handle", "graph_def", "config_proto", "request_id")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    GRAPH_DEF_FIELD_NUMBER: _ClassVar[int]
    CONFIG_PROTO_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    graph_def: _graph_pb2.GraphDef
    config_proto: _config_pb2.ConfigProto
    request_id: int
    def __init__(self, session_handle: _Optional[str] = ..., graph_def: _Optional[_Union[_graph_pb2.GraphDef, _Mapping]] = ..., config_proto: _Optional[_Union[_config_pb2.ConfigProto, _Mapping]] = ..., request_id: _Optional[int] = ...) -> None: ...

class RegisterGraphResponse(_message.Message):
    __slots__ = ("graph_handle",)
    GRAPH_HANDLE_FIELD_NUMBER: _ClassVar[int]
    graph_handle: str
    def __init__(self, graph_handle: _Optional[str] = ...) -> None: ...

class DeregisterGraphRequest(_message.Message):
    __slots__ = ("session_handle", "graph_handle", "request_id")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    GRAPH_HANDLE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    graph_handle: str
    request_id: int
    def __init__(self, session_handle: _Optional[str] = ..., graph_handle: _Optional[str] = ..., request_id: _Optional[int] = ...) -> None: ...

class DeregisterGraphResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ExecutorOpts(_message.Message):
    __slots__ = ("record_timeline", "record_partition_graphs", "timeout_in_ms")
    RECORD_TIMELINE_FIELD_NUMBER: _ClassVar[int]
    RECORD_PARTITION_GRAPHS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_IN_MS_FIELD_NUMBER: _ClassVar[int]
    record_timeline: bool
    record_partition_graphs: bool
    timeout_in_ms: int
    def __init__(self, record_timeline: _Optional[bool] = ..., record_partition_graphs: _Optional[bool] = ..., timeout_in_ms: _Optional[int] = ...) -> None: ...

class RunGraphRequest(_message.Message):
    __slots__ = ("session_handle", "graph_handle", "step_id", "exec_opts", "send", "recv_key", "request_id")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    GRAPH_HANDLE_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    EXEC_OPTS_FIELD_NUMBER: _ClassVar[int]
    SEND_FIELD_NUMBER: _ClassVar[int]
    RECV_KEY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    graph_handle: str
    step_id: int
    exec_opts: ExecutorOpts
    send: _containers.RepeatedCompositeFieldContainer[_named_tensor_pb2.NamedTensorProto]
    recv_key: _containers.RepeatedScalarFieldContainer[str]
    request_id: int
    def __init__(self, session_handle: _Optional[str] = ..., graph_handle: _Optional[str] = ..., step_id: _Optional[int] = ..., exec_opts: _Optional[_Union[ExecutorOpts, _Mapping]] = ..., send: _Optional[_Iterable[_Union[_named_tensor_pb2.NamedTensorProto, _Mapping]]] = ..., recv_key: _Optional[_Iterable[str]] = ..., request_id: _Optional[int] = ...) -> None: ...

class RunGraphResponse(_message.Message):
    __slots__ = ("recv", "step_stats", "partition_graph", "status_code", "status_error_message")
    RECV_FIELD_NUMBER: _ClassVar[int]
    STEP_STATS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_GRAPH_FIELD_NUMBER: _ClassVar[int]
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    STATUS_ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    recv: _containers.RepeatedCompositeFieldContainer[_named_tensor_pb2.NamedTensorProto]
    step_stats: _step_stats_pb2.StepStats
    partition_graph: _graph_pb2.GraphDef
    status_code: int
    status_error_message: str
    def __init__(self, recv: _Optional[_Iterable[_Union[_named_tensor_pb2.NamedTensorProto, _Mapping]]] = ..., step_stats: _Optional[_Union[_step_stats_pb2.StepStats, _Mapping]] = ..., partition_graph: _Optional[_Union[_graph_pb2.GraphDef, _Mapping]] = ..., status_code: _Optional[int] = ..., status_error_message: _Optional[str] = ...) -> None: ...

class CleanupGraphRequest(_message.Message):
    __slots__ = ("step_id",)
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    def __init__(self, step_id: _Optional[int] = ...) -> None: ...

class CleanupGraphResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CleanupAllRequest(_message.Message):
    __slots__ = ("container",)
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    container: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, container: _Optional[_Iterable[str]] = ...) -> None: ...

class CleanupAllResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RecvTensorRequest(_message.Message):
    __slots__ = ("step_id", "rendezvous_key", "wait_ms", "sibling_key", "request_id")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    RENDEZVOUS_KEY_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    SIBLING_KEY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    rendezvous_key: str
    wait_ms: int
    sibling_key: _containers.RepeatedScalarFieldContainer[str]
    request_id: int
    def __init__(self, step_id: _Optional[int] = ..., rendezvous_key: _Optional[str] = ..., wait_ms: _Optional[int] = ..., sibling_key: _Optional[_Iterable[str]] = ..., request_id: _Optional[int] = ...) -> None: ...

class RecvTensorResponse(_message.Message):
    __slots__ = ("tensor", "is_dead", "send_start_micros", "data", "offset", "total_bytes", "pending", "extra")
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    IS_DEAD_FIELD_NUMBER: _ClassVar[int]
    SEND_START_MICROS_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    OFFSET_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    tensor: _tensor_pb2.TensorProto
    is_dead: bool
    send_start_micros: int
    data: bytes
    offset: int
    total_bytes: int
    pending: bool
    extra: _containers.RepeatedCompositeFieldContainer[_named_tensor_pb2.NamedTensorProto]
    def __init__(self, tensor: _Optional[_Union[_tensor_pb2.TensorProto, _Mapping]] = ..., is_dead: _Optional[bool] = ..., send_start_micros: _Optional[int] = ..., data: _Optional[bytes] = ..., offset: _Optional[int] = ..., total_bytes: _Optional[int] = ..., pending: _Optional[bool] = ..., extra: _Optional[_Iterable[_Union[_named_tensor_pb2.NamedTensorProto, _Mapping]]] = ...) -> None: ...

class FaultRule(_message.Message):
    __slots__ = ("kind", "peer", "delay_s")
    KIND_FIELD_NUMBER: _ClassVar[int]
    PEER_FIELD_NUMBER: _ClassVar[int]
    DELAY_S_FIELD_NUMBER: _ClassVar[int]
    kind: str
    peer: str
    delay_s: float
    def __init__(self, kind: _Optional[str] = ..., peer: _Optional[str] = ..., delay_s: _Optional[float] = ...) -> None: ...

class SetFaultsRequest(_message.Message):
    __slots__ = ("rule", "owner")
    RULE_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    rule: _containers.RepeatedCompositeFieldContainer[FaultRule]
    owner: str
    def __init__(self, rule: _Optional[_Iterable[_Union[FaultRule, _Mapping]]] = ..., owner: _Optional[str] = ...) -> None: ...

class SetFaultsResponse(_message.Message):
    __slots__ = ("rule", "removed")
    RULE_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    rule: _containers.RepeatedCompositeFieldContainer[FaultRule]
    removed: _containers.RepeatedCompositeFieldContainer[FaultRule]
    def __init__(self, rule: _Optional[_Iterable[_Union[FaultRule, _Mapping]]] = ..., removed: _Optional[_Iterable[_Union[FaultRule, _Mapping]]] = ...) -> None: ...
