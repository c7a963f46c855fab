"""The rest of TF's ``tf.strings``: hashing into buckets (``to_hash_bucket``,
``_fast``, ``_strong``, TF's very hashes), ``regex_full_match``, ``format``,
``unsorted_segment_join``, ``ngrams`` and the Unicode ops (``unicode_decode``,
``unicode_encode``, ``unicode_transcode``, ``unicode_split``, ``bytes_split``).

TF returns ``RaggedTensor``s from ``unicode_decode``/``unicode_split``/
``bytes_split`` for inputs of rank >= 1; nbdist has no ragged tensors and
returns a ``SparseTensor`` of the same rows there (as TF1's ``strings.split``
does). A scalar input gives a dense vector, as TF.

>>> import nbdist as nd
>>> with nd.Session() as s:
...     s.run(nd.strings.to_hash_bucket(["hello", "a"], 1000)).tolist()
[938, 868]
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import NotDifferentiable
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.op_util import INDEX
from nbdist.framework.ops import _graph_of, convert_to_tensor
from nbdist.framework.sparse_tensor import SparseTensor
from nbdist.framework.tensor_shape import TensorShape, broadcast_shapes
from nbdist.ops.lookup_ops import string_to_hash_bucket_fast
from nbdist.ops.string_ops import _strings_in

_ENCODINGS = ("UTF-8", "UTF-16-BE", "UTF-32-BE")
_ERRORS = ("strict", "replace", "ignore")


def _same_shape_infer(out_dtype):
    return lambda c: (_strings_in(c, 0), [(out_dtype, c.shape(0))])[1]


register_op("StringToHashBucket", _same_shape_infer(dtypes.int64),
            attrs={"num_buckets": ("int", REQUIRED)}, num_inputs=1)
register_op("StringToHashBucketStrong", _same_shape_infer(dtypes.int64),
            attrs={"num_buckets": ("int", REQUIRED), "key": ("list(int)", REQUIRED)},
            num_inputs=1)
register_op("RegexFullMatch",
            lambda c: (_strings_in(c, 0, 1),
                       [(dtypes.bool, broadcast_shapes(c.shape(0), c.shape(1)))])[1],
            num_inputs=2)
register_op("StringFormat", lambda c: [(dtypes.string, TensorShape([]))],
            attrs={"T": ("list(type)", []), "template": ("string", "%s"),
                   "placeholder": ("string", "%s"), "summarize": ("int", 3)})
_TRANSCODE_ATTRS = {"errors": ("string", "replace"),
                    "replacement_char": ("int", 65533),
                    "replace_control_characters": ("bool", False)}
register_op("UnicodeTranscode", _same_shape_infer(dtypes.string),
            attrs=dict(_TRANSCODE_ATTRS, input_encoding=("string", REQUIRED),
                       output_encoding=("string", REQUIRED)), num_inputs=1)


def _encode_infer(c):
    if c.dtype(0) is not dtypes.int32:
        raise TypeError(f"UnicodeEncodeDense: code points must be int32, got "
                        f"{c.dtype(0).name}")
    s = c.shape(0)
    if s.rank == 0:
        raise ValueError("unicode_encode: input must have rank >= 1")
    return [(dtypes.string, TensorShape(None if s.rank is None else s.as_list()[:-1]))]


# nbdist's own op types where TF's work on ragged splits.
register_op("UnicodeEncodeDense", _encode_infer,
            attrs=dict(_TRANSCODE_ATTRS, output_encoding=("string", REQUIRED)),
            num_inputs=1)


def _decode_infer(c):
    _strings_in(c, 0)
    rank = c.shape(0).rank
    out = dtypes.string if c.attr("output") == "chars" else dtypes.int32
    width = None if rank is None else rank + 1
    return [(dtypes.int64, TensorShape([None, width])), (out, TensorShape([None])),
            (dtypes.int64, TensorShape([width])), (dtypes.int64, TensorShape([None]))]


register_op("UnicodeDecodeSparse", _decode_infer,
            attrs=dict(_TRANSCODE_ATTRS, input_encoding=("string", REQUIRED),
                       output=("string", "codepoints")), num_inputs=1)


def _ngrams_infer(c):
    _strings_in(c, 0)
    s = c.shape(0)
    if s.rank == 0:
        raise ValueError("ngrams: data must have rank >= 1")
    return [(dtypes.string, TensorShape(None if s.rank is None
                                        else s.as_list()[:-1] + [None]))]


register_op("StringNGramsDense", _ngrams_infer,
            attrs={"ngram_widths": ("list(int)", REQUIRED),
                   "separator": ("string", " "), "left_pad": ("string", ""),
                   "right_pad": ("string", ""), "pad_width": ("int", 0),
                   "preserve_short_sequences": ("bool", False)}, num_inputs=1)


def _segment_join_infer(c):
    _strings_in(c, 0)
    if c.dtype(1) not in INDEX or c.dtype(2) not in INDEX:
        raise TypeError("UnsortedSegmentJoin: segment_ids and num_segments must be "
                        "int32 or int64")
    n = c.constant(2)
    data, ids = c.shape(0), c.shape(1)
    tail = (data.as_list()[ids.rank:] if data.rank is not None and ids.rank is not None
            else None)
    if tail is None:
        return [(dtypes.string, TensorShape(None))]
    return [(dtypes.string, TensorShape([None if n is None else int(n)] + tail))]


register_op("UnsortedSegmentJoin", _segment_join_infer,
            attrs={"separator": ("string", ""), "Tindices": ("type", dtypes.int32),
                   "Tnumsegments": ("type", dtypes.int32)}, num_inputs=3)
for _t in ("StringToHashBucket", "StringToHashBucketStrong", "RegexFullMatch",
           "StringFormat", "UnicodeTranscode", "UnicodeEncodeDense",
           "UnicodeDecodeSparse", "StringNGramsDense", "UnsortedSegmentJoin"):
    NotDifferentiable(_t)


# -- Python API ---------------------------------------------------------------------
def _strings(value, name="input"):
    return convert_to_tensor(value, dtype=dtypes.string, name=name)


def _create(op_type, inputs, attrs, name):
    g = _graph_of(inputs)
    with g.as_default():
        ts = [convert_to_tensor(x) for x in inputs]
        return g.create_op(op_type, ts, attrs, name=name or op_type)


def to_hash_bucket(input, num_buckets, name=None):  # noqa: A002 - TF's name
    """Each string's bucket in ``[0, num_buckets)``: TF's legacy ``Hash64``
    (MurmurHash64A, seed 0xDECAFCAFFE) modulo ``num_buckets``, TF's buckets."""
    return _create("StringToHashBucket", [_strings(input)],
                   {"num_buckets": int(num_buckets)}, name).outputs[0]


