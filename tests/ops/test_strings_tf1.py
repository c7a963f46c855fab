"""The rest of ``tf.strings``: hash buckets (TF's buckets), ``regex_full_match``,
``format``, ``ngrams``, the Unicode ops and ``unsorted_segment_join``.

Oracles: the bucket numbers and formatted strings are what TensorFlow 2.21's
``tf.compat.v1.strings`` gives for the same inputs in graph mode (checked with
/work/tfvenv); the rest against Python's codecs and ``re``.
"""

from __future__ import annotations

import re

import pytest

import nbdist as nd

S = nd.compat.v1.strings


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def run(x):
    with nd.Session() as s:
        return s.run(x)


WORDS = ["hello", "a", "", "abcdefghijk"]  # 0, 1 and more than 8 bytes: every hash path


def test_hash_buckets_are_tensorflows():
    # TF: to_hash_bucket (Hash64), _strong (SipHash key [1, 2]), _fast (Fingerprint64).
    assert run(S.to_hash_bucket(WORDS, 1000)).tolist() == [938, 868, 899, 380]
    assert run(S.to_hash_bucket_strong(WORDS, 1000, [1, 2])).tolist() == [
        622, 646, 435, 366]
    assert run(S.to_hash_bucket_fast(WORDS[:2], 1000)).tolist() == [296, 939]
    with pytest.raises(ValueError, match="key must have 2"):
        S.to_hash_bucket_strong(WORDS, 10, [1])


def test_regex_full_match_matches_whole_strings():
    words = ["abc", "abcd", "xabc"]
    got = run(S.regex_full_match(words, "a.c"))
    assert got.tolist() == [re.fullmatch("a.c", w) is not None for w in words]
    with pytest.raises(nd.errors.InvalidArgumentError, match="Invalid pattern"):
        run(S.regex_full_match(words, "("))


@pytest.mark.parametrize("template, inputs, expected", [
    ("x={} y={} z={}", lambda: [nd.constant([1, 2]), nd.constant(3.5),
                               nd.constant([[1.0, 2.5], [3, 4]])],
     b"x=[1 2] y=3.5 z=[[1 2.5]\n [3 4]]"),
    ("{}", lambda: [nd.range(10)], b"[0 1 2 ... 7 8 9]"),
    ("{}", lambda: [nd.constant(["ab", "c"])], b'["ab" "c"]'),
    ("{}", lambda: [nd.constant(0.1)], b"0.1"),
])
def test_format_prints_tensors_as_tf(template, inputs, expected):
    assert run(S.format(template, inputs())) == expected


def test_format_counts_placeholders():
    with pytest.raises(ValueError, match="num placeholders"):
        S.format("{} {}", [nd.constant(1)])


def test_ngrams_dense_and_padded():
    got = run(S.ngrams(nd.constant([["a", "b", "c"], ["d", "e", "f"]]), 2))
    assert got.tolist() == [[b"a b", b"b c"], [b"d e", b"e f"]]
    got = run(S.ngrams(nd.constant(["a", "b", "c"]), [1, 2], pad_values="#"))
    assert got.tolist() == [b"a", b"b", b"c", b"# a", b"a b", b"b c", b"c #"]


def test_unicode_decode_encode_transcode_round_trip():
    text = "héllo"
    assert run(S.unicode_decode(text, "UTF-8")).tolist() == [ord(c) for c in text]
    points, starts = run(S.unicode_decode_with_offsets(text, "UTF-8"))
    assert starts.tolist() == [0, 1, 3, 4, 5]
    assert run(S.unicode_split(text, "UTF-8")).tolist() == [
        c.encode() for c in text]
    assert run(S.bytes_split("abc")).tolist() == [b"a", b"b", b"c"]
    assert run(S.unicode_transcode([text], "UTF-8", "UTF-16-BE")).tolist() == [
        text.encode("utf-16-be")]
    # -1 pads a row of code points; the rank drops by one.
    got = run(S.unicode_encode(nd.constant([[104, 233], [97, -1]]), "UTF-8"))
    assert got.tolist() == ["hé".encode(), b"a"]


def test_unicode_decode_of_a_vector_is_sparse_rows():
    v = run(S.unicode_decode(["héllo", "a"], "UTF-8"))
    assert v.dense_shape.tolist() == [2, 5]
    assert v.values.tolist() == [104, 233, 108, 108, 111, 97]
    assert v.indices.tolist()[-1] == [1, 0]


def test_unicode_decode_strict_rejects_bad_utf8():
    with pytest.raises(nd.errors.InvalidArgumentError, match="Invalid formatting"):
        run(S.unicode_decode(b"\xff", "UTF-8", errors="strict"))
    assert run(S.unicode_decode(b"a\xff", "UTF-8", replacement_char=63)).tolist() == [
        97, 63]


def test_unsorted_segment_join():
    got = run(S.unsorted_segment_join(["a", "b", "c", "d"], [1, 0, 1, 3], 4,
                                      separator=":"))
    assert got.tolist() == [b"b", b"a:c", b"", b"d"]
    with pytest.raises(nd.errors.InvalidArgumentError, match="out of range"):
        run(S.unsorted_segment_join(["a"], [5], 2))
