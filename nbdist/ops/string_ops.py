"""String ops for input pipelines: ``string_split`` (to an ``nd.SparseTensor``),
``substr``, ``as_string``, ``string_to_number``, ``string_join``,
``reduce_join``, ``string_length`` and ``regex_replace``, as TF1's
``string_ops`` (``nd.strings`` gives the ``tf.strings`` names).

>>> import nbdist as nd
>>> words = nd.string_split(["a b", "c"])
>>> with nd.Session() as s:
...     v = s.run(words)
>>> v.values.tolist(), v.dense_shape.tolist()
([b'a', b'b', b'c'], [2, 2])
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.ops.array_ops_creation import range as _range
from nbdist.ops.array_ops_shape import rank as _rank
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.ops import _graph_of, convert_to_tensor
from nbdist.framework.tensor_shape import TensorShape, broadcast_shapes
from nbdist.framework.sparse_tensor import SparseTensor


def _strings_in(c, *indices):
    for i in indices:
        if c.dtype(i) is not dtypes.string:
            raise TypeError(f"{c.op_type}: input {i} must be a string tensor, got "
                            f"{c.dtype(i).name}")


def _split_infer(c):
    _strings_in(c, 0, 1)
    if c.shape(0).rank not in (None, 1):
        raise ValueError(f"{c.op_type}: input must be a vector, got shape "
                         f"{c.shape(0)}")
    if c.shape(1).rank not in (None, 0):
        raise ValueError(f"{c.op_type}: delimiter must be a scalar, got shape "
                         f"{c.shape(1)}")
    return [(dtypes.int64, TensorShape([None, 2])),
            (dtypes.string, TensorShape([None])), (dtypes.int64, TensorShape([2]))]


register_op("StringSplit", _split_infer, attrs={"skip_empty": ("bool", True)},
            num_inputs=2)
register_op("StringSplitV2", _split_infer, attrs={"maxsplit": ("int", -1)},
            num_inputs=2)


def _elementwise_infer(out_dtype, string_inputs=(0,)):
    def infer(c):
        _strings_in(c, *string_inputs)
        shape = c.shape(0)
        for i in range(1, len(c.input_dtypes)):
            try:
                shape = broadcast_shapes(shape, c.shape(i))
            except ValueError:
                raise ValueError(f"{c.op_type}: shapes {c.shape(0)} and "
                                 f"{c.shape(i)} do not broadcast") from None
        return [(out_dtype, shape)]

    return infer


def _substr_infer(c):
    if c.dtype(1) is not c.dtype(2) or not c.dtype(1).is_integer:
        raise TypeError("Substr: pos and len must be int32 or int64 of one dtype")
    return _elementwise_infer(dtypes.string)(c)


register_op("Substr", _substr_infer,
            attrs={"T": ("type", REQUIRED), "unit": ("string", "BYTE")}, num_inputs=3)


def _as_string_infer(c):
    if c.dtype(0) is dtypes.string or c.dtype(0) is dtypes.resource:
        raise TypeError(f"AsString takes numbers or bools, got {c.dtype(0).name}")
    return [(dtypes.string, c.shape(0))]


register_op("AsString", _as_string_infer,
            attrs={"T": ("type", REQUIRED), "precision": ("int", -1),
                   "scientific": ("bool", False), "shortest": ("bool", False),
                   "width": ("int", -1), "fill": ("string", "")}, num_inputs=1)
register_op("StringToNumber",
            lambda c: (_strings_in(c, 0), [(c.attr("out_type"), c.shape(0))])[1],
            attrs={"out_type": ("type", dtypes.float32)}, num_inputs=1)
register_op("StringLength",
            lambda c: (_strings_in(c, 0), [(dtypes.int32, c.shape(0))])[1],
            attrs={"unit": ("string", "BYTE")}, num_inputs=1)
register_op("StringJoin",
            lambda c: _elementwise_infer(dtypes.string,
                                         range(len(c.input_dtypes)))(c),
            attrs={"separator": ("string", "")}, min_inputs=1)
register_op("RegexReplace", _elementwise_infer(dtypes.string, (0, 1, 2)),
            attrs={"replace_global": ("bool", True)}, num_inputs=3)


def _reduce_join_infer(c):
    _strings_in(c, 0)
    axes = c.constant(1)
    s = c.shape(0)
    if axes is None or s.rank is None:
        return [(dtypes.string, TensorShape(None))]
    axes = [int(a) for a in (axes.reshape(-1) if hasattr(axes, "reshape") else [axes])]
    rank = s.rank
    for a in axes:
        if not -rank <= a < max(rank, 1):
            raise ValueError(f"ReduceJoin: axis {a} out of range for rank {rank}")
    axes = {a % rank for a in axes} if rank else set()
    dims = s.as_list()
    keep = c.attr("keep_dims")
    out = [1 if i in axes else d for i, d in enumerate(dims)] if keep else [
        d for i, d in enumerate(dims) if i not in axes]
    return [(dtypes.string, TensorShape(out))]


register_op("ReduceJoin", _reduce_join_infer,
            attrs={"keep_dims": ("bool", False), "separator": ("string", "")},
            num_inputs=2)


for _op_type in ("StringStrip", "StringLower", "StringUpper", "DecodeBase64"):
    register_op(_op_type, lambda c: (_strings_in(c, 0), [(dtypes.string,
                                                          c.shape(0))])[1],
                attrs={"encoding": ("string", "")} if "Lower" in _op_type
                or "Upper" in _op_type else {}, num_inputs=1)
register_op("EncodeBase64",
            lambda c: (_strings_in(c, 0), [(dtypes.string, c.shape(0))])[1],
            attrs={"pad": ("bool", False)}, num_inputs=1)


# -- Python API ------------------------------------------------------------------
def _strings(value, name="input"):
    return convert_to_tensor(value, dtype=dtypes.string, name=name)


def _op(op_type, inputs, attrs, name):
    g = _graph_of(inputs)
    with g.as_default():
        return g.create_op(op_type, inputs, attrs, name=name or op_type)


def _text(x) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def string_split(source, delimiter=" ", skip_empty=True):  # noqa: D417
    """Splits each string of the vector ``source`` at any of the characters of
    ``delimiter`` (into single bytes when it is ""), dropping empty tokens when
    ``skip_empty``; an ``nd.SparseTensor`` of dense shape ``[len(source),
    max_tokens]``."""
    g = _graph_of([source, delimiter])
    with g.as_default():
        op = g.create_op("StringSplit", [_strings(source), _strings(delimiter,
                                                                    "delimiter")],
                         {"skip_empty": bool(skip_empty)}, name="StringSplit")
    return SparseTensor(*op.outputs)


def strings_split(input=None, sep=None, maxsplit=-1,  # noqa: A002 - TF's name
                  result_type="SparseTensor", source=None, name=None):
    """``nd.strings.split``: Python's ``str.split(sep, maxsplit)`` on each string
    of a vector (runs of whitespace when ``sep`` is None), as an
    ``nd.SparseTensor``."""
    value = input if input is not None else source
    if result_type != "SparseTensor":
        raise ValueError("nd.strings.split returns a SparseTensor (result_type="
                         "'SparseTensor'); RaggedTensor is not supported")
    op = _op("StringSplitV2", [_strings(value), _strings(sep or "", "sep")],
             {"maxsplit": int(maxsplit)}, name)
    return SparseTensor(*op.outputs)


def substr(input, pos, len, name=None, unit="BYTE"):  # noqa: A002 - TF's names
    """The ``len`` bytes of each string from byte ``pos`` (negative: from the
    end); ``pos`` past the end is an ``InvalidArgumentError``. ``input``,
    ``pos`` and ``len`` broadcast."""
    if unit not in ("BYTE", "UTF8_CHAR"):
        raise ValueError(f"substr: unit must be 'BYTE' or 'UTF8_CHAR', got {unit!r}")
    g = _graph_of([input, pos, len])
    with g.as_default():
        pos = convert_to_tensor(pos, name="pos")
        len_ = convert_to_tensor(len, dtype=pos.dtype.base_dtype, name="len")
        return g.create_op("Substr", [_strings(input), pos, len_],
                           {"T": pos.dtype.base_dtype, "unit": unit},
                           name=name or "Substr").outputs[0]


def as_string(input, precision=-1, scientific=False, shortest=False,  # noqa: A002
              width=-1, fill="", name=None):
    """Each number (or bool) as a string, printf-style: ``precision`` digits
    after the point, ``scientific`` (``%e``) or ``shortest`` (``%g``)
    notation, padded to ``width`` with ``fill`` (" " or "0")."""
    x = convert_to_tensor(input)
    if fill not in ("", " ", "0"):
        raise ValueError(f"as_string: fill must be '', ' ' or '0', got {fill!r}")
    if scientific and shortest:
        raise ValueError("as_string: cannot select both scientific and shortest")
    return x.graph.create_op(
        "AsString", [x], {"T": x.dtype.base_dtype, "precision": int(precision),
                          "scientific": bool(scientific),
                          "shortest": bool(shortest), "width": int(width),
                          "fill": fill}, name=name or "AsString").outputs[0]


def string_to_number(string_tensor=None, out_type=dtypes.float32, name=None,
                     input=None):  # noqa: A002
    """Each string parsed as a number of ``out_type`` (float32, float64, int32
    or int64); a string that is not one is an ``InvalidArgumentError``."""
    out_type = dtypes.as_dtype(out_type)
    if out_type not in (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64):
        raise TypeError(f"string_to_number: out_type must be float32, float64, "
                        f"int32 or int64, got {out_type.name}")
    value = string_tensor if string_tensor is not None else input
    return _op("StringToNumber", [_strings(value)], {"out_type": out_type},
               name).outputs[0]


def string_length(input, name=None, unit="BYTE"):  # noqa: A002 - TF's name
    """The length of each string, in bytes (or UTF-8 characters), as int32."""
    if unit not in ("BYTE", "UTF8_CHAR"):
        raise ValueError(f"string_length: unit must be 'BYTE' or 'UTF8_CHAR', got "
                         f"{unit!r}")
    return _op("StringLength", [_strings(input)], {"unit": unit}, name).outputs[0]


def string_join(inputs, separator="", name=None):
    """The strings of ``inputs`` (tensors that broadcast) joined elementwise
    with ``separator``."""
    if not isinstance(inputs, (list, tuple)) or not inputs:
        raise ValueError("string_join needs a non-empty list of string tensors")
    g = _graph_of(list(inputs))
    with g.as_default():
        ts = [_strings(x, f"input_{i}") for i, x in enumerate(inputs)]
        return g.create_op("StringJoin", ts, {"separator": separator},
                           name=name or "StringJoin").outputs[0]


def reduce_join(inputs, axis=None, keep_dims=False, separator="", name=None,
                reduction_indices=None, keepdims=None):
    """The strings of ``inputs`` joined along ``axis`` (all axes when None)
    with ``separator``."""
    if axis is None:
        axis = reduction_indices
    if keepdims is not None:
        keep_dims = keepdims
    x = _strings(inputs)
    with x.graph.as_default():
        if axis is None:  # every axis (an empty list joins along none, as TF)
            if x.shape.rank is not None:
                axis = list(range(x.shape.rank))
            else:
                axis = _range(_rank(x))
        axes = convert_to_tensor(axis, dtype=dtypes.int32, name="reduction_indices")
    return x.graph.create_op("ReduceJoin", [x, axes],
                             {"keep_dims": bool(keep_dims), "separator": separator},
                             name=name or "ReduceJoin").outputs[0]


def regex_replace(input, pattern, rewrite, replace_global=True,  # noqa: A002
                  name=None):
    """Replaces matches of the regular expression ``pattern`` in each string with
    ``rewrite`` (``\\1`` for a group); only the first when not
    ``replace_global``. Python's ``re`` syntax (TF uses RE2)."""
    g = _graph_of([input, pattern, rewrite])
    with g.as_default():
        ins = [_strings(input), _strings(pattern, "pattern"),
               _strings(rewrite, "rewrite")]
        return g.create_op("RegexReplace", ins,
                           {"replace_global": bool(replace_global)},
                           name=name or "RegexReplace").outputs[0]


