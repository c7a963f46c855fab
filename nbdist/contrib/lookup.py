"""``nd.contrib.lookup``: TF1's ``tf.contrib.lookup`` names, the same objects as
``nd.lookup``."""

from __future__ import annotations

from nbdist.lookup import (
                           HashTable,
                           IdTableWithHashBuckets,
                           KeyValueTensorInitializer,
                           LookupInterface,
                           StaticHashTable,
                           TableInitializerBase,
                           TextFileIdTableInitializer,
                           TextFileIndex,
                           TextFileInitializer,
                           TextFileStringTableInitializer,
                           index_table_from_file,
                           index_table_from_tensor,
                           index_to_string,
                           index_to_string_table_from_file,
                           index_to_string_table_from_tensor,
)

__all__ = [
    "HashTable", "IdTableWithHashBuckets", "KeyValueTensorInitializer",
    "LookupInterface", "StaticHashTable", "TableInitializerBase",
    "TextFileIdTableInitializer", "TextFileIndex", "TextFileInitializer",
    "TextFileStringTableInitializer", "index_table_from_file",
    "index_table_from_tensor", "index_to_string", "index_to_string_table_from_file",
    "index_to_string_table_from_tensor",
]
