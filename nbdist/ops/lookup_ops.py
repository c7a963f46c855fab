"""Lookup-table ops, as TF's ``lookup_ops``: a hash table is a resource
(``HashTableV2``) filled once by an initializer op (``InitializeTableV2`` from
key and value tensors, ``InitializeTableFromTextFileV2`` from a vocabulary
file) and read by ``LookupTableFindV2`` and ``LookupTableSizeV2``; ops on a
table are colocated with it. Also ``StringToHashBucketFast`` (Farmhash
Fingerprint64 of each string, modulo the bucket count, as TF).

===============================  ===========================================
op                               inputs -> outputs
===============================  ===========================================
HashTableV2                      -> table handle (attrs key/value_dtype)
InitializeTableV2                table, keys, values
InitializeTableFromTextFileV2    table, filename (attrs key_index, value_index,
                                 vocab_size, delimiter)
LookupTableFindV2                table, keys, default_value -> values
LookupTableSizeV2                table -> int64 size
StringToHashBucketFast           strings -> int64 buckets (attr num_buckets)
===============================  ===========================================
"""

from __future__ import annotations

from nbdist.framework import dtypes as _dtypes
from nbdist.framework.gradient_registry import NotDifferentiable
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.ops import convert_to_tensor, get_default_graph
from nbdist.framework.tensor_shape import TensorShape

WHOLE_LINE = -2
LINE_NUMBER = -1


def _table_only(c):
    if c.input_dtypes[0].base_dtype is not _dtypes.resource:
        raise TypeError(f"{c.op_type} needs a table handle as its first input")


def _init_infer(c):
    _table_only(c)
    keys, values = c.shape(1), c.shape(2)
    if keys.rank not in (None, 1) or values.rank not in (None, 1):
        raise ValueError(f"{c.op_type} ({c.name}): keys and values must be vectors, "
                         f"got shapes {keys} and {values}")
    if not keys.is_compatible_with(values):
        raise ValueError(f"{c.op_type} ({c.name}): keys and values must have the "
                         f"same size, got shapes {keys} and {values}")
    return []


def _text_init_infer(c):
    _table_only(c)
    if c.dtype(1) is not _dtypes.string or c.shape(1).rank not in (None, 0):
        raise ValueError(f"{c.op_type} ({c.name}): filename must be a string scalar")
    return []


def _find_infer(c):
    _table_only(c)
    default = c.shape(2)
    if default.rank not in (None, 0):
        raise ValueError(f"{c.op_type} ({c.name}): default_value must be a scalar, "
                         f"got shape {default}")
    return [(c.dtype(2), c.shape(1))]


def _hash_bucket_infer(c):
    if c.dtype(0) is not _dtypes.string:
        raise TypeError(f"StringToHashBucketFast ({c.name}) needs strings, got "
                        f"{c.dtype(0).name}")
    if c.attr("num_buckets") < 1:
        raise ValueError(f"StringToHashBucketFast ({c.name}): num_buckets must be "
                         f">= 1, got {c.attr('num_buckets')}")
    return [(_dtypes.int64, c.shape(0))]


register_op("HashTableV2", lambda c: [(_dtypes.resource, TensorShape([]))],
            attrs={"key_dtype": ("type", REQUIRED), "value_dtype": ("type", REQUIRED),
                   "container": ("string", ""), "shared_name": ("string", ""),
                   "use_node_name_sharing": ("bool", False)},
            num_inputs=0, stateful=True)
register_op("InitializeTableV2", _init_infer, attrs={"Tkey": ("type", None),
                                                     "Tval": ("type", None)},
            num_inputs=3, stateful=True)
register_op("InitializeTableFromTextFileV2", _text_init_infer,
            attrs={"key_index": ("int", REQUIRED), "value_index": ("int", REQUIRED),
                   "vocab_size": ("int", -1), "delimiter": ("string", "\t")},
            num_inputs=2, stateful=True)
register_op("LookupTableFindV2", _find_infer,
            attrs={"Tin": ("type", None), "Tout": ("type", None)}, num_inputs=3,
            stateful=True)
register_op("LookupTableSizeV2", lambda c: (_table_only(c),
                                            [(_dtypes.int64, TensorShape([]))])[1],
            num_inputs=1, stateful=True)
register_op("StringToHashBucketFast", _hash_bucket_infer,
            attrs={"num_buckets": ("int", REQUIRED)}, num_inputs=1)


for _t in ("HashTableV2", "InitializeTableV2", "InitializeTableFromTextFileV2",
           "LookupTableFindV2", "LookupTableSizeV2", "StringToHashBucketFast"):
    NotDifferentiable(_t)


def hash_table(key_dtype, value_dtype, shared_name=None, name=None):
    """The handle of a new, empty ``HashTableV2``."""
    g = get_default_graph()
    return g.create_op("HashTableV2", [], {
        "key_dtype": _dtypes.as_dtype(key_dtype),
        "value_dtype": _dtypes.as_dtype(value_dtype),
        "shared_name": shared_name or ""}, name=name or "hash_table").outputs[0]


def _on_table(table, op_type, inputs, attrs, name):
    g = table.graph
    with g.colocate_with(table.op):
        return g.create_op(op_type, [table] + list(inputs), attrs, name=name)


def initialize_table(table, keys, values, name=None):
    """The op filling ``table`` with ``keys`` -> ``values`` (vectors)."""
    return _on_table(table, "InitializeTableV2", [keys, values],
                     {"Tkey": keys.dtype.base_dtype, "Tval": values.dtype.base_dtype},
                     name or "table_init")


def initialize_table_from_text_file(table, filename, key_index, value_index,
                                    vocab_size=-1, delimiter="\t", name=None):
    """The op filling ``table`` from the lines of ``filename``: key and value are
    columns (split by ``delimiter``), the whole line (-2) or its number (-1)."""
    filename = convert_to_tensor(filename, dtype=_dtypes.string, name="asset_filepath")
    return _on_table(table, "InitializeTableFromTextFileV2", [filename],
                     {"key_index": int(key_index), "value_index": int(value_index),
                      "vocab_size": -1 if vocab_size is None else int(vocab_size),
                      "delimiter": delimiter}, name or "table_init")


def lookup_table_find(table, keys, default_value, name=None):
    """The values of ``keys`` (any shape), ``default_value`` where missing."""
    op = _on_table(table, "LookupTableFindV2", [keys, default_value],
                   {"Tin": keys.dtype.base_dtype,
                    "Tout": default_value.dtype.base_dtype}, name or "hash_table_Lookup")
    return op.outputs[0]


def lookup_table_size(table, name=None):
    return _on_table(table, "LookupTableSizeV2", [], {}, name or "Size").outputs[0]


def string_to_hash_bucket_fast(input, num_buckets, name=None):
    """Each string's Farmhash Fingerprint64 modulo ``num_buckets`` (int64), the
    same buckets as TensorFlow's ``string_to_hash_bucket_fast``."""
    g = get_default_graph()
    x = convert_to_tensor(input, name="input")
    if x.dtype.base_dtype is not _dtypes.string:
        raise TypeError(f"Input 'input' of 'StringToHashBucketFast' Op has type "
                        f"{x.dtype.base_dtype.name} that does not match expected "
                        "type of string.")
    return g.create_op("StringToHashBucketFast", [x],
                       {"num_buckets": int(num_buckets)},
                       name=name or "StringToHashBucketFast").outputs[0]
