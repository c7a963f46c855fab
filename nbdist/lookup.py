"""``nd.lookup``: TF1's lookup tables (``tf.lookup``, ``tf.contrib.lookup``) as
wide-and-deep input code uses them: ``HashTable``/``StaticHashTable`` from a
``KeyValueTensorInitializer`` or ``TextFileInitializer``, the vocabulary
tables ``index_table_from_tensor``/``_from_file`` (with out-of-vocabulary hash
buckets) and ``index_to_string_table_from_tensor``/``_from_file``, and
``tables_initializer`` (which runs the ``TABLE_INITIALIZERS``).

>>> import nbdist as nd
>>> with nd.Graph().as_default():
...     table = nd.lookup.index_table_from_tensor(["emerson", "lake", "palmer"])
...     ids = table.lookup(nd.constant(["emerson", "lake", "and", "palmer"]))
...     with nd.Session() as s:
...         s.run(nd.tables_initializer())
...         s.run(ids).tolist()
[0, 1, -1, 2]
"""

from __future__ import annotations

import nbdist as nd
from nbdist.ops import lookup_ops as _ops

TABLE_INITIALIZERS = "table_initializer"


class TextFileIndex:
    """Special column indices of a ``TextFileInitializer``."""

    WHOLE_LINE = _ops.WHOLE_LINE
    LINE_NUMBER = _ops.LINE_NUMBER


class TableInitializerBase:
    """Fills a table: ``initialize(table)`` returns the op."""

    def __init__(self, key_dtype, value_dtype):
        self._key_dtype = nd.as_dtype(key_dtype)
        self._value_dtype = nd.as_dtype(value_dtype)

    key_dtype = property(lambda self: self._key_dtype)
    value_dtype = property(lambda self: self._value_dtype)

    def initialize(self, table):
        raise NotImplementedError


class KeyValueTensorInitializer(TableInitializerBase):
    """The table maps ``keys[i]`` to ``values[i]`` (two vectors)."""

    def __init__(self, keys, values, key_dtype=None, value_dtype=None, name=None):
        with nd.name_scope(name, "key_value_init"):
            self._keys = nd.convert_to_tensor(keys, dtype=key_dtype, name="keys")
            self._values = nd.convert_to_tensor(values, dtype=value_dtype,
                                                name="values")
        self._name = name or "key_value_init"
        super().__init__(self._keys.dtype.base_dtype, self._values.dtype.base_dtype)

    def initialize(self, table):
        table.check_table_dtypes(self._keys.dtype, self._values.dtype)
        with nd.name_scope(self._name, values=[table.resource_handle]):
            op = _ops.initialize_table(table.resource_handle, self._keys,
                                       self._values)
        nd.add_to_collection(TABLE_INITIALIZERS, op)
        return op


class TextFileInitializer(TableInitializerBase):
    """The table's keys and values are columns of the lines of ``filename``
    (split by ``delimiter``), the whole line (``TextFileIndex.WHOLE_LINE``)
    or its number (``TextFileIndex.LINE_NUMBER``); ``vocab_size`` lines at most."""

    def __init__(self, filename, key_dtype, key_index, value_dtype, value_index,
                 vocab_size=None, delimiter="\t", name=None):
        if key_index == TextFileIndex.LINE_NUMBER and nd.as_dtype(key_dtype) not in (
                nd.int64,):
            raise ValueError(f"Signature mismatch. Keys must be dtype int64, got "
                             f"{nd.as_dtype(key_dtype).name}.")
        if value_index == TextFileIndex.LINE_NUMBER and nd.as_dtype(
                value_dtype) not in (nd.int64,):
            raise ValueError(f"Signature mismatch. Values must be dtype int64, got "
                             f"{nd.as_dtype(value_dtype).name}.")
        if vocab_size is not None and vocab_size <= 0:
            raise ValueError(f"Invalid vocab_size {vocab_size}.")
        self._filename = filename
        self._key_index, self._value_index = key_index, value_index
        self._vocab_size, self._delimiter = vocab_size, delimiter
        self._name = name or "text_file_init"
        super().__init__(key_dtype, value_dtype)

    def initialize(self, table):
        table.check_table_dtypes(self.key_dtype, self.value_dtype)
        with nd.name_scope(self._name, values=[table.resource_handle]):
            op = _ops.initialize_table_from_text_file(
                table.resource_handle, self._filename, self._key_index,
                self._value_index, self._vocab_size, self._delimiter)
        nd.add_to_collection(TABLE_INITIALIZERS, op)
        return op


