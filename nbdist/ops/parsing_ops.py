"""Parsing input records: ``parse_example`` / ``parse_single_example`` (serialized
``nd.train.Example`` protos to tensors), ``decode_raw`` and ``decode_csv``, as
TF1's ``parsing_ops``.

>>> import nbdist as nd
>>> ex = nd.train.Example(features=nd.train.Features(feature={
...     "x": nd.train.Feature(float_list=nd.train.FloatList(value=[1.0, 2.0])),
...     "ids": nd.train.Feature(int64_list=nd.train.Int64List(value=[7]))}))
>>> out = nd.parse_single_example(ex.SerializeToString(), {
...     "x": nd.FixedLenFeature([2], nd.float32),
...     "ids": nd.VarLenFeature(nd.int64)})
>>> with nd.Session() as s:
...     x, ids = s.run([out["x"], out["ids"]])
>>> x.tolist(), ids.values.tolist(), ids.dense_shape.tolist()
([1.0, 2.0], [7], [1])

A feature with no default that an Example lacks is an ``InvalidArgumentError``
naming it; a ``VarLenFeature`` parses to an ``nd.SparseTensor``.
"""

from __future__ import annotations

import collections

import numpy as np

from nbdist.framework import dtypes
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.ops import _graph_of, convert_to_tensor
from nbdist.framework.sparse_tensor import SparseTensor
from nbdist.framework.tensor_shape import TensorShape, as_shape

_FEATURE_DTYPES = (dtypes.float32, dtypes.int64, dtypes.string)


class FixedLenFeature(collections.namedtuple(
        "FixedLenFeature", ["shape", "dtype", "default_value"])):
    """A feature with a fixed number of values, parsed to a dense tensor of
    ``shape``; ``default_value`` stands in when an Example lacks it (without
    one the feature is required)."""

    def __new__(cls, shape, dtype, default_value=None):
        return super().__new__(cls, shape, dtype, default_value)


class FixedLenSequenceFeature(collections.namedtuple(
        "FixedLenSequenceFeature",
        ["shape", "dtype", "allow_missing", "default_value"])):
    """A feature of any number of elements of ``shape``, parsed to a dense
    tensor ``[batch, max_length] + shape`` padded with ``default_value``
    (0 or ``b""`` when None). ``parse_example`` needs ``allow_missing=True``."""

    def __new__(cls, shape, dtype, allow_missing=False, default_value=None):
        return super().__new__(cls, shape, dtype, allow_missing, default_value)


class VarLenFeature(collections.namedtuple("VarLenFeature", ["dtype"])):
    """A feature of any number of values, parsed to an ``nd.SparseTensor``."""


class SparseFeature(collections.namedtuple(
        "SparseFeature",
        ["index_key", "value_key", "dtype", "size", "already_sorted"])):
    """A ``SparseTensor`` of dense shape ``[batch] + size`` read from two (or
    more) features of an ``Example``: the int64 indices under ``index_key``
    (one key per dimension when ``size`` is a list) and the values under
    ``value_key``. Unless ``already_sorted``, the entries are put in order.

    >>> import nbdist as nd
    >>> ex = nd.train.Example(features=nd.train.Features(feature={
    ...     "ix": nd.train.Feature(int64_list=nd.train.Int64List(value=[3, 1])),
    ...     "v": nd.train.Feature(float_list=nd.train.FloatList(value=[.3, .1]))}))
    >>> sp = nd.io.parse_single_example(ex.SerializeToString(), {
    ...     "sp": nd.io.SparseFeature("ix", "v", nd.float32, 5)})["sp"]
    >>> with nd.Session() as s:
    ...     v = s.run(sp)
    >>> v.indices.tolist(), v.dense_shape.tolist()
    ([[1], [3]], [5])
    """

    def __new__(cls, index_key, value_key, dtype, size, already_sorted=False):
        return super().__new__(cls, index_key, value_key, dtype, size,
                               already_sorted)