def _unary(op_type, input, name, attrs=None):  # noqa: A002 - TF's name
    return _op(op_type, [_strings(input)], attrs or {}, name).outputs[0]


def strip(input, name=None):  # noqa: A002 - TF's name
    """Each string without its leading and trailing whitespace."""
    return _unary("StringStrip", input, name)


def lower(input, encoding="", name=None):  # noqa: A002 - TF's name
    """Each string in lower case (ASCII letters; all of Unicode with
    ``encoding="utf-8"``)."""
    return _unary("StringLower", input, name, {"encoding": encoding})


def upper(input, encoding="", name=None):  # noqa: A002 - TF's name
    """Each string in upper case (see ``lower``)."""
    return _unary("StringUpper", input, name, {"encoding": encoding})


def encode_base64(input, pad=False, name=None):  # noqa: A002 - TF's name
    """Each string in web-safe base64 (``-`` and ``_``), ``=``-padded only when
    ``pad``."""
    return _unary("EncodeBase64", input, name, {"pad": bool(pad)})


def decode_base64(input, name=None):  # noqa: A002 - TF's name
    """The bytes of each web-safe base64 string (padded or not)."""
    return _unary("DecodeBase64", input, name)


__all__ = ["as_string", "decode_base64", "encode_base64", "reduce_join",
           "regex_replace", "string_join", "string_length", "string_split",
           "string_to_number", "substr"]
