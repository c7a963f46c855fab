"""Kernels for ``ParseExample`` / ``ParseSingleExample`` (serialized
``Example`` protos to arrays), ``DecodeRaw`` and ``DecodeCSV``.

Error messages follow TF's ``example_proto_fast_parsing.cc`` and
``decode_csv_op.cc`` so that a TF user recognises them.
"""

from __future__ import annotations

import csv
import itertools
import math

import numpy as np
from google.protobuf.message import DecodeError

from nbdist import errors
from nbdist.executor.kernel import register_kernel
from nbdist.proto import example_pb2

_KIND = {"float": "float_list", "int64": "int64_list", "string": "bytes_list"}
_TF_TYPE_NAME = {"float_list": "float", "int64_list": "int64", "bytes_list": "string"}
_EXAMPLE_FROM = example_pb2.Example.FromString
# The protobuf list of each dtype a FixedLenFeature may have (by dtype name).
_KIND_OF = {"float32": "float_list", "int64": "int64_list", "string": "bytes_list"}


def _type_name(dtype) -> str:
    return "float" if dtype.name == "float32" else dtype.name


def _feature_list(node, key, feature, dtype, where):
    """The values of ``feature`` as its protobuf list (checked against
    ``dtype``); ``()`` for a feature with no list."""
    kind = feature.WhichOneof("kind")
    if kind is None:
        return ()
    want = _KIND[_type_name(dtype)]
    if kind != want:
        raise errors.InvalidArgumentError(
            None, node, f"{where}Key: {key}.  Data types don't match. Data type: "
            f"{_TF_TYPE_NAME[kind]} but expected type: {_type_name(dtype)}")
    return getattr(feature, kind).value


def _array(values, dtype, count):
    """``count`` values (an iterable) as a flat array of ``dtype``: one C loop
    over the protobuf lists (``np.array`` of a protobuf list goes through the
    sequence protocol per element, several times slower)."""
    if dtype.name == "string":
        out = np.empty(count, dtype=object)
        if count == 1:  # a scalar string feature: no list built
            out[0] = next(iter(values))
        else:
            out[:] = list(values)
        return out
    return np.fromiter(values, dtype.as_numpy_dtype, count)


def _feature_values(node, key, feature, dtype, where):
    """The values of ``feature`` as an array of ``dtype`` (checked)."""
    values = _feature_list(node, key, feature, dtype, where)
    return _array(values, dtype, len(values))


def _examples(node, serialized):
    if len(serialized) == 1:  # one example (parse_single_example's)
        try:
            return [_EXAMPLE_FROM(bytes(serialized[0])).features.feature]
        except DecodeError:
            pass  # the loop below says which and how
    out = []
    for i, s in enumerate(serialized):
        try:
            out.append(example_pb2.Example.FromString(bytes(s)).features.feature)
        except DecodeError:
            raise errors.InvalidArgumentError(
                None, node, f"Could not parse example input, value: '{s[:60]!r}' "
                f"(element {i})") from None
    return out


def _dense(node, key, dtype, shape, default, maps, single):
    """``[batch] + shape`` from a fixed-length feature."""
    size = math.prod(shape)
    if len(maps) == 1:  # one example (parse_single_example): its list as it is
        feature = maps[0].get(key)
        kind = _KIND_OF.get(dtype.name)
        if feature is not None and kind and feature.WhichOneof("kind") == kind:
            values = getattr(feature, kind).value
            if len(values) == size:
                return _array(values, dtype, size).reshape([1, *shape])
    where = "" if single else "Name: <unknown>, "
    rows = []
    for b, fmap in enumerate(maps):
        feature = fmap.get(key)
        if feature is None:
            if default.size == 0:
                raise errors.InvalidArgumentError(
                    None, node, f"{where}Feature: {key} (data type: "
                    f"{_type_name(dtype)}) is required but could not be found.")
            rows.append(default.reshape(-1))
            continue
        values = _feature_list(node, key, feature, dtype, where)
        if len(values) != size:
            raise errors.InvalidArgumentError(
                None, node, f"{where}Key: {key}, Index: {b}.  Number of "
                f"{_type_name(dtype)} values != expected.  Values size: "
                f"{len(values)} but output shape: {list(shape)}")
        rows.append(values)
    flat = rows[0] if len(rows) == 1 else itertools.chain.from_iterable(rows)
    return _array(flat, dtype, len(rows) * size).reshape([len(maps), *shape])