# -- op definitions -----------------------------------------------------------
# TF's own ops, as TF 2.x writes them (so a GraphDef or SavedModel moves both
# ways): the feature keys are string inputs, a FixedLenSequenceFeature is a
# dense shape with a leading -1, ragged features are not supported. TF's first
# versions (ParseExample, ParseSingleExample, ParseSingleSequenceExample) below.
_PARSE_ATTRS = {"Tdense": ("list(type)", []), "num_sparse": ("int", 0),
                "sparse_types": ("list(type)", []),
                "ragged_value_types": ("list(type)", []),
                "ragged_split_types": ("list(type)", []),
                "dense_shapes": ("list(shape)", [])}
_SEQ_ATTRS = {"Ncontext_sparse": ("int", 0), "Tcontext_dense": ("list(type)", []),
              "context_sparse_types": ("list(type)", []),
              "context_ragged_value_types": ("list(type)", []),
              "context_ragged_split_types": ("list(type)", []),
              "context_dense_shapes": ("list(shape)", []),
              "Nfeature_list_sparse": ("int", 0), "Nfeature_list_dense": ("int", 0),
              "feature_list_dense_types": ("list(type)", []),
              "feature_list_sparse_types": ("list(type)", []),
              "feature_list_ragged_value_types": ("list(type)", []),
              "feature_list_ragged_split_types": ("list(type)", []),
              "feature_list_dense_shapes": ("list(shape)", [])}
_PARSE_KEY_INPUTS = 5  # serialized, names, sparse_keys, dense_keys, ragged_keys
_SEQ_KEY_INPUTS = 9  # serialized, debug_name, 6 key vectors, missing_assumed_empty


def _serialized_batch(c):
    """The batch dimensions of a parse op's outputs: [] for one scalar record,
    [n] for a vector, None when the rank is unknown."""
    if c.dtype(0) is not dtypes.string:
        raise TypeError(f"{c.op_type} needs serialized strings, got "
                        f"{c.dtype(0).name}")
    s = c.shape(0)
    if s.rank is None:
        return None
    if s.rank > 1:
        raise ValueError(f"{c.op_type}: serialized must be a scalar or a vector, "
                         f"got shape {s}")
    return s.as_list()


def _parsed_outputs(batch, n_sparse, sparse_types, dense_types, dense_shapes):
    """(dtype, shape) of the sparse triples and dense values of a parse op."""
    rank = None if batch is None else len(batch) + 1
    out = [(dtypes.int64, TensorShape([None, rank]))] * n_sparse
    out += [(t, TensorShape([None])) for t in sparse_types]
    out += [(dtypes.int64, TensorShape([rank]))] * n_sparse
    out += [(t, TensorShape(None) if batch is None else
             TensorShape(batch + s.as_list()))
            for t, s in zip(dense_types, dense_shapes)]
    return out


def _check_no_ragged(c, *attrs):
    if any(c.attr(a) for a in attrs):
        raise NotImplementedError(f"{c.op_type}: ragged features are not supported")


def _parse_infer(c):
    _check_no_ragged(c, "ragged_value_types", "ragged_split_types")
    return _parsed_outputs(_serialized_batch(c), c.attr("num_sparse"),
                           c.attr("sparse_types"), c.attr("Tdense"),
                           c.attr("dense_shapes"))


def _parse_sequence_infer(c):
    _check_no_ragged(c, "context_ragged_value_types", "context_ragged_split_types",
                     "feature_list_ragged_value_types",
                     "feature_list_ragged_split_types")
    batch = _serialized_batch(c)
    out = _parsed_outputs(batch, c.attr("Ncontext_sparse"),
                          c.attr("context_sparse_types"), c.attr("Tcontext_dense"),
                          c.attr("context_dense_shapes"))
    # A feature list adds a steps dimension: [batch, steps] + shape.
    steps = None if batch is None else batch + [None]
    out += _parsed_outputs(steps, c.attr("Nfeature_list_sparse"),
                           c.attr("feature_list_sparse_types"),
                           c.attr("feature_list_dense_types"),
                           c.attr("feature_list_dense_shapes"))
    out += [(dtypes.int64, TensorShape(batch))] * c.attr("Nfeature_list_dense")
    return out


register_op("ParseExampleV2", _parse_infer, attrs=_PARSE_ATTRS,
            min_inputs=_PARSE_KEY_INPUTS)
register_op("ParseSequenceExampleV2", _parse_sequence_infer, attrs=_SEQ_ATTRS,
            min_inputs=_SEQ_KEY_INPUTS)