class TextFileIdTableInitializer(TextFileInitializer):
    """Keys from a column (the whole line by default), ids the line numbers."""

    def __init__(self, filename, key_column_index=TextFileIndex.WHOLE_LINE,
                 value_column_index=TextFileIndex.LINE_NUMBER, vocab_size=None,
                 delimiter="\t", name="text_file_id_table_init",
                 key_dtype=nd.string):
        super().__init__(filename, key_dtype, key_column_index, nd.int64,
                         value_column_index, vocab_size, delimiter, name)


class TextFileStringTableInitializer(TextFileInitializer):
    """Keys the line numbers, values a column (the whole line by default)."""

    def __init__(self, filename, key_column_index=TextFileIndex.LINE_NUMBER,
                 value_column_index=TextFileIndex.WHOLE_LINE, vocab_size=None,
                 delimiter="\t", name="text_file_string_table_init"):
        super().__init__(filename, nd.int64, key_column_index, nd.string,
                         value_column_index, vocab_size, delimiter, name)


class LookupInterface:
    """What every table offers: ``lookup``, ``size``, ``key_dtype``,
    ``value_dtype``, ``name``."""

    def __init__(self, key_dtype, value_dtype, name):
        self._key_dtype = nd.as_dtype(key_dtype)
        self._value_dtype = nd.as_dtype(value_dtype)
        self._name = name

    key_dtype = property(lambda self: self._key_dtype)
    value_dtype = property(lambda self: self._value_dtype)
    name = property(lambda self: self._name)

    def check_table_dtypes(self, key_dtype, value_dtype):
        if nd.as_dtype(key_dtype).base_dtype != self.key_dtype:
            raise TypeError(f"Invalid key dtype, expected {self.key_dtype.name} but "
                            f"got {nd.as_dtype(key_dtype).base_dtype.name}.")
        if nd.as_dtype(value_dtype).base_dtype != self.value_dtype:
            raise TypeError(f"Invalid value dtype, expected {self.value_dtype.name} "
                            f"but got {nd.as_dtype(value_dtype).base_dtype.name}.")


class StaticHashTable(LookupInterface):
    """A hash table filled once by ``initializer`` (its op is in
    ``TABLE_INITIALIZERS``: run ``nd.tables_initializer()``); keys not in it look
    up as ``default_value``."""

    def __init__(self, initializer, default_value, name=None):
        with nd.name_scope(name, "hash_table") as scope:
            self._handle = _ops.hash_table(initializer.key_dtype,
                                           initializer.value_dtype)
            super().__init__(initializer.key_dtype, initializer.value_dtype,
                             scope.rstrip("/"))
            self._default_value = nd.convert_to_tensor(
                default_value, dtype=self.value_dtype, name="Const")
            self._initializer = initializer
            self._init_op = initializer.initialize(self)

    resource_handle = property(lambda self: self._handle)
    table_ref = resource_handle
    default_value = property(lambda self: self._default_value)
    initializer = property(lambda self: self._init_op)
    init = initializer

    def size(self, name=None):
        """The number of entries (int64)."""
        with nd.name_scope(name, f"{self._name.rpartition('/')[2]}_Size"):
            return _ops.lookup_table_size(self._handle)

    def lookup(self, keys, name=None):
        """The values of ``keys`` (a tensor of any shape, or a ``SparseTensor``
        whose values are looked up)."""
        sparse = _as_sparse(keys)
        if sparse is not None:
            values = self.lookup(sparse.values, name)
            return type(sparse)(sparse.indices, values, sparse.dense_shape)
        keys = nd.convert_to_tensor(keys, name="keys")
        if keys.dtype.base_dtype != self.key_dtype:
            raise TypeError(f"Signature mismatch. Keys must be dtype "
                            f"{self.key_dtype.name}, got {keys.dtype.base_dtype.name}.")
        with nd.name_scope(name, f"{self._name.rpartition('/')[2]}_Lookup"):
            return _ops.lookup_table_find(self._handle, keys, self._default_value)


