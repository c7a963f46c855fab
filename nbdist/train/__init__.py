"""``nd.train``: optimizers, the global step, ``Saver`` and checkpoints, and the
cluster entry points (``ClusterSpec``, ``Server``), as ``tf.compat.v1.train``.
"""

from __future__ import annotations

from nbdist.train.meta_graph import export_meta_graph
from nbdist.train.checkpoint_utils import (
    NewCheckpointReader,
    init_from_checkpoint,
    list_variables,
    load_checkpoint,
    load_variable,
)
from nbdist.train.graph_io import write_graph
from nbdist.train.optimizer import Optimizer
from nbdist.train.optimizers import (
    AdagradOptimizer,
    AdamOptimizer,
    GradientDescentOptimizer,
    MomentumOptimizer,
    RMSPropOptimizer,
)
from nbdist.train.saver import (
    CheckpointState,
    Saver,
    SaverDef,
    checkpoint_exists,
    generate_checkpoint_state_proto,
    get_checkpoint_mtimes,
    get_checkpoint_state,
    import_meta_graph,
    latest_checkpoint,
    remove_checkpoint,
    update_checkpoint_state,
)
from nbdist.train.training_util import (
    assert_global_step,
    create_global_step,
    get_global_step,
    get_or_create_global_step,
    global_step,
)

from nbdist.train.coordinator import Coordinator, LooperThread
from nbdist.train.device_setter import (
    STANDARD_PS_OPS,
    GreedyLoadBalancingStrategy,
    byte_size_load_fn,
    replica_device_setter,
)
from nbdist.train.hooks import (
    CheckpointSaverHook,
    CheckpointSaverListener,
    FeedFnHook,
    FinalOpsHook,
    GlobalStepWaiterHook,
    LoggingTensorHook,
    NanLossDuringTrainingError,
    NanTensorHook,
    ProgressBarHook,
    SecondOrStepTimer,
    SessionRunArgs,
    SessionRunContext,
    SessionRunHook,
    SessionRunValues,
    StepCounterHook,
    StopAtStepHook,
)
from nbdist.train.monitored_session import (
    ChiefSessionCreator,
    MonitoredSession,
    MonitoredTrainingSession,
    Scaffold,
    SessionCreator,
    SingularMonitoredSession,
    WorkerSessionCreator,
)
from nbdist.train.input import (
    batch,
    input_producer,
    limit_epochs,
    range_input_producer,
    shuffle_batch,
    slice_input_producer,
    string_input_producer,
)
from nbdist.train.input import (
    batch_join,
    match_filenames_once,
    maybe_batch,
    maybe_batch_join,
    maybe_shuffle_batch,
    maybe_shuffle_batch_join,
    shuffle_batch_join,
)
from nbdist.train.queue_barrier import queue_barrier
from nbdist.train.queue_runner import QueueRunner, add_queue_runner, start_queue_runners
from nbdist.train.session_manager import SessionManager
from nbdist.train.summary_hooks import SummarySaverHook
from nbdist.train.profiler_hook import ProfilerHook
from nbdist.train.summary_iterator import summary_iterator
from nbdist.train.supervisor import Supervisor
from nbdist.train.sync_replicas_optimizer import SyncReplicasOptimizer
from nbdist.proto.example_pb2 import Example, SequenceExample
from nbdist.proto.feature_pb2 import (BytesList, Feature, FeatureList, FeatureLists,
                                     Features, FloatList, Int64List)
from nbdist.train.learning_rate_decay import (
    cosine_decay,
    cosine_decay_restarts,
    exponential_decay,
    inverse_time_decay,
    linear_cosine_decay,
    natural_exp_decay,
    noisy_linear_cosine_decay,
    piecewise_constant,
    polynomial_decay,
)
from nbdist.train.moving_averages import ExponentialMovingAverage
from nbdist.train.optimizers_more import (
    AdadeltaOptimizer,
    AdagradDAOptimizer,
    FtrlOptimizer,
    ProximalAdagradOptimizer,
    ProximalGradientDescentOptimizer,
)