# TF's first versions, which TF 1.x graphs hold: imported and run, not built.
def _parse_v1_infer(c):
    return _parsed_outputs(_serialized_batch(c), c.attr("Nsparse"),
                           c.attr("sparse_types"), c.attr("Tdense"),
                           c.attr("dense_shapes"))


def _parse_single_v1_infer(c):
    return _parsed_outputs([], c.attr("num_sparse"), c.attr("sparse_types"),
                           c.attr("Tdense"), c.attr("dense_shapes"))


def _parse_single_sequence_v1_infer(c):
    return (_parsed_outputs([], c.attr("Ncontext_sparse"),
                            c.attr("context_sparse_types"), c.attr("Tcontext_dense"),
                            c.attr("context_dense_shapes"))
            + _parsed_outputs([None], c.attr("Nfeature_list_sparse"),
                              c.attr("feature_list_sparse_types"),
                              c.attr("feature_list_dense_types"),
                              c.attr("feature_list_dense_shapes")))


register_op("ParseExample", _parse_v1_infer, min_inputs=2, attrs={
    "Nsparse": ("int", 0), "Ndense": ("int", 0), "sparse_types": ("list(type)", []),
    "Tdense": ("list(type)", []), "dense_shapes": ("list(shape)", [])})
register_op("ParseSingleExample", _parse_single_v1_infer, min_inputs=1, attrs={
    "num_sparse": ("int", 0), "sparse_keys": ("list(string)", []),
    "dense_keys": ("list(string)", []), "sparse_types": ("list(type)", []),
    "Tdense": ("list(type)", []), "dense_shapes": ("list(shape)", [])})
register_op("ParseSingleSequenceExample", _parse_single_sequence_v1_infer,
            min_inputs=3, attrs={
                "Ncontext_sparse": ("int", 0), "Ncontext_dense": ("int", 0),
                "Nfeature_list_sparse": ("int", 0), "Nfeature_list_dense": ("int", 0),
                "context_sparse_types": ("list(type)", []),
                "Tcontext_dense": ("list(type)", []),
                "feature_list_dense_types": ("list(type)", []),
                "context_dense_shapes": ("list(shape)", []),
                "feature_list_sparse_types": ("list(type)", []),
                "feature_list_dense_shapes": ("list(shape)", [])})


def _check_dtype(key, dtype):
    dtype = dtypes.as_dtype(dtype)
    if dtype not in _FEATURE_DTYPES:
        raise ValueError(f"Feature {key!r}: an Example holds float32, int64 or "
                         f"string values, got {dtype.name}")
    return dtype


def _dense_default(key, feature, dtype, shape, variable):
    """The default-value input of a dense feature, as TF gives it: empty when
    the feature is required, the feature's shape when fixed, a scalar (the
    padding) for a FixedLenSequenceFeature."""
    np_dtype = object if dtype is dtypes.string else dtype.as_numpy_dtype
    if feature.default_value is None:
        if variable:
            return np.array(b"" if dtype is dtypes.string else 0, dtype=np_dtype)
        return np.zeros([0], dtype=np_dtype)
    value = np.asarray(feature.default_value, dtype=np_dtype)
    if variable:
        if value.size != 1:
            raise ValueError(f"Feature {key!r}: the default_value of a "
                             "FixedLenSequenceFeature is one (padding) value, got "
                             f"{feature.default_value!r}")
        return value.reshape([])
    if value.size != int(np.prod(shape.as_list(), dtype=np.int64)):
        raise ValueError(f"Feature {key!r}: default_value {feature.default_value!r} "
                         f"does not have shape {shape}")
    return value.reshape(shape.as_list())


def _key_inputs(named_keys):
    """String-vector constants, one per (input name, keys) pair: the feature
    keys of a parse op, which TF passes as inputs."""
    return [convert_to_tensor(np.array(keys, dtype=object).reshape([len(keys)]),
                              dtype=dtypes.string, name=input_name)
            for input_name, keys in named_keys]


def _dense_defaults(dense, named):
    return [convert_to_tensor(_dense_default(k, f, t, s, v), dtype=t,
                              name=f"key_{k}" if named and k.isidentifier() else None)
            for k, t, s, v, f in dense]


