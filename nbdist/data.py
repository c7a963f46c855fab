"""``nd.data``: input pipelines as graph ops (``tf.data`` for nbdist).

>>> import nbdist as nd
>>> it = nd.data.Dataset.from_tensor_slices([3] * 3).make_one_shot_iterator()
>>> nxt = it.get_next()
>>> with nd.Session() as s:
...     [int(s.run(nxt)) for _ in range(3)]
[3, 3, 3]

See ``nbdist.distribute.data.data_ops`` for how datasets and iterators are placed
and run.
"""

from __future__ import annotations

from nbdist.distribute.data.data_ops import (
                                        AUTOTUNE,
                                        Dataset,
                                        Iterator,
                                        make_initializable_iterator,
                                        make_one_shot_iterator,
)
from nbdist.distribute.data.file_datasets import TFRecordDataset, TextLineDataset
from nbdist.distribute.tracing.function import TensorSpec

__all__ = ["AUTOTUNE", "Dataset", "Iterator", "TensorSpec",
           "make_initializable_iterator", "make_one_shot_iterator",
           "TFRecordDataset", "TextLineDataset"]

INFINITE_CARDINALITY = -1
UNKNOWN_CARDINALITY = -2


def get_output_types(dataset_or_iterator):
    """The nested dtypes of a ``Dataset``'s or ``Iterator``'s elements."""
    return dataset_or_iterator.output_types


def get_output_shapes(dataset_or_iterator):
    """The nested ``TensorShape``s of its elements."""
    return dataset_or_iterator.output_shapes


def get_output_classes(dataset_or_iterator):
    """The nested classes (``Tensor``, ``SparseTensor``) of its elements."""
    return dataset_or_iterator.output_classes


__all__ += ["INFINITE_CARDINALITY", "UNKNOWN_CARDINALITY", "get_output_classes",
            "get_output_shapes", "get_output_types"]

# TF1's tf.data also names the fixed-length file dataset, the options and the
# dataset type spec.
from nbdist.distribute.data.data_ops import DatasetSpec
from nbdist.distribute.data.dataset_options import Options, ThreadingOptions
from nbdist.distribute.data.file_datasets import FixedLengthRecordDataset

__all__ += ["DatasetSpec", "FixedLengthRecordDataset", "Options", "ThreadingOptions"]
