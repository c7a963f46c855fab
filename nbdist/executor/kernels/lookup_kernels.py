"""Kernels of the lookup-table ops (``HashTableV2``, ``LookupTableFindV2`` ...) and
``StringToHashBucketFast``.

A table keeps its keys sorted in a NumPy array (values aligned), so a lookup is
one ``searchsorted`` over all the keys asked for. Initialising a table again
with the same entries is a no-op and with different ones an error, as TF.
"""

from __future__ import annotations

import threading

import numpy as np

from nbdist import errors
from nbdist.executor.kernel import register_kernel
from nbdist.framework import dtypes as _dtypes
from nbdist.ops import lookup_ops  # registers the op definitions

_MAX_UINT64 = np.uint64(2 ** 64 - 1)


class HashTableResource:
    """An immutable-once-initialised map from keys to values."""

    kind = "table"

    def __init__(self, name, key_dtype, value_dtype):
        self.name = name
        self.key_dtype = _dtypes.as_dtype(key_dtype)
        self.value_dtype = _dtypes.as_dtype(value_dtype)
        self.lock = threading.Lock()
        self.keys = None  # sorted
        self.values = None

    def _np(self, dtype):
        return object if dtype is _dtypes.string else dtype.as_numpy_dtype

    def initialize(self, op_name, keys, values):
        keys = np.asarray(keys, dtype=self._np(self.key_dtype)).reshape(-1)
        values = np.asarray(values, dtype=self._np(self.value_dtype)).reshape(-1)
        if keys.shape != values.shape:
            raise errors.InvalidArgumentError(
                None, op_name, f"Expected shape {list(keys.shape)} for value, got "
                f"{list(values.shape)}")
        order = np.argsort(keys, kind="stable")
        keys, values = keys[order], values[order]
        if keys.size > 1:
            same_key = keys[1:] == keys[:-1]
            clash = same_key & (values[1:] != values[:-1])
            if clash.any():
                i = int(np.argmax(clash))
                raise errors.FailedPreconditionError(
                    None, op_name, f"HashTable has different value for same key. Key "
                    f"{_show(keys[i])} has {_show(values[i])} and trying to add value "
                    f"{_show(values[i + 1])}")
            keep = np.concatenate([[True], ~same_key])
            keys, values = keys[keep], values[keep]
        with self.lock:
            if self.keys is not None:
                if not (np.array_equal(self.keys, keys)
                        and np.array_equal(self.values, values)):
                    raise errors.FailedPreconditionError(
                        None, op_name, "Table was already initialized with different "
                        "data.")
                return
            self.keys, self.values = keys, values

    def find(self, op_name, keys, default):
        with self.lock:
            table_keys, table_values = self.keys, self.values
        if table_keys is None:
            raise errors.FailedPreconditionError(None, op_name,
                                                 "Table not initialized.")
        flat = np.asarray(keys, dtype=self._np(self.key_dtype)).reshape(-1)
        out = np.full(flat.shape, default, dtype=self._np(self.value_dtype))
        if table_keys.size and flat.size:
            pos = np.searchsorted(table_keys, flat)
            pos_ok = np.minimum(pos, table_keys.size - 1)
            found = (pos < table_keys.size) & (table_keys[pos_ok] == flat)
            out[found] = table_values[pos_ok[found]]
        return out.reshape(np.shape(keys))

    def size(self) -> int:
        with self.lock:
            return 0 if self.keys is None else int(self.keys.size)


def _show(v):
    return v.decode(errors="replace") if isinstance(v, bytes) else v


@register_kernel("HashTableV2")
def hash_table_kernel(node):
    a = node.attrs
    name = a["shared_name"] or node.name
    rm = node.resources

    def compute(step):
        table = rm.lookup_or_create(
            a["container"], "table", name,
            lambda: HashTableResource(name, a["key_dtype"], a["value_dtype"]))
        if (table.key_dtype is not _dtypes.as_dtype(a["key_dtype"]) or
                table.value_dtype is not _dtypes.as_dtype(a["value_dtype"])):
            raise errors.InvalidArgumentError(
                None, node.name, f"Shared table {name} is "
                f"{table.key_dtype.name}->{table.value_dtype.name}, not "
                f"{_dtypes.as_dtype(a['key_dtype']).name}->"
                f"{_dtypes.as_dtype(a['value_dtype']).name}")
        return table

    return compute