def _dense_shapes(dense):
    """TF's ``dense_shapes``: a FixedLenSequenceFeature's with a leading -1."""
    return [TensorShape([None] + s.as_list()) if v else s
            for _, _, s, v, _ in dense]


def _sparse_and_dense_outputs(outs, sparse, dense):
    """The results by key of a parse op's sparse triples and dense values, and
    the outputs after them."""
    ns, result = len(sparse), {}
    for i, (key, _) in enumerate(sparse):
        result[key] = SparseTensor(outs[i], outs[ns + i], outs[2 * ns + i])
    for j, d in enumerate(dense):
        result[d[0]] = outs[3 * ns + j]
    return result, outs[3 * ns + len(dense):]


def _split_features(features, sequence=False):
    """``features`` as (sparse: [(key, dtype)], dense: [(key, dtype, shape,
    variable, feature)]), sorted by key as TF orders them."""
    sparse, dense = [], []
    for key in sorted(features or {}):
        f = features[key]
        if isinstance(f, VarLenFeature):
            sparse.append((key, _check_dtype(key, f.dtype)))
        elif isinstance(f, (FixedLenFeature, FixedLenSequenceFeature)):
            variable = isinstance(f, FixedLenSequenceFeature)
            if sequence and not variable:
                raise ValueError(f"Feature {key!r}: a sequence feature is a "
                                 "FixedLenSequenceFeature or a VarLenFeature")
            if variable and not f.allow_missing and not sequence:
                raise ValueError(f"Feature {key!r}: FixedLenSequenceFeature "
                                 "requires allow_missing to be True.")
            shape = as_shape(f.shape)
            if not shape.is_fully_defined():
                raise ValueError(f"Feature {key!r}: shape must be fully defined, "
                                 f"got {shape}")
            dense.append((key, _check_dtype(key, f.dtype), shape, variable, f))
        else:
            raise ValueError(f"Unsupported feature {key!r}: {f!r} (FixedLenFeature, "
                             "FixedLenSequenceFeature or VarLenFeature)")
    return sparse, dense


def _without_sparse_features(features):
    """``features`` with each ``SparseFeature`` replaced by ``VarLenFeature``s
    of its index and value keys; and the ``SparseFeature``s by key."""
    plain, composite = {}, {}
    for key, f in (features or {}).items():
        if not isinstance(f, SparseFeature):
            plain[key] = f
            continue
        composite[key] = f
        index_keys = ([f.index_key] if isinstance(f.index_key, str)
                      else list(f.index_key))
        sizes = [f.size] if isinstance(f.size, int) else list(f.size)
        if len(sizes) != len(index_keys):
            raise ValueError(f"SparseFeature {key!r}: {len(index_keys)} index keys "
                             f"but size {f.size}")
        for k, want in [(k, dtypes.int64) for k in index_keys] + [
                (f.value_key, dtypes.as_dtype(f.dtype))]:
            prior = plain.get(k)
            if prior is not None and dtypes.as_dtype(prior.dtype) is not want:
                raise ValueError(f"Conflicting type for feature {k!r}: "
                                 f"{dtypes.as_dtype(prior.dtype).name} and "
                                 f"{want.name}")
            plain[k] = VarLenFeature(want)
    return plain, composite


def _sparse_feature_tensor(parsed, f, single):
    """The ``SparseTensor`` of ``SparseFeature`` ``f`` from the parsed
    ``VarLenFeature``s of its keys."""
    from nbdist.ops.array_ops_join import concat
    from nbdist.ops.array_ops_shape import expand_dims
    from nbdist.ops.math_ops import cast
    from nbdist.ops.sparse_ops_transform import sparse_reorder

    index_keys = [f.index_key] if isinstance(f.index_key, str) else f.index_key
    sizes = [f.size] if isinstance(f.size, int) else list(f.size)
    values = parsed[f.value_key]
    cols = [expand_dims(cast(parsed[k].values, dtypes.int64), 1)
            for k in index_keys]
    sizes_t = convert_to_tensor(np.array(sizes, np.int64))
    if single:
        indices, shape = concat(cols, 1), sizes_t
    else:
        indices = concat([values.indices[:, :1]] + cols, 1)
        shape = concat([values.dense_shape[:1], sizes_t], 0)
    out = SparseTensor(indices, values.values, shape)
    return out if f.already_sorted else sparse_reorder(out)