HashTable = StaticHashTable


def _as_sparse(x):
    return x if hasattr(x, "indices") and hasattr(x, "dense_shape") else None


class IdTableWithHashBuckets(LookupInterface):
    """Ids from ``table`` (if any), and for keys it lacks one of
    ``num_oov_buckets`` hash buckets after them: ``size + fingerprint(key) %
    num_oov_buckets`` (string keys)."""

    def __init__(self, table, num_oov_buckets, hasher_spec=None, name=None,
                 key_dtype=None):
        if num_oov_buckets < 0:
            raise ValueError(f"oov_buckets must be >= 0, got {num_oov_buckets}.")
        key_dtype = nd.as_dtype(key_dtype or (table.key_dtype if table
                                              else nd.string))
        if key_dtype != nd.string:
            raise NotImplementedError("nbdist hashes only string keys into "
                                      "out-of-vocabulary buckets")
        self._table = table
        self._num_oov_buckets = num_oov_buckets
        super().__init__(key_dtype, nd.int64, name or (table.name if table else
                                                       "hash_bucket"))

    def size(self, name=None):
        with nd.name_scope(name, "table_size"):
            if self._table is None:
                return nd.constant(self._num_oov_buckets, nd.int64)
            return self._table.size() + self._num_oov_buckets

    def lookup(self, keys, name=None):
        sparse = _as_sparse(keys)
        if sparse is not None:
            return type(sparse)(sparse.indices, self.lookup(sparse.values, name),
                                sparse.dense_shape)
        keys = nd.convert_to_tensor(keys, dtype=self.key_dtype, name="keys")
        with nd.name_scope(name, "hash_table_Lookup"):
            if self._table is None:
                return _ops.string_to_hash_bucket_fast(keys, self._num_oov_buckets)
            ids = self._table.lookup(keys)
            if not self._num_oov_buckets:
                return ids
            buckets = nd.add(_ops.string_to_hash_bucket_fast(
                keys, self._num_oov_buckets), self._table.size())
            return nd.where(nd.equal(ids, -1), buckets, ids)

    @property
    def initializer(self):
        return self._table.initializer if self._table else nd.no_op()

    init = initializer


def _vocab_table(initializer, num_oov_buckets, default_value, name):
    if num_oov_buckets and default_value != -1:
        raise ValueError("Can't specify default_value and num_oov_buckets: a key "
                         "that is not in the vocabulary goes to a bucket.")
    table = StaticHashTable(initializer, default_value)
    if num_oov_buckets:
        return IdTableWithHashBuckets(table, num_oov_buckets, name=name)
    return table


def index_table_from_tensor(vocabulary_list, num_oov_buckets=0, default_value=-1,
                            hasher_spec=None, dtype=nd.string, name=None):
    """A table from each string of ``vocabulary_list`` to its index (int64);
    other strings map to ``default_value``, or with ``num_oov_buckets`` to one
    of that many ids after the vocabulary (by their Farmhash fingerprint)."""
    if vocabulary_list is None:
        raise ValueError("vocabulary_list must be specified.")
    if num_oov_buckets < 0:
        raise ValueError(f"num_oov_buckets must be greater or equal than 0, got "
                         f"{num_oov_buckets}.")
    with nd.name_scope(name, "string_to_index"):
        keys = nd.convert_to_tensor(vocabulary_list, dtype=dtype,
                                    name="vocabulary_list")
        n = keys.shape.as_list()[0]
        if n is None:
            ids = nd.cast(nd.range(nd.size(keys)), nd.int64)
        else:
            ids = nd.constant(list(range(n)), dtype=nd.int64)
        init = KeyValueTensorInitializer(keys, ids, name="table_init")
        return _vocab_table(init, num_oov_buckets, default_value, name)