def _check_dtypes(node, table, key_dtype, value_dtype):
    if key_dtype is not table.key_dtype or value_dtype is not table.value_dtype:
        raise errors.InvalidArgumentError(
            None, node.name, f"Conflicting key/value dtypes {key_dtype.name}->"
            f"{value_dtype.name} with {table.key_dtype.name}->"
            f"{table.value_dtype.name}")


@register_kernel("InitializeTableV2")
def initialize_table_kernel(node):
    key_dtype = _dtypes.as_dtype(node.attrs["Tkey"])
    value_dtype = _dtypes.as_dtype(node.attrs["Tval"])

    def compute(step, table, keys, values):
        _check_dtypes(node, table, key_dtype, value_dtype)
        table.initialize(node.name, keys, values)

    return compute


def _column(node, lines, fields, index, dtype, filename):
    if index == lookup_ops.LINE_NUMBER:
        return np.arange(len(lines), dtype=np.int64)
    if index == lookup_ops.WHOLE_LINE:
        raw = lines
    else:
        bad = [i for i, f in enumerate(fields) if len(f) <= index]
        if bad:
            raise errors.InvalidArgumentError(
                None, node.name, f"Invalid number of columns in {filename} line "
                f"{bad[0]} ({lines[bad[0]].decode(errors='replace')}) : expected "
                f"{index + 1} got {len(fields[bad[0]])}")
        raw = [f[index] for f in fields]
    if dtype is _dtypes.string:
        return np.array(raw, dtype=object)
    try:
        return np.array([int(r) if dtype.is_integer else float(r) for r in raw],
                        dtype=dtype.as_numpy_dtype)
    except ValueError as e:
        raise errors.InvalidArgumentError(
            None, node.name, f"Field in {filename} is not a valid "
            f"{dtype.name}: {e}") from None


@register_kernel("InitializeTableFromTextFileV2")
def initialize_from_text_kernel(node):
    a = node.attrs

    def compute(step, table, filename):
        path = np.asarray(filename, dtype=object).item()
        path = path.decode() if isinstance(path, bytes) else str(path)
        try:
            with open(path, "rb") as f:
                lines = f.read().splitlines()
        except OSError as e:
            raise errors.NotFoundError(None, node.name,
                                       f"{path}; {e.strerror}") from None
        vocab_size = a["vocab_size"]
        if vocab_size != -1:
            if len(lines) < vocab_size:
                raise errors.InvalidArgumentError(
                    None, node.name, f"Invalid vocab_size in {path}: expected "
                    f"{vocab_size} lines, got {len(lines)}")
            lines = lines[:vocab_size]
        delim = a["delimiter"].encode()
        fields = [ln.split(delim) for ln in lines]
        keys = _column(node, lines, fields, a["key_index"], table.key_dtype, path)
        values = _column(node, lines, fields, a["value_index"], table.value_dtype,
                         path)
        table.initialize(node.name, keys, values)

    return compute


@register_kernel("LookupTableFindV2")
def find_kernel(node):
    key_dtype = _dtypes.as_dtype(node.attrs["Tin"])
    value_dtype = _dtypes.as_dtype(node.attrs["Tout"])

    def compute(step, table, keys, default):
        _check_dtypes(node, table, key_dtype, value_dtype)
        return table.find(node.name, keys, default)

    return compute


@register_kernel("LookupTableSizeV2")
def size_kernel(node):
    return lambda step, table: np.int64(table.size())


@register_kernel("StringToHashBucketFast")
def hash_bucket_kernel(node):
    import farmhash  # pyfarmhash: Google's Farmhash, TF's Fingerprint64

    buckets = np.uint64(node.attrs["num_buckets"])

    def compute(step, strings):
        arr = np.asarray(strings, dtype=object)
        flat = arr.reshape(-1)
        # One C call per string: Farmhash has no vectorised form.
        fp = np.fromiter((farmhash.fingerprint64(s if isinstance(s, bytes)
                                                  else str(s).encode())
                          for s in flat), dtype=np.uint64, count=flat.size)
        return (fp % buckets).astype(np.int64).reshape(arr.shape)

    return compute