to_hash_bucket_fast = string_to_hash_bucket_fast


def to_hash_bucket_strong(input, num_buckets, key, name=None):  # noqa: A002
    """Each string's bucket from SipHash-2-4 keyed by ``key`` (two ints), TF's
    buckets: slower, but hard to collide on purpose."""
    if len(key) != 2:
        raise ValueError(f"to_hash_bucket_strong: key must have 2 elements, got "
                         f"{len(key)}")
    return _create("StringToHashBucketStrong", [_strings(input)],
                   {"num_buckets": int(num_buckets),
                    "key": [int(k) for k in key]}, name).outputs[0]


def regex_full_match(input, pattern, name=None):  # noqa: A002 - TF's name
    """Whether each whole string matches the regular expression ``pattern``
    (Python ``re`` syntax; TF uses RE2)."""
    return _create("RegexFullMatch", [_strings(input), _strings(pattern, "pattern")],
                   {}, name).outputs[0]


def string_format(template, inputs, placeholder="{}", summarize=3, name=None):
    """``template`` with each ``placeholder`` replaced by one of ``inputs``
    formatted as ``tf.print`` shows it (at most ``summarize`` entries per
    dimension at each end)."""
    if not isinstance(inputs, (list, tuple)):
        inputs = [inputs]
    if template.count(placeholder) != len(inputs):
        raise ValueError(f"num placeholders in template and num inputs must match"
                         f": {template.count(placeholder)} vs. {len(inputs)}")
    g = _graph_of(list(inputs))
    with g.as_default():
        ts = [convert_to_tensor(x) for x in inputs]
        return g.create_op("StringFormat", ts,
                           {"T": [t.dtype.base_dtype for t in ts],
                            "template": template, "placeholder": placeholder,
                            "summarize": int(summarize)},
                           name=name or "StringFormat").outputs[0]


def unicode_transcode(input, input_encoding, output_encoding,  # noqa: A002
                      errors="replace", replacement_char=65533,
                      replace_control_characters=False, name=None):
    """Each string re-encoded from ``input_encoding`` to ``output_encoding``
    (UTF-8, UTF-16-BE or UTF-32-BE); invalid input per ``errors``."""
    _check_encoding(output_encoding)
    _check_encoding(input_encoding)
    return _create("UnicodeTranscode", [_strings(input)],
                   _transcode_attrs(errors, replacement_char,
                                    replace_control_characters,
                                    input_encoding=input_encoding,
                                    output_encoding=output_encoding), name).outputs[0]


def unicode_encode(input, output_encoding, errors="replace",  # noqa: A002
                   replacement_char=65533, name=None):
    """The int32 code points along the last dimension of ``input`` encoded as
    one string each (rank drops by one). Negative code points are padding and
    skipped."""
    _check_encoding(output_encoding)
    x = convert_to_tensor(input, dtype=dtypes.int32, name="input")
    return _create("UnicodeEncodeDense", [x],
                   _transcode_attrs(errors, replacement_char, False,
                                    output_encoding=output_encoding), name).outputs[0]