def _dense_variable(node, key, dtype, shape, default, maps, single):
    """``[batch, max_len] + shape`` from a sequence feature, padded."""
    size = int(np.prod(shape, dtype=np.int64))
    where = "" if single else "Name: <unknown>, "
    values = []
    for b, fmap in enumerate(maps):
        v = (_feature_values(node, key, fmap[key], dtype, where) if key in fmap
             else np.zeros([0], dtype.as_numpy_dtype))
        if size and v.size % size:
            raise errors.InvalidArgumentError(
                None, node, f"{where}Key: {key}, Index: {b}.  Number of "
                f"{_type_name(dtype)} values is not a multiple of stride length. "
                f"Saw {v.size} values but output shape is: {list(shape)}")
        values.append(v)
    lengths = np.array([v.size // size if size else 0 for v in values], np.int64)
    max_len = int(lengths.max(initial=0))
    out = np.empty([len(maps), max_len * size], dtype=dtype.as_numpy_dtype)
    out[...] = default.reshape(-1)[0]
    flat = np.concatenate(values) if values else out.reshape(-1)[:0]
    if flat.size:
        rows = np.repeat(np.arange(len(maps)), lengths * size)
        starts = np.repeat(np.cumsum(lengths * size) - lengths * size, lengths * size)
        out[rows, np.arange(flat.size) - starts] = flat
    return out.reshape([len(maps), max_len] + list(shape))


def _sparse(node, key, dtype, maps, single):
    where = "" if single else "Name: <unknown>, "
    values = [_feature_values(node, key, fmap[key], dtype, where) if key in fmap
              else np.zeros([0], dtype.as_numpy_dtype) for fmap in maps]
    if single:  # one example: its values in order (no batch arithmetic)
        flat = values[0]
        if dtype.name != "string":
            flat = flat.astype(dtype.as_numpy_dtype, copy=False)
        n = flat.size
        return (np.arange(n, dtype=np.int64).reshape(-1, 1), flat,
                np.array([n], np.int64))
    lengths = np.array([v.size for v in values], np.int64)
    total = int(lengths.sum())
    batch = np.repeat(np.arange(len(maps), dtype=np.int64), lengths)
    within = np.arange(total, dtype=np.int64) - np.repeat(
        np.cumsum(lengths) - lengths, lengths)
    flat = (np.concatenate(values) if values else np.zeros([0], dtype.as_numpy_dtype))
    if dtype.name != "string":
        flat = flat.astype(dtype.as_numpy_dtype)
    max_len = int(lengths.max(initial=0))
    return (np.stack([batch, within], axis=1), flat,
            np.array([len(maps), max_len], np.int64))


def _keys(node, value, count, what):
    """The feature keys a parse op gets as a string-vector input; ``count``
    of them, as its attrs say."""
    keys = [k.decode() if isinstance(k, bytes) else str(k)
            for k in np.asarray(value, dtype=object).reshape(-1)]
    if len(keys) != count:
        raise errors.InvalidArgumentError(
            None, node, f"Expected len({what}) == {count}, got {len(keys)}")
    return keys


def _dense_specs(types, shapes):
    """(dtype, shape, variable) of each dense feature: a leading -1 in its
    ``dense_shapes`` marks a FixedLenSequenceFeature."""
    out = []
    for t, s in zip(types, shapes):
        dims = s.as_list()
        variable = bool(dims) and dims[0] is None
        out.append((t, dims[1:] if variable else dims, variable))
    return out


def _check_no_ragged(node, *types):
    if any(types):
        raise errors.UnimplementedError(
            None, node.name, f"{node.op}: ragged features are not supported")


def _parse_features(node, maps, single, sparse, dense, defaults):
    """The sparse triples then dense values of ``sparse`` [(key, dtype)] and
    ``dense`` [(key, dtype, shape, variable)] read from feature ``maps``."""
    parts = [_sparse(node, k, t, maps, single) for k, t in sparse]
    outs = [p[0] for p in parts] + [p[1] for p in parts] + [p[2] for p in parts]
    for (key, dtype, shape, variable), default in zip(dense, defaults):
        default = np.asarray(default, dtype=dtype.as_numpy_dtype)
        make = _dense_variable if variable else _dense
        d = make(node, key, dtype, shape, default, maps, single)
        outs.append(d[0] if single else d)
    return outs


def _outputs(outs):
    return tuple(outs) if len(outs) != 1 else outs[0]


@register_kernel("ParseExampleV2")
def parse_example_kernel(node):
    """``ParseExampleV2``: a scalar ``serialized`` is one Example (no batch
    dimension in the results), a vector a batch."""
    a = node.attrs
    _check_no_ragged(node, a["ragged_value_types"], a["ragged_split_types"])
    sparse_types, dense = a["sparse_types"], _dense_specs(a["Tdense"],
                                                          a["dense_shapes"])

    # The keys' inputs of the last run and what they gave: constants (as
    # parse_example writes them) are the same arrays every run, decoded once.
    # One tuple, read and replaced whole: runner threads share this kernel.
    memo = [(None, None, None)]

    def compute(step, serialized, names, sparse_keys, dense_keys, ragged_keys,
                *defaults):
        m = memo[0]
        if m[0] is not sparse_keys or m[1] is not dense_keys:
            sparse = list(zip(_keys(node.name, sparse_keys, a["num_sparse"],
                                    "sparse_keys"), sparse_types))
            keys = _keys(node.name, dense_keys, len(dense), "dense_keys")
            m = memo[0] = (sparse_keys, dense_keys, (
                sparse, [(k, *spec) for k, spec in zip(keys, dense)]))
        return _parse_serialized(node.name, serialized, *m[2], defaults)

    return compute


def _parse_serialized(node, serialized, sparse, dense, defaults):
    serialized = np.asarray(serialized, dtype=object)
    maps = _examples(node, serialized.reshape(-1))
    return _outputs(_parse_features(node, maps, serialized.ndim == 0, sparse, dense,
                                    defaults))


@register_kernel("ParseExample")
def parse_example_v1_kernel(node):
    """TF's first ``ParseExample`` (what TF 1.x graphs hold): a batch, each key
    a scalar string input of its own."""
    a = node.attrs
    ns, nd = a["Nsparse"], a["Ndense"]
    dense = _dense_specs(a["Tdense"], a["dense_shapes"])

    def compute(step, serialized, names, *rest):
        keys = [_keys(node.name, k, 1, "a key")[0] for k in rest[:ns + nd]]
        return _parse_serialized(
            node.name, np.asarray(serialized, dtype=object).reshape(-1),
            list(zip(keys[:ns], a["sparse_types"])),
            [(k, *spec) for k, spec in zip(keys[ns:], dense)], rest[ns + nd:])

    return compute


@register_kernel("ParseSingleExample")
def parse_single_example_kernel(node):
    """TF's ``ParseSingleExample``: one Example, the keys in attrs."""
    a = node.attrs
    sparse = list(zip(a["sparse_keys"], a["sparse_types"]))
    dense = [(k, *spec) for k, spec in zip(
        a["dense_keys"], _dense_specs(a["Tdense"], a["dense_shapes"]))]

    def compute(step, serialized, *defaults):
        return _parse_serialized(node.name, np.asarray(serialized, dtype=object)
                                 .reshape(()), sparse, dense, defaults)

    return compute


def _sequence_steps(lists, keys):
    """Per key, the steps of a feature list as one-feature maps."""
    return {k: [{k: f} for f in lists[k].feature] if k in lists else []
            for k in keys}


def _missing_list(node, key):
    return errors.InvalidArgumentError(
        None, node, f"Name: <unknown>, Feature list '{key}' is required but could "
        "not be found.  Did you mean to include it in "
        "feature_list_dense_missing_assumed_empty or feature_list_dense_defaults?")


def _batch_sparse(parts, dtype):
    """Per-example ``[steps, len]`` sparse parts as one ``[batch, steps, len]``."""
    idx = [np.concatenate([np.full([len(p[0]), 1], b, np.int64), p[0]], 1)
           for b, p in enumerate(parts)]
    shape = np.max([p[2] for p in parts], axis=0) if parts else np.zeros([2], np.int64)
    return (np.concatenate(idx) if idx else np.zeros([0, 3], np.int64),
            np.concatenate([p[1] for p in parts]) if parts
            else np.zeros([0], dtype.as_numpy_dtype),
            np.concatenate([[len(parts)], shape]).astype(np.int64))


def _batch_dense(per, dtype, shape):
    """Per-example ``[steps] + shape`` arrays padded to ``[batch, max] + shape``."""
    n = np.array([len(p) for p in per], np.int64)
    out_shape = [len(per), int(n.max(initial=0))] + shape
    out = (np.full(out_shape, b"", dtype=object) if dtype.name == "string"
           else np.zeros(out_shape, dtype.as_numpy_dtype))
    for b, p in enumerate(per):
        out[b, :len(p)] = p
    return out, n


def _sequence_examples(node, serialized):
    out = []
    for s in serialized:
        try:
            out.append(example_pb2.SequenceExample.FromString(bytes(s)))
        except DecodeError:
            raise errors.InvalidArgumentError(
                None, node, f"Could not parse example input, value: "
                f"'{s[:60]!r}'") from None
    return out


@register_kernel("ParseSequenceExampleV2")
def parse_sequence_example_kernel(node):
    """``ParseSequenceExampleV2``: the context parsed as ``ParseExampleV2``
    parses Examples; each feature list ``[steps] + shape`` with its number of
    steps, padded to the longest in a batch (a vector ``serialized``)."""
    a = node.attrs
    _check_no_ragged(node, a["context_ragged_value_types"],
                     a["context_ragged_split_types"],
                     a["feature_list_ragged_value_types"],
                     a["feature_list_ragged_split_types"])
    dense = _dense_specs(a["Tcontext_dense"], a["context_dense_shapes"])

    def compute(step, serialized, debug_name, c_sparse_keys, c_dense_keys,
                c_ragged_keys, fl_sparse_keys, fl_dense_keys, fl_ragged_keys,
                missing_assumed_empty, *defaults):
        keys = _keys(node.name, c_dense_keys, len(dense), "context_dense_keys")
        fl_keys = _keys(node.name, fl_dense_keys, a["Nfeature_list_dense"],
                        "feature_list_dense_keys")
        allow_missing = np.asarray(missing_assumed_empty, bool).reshape(-1)
        outs, lengths = _parse_sequences(
            node, serialized,
            list(zip(_keys(node.name, c_sparse_keys, a["Ncontext_sparse"],
                           "context_sparse_keys"), a["context_sparse_types"])),
            [(k, *spec) for k, spec in zip(keys, dense)],
            list(zip(_keys(node.name, fl_sparse_keys, a["Nfeature_list_sparse"],
                           "feature_list_sparse_keys"),
                     a["feature_list_sparse_types"])),
            fl_keys, [i < allow_missing.size and bool(allow_missing[i])
                      for i in range(len(fl_keys))], defaults)
        return _outputs(outs + lengths)

    return compute


@register_kernel("ParseSingleSequenceExample")
def parse_single_sequence_example_kernel(node):
    """TF's first ``ParseSingleSequenceExample`` (TF 1.x graphs): each key a
    scalar string input, ``feature_list_dense_missing_assumed_empty`` the keys
    of the feature lists that may be missing; no lengths."""
    a = node.attrs
    counts = [a["Ncontext_sparse"], a["Ncontext_dense"], a["Nfeature_list_sparse"],
              a["Nfeature_list_dense"]]
    dense = _dense_specs(a["Tcontext_dense"], a["context_dense_shapes"])

    def compute(step, serialized, missing_assumed_empty, *rest):
        keys = [_keys(node.name, k, 1, "a key")[0] for k in rest[:sum(counts)]]
        cs, cd, fs, fd = (keys[sum(counts[:i]):sum(counts[:i + 1])]
                          for i in range(4))
        may_miss = set(_keys(node.name, missing_assumed_empty,
                             np.size(missing_assumed_empty), "missing keys"))
        outs, _ = _parse_sequences(
            node, np.asarray(serialized, dtype=object).reshape(()),
            list(zip(cs, a["context_sparse_types"])),
            [(k, *spec) for k, spec in zip(cd, dense)],
            list(zip(fs, a["feature_list_sparse_types"])), fd,
            [k in may_miss for k in fd], rest[sum(counts):sum(counts) + len(cd)])
        return _outputs(outs)

    return compute


def _parse_sequences(node, serialized, sparse, dense, fl_sparse, fl_keys,
                     allow_missing, defaults):
    """The outputs of a sequence parse op but the lengths, and the lengths:
    context as ``_parse_features``, then the feature lists' sparse triples and
    dense values of ``node.attrs``' types and shapes."""
    a = node.attrs
    serialized = np.asarray(serialized, dtype=object)
    single = serialized.ndim == 0
    examples = _sequence_examples(node.name, serialized.reshape(-1))
    outs = _parse_features(node.name, [ex.context.feature for ex in examples],
                           single, sparse, dense, defaults)
    steps = [_sequence_steps(ex.feature_lists.feature_list,
                             [k for k, _ in fl_sparse] + fl_keys)
             for ex in examples]
    parts = [[_sparse(node.name, k, t, st[k], False) for st in steps]
             for k, t in fl_sparse]
    parts = [p[0] if single else _batch_sparse(p, t)
             for p, (_, t) in zip(parts, fl_sparse)]
    outs += [p[0] for p in parts] + [p[1] for p in parts] + [p[2] for p in parts]
    lengths = []
    for key, dtype, shape, may_miss in zip(
            fl_keys, a["feature_list_dense_types"],
            [s.as_list() for s in a["feature_list_dense_shapes"]], allow_missing):
        if not may_miss and any(key not in ex.feature_lists.feature_list
                                for ex in examples):
            raise _missing_list(node.name, key)
        out, n = _batch_dense([_dense(node.name, key, dtype, shape, np.zeros([0]),
                                      st[key], False) for st in steps],
                              dtype, shape)
        outs.append(out[0] if single else out)
        lengths.append(n[0] if single else n)
    return outs, lengths


@register_kernel("DecodeRaw")
def decode_raw_kernel(node):
    out_type = node.attrs["out_type"]
    dt = np.dtype(out_type.as_numpy_dtype).newbyteorder(
        "<" if node.attrs["little_endian"] else ">")

    def compute(step, value):
        # One record (a reader's, or a parsed scalar feature), the common case:
        # no per-element pass.
        s = value.item() if type(value) is np.ndarray and value.shape == () \
            else value
        if type(s) is bytes and dt.isnative and len(s) % dt.itemsize == 0:
            # bytearray: the one writable copy (frombuffer alone is read-only)
            return np.frombuffer(bytearray(s), dtype=dt)
        value = np.asarray(value, dtype=object)
        flat = value.reshape(-1)
        if flat.size == 0:
            return np.zeros(value.shape + (0,), dtype=out_type.as_numpy_dtype)
        if flat.size == 1:  # one record (a reader's): no per-element pass
            lengths = np.array([len(flat[0])], np.int64)
        else:
            lengths = np.frompyfunc(len, 1, 1)(flat).astype(np.int64)
        bad = np.flatnonzero(lengths != lengths[0])
        if bad.size:
            raise errors.InvalidArgumentError(
                None, node.name, f"DecodeRaw requires input strings to all be the "
                f"same size, but element {bad[0]} has size {lengths[bad[0]]} != "
                f"{lengths[0]}")
        if lengths[0] % dt.itemsize:
            raise errors.InvalidArgumentError(
                None, node.name, f"Input to DecodeRaw has length {lengths[0]} that "
                f"is not a multiple of {dt.itemsize}, the size of {out_type.name}")
        # bytearray: the one writable copy (frombuffer alone is read-only); astype
        # only where the bytes must be swapped.
        data = np.frombuffer(bytearray(b"".join(flat)), dtype=dt)
        if dt.isnative:
            return data.reshape(value.shape + (int(lengths[0]) // dt.itemsize,))
        return data.astype(out_type.as_numpy_dtype).reshape(
            value.shape + (int(lengths[0]) // dt.itemsize,))

    return compute


def _csv_rows(node, records, delim, quote):
    """Each record split into its fields (TF's quoting: ``"`` around a field,
    ``""`` for a quote inside one)."""
    texts = [r.decode() if isinstance(r, bytes) else str(r) for r in records]
    try:
        reader = csv.reader(texts, delimiter=delim, strict=True,
                            quoting=csv.QUOTE_MINIMAL if quote else csv.QUOTE_NONE,
                            quotechar='"' if quote else None)
        rows = list(reader)
    except csv.Error as e:
        raise errors.InvalidArgumentError(
            None, node, f"Quoted field has to end with quote followed by delim or "
            f"end ({e})") from None
    if len(rows) != len(texts):
        raise errors.InvalidArgumentError(
            None, node, "Unquoted fields cannot have quotes/CRLFs inside")
    return [r if r else [""] for r in rows]


@register_kernel("DecodeCSV")
def decode_csv_kernel(node):
    a = node.attrs
    types = a["OUT_TYPE"]
    select = a["select_cols"]
    na = a["na_value"]

    def compute(step, records, *defaults):
        records = np.asarray(records, dtype=object)
        rows = _csv_rows(node.name, records.reshape(-1), a["field_delim"],
                         a["use_quote_delim"])
        n_cols = len(types)
        outs = []
        for i, r in enumerate(rows):
            if select:
                if len(r) <= select[-1]:
                    raise errors.InvalidArgumentError(
                        None, node.name, f"Expect {select[-1] + 1} fields but have "
                        f"{len(r)} in record {i}")
                rows[i] = [r[c] for c in select]
            elif len(r) != n_cols:
                raise errors.InvalidArgumentError(
                    None, node.name, f"Expect {n_cols} fields but have {len(r)} in "
                    f"record {i}")
        fields = np.array(rows, dtype=object).reshape(len(rows), n_cols)
        for c, (dtype, default) in enumerate(zip(types, defaults)):
            default = np.asarray(default, dtype=object if dtype.name == "string"
                                 else dtype.as_numpy_dtype).reshape(-1)
            col = fields[:, c]
            missing = (col == "") | (col == na) if na else (col == "")
            if missing.any() and default.size == 0:
                i = int(np.flatnonzero(missing)[0])
                raise errors.InvalidArgumentError(
                    None, node.name, f"Field {c} is required but missing in record "
                    f"{i}!")
            outs.append(_convert_column(node.name, col, missing, dtype, default, c)
                        .reshape(records.shape))
        return tuple(outs) if len(outs) > 1 else outs[0]

    return compute


def _convert_column(node, col, missing, dtype, default, c):
    if dtype.name == "string":
        out = np.frompyfunc(str.encode, 1, 1)(col.astype(str)).astype(object)
        out[missing] = default[0] if default.size else b""
        return out
    text = np.where(missing, "0", col).astype(str)
    try:
        if dtype.is_integer:
            # int(...) rejects "1.5" as TF does; the range is checked after.
            values = np.array(text.astype(np.int64), dtype=np.int64)
            info = np.iinfo(dtype.as_numpy_dtype)
            if ((values < info.min) | (values > info.max)).any():
                raise ValueError("out of range")
        else:
            values = text.astype(np.float64)
    except (ValueError, OverflowError):
        bad = int(np.flatnonzero(~_parses(text, dtype))[0])
        raise errors.InvalidArgumentError(
            None, node, f"Field {c} in record {bad} is not a valid "
            f"{_type_name(dtype)}: {col[bad]}") from None
    values = values.astype(dtype.as_numpy_dtype)
    if default.size:
        values[missing] = default[0]
    return values


def _parses(text, dtype):
    def ok(s):
        try:
            if dtype.is_integer:
                v = int(s)
                info = np.iinfo(dtype.as_numpy_dtype)
                return info.min <= v <= info.max
            float(s)
            return True
        except ValueError:
            return False

    return np.frompyfunc(ok, 1, 1)(text).astype(bool)