def _parse(serialized, features, name, single):
    if not features:
        raise ValueError("Missing: features was empty.")
    requested = features
    features, composite = _without_sparse_features(features)
    if composite:
        parsed = _parse(serialized, features, name, single)
        with _graph_of([serialized]).as_default():
            return {k: (_sparse_feature_tensor(parsed, composite[k], single)
                        if k in composite else parsed[k]) for k in requested}
    sparse, dense = _split_features(features)
    g = _graph_of([serialized])
    scope = "ParseSingleExample" if single else "ParseExample"
    with g.as_default(), g.name_scope(name or scope):
        serialized = convert_to_tensor(serialized, dtype=dtypes.string,
                                       name="serialized")
        if serialized.shape.rank not in (None, 0 if single else 1):
            raise ValueError(f"{scope}: serialized must be "
                             f"{'a scalar' if single else 'a vector'}, got shape "
                             f"{serialized.shape}")
        defaults = _dense_defaults(dense, named=True)
        with g.name_scope("ParseExampleV2") as op_name:
            keys = _key_inputs([("names", []),
                                ("sparse_keys", [k for k, _ in sparse]),
                                ("dense_keys", [d[0] for d in dense]),
                                ("ragged_keys", [])])
        attrs = {"Tdense": [d[1] for d in dense], "num_sparse": len(sparse),
                 "sparse_types": [t for _, t in sparse], "ragged_value_types": [],
                 "ragged_split_types": [], "dense_shapes": _dense_shapes(dense)}
        op = g.create_op("ParseExampleV2", [serialized] + keys + defaults, attrs,
                         name=op_name)
    return _sparse_and_dense_outputs(list(op.outputs), sparse, dense)[0]


def parse_example(serialized, features, name=None, example_names=None):
    """Parses a vector of serialized ``Example`` protos into a dict: a dense
    tensor ``[batch] + shape`` per ``FixedLenFeature``, ``[batch, max_len] +
    shape`` per ``FixedLenSequenceFeature`` and an ``nd.SparseTensor`` (dense
    shape ``[batch, max_len]``) per ``VarLenFeature``."""
    return _parse(serialized, features, name, single=False)


def parse_single_example(serialized, features, name=None, example_names=None):
    """``parse_example`` for one serialized ``Example`` (a scalar): no batch
    dimension in the results."""
    return _parse(serialized, features, name, single=True)


# -- SequenceExample ------------------------------------------------------------
def _parse_sequences(serialized, context_features, sequence_features, name,
                     single):
    """Builds a ``ParseSequenceExampleV2`` and returns its outputs as
    (context, sequences, lengths) dicts."""
    if not context_features and not sequence_features:
        raise ValueError("Missing features: give context_features or "
                         "sequence_features")
    sparse, dense = _split_features(context_features)
    fl_sparse, fl_dense = _split_features(sequence_features, sequence=True)
    g = _graph_of([serialized])
    scope = "ParseSingleSequenceExample" if single else "ParseSequenceExample"
    with g.as_default(), g.name_scope(name or scope):
        serialized = convert_to_tensor(serialized, dtype=dtypes.string,
                                       name="serialized")
        defaults = _dense_defaults(dense, named=False)
        with g.name_scope("ParseSequenceExampleV2") as op_name:
            keys = _key_inputs([
                ("debug_name", []),
                ("context_sparse_keys", [k for k, _ in sparse]),
                ("context_dense_keys", [d[0] for d in dense]),
                ("context_ragged_keys", []),
                ("feature_list_sparse_keys", [k for k, _ in fl_sparse]),
                ("feature_list_dense_keys", [d[0] for d in fl_dense]),
                ("feature_list_ragged_keys", [])])
            missing = convert_to_tensor(
                np.array([bool(d[4].allow_missing) for d in fl_dense], np.bool_),
                name="feature_list_dense_missing_assumed_empty")
        attrs = {"Ncontext_sparse": len(sparse),
                 "Tcontext_dense": [d[1] for d in dense],
                 "context_sparse_types": [t for _, t in sparse],
                 "context_ragged_value_types": [], "context_ragged_split_types": [],
                 "context_dense_shapes": _dense_shapes(dense),
                 "Nfeature_list_sparse": len(fl_sparse),
                 "Nfeature_list_dense": len(fl_dense),
                 "feature_list_dense_types": [d[1] for d in fl_dense],
                 "feature_list_sparse_types": [t for _, t in fl_sparse],
                 "feature_list_ragged_value_types": [],
                 "feature_list_ragged_split_types": [],
                 "feature_list_dense_shapes": [d[2] for d in fl_dense]}
        op = g.create_op("ParseSequenceExampleV2",
                         [serialized] + keys + [missing] + defaults, attrs,
                         name=op_name)
    context, rest = _sparse_and_dense_outputs(list(op.outputs), sparse, dense)
    sequences, lengths = _sparse_and_dense_outputs(rest, fl_sparse, fl_dense)
    return context, sequences, dict(zip([d[0] for d in fl_dense], lengths))