_LAZY = {
    # The runtime layer's entry points, loaded on first use (grpc is heavy).
    "ClusterSpec": ("nbdist.runtime.cluster_spec", "ClusterSpec"),
    "Server": ("nbdist.runtime.server_lib", "Server"),
    "ServerDef": ("nbdist.proto.server_def_pb2", "ServerDef"),
    "ClusterDef": ("nbdist.proto.cluster_pb2", "ClusterDef"),
    "JobDef": ("nbdist.proto.cluster_pb2", "JobDef"),
    "SaverDef": ("nbdist.proto.meta_graph_pb2", "SaverDef"),
}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'nbdist.train' has no attribute '{name}'")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "AdagradOptimizer", "AdamOptimizer", "CheckpointState", "ClusterSpec",
    "GradientDescentOptimizer", "MomentumOptimizer", "Optimizer",
    "RMSPropOptimizer", "Saver", "Server", "assert_global_step",
    "checkpoint_exists", "create_global_step", "export_meta_graph",
    "generate_checkpoint_state_proto", "get_checkpoint_mtimes",
    "get_checkpoint_state", "get_global_step", "get_or_create_global_step",
    "global_step", "import_meta_graph", "latest_checkpoint", "remove_checkpoint",
    "update_checkpoint_state", "Coordinator", "LooperThread", "STANDARD_PS_OPS",
    "GreedyLoadBalancingStrategy", "byte_size_load_fn", "replica_device_setter",
    "CheckpointSaverHook", "CheckpointSaverListener", "FeedFnHook", "FinalOpsHook",
    "GlobalStepWaiterHook", "LoggingTensorHook", "NanLossDuringTrainingError",
    "NanTensorHook", "ProgressBarHook", "SecondOrStepTimer", "SessionRunArgs",
    "SessionRunContext",
    "SessionRunHook", "SessionRunValues", "StepCounterHook", "StopAtStepHook",
    "ChiefSessionCreator", "MonitoredSession", "MonitoredTrainingSession",
    "Scaffold", "SessionCreator", "SingularMonitoredSession",
    "WorkerSessionCreator", "QueueRunner", "add_queue_runner",
    "start_queue_runners", "SessionManager", "SyncReplicasOptimizer",
    "queue_barrier", "Supervisor", "SummarySaverHook",
    "batch", "input_producer", "limit_epochs", "range_input_producer",
    "shuffle_batch", "slice_input_producer", "string_input_producer",
    "batch_join", "match_filenames_once", "maybe_batch", "maybe_batch_join",
    "maybe_shuffle_batch", "maybe_shuffle_batch_join", "shuffle_batch_join",
    "NewCheckpointReader", "SaverDef", "init_from_checkpoint", "list_variables",
    "load_checkpoint", "load_variable", "write_graph",
    "ProfilerHook", "summary_iterator",
    "BytesList", "Example", "Feature", "FeatureList", "FeatureLists", "Features",
    "FloatList", "Int64List", "SequenceExample",
    "cosine_decay", "cosine_decay_restarts", "exponential_decay",
    "inverse_time_decay",
    "linear_cosine_decay", "natural_exp_decay", "noisy_linear_cosine_decay",
    "piecewise_constant",
    "polynomial_decay", "ExponentialMovingAverage", "AdadeltaOptimizer",
    "AdagradDAOptimizer",
    "FtrlOptimizer", "ProximalAdagradOptimizer", "ProximalGradientDescentOptimizer",
]

# More of TF1's tf.train: loops, the checkpoint watcher, decay aliases, warm starts.
from nbdist.train.basic_loops import (  # noqa: E402
    basic_train_loop,
    checkpoints_iterator,
)
from nbdist.train.learning_rate_decay import (  # noqa: E402
    piecewise_constant as piecewise_constant_decay,
)
from nbdist.train.checkpoint import Checkpoint, CheckpointOptions  # noqa: E402
from nbdist.train.checkpoint_manager import CheckpointManager  # noqa: E402
from nbdist.train.warm_starting_util import (  # noqa: E402
    VocabInfo,
    warm_start,
)

__all__ += ["Checkpoint", "CheckpointManager", "CheckpointOptions", "VocabInfo",
            "warm_start", "basic_train_loop", "checkpoints_iterator",
            "piecewise_constant_decay"]