def _check_encoding(encoding):
    if encoding not in _ENCODINGS:
        raise ValueError(f"encoding must be one of {', '.join(_ENCODINGS)}, got "
                         f"{encoding!r}")


def _transcode_attrs(errors, replacement_char, replace_control, **extra):
    if errors not in _ERRORS:
        raise ValueError(f"errors must be one of {_ERRORS}, got {errors!r}")
    return dict(extra, errors=errors, replacement_char=int(replacement_char),
                replace_control_characters=bool(replace_control))


def _decode(input, encoding, output, errors, replacement_char,  # noqa: A002
            replace_control, name, with_offsets):
    if encoding != "BYTE":
        _check_encoding(encoding)
    x = _strings(input)
    op = _create("UnicodeDecodeSparse", [x],
                 _transcode_attrs(errors, replacement_char, replace_control,
                                  input_encoding=encoding, output=output), name)
    indices, values, shape, offsets = op.outputs
    if x.shape.rank == 0:
        return (values, offsets) if with_offsets else values
    chars = SparseTensor(indices, values, shape)
    return (chars, SparseTensor(indices, offsets, shape)) if with_offsets else chars


def unicode_decode(input, input_encoding, errors="replace",  # noqa: A002
                   replacement_char=65533, replace_control_characters=False,
                   name=None):
    """The int32 code points of each string (see the module note on ragged
    results)."""
    return _decode(input, input_encoding, "codepoints", errors, replacement_char,
                   replace_control_characters, name, False)


def unicode_decode_with_offsets(input, input_encoding, errors="replace",  # noqa
                                replacement_char=65533,
                                replace_control_characters=False, name=None):
    """``unicode_decode`` and each character's starting byte offset."""
    return _decode(input, input_encoding, "codepoints", errors, replacement_char,
                   replace_control_characters, name, True)


def unicode_split(input, input_encoding, errors="replace",  # noqa: A002
                  replacement_char=65533, name=None):
    """Each string split into its characters (each encoded as a string)."""
    return _decode(input, input_encoding, "chars", errors, replacement_char, False,
                   name, False)


def unicode_split_with_offsets(input, input_encoding, errors="replace",  # noqa
                               replacement_char=65533, name=None):
    """``unicode_split`` and each character's starting byte offset."""
    return _decode(input, input_encoding, "chars", errors, replacement_char, False,
                   name, True)


def bytes_split(input, name=None):  # noqa: A002 - TF's name
    """Each string split into single bytes."""
    return _decode(input, "BYTE", "chars", "strict", 65533, False, name, False)


def ngrams(data, ngram_width, separator=" ", pad_values=None, padding_width=None,
           preserve_short_sequences=False, name=None):
    """The ``ngram_width``-grams (an int or a list of widths) along the last
    dimension of the string tensor ``data``, joined by ``separator``; with
    ``pad_values`` (one string or a (left, right) pair) each row is padded by
    ``padding_width`` (default ``width - 1``) on each side first."""
    widths = [ngram_width] if isinstance(ngram_width, int) else list(ngram_width)
    if any(w < 1 for w in widths):
        raise ValueError(f"All ngram_widths must be greater than 0. Got {widths}")
    left = right = ""
    if pad_values is not None:
        left, right = ((pad_values, pad_values) if isinstance(pad_values, str)
                       else tuple(pad_values))
        if padding_width is None:
            padding_width = -1  # width - 1 for each width
        elif padding_width < 1:
            raise ValueError("padding_width must be greater than 0.")
    elif padding_width is not None:
        raise ValueError("pad_values must be provided if padding_width is set.")
    return _create("StringNGramsDense", [_strings(data, "data")],
                   {"ngram_widths": widths, "separator": separator,
                    "left_pad": left, "right_pad": right,
                    "pad_width": int(padding_width or 0),
                    "preserve_short_sequences": bool(preserve_short_sequences)},
                   name).outputs[0]


def unsorted_segment_join(inputs, segment_ids, num_segments, separator="",
                          name=None):
    """The strings of ``inputs`` joined (with ``separator``) per segment of
    ``segment_ids``; a segment no string falls into is ``""``."""
    g = _graph_of([inputs, segment_ids, num_segments])
    with g.as_default():
        x = _strings(inputs, "inputs")
        ids = convert_to_tensor(segment_ids, name="segment_ids")
        n = convert_to_tensor(num_segments, name="num_segments")
        return g.create_op("UnsortedSegmentJoin", [x, ids, n],
                           {"separator": separator,
                            "Tindices": ids.dtype.base_dtype,
                            "Tnumsegments": n.dtype.base_dtype},
                           name=name or "UnsortedSegmentJoin").outputs[0]


__all__ = ["bytes_split", "ngrams", "regex_full_match", "string_format",
           "to_hash_bucket", "to_hash_bucket_fast", "to_hash_bucket_strong",
           "unicode_decode", "unicode_decode_with_offsets", "unicode_encode",
           "unicode_split", "unicode_split_with_offsets", "unicode_transcode",
           "unsorted_segment_join"]
