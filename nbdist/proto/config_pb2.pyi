from nbdist.proto import cluster_pb2 as _cluster_pb2
from nbdist.proto import graph_pb2 as _graph_pb2
from nbdist.proto import step_stats_pb2 as _step_stats_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GPUOptions(_message.Message):
    __slots__ = ("per_process_gpu_memory_fraction", "allocator_type", "deferred_deletion_bytes", "allow_growth", "visible_device_list", "polling_active_delay_usecs", "polling_inactive_delay_msecs", "force_gpu_compatible")
    PER_PROCESS_GPU_MEMORY_FRACTION_FIELD_NUMBER: _ClassVar[int]
    ALLOCATOR_TYPE_FIELD_NUMBER: _ClassVar[int]
    DEFERRED_DELETION_BYTES_FIELD_NUMBER: _ClassVar[int]
    ALLOW_GROWTH_FIELD_NUMBER: _ClassVar[int]
    VISIBLE_DEVICE_LIST_FIELD_NUMBER: _ClassVar[int]
    POLLING_ACTIVE_DELAY_USECS_FIELD_NUMBER: _ClassVar[int]
    POLLING_INACTIVE_DELAY_MSECS_FIELD_NUMBER: _ClassVar[int]
    FORCE_GPU_COMPATIBLE_FIELD_NUMBER: _ClassVar[int]
    per_process_gpu_memory_fraction: float
    allocator_type: str
    deferred_deletion_bytes: int
    allow_growth: bool
    visible_device_list: str
    polling_active_delay_usecs: int
    polling_inactive_delay_msecs: int
    force_gpu_compatible: bool
    def __init__(self, per_process_gpu_memory_fraction: _Optional[float] = ..., allocator_type: _Optional[str] = ..., deferred_deletion_bytes: _Optional[int] = ..., allow_growth: _Optional[bool] = ..., visible_device_list: _Optional[str] = ..., polling_active_delay_usecs: _Optional[int] = ..., polling_inactive_delay_msecs: _Optional[int] = ..., force_gpu_compatible: _Optional[bool] = ...) -> None: ...

class ServerLimits(_message.Message):
    __slots__ = ("max_request_bytes", "max_tensor_bytes", "max_graph_constant_bytes", "max_pushed_bytes_per_client", "max_pushed_bytes", "max_parked_bytes", "max_key_value_bytes")
    MAX_REQUEST_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_TENSOR_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_GRAPH_CONSTANT_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_PUSHED_BYTES_PER_CLIENT_FIELD_NUMBER: _ClassVar[int]
    MAX_PUSHED_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_PARKED_BYTES_FIELD_NUMBER: _ClassVar[int]
    MAX_KEY_VALUE_BYTES_FIELD_NUMBER: _ClassVar[int]
    max_request_bytes: int
    max_tensor_bytes: int
    max_graph_constant_bytes: int
    max_pushed_bytes_per_client: int
    max_pushed_bytes: int
    max_parked_bytes: int
    max_key_value_bytes: int
    def __init__(self, max_request_bytes: _Optional[int] = ..., max_tensor_bytes: _Optional[int] = ..., max_graph_constant_bytes: _Optional[int] = ..., max_pushed_bytes_per_client: _Optional[int] = ..., max_pushed_bytes: _Optional[int] = ..., max_parked_bytes: _Optional[int] = ..., max_key_value_bytes: _Optional[int] = ...) -> None: ...

class ConfigProto(_message.Message):
    __slots__ = ("device_count", "intra_op_parallelism_threads", "device_filters", "inter_op_parallelism_threads", "gpu_options", "allow_soft_placement", "log_device_placement", "operation_timeout_in_ms", "cluster_def", "isolate_session_state", "auth_token", "server_limits")
    class DeviceCountEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    DEVICE_COUNT_FIELD_NUMBER: _ClassVar[int]
    INTRA_OP_PARALLELISM_THREADS_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FILTERS_FIELD_NUMBER: _ClassVar[int]
    INTER_OP_PARALLELISM_THREADS_FIELD_NUMBER: _ClassVar[int]
    GPU_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    ALLOW_SOFT_PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    LOG_DEVICE_PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    OPERATION_TIMEOUT_IN_MS_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_DEF_FIELD_NUMBER: _ClassVar[int]
    ISOLATE_SESSION_STATE_FIELD_NUMBER: _ClassVar[int]
    AUTH_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SERVER_LIMITS_FIELD_NUMBER: _ClassVar[int]
    device_count: _containers.ScalarMap[str, int]
    intra_op_parallelism_threads: int
    device_filters: _containers.RepeatedScalarFieldContainer[str]
    inter_op_parallelism_threads: int
    gpu_options: GPUOptions
    allow_soft_placement: bool
    log_device_placement: bool
    operation_timeout_in_ms: int
    cluster_def: _cluster_pb2.ClusterDef
    isolate_session_state: bool
    auth_token: str
    server_limits: ServerLimits
    def __init__(self, device_count: _Optional[_Mapping[str, int]] = ..., intra_op_parallelism_threads: _Optional[int] = ..., device_filters: _Optional[_Iterable[str]] = ..., inter_op_parallelism_threads: _Optional[int] = ..., gpu_options: _Optional[_Union[GPUOptions, _Mapping]] = ..., allow_soft_placement: _Optional[bool] = ..., log_device_placement: _Optional[bool] = ..., operation_timeout_in_ms: _Optional[int] = ..., cluster_def: _Optional[_Union[_cluster_pb2.ClusterDef, _Mapping]] = ..., isolate_session_state: _Optional[bool] = ..., auth_token: _Optional[str] = ..., server_limits: _Optional[_Union[ServerLimits, _Mapping]] = ...) -> None: ...

class RunOptions(_message.Message):
    __slots__ = ("trace_level", "timeout_in_ms", "output_partition_graphs")
    class TraceLevel(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        NO_TRACE: _ClassVar[RunOptions.TraceLevel]
        SOFTWARE_TRACE: _ClassVar[RunOptions.TraceLevel]
        HARDWARE_TRACE: _ClassVar[RunOptions.TraceLevel]
        FULL_TRACE: _ClassVar[RunOptions.TraceLevel]
    NO_TRACE: RunOptions.TraceLevel
    SOFTWARE_TRACE: RunOptions.TraceLevel
    HARDWARE_TRACE: RunOptions.TraceLevel
    FULL_TRACE: RunOptions.TraceLevel
    TRACE_LEVEL_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_IN_MS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_PARTITION_GRAPHS_FIELD_NUMBER: _ClassVar[int]
    trace_level: RunOptions.TraceLevel
    timeout_in_ms: int
    output_partition_graphs: bool
    def __init__(self, trace_level: _Optional[_Union[RunOptions.TraceLevel, str]] = ..., timeout_in_ms: _Optional[int] = ..., output_partition_graphs: _Optional[bool] = ...) -> None: ...

class RunMetadata(_message.Message):
    __slots__ = ("step_stats", "partition_graphs")
    STEP_STATS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_GRAPHS_FIELD_NUMBER: _ClassVar[int]
    step_stats: _step_stats_pb2.StepStats
    partition_graphs: _containers.RepeatedCompositeFieldContainer[_graph_pb2.GraphDef]
    def __init__(self, step_stats: _Optional[_Union[_step_stats_pb2.StepStats, _Mapping]] = ..., partition_graphs: _Optional[_Iterable[_Union[_graph_pb2.GraphDef, _Mapping]]] = ...) -> None: ...
