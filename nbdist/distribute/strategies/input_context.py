"""``InputContext``: what a ``dataset_fn`` learns about its input pipeline
(``tf.distribute.InputContext``).

    >>> ctx = InputContext(num_input_pipelines=2, input_pipeline_id=1,
    ...                    num_replicas_in_sync=4)
    >>> ctx.get_per_replica_batch_size(64)
    16
"""

from __future__ import annotations

__all__ = ["InputContext"]


class InputContext:
    """The number of input pipelines, this one's id, and the replicas in sync
    (batch with ``get_per_replica_batch_size(global_batch_size)``)."""

    def __init__(self, num_input_pipelines=1, input_pipeline_id=0,
                 num_replicas_in_sync=1):
        self._num_input_pipelines = num_input_pipelines
        self._input_pipeline_id = input_pipeline_id
        self._num_replicas_in_sync = num_replicas_in_sync

    @property
    def num_input_pipelines(self) -> int:
        return self._num_input_pipelines

    @property
    def input_pipeline_id(self) -> int:
        return self._input_pipeline_id

    @property
    def num_replicas_in_sync(self) -> int:
        return self._num_replicas_in_sync

    def get_per_replica_batch_size(self, global_batch_size: int) -> int:
        """``global_batch_size`` split over the replicas in sync; ValueError if
        it does not divide evenly."""
        if global_batch_size % self._num_replicas_in_sync:
            raise ValueError(f"The `global_batch_size` {global_batch_size!r} is not "
                             f"divisible by `num_replicas_in_sync` "
                             f"{self._num_replicas_in_sync!r}")
        return global_batch_size // self._num_replicas_in_sync

    def __repr__(self) -> str:
        return (f"InputContext(num_input_pipelines={self._num_input_pipelines}, "
                f"input_pipeline_id={self._input_pipeline_id}, "
                f"num_replicas_in_sync={self._num_replicas_in_sync})")