def parse_single_sequence_example(serialized, context_features=None,
                                  sequence_features=None, example_name=None,
                                  name=None):
    """Parses one serialized ``SequenceExample``: ``(context, sequences)``
    dicts. ``context_features`` parse as in ``parse_single_example``; a
    ``FixedLenSequenceFeature`` of ``sequence_features`` is a dense ``[steps] +
    shape`` tensor (a missing feature list is an error unless
    ``allow_missing``), a ``VarLenFeature`` a ``[steps, max_len]``
    ``nd.SparseTensor``."""
    context, sequences, _ = _parse_sequences(
        serialized, context_features, sequence_features, name, single=True)
    return context, sequences


def parse_sequence_example(serialized, context_features=None,
                           sequence_features=None, example_names=None, name=None):
    """Parses a vector of serialized ``SequenceExample``s: ``(context,
    sequences, lengths)`` dicts. Context features are batched as in
    ``parse_example``; a ``FixedLenSequenceFeature`` is a ``[batch, max_steps]
    + shape`` tensor padded with zeros (``b""``), its ``lengths`` entry the
    int64 ``[batch]`` number of steps of each; a ``VarLenFeature`` is a
    ``[batch, max_steps, max_len]`` ``nd.SparseTensor``.

    >>> import nbdist as nd
    >>> def seq(*steps):
    ...     fl = nd.train.FeatureList(feature=[nd.train.Feature(
    ...         float_list=nd.train.FloatList(value=[v])) for v in steps])
    ...     return nd.train.SequenceExample(feature_lists=nd.train.FeatureLists(
    ...         feature_list={"x": fl})).SerializeToString()
    >>> _, seqs, lengths = nd.io.parse_sequence_example(
    ...     [seq(1., 2.), seq(3.)],
    ...     sequence_features={"x": nd.io.FixedLenSequenceFeature([], nd.float32)})
    >>> with nd.Session() as s:
    ...     x, n = s.run([seqs["x"], lengths["x"]])
    >>> x.tolist(), n.tolist()
    ([[1.0, 2.0], [3.0, 0.0]], [2, 1])
    """
    return _parse_sequences(serialized, context_features, sequence_features, name,
                            single=False)


# -- decode_raw, decode_csv ------------------------------------------------------
_RAW_TYPES = (dtypes.float16, dtypes.float32, dtypes.float64, dtypes.int32,
              dtypes.uint8, dtypes.int16, dtypes.int8, dtypes.int64, dtypes.bool)


def _decode_raw_infer(c):
    if c.dtype(0) is not dtypes.string:
        raise TypeError(f"DecodeRaw needs strings, got {c.dtype(0).name}")
    s = c.shape(0)
    return [(c.attr("out_type"), TensorShape(None) if s.rank is None
             else TensorShape(s.as_list() + [None]))]


register_op("DecodeRaw", _decode_raw_infer,
            attrs={"out_type": ("type", REQUIRED), "little_endian": ("bool", True)},
            num_inputs=1)


