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
