"""``nd.strings``: the string ops under TF's ``tf.strings`` names.

>>> import nbdist as nd
>>> with nd.Session() as s:
...     s.run(nd.strings.join(["a", "b"], separator="-"))
b'a-b'
"""

from __future__ import annotations

from nbdist.ops.string_ops import (as_string, lower, reduce_join, regex_replace,
                                   strip, upper)
from nbdist.ops.string_ops import string_join as join
from nbdist.ops.string_ops import string_length as length
from nbdist.ops.string_ops import string_to_number as to_number
from nbdist.ops.string_ops import strings_split as split
from nbdist.ops.string_ops import substr

__all__ = ["as_string", "join", "length", "lower", "reduce_join", "regex_replace",
           "split", "strip", "substr", "to_number", "upper"]

# The rest of TF's tf.strings (hash buckets, Unicode, ngrams, format ...).
from nbdist.ops.unicode_string_ops import (  # noqa: E402
    bytes_split,
    ngrams,
    regex_full_match,
    to_hash_bucket,
    to_hash_bucket_fast,
    to_hash_bucket_strong,
    unicode_decode,
    unicode_decode_with_offsets,
    unicode_encode,
    unicode_split,
    unicode_split_with_offsets,
    unicode_transcode,
    unsorted_segment_join,
)
from nbdist.ops.unicode_string_ops import string_format as format  # noqa: E402,A004

__all__ += ["bytes_split", "format", "ngrams", "regex_full_match", "to_hash_bucket",
            "to_hash_bucket_fast", "to_hash_bucket_strong", "unicode_decode",
            "unicode_decode_with_offsets", "unicode_encode", "unicode_split",
            "unicode_split_with_offsets", "unicode_transcode",
            "unsorted_segment_join"]
