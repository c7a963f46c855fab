"""nd.lookup tables as TF1's: vocabulary tables from tensors and files, OOV hash
buckets (Farmhash Fingerprint64, the buckets TensorFlow computes), reverse
tables, tables_initializer, and TF's errors."""

from __future__ import annotations

import numpy as np
import pytest

import nbdist as nd

# tf.strings.to_hash_bucket_fast(WORDS, n) as TensorFlow 2.21 computes it.
WORDS = ["and", "mississippi", "café", "hello", "world", ""]
TF_BUCKETS_3 = [0, 0, 2, 1, 1, 2]
TF_BUCKETS_2_62 = [2317856756412234893, 1664401289739955113, 2156005646011579779,
                   3786372426573024488, 2601484383088587886, 1936946117179621455]


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def test_string_to_hash_bucket_fast_matches_tensorflow():
    a = nd.string_to_hash_bucket_fast(WORDS, 3)
    b = nd.string_to_hash_bucket_fast(nd.constant([WORDS, WORDS]), 2 ** 62)
    assert a.dtype == nd.int64 and b.shape.as_list() == [2, 6]
    with nd.Session() as s:
        av, bv = s.run([a, b])
    assert av.tolist() == TF_BUCKETS_3
    assert bv.tolist() == [TF_BUCKETS_2_62] * 2
    with pytest.raises(TypeError, match="expected type of string"):
        nd.string_to_hash_bucket_fast(nd.constant([1, 2]), 3)


def test_index_table_from_tensor_with_and_without_oov_buckets():
    vocab = ["emerson", "lake", "palmer"]
    plain = nd.lookup.index_table_from_tensor(vocab)
    oov = nd.lookup.index_table_from_tensor(vocab, num_oov_buckets=3)
    keys = nd.constant([["emerson", "and"], ["palmer", "café"]])
    ids, ids_oov = plain.lookup(keys), oov.lookup(keys)
    assert ids.dtype == nd.int64 and ids.shape.as_list() == [2, 2]
    assert len(nd.get_collection(nd.GraphKeys.TABLE_INITIALIZERS)) == 2
    with nd.Session() as s:
        with pytest.raises(nd.errors.FailedPreconditionError,
                           match="not initialized"):
            s.run(ids)
        s.run(nd.tables_initializer())
        s.run(nd.tables_initializer())  # again, same data: fine
        got, got_oov, n, n_oov = s.run([ids, ids_oov, plain.size(), oov.size()])
    assert got.tolist() == [[0, -1], [2, -1]]
    assert got_oov.tolist() == [[0, 3 + TF_BUCKETS_3[0]], [2, 3 + TF_BUCKETS_3[2]]]
    assert (n, n_oov) == (3, 6)
    with pytest.raises(ValueError, match="default_value and num_oov_buckets"):
        nd.lookup.index_table_from_tensor(vocab, num_oov_buckets=1, default_value=7)


def test_index_table_from_file_and_reverse_tables(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("brain\nsalad\nsurgery\n")
    table = nd.lookup.index_table_from_file(str(vocab), default_value=-7)
    small = nd.lookup.index_table_from_file(str(vocab), vocab_size=2)
    ids = table.lookup(nd.constant(["salad", "surgery", "tarkus"]))
    small_ids = small.lookup(nd.constant(["surgery", "brain"]))
    reverse = nd.lookup.index_to_string_table_from_file(str(vocab))
    words = reverse.lookup(nd.constant([2, 0, 5], nd.int64))
    rev_t = nd.lookup.index_to_string_table_from_tensor(["a", "b"], default_value="?")
    words_t = rev_t.lookup(nd.constant([1, 3], nd.int64))
    with nd.Session() as s:
        s.run(nd.tables_initializer())
        got = s.run([ids, small_ids, words, words_t])
    assert got[0].tolist() == [1, 2, -7]
    assert got[1].tolist() == [-1, 0]
    assert got[2].tolist() == [b"surgery", b"brain", b"UNK"]
    assert got[3].tolist() == [b"b", b"?"]
    missing = nd.lookup.index_table_from_file(str(tmp_path / "nope.txt"))
    with nd.Session() as s:
        with pytest.raises(nd.errors.NotFoundError, match="nope.txt"):
            s.run(missing.initializer)


def test_hash_table_key_value_and_columns(tmp_path):
    init = nd.lookup.KeyValueTensorInitializer(nd.constant([3, 1, 9], nd.int64),
                                               nd.constant([0.3, 0.1, 0.9]))
    table = nd.lookup.HashTable(init, -1.0)
    assert nd.lookup.StaticHashTable is nd.lookup.HashTable
    assert nd.contrib.lookup.HashTable is nd.lookup.HashTable
    values = table.lookup(nd.constant([[9, 2], [1, 3]], nd.int64))
    with pytest.raises(TypeError, match="Keys must be dtype int64"):
        table.lookup(nd.constant(["a"]))
    path = tmp_path / "pairs.tsv"
    path.write_text("x\t10\ny\t20\n")
    cols = nd.lookup.HashTable(nd.lookup.TextFileInitializer(
        str(path), nd.string, 0, nd.int64, 1), 0)
    col_values = cols.lookup(nd.constant(["y", "x", "z"]))
    with nd.Session() as s:
        s.run(table.initializer)
        s.run(cols.init)
        v, cv = s.run([values, col_values])
    np.testing.assert_allclose(v, [[0.9, -1.0], [0.1, 0.3]], rtol=1e-6)
    assert cv.tolist() == [20, 10, 0]


def test_conflicting_entries_are_errors():
    clash = nd.lookup.HashTable(nd.lookup.KeyValueTensorInitializer(
        ["a", "a"], nd.constant([1, 2], nd.int64)), -1)
    with nd.Session() as s, pytest.raises(nd.errors.FailedPreconditionError,
                       match="different value for same key"):
        s.run(clash.initializer)


def test_table_on_ps_used_from_worker_session():
    server = nd.Server.create_local_server()
    try:
        with nd.device("/job:localhost/task:0"):
            table = nd.lookup.index_table_from_tensor(["a", "b"], num_oov_buckets=1)
        ids = table.lookup(nd.constant(["b", "zz"]))
        assert ids.op.device == ""  # follows the table, placed with it
        with nd.Session(server.target) as s:
            s.run(nd.tables_initializer())
            assert s.run(ids).tolist() == [1, 2]
    finally:
        server.stop()


def test_lookup_values_are_constants_to_gradients():
    table = nd.lookup.HashTable(nd.lookup.KeyValueTensorInitializer(
        ["a", "b"], [1.0, 2.0]), 0.0)
    w = nd.Variable(3.0)
    y = w * table.lookup(nd.constant(["b", "a", "c"]))
    grad = nd.gradients(nd.reduce_sum(y), [w])[0]
    with nd.Session() as s:
        s.run([nd.global_variables_initializer(), nd.tables_initializer()])
        assert s.run(grad) == pytest.approx(3.0)