def index_table_from_file(vocabulary_file=None, num_oov_buckets=0, vocab_size=None,
                          default_value=-1, hasher_spec=None, key_dtype=nd.string,
                          name=None, key_column_index=TextFileIndex.WHOLE_LINE,
                          value_column_index=TextFileIndex.LINE_NUMBER,
                          delimiter="\t"):
    """``index_table_from_tensor`` with the vocabulary read (when the table is
    initialised) from ``vocabulary_file``, one entry per line."""
    if not vocabulary_file:
        raise ValueError("vocabulary_file must be specified and must not be empty.")
    if num_oov_buckets < 0:
        raise ValueError(f"num_oov_buckets must be greater or equal than 0, got "
                         f"{num_oov_buckets}.")
    with nd.name_scope(name, "string_to_index"):
        init = TextFileIdTableInitializer(
            vocabulary_file, key_column_index, value_column_index, vocab_size,
            delimiter, key_dtype=key_dtype)
        return _vocab_table(init, num_oov_buckets, default_value, name)


def index_to_string_table_from_tensor(vocabulary_list, default_value="UNK",
                                      name=None):
    """A table from each index (int64) to the string of ``vocabulary_list`` at
    that index; other indices map to ``default_value``."""
    if vocabulary_list is None:
        raise ValueError("vocabulary_list must be specified.")
    with nd.name_scope(name, "index_to_string"):
        values = nd.convert_to_tensor(vocabulary_list, dtype=nd.string)
        n = values.shape.as_list()[0]
        keys = (nd.constant(list(range(n)), dtype=nd.int64) if n is not None
                else nd.cast(nd.range(nd.size(values)), nd.int64))
        init = KeyValueTensorInitializer(keys, values, name="table_init")
        return StaticHashTable(init, default_value)


def index_to_string_table_from_file(vocabulary_file, vocab_size=None,
                                    default_value="UNK", name=None,
                                    key_column_index=TextFileIndex.LINE_NUMBER,
                                    value_column_index=TextFileIndex.WHOLE_LINE,
                                    delimiter="\t"):
    """``index_to_string_table_from_tensor`` with the strings read from
    ``vocabulary_file``."""
    if not vocabulary_file:
        raise ValueError("vocabulary_file must be specified and must not be empty.")
    with nd.name_scope(name, "index_to_string"):
        init = TextFileStringTableInitializer(vocabulary_file, key_column_index,
                                              value_column_index, vocab_size,
                                              delimiter)
        return StaticHashTable(init, default_value)


def index_to_string(tensor, mapping, default_value="UNK", name=None):
    """The strings of ``mapping`` at the indices of ``tensor``."""
    table = index_to_string_table_from_tensor(mapping, default_value, name)
    return table.lookup(tensor)


def tables_initializer(name="init_all_tables"):
    """An op running every table initializer of the graph (a no-op if none)."""
    inits = nd.get_collection(TABLE_INITIALIZERS)
    if inits:
        return nd.group(*inits, name=name)
    return nd.no_op(name=name)


initialize_all_tables = tables_initializer


def string_to_hash_bucket_fast(input, num_buckets, name=None):
    """Each string's bucket in [0, num_buckets): Farmhash Fingerprint64 modulo
    ``num_buckets``, the same buckets as TensorFlow."""
    return _ops.string_to_hash_bucket_fast(input, num_buckets, name=name)


__all__ = [
    "HashTable", "IdTableWithHashBuckets", "KeyValueTensorInitializer",
    "LookupInterface", "StaticHashTable", "TableInitializerBase",
    "TextFileIdTableInitializer", "TextFileIndex", "TextFileInitializer",
    "TextFileStringTableInitializer", "index_table_from_file",
    "index_table_from_tensor", "index_to_string", "index_to_string_table_from_file",
    "index_to_string_table_from_tensor", "initialize_all_tables",
    "string_to_hash_bucket_fast", "tables_initializer",
]