def decode_raw(input_bytes=None, out_type=None, little_endian=True, name=None,
               bytes=None):  # noqa: A002 - TF1's argument name
    """The bytes of each string reinterpreted as numbers of ``out_type``: shape
    ``input.shape + [len(string) / itemsize]`` (all strings the same length).

    >>> import nbdist as nd, numpy as np
    >>> raw = np.arange(3, dtype="<i4").tobytes()
    >>> with nd.Session() as s:
    ...     s.run(nd.decode_raw(raw, nd.int32)).tolist()
    [0, 1, 2]
    """
    value = input_bytes if input_bytes is not None else bytes
    if value is None or out_type is None:
        raise TypeError("decode_raw needs input_bytes and out_type")
    out_type = dtypes.as_dtype(out_type)
    if out_type not in _RAW_TYPES:
        raise TypeError(f"decode_raw: out_type must be one of "
                        f"{[t.name for t in _RAW_TYPES]}, got {out_type.name}")
    value = convert_to_tensor(value, dtype=dtypes.string)
    return value.graph.create_op(
        "DecodeRaw", [value], {"out_type": out_type,
                               "little_endian": bool(little_endian)},
        name=name or "DecodeRaw").outputs[0]


_CSV_TYPES = (dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64,
              dtypes.string)


def _decode_csv_infer(c):
    if c.dtype(0) is not dtypes.string:
        raise TypeError(f"DecodeCSV needs string records, got {c.dtype(0).name}")
    out = []
    for i, t in enumerate(c.attr("OUT_TYPE")):
        if c.shape(i + 1).rank not in (None, 0, 1) or (
                c.shape(i + 1).rank == 1 and c.shape(i + 1)[0] not in (None, 0, 1)):
            raise ValueError(f"DecodeCSV: record_defaults[{i}] must be a scalar or "
                             f"a vector of at most one value, got "
                             f"{c.shape(i + 1)}")
        out.append((t, c.shape(0)))
    return out


register_op("DecodeCSV", _decode_csv_infer,
            attrs={"OUT_TYPE": ("list(type)", REQUIRED), "field_delim": ("string", ","),
                   "use_quote_delim": ("bool", True), "na_value": ("string", ""),
                   "select_cols": ("list(int)", [])},
            min_inputs=2)


def decode_csv(records, record_defaults, field_delim=",", use_quote_delim=True,
               name=None, na_value="", select_cols=None):
    """Splits each CSV line of ``records`` into columns, one tensor per column
    of ``records``' shape, typed by ``record_defaults`` (a default value per
    column, or an empty list for a required column).

    >>> import nbdist as nd
    >>> a, b = nd.decode_csv(["1,x", "2,"], [[0], ["none"]])
    >>> with nd.Session() as s:
    ...     s.run([a, b])[1].tolist()
    [b'x', b'none']
    """
    if len(field_delim) != 1:
        raise ValueError(f"field_delim must be one character, got {field_delim!r}")
    records = convert_to_tensor(records, dtype=dtypes.string)
    defaults = []
    with records.graph.as_default():
        for i, d in enumerate(record_defaults):
            # An empty list is TF's required float32 column.
            empty = isinstance(d, (list, tuple)) and len(d) == 0
            t = convert_to_tensor(d, name=f"record_default_{i}",
                                  dtype=dtypes.float32 if empty else None)
            if t.dtype.base_dtype not in _CSV_TYPES:
                raise TypeError(f"record_defaults[{i}] must be one of "
                                f"{[x.name for x in _CSV_TYPES]}, got {t.dtype.name}")
            defaults.append(t)
    select = list(select_cols or [])
    if select and (sorted(set(select)) != select or len(select) != len(defaults)):
        raise ValueError("select_cols must be strictly increasing, one per "
                         "record_default")
    op = records.graph.create_op(
        "DecodeCSV", [records] + defaults,
        {"OUT_TYPE": [t.dtype.base_dtype for t in defaults],
         "field_delim": field_delim, "use_quote_delim": bool(use_quote_delim),
         "na_value": na_value, "select_cols": select},
        name=name or "DecodeCSV")
    return list(op.outputs)


__all__ = ["FixedLenFeature", "FixedLenSequenceFeature", "SparseFeature",
           "VarLenFeature", "decode_csv", "decode_raw", "parse_example",
           "parse_sequence_example", "parse_single_example",
           "parse_single_sequence_example"]
