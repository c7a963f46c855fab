"""``nd.python_io``: TFRecord files from Python (TF1's ``tf.python_io``).

>>> import os, tempfile
>>> import nbdist as nd
>>> path = os.path.join(tempfile.mkdtemp(), "data.tfrecord")
>>> with nd.python_io.TFRecordWriter(path) as w:
...     w.write(b"first"); w.write(b"second")
>>> list(nd.python_io.tf_record_iterator(path))
[b'first', b'second']
"""

from __future__ import annotations

from nbdist.executor.tf_record import (
    TFRecordCompressionType,
    TFRecordOptions,
    TFRecordWriter,
    tf_record_iterator,
)

__all__ = ["TFRecordCompressionType", "TFRecordOptions", "TFRecordWriter",
           "tf_record_iterator"]
