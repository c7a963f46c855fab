"""String ops: ``string_split`` / ``strings.split`` (SparseTensors), ``substr``,
``as_string``, ``string_to_number``, ``string_join``, ``reduce_join``,
``strings.length`` and ``regex_replace``, against Python's string methods."""

from __future__ import annotations

import re

import numpy as np
import pytest

import nbdist as nd


@pytest.fixture(autouse=True)
def fresh_graph():
    with nd.Graph().as_default() as g:
        yield g


def run(x):
    with nd.Session() as s:
        return s.run(x)


def sparse_rows(value):
    """A SparseTensorValue of strings as a list of rows (the oracle's form)."""
    rows = [[] for _ in range(int(value.dense_shape[0]))]
    for (r, c), v in zip(value.indices.tolist(), value.values.tolist()):
        assert c == len(rows[r])            # row-major, no gaps
        rows[r].append(v)
    return rows


def test_string_split_any_delimiter_character():
    source = ["a b  c", "", "d,e", "f"]
    v = run(nd.string_split(source, delimiter=" ,"))
    assert isinstance(v, nd.SparseTensorValue)
    assert sparse_rows(v) == [[t for t in re.split(b"[ ,]", s.encode()) if t]
                              for s in source]
    assert v.dense_shape.tolist() == [4, 3]
    kept = run(nd.string_split(["a b  c"], delimiter=" ", skip_empty=False))
    assert sparse_rows(kept) == [b"a b  c".split(b" ")]
    chars = run(nd.string_split(["abc", "de"], delimiter=""))
    assert sparse_rows(chars) == [[b"a", b"b", b"c"], [b"d", b"e"]]
    with pytest.raises(ValueError, match="vector"):
        nd.string_split("a b")


def test_strings_split_is_python_str_split():
    source = ["a  b c", " x ", "a,,b"]
    assert sparse_rows(run(nd.strings.split(source))) == [
        s.encode().split() for s in source]
    assert sparse_rows(run(nd.strings.split(source, sep=","))) == [
        s.encode().split(b",") for s in source]
    assert sparse_rows(run(nd.strings.split(["a b c"], maxsplit=1))) == [
        [b"a", b"b c"]]


def test_substr_broadcasts_and_checks_pos():
    words = ["hello", "world", "hi"]
    got = run(nd.substr(words, 1, 3))
    assert got.tolist() == [w.encode()[1:4] for w in words]
    got = run(nd.strings.substr(words, [0, 2, 1], [2, 1, 5]))
    assert got.tolist() == [b"he", b"r", b"i"]
    assert run(nd.substr("hello", -3, 2)) == b"ll"
    assert run(nd.substr("héllo", 1, 2, unit="UTF8_CHAR")) == "él".encode()
    with pytest.raises(nd.errors.InvalidArgumentError, match="pos 5 out of range"):
        run(nd.substr(["hi"], 5, 1))


def test_as_string_formats_like_printf():
    x = np.array([1.5, -2.0, 1e-3], np.float32)
    assert run(nd.as_string(x)).tolist() == [(b"%f" % v) for v in x]
    assert run(nd.as_string(x, precision=2, scientific=True)).tolist() == [
        (b"%.2e" % v) for v in x]
    assert run(nd.as_string(np.float64([0.1]), shortest=True)).tolist() == [b"0.1"]
    assert run(nd.as_string([3, -4], width=4, fill="0")).tolist() == [b"0003",
                                                                      b"-004"]
    assert run(nd.strings.as_string([True, False])).tolist() == [b"true", b"false"]


def test_string_to_number():
    got = run(nd.string_to_number(["1.5", "-2e3", " 7 "]))
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.float32([1.5, -2000.0, 7.0]))
    got = run(nd.strings.to_number([["12", "-3"]], out_type=nd.int64))
    assert got.dtype == np.int64 and got.tolist() == [[12, -3]]
    with pytest.raises(nd.errors.InvalidArgumentError,
                       match="StringToNumberOp could not correctly convert string: "
                             "1.5"):
        run(nd.string_to_number(["3", "1.5"], out_type=nd.int32))
    with pytest.raises(nd.errors.InvalidArgumentError, match="string: 99999999999"):
        run(nd.string_to_number(["99999999999"], out_type=nd.int32))


def test_joins_and_lengths():
    assert run(nd.string_join(["a", ["x", "y"]], separator="+")).tolist() == [
        b"a+x", b"a+y"]
    assert run(nd.strings.join([["a"], ["b"], ["c"]])).tolist() == [b"abc"]
    grid = [["a", "b"], ["c", "d"]]
    assert run(nd.reduce_join(grid, 1, separator="-")).tolist() == [b"a-b", b"c-d"]
    assert run(nd.reduce_join(grid, 0)).tolist() == [b"ac", b"bd"]
    assert run(nd.reduce_join(grid)) == b"abcd"
    assert run(nd.strings.reduce_join(grid, 1, keep_dims=True)).tolist() == [
        [b"ab"], [b"cd"]]
    assert run(nd.strings.length(["abc", "", "é"])).tolist() == [3, 0, 2]
    assert run(nd.strings.length(["é"], unit="UTF8_CHAR")).tolist() == [1]


def test_regex_replace():
    words = ["aab", "xyz", "banana"]
    assert run(nd.regex_replace(words, "a+", "X")).tolist() == [
        re.sub("a+", "X", w).encode() for w in words]
    assert run(nd.strings.regex_replace(words, "a", "_", replace_global=False)
               ).tolist() == [re.sub("a", "_", w, count=1).encode() for w in words]
    assert run(nd.regex_replace(["ab12"], r"([a-z]+)(\d+)", r"\2\1")) == [b"12ab"]


def test_string_ops_reject_numbers():
    with pytest.raises(ValueError, match="requested dtype string"):
        nd.string_to_number(nd.constant([1.0]))
    with pytest.raises(TypeError, match="numbers or bools"):
        nd.as_string(nd.constant(["a"]))


def test_base64_is_web_safe_and_round_trips():
    import base64

    data = [b"\xff\xfe ab?", b"", b"hello world"]
    encoded = run(nd.encode_base64(data)).tolist()
    assert encoded == [base64.urlsafe_b64encode(d).rstrip(b"=") for d in data]
    padded = run(nd.encode_base64(data, pad=True)).tolist()
    assert padded == [base64.urlsafe_b64encode(d) for d in data]
    assert run(nd.decode_base64(encoded)).tolist() == data
    assert run(nd.decode_base64(padded)).tolist() == data
    with pytest.raises(nd.errors.InvalidArgumentError, match="base64"):
        run(nd.decode_base64(["a"]))


def test_strip_lower_upper():
    assert run(nd.strings.strip(["  a b \n", "x"])).tolist() == [b"a b", b"x"]
    # ASCII letters only, unless the encoding is utf-8 (as TF).
    assert run(nd.strings.lower(["ABc É"])).tolist() == ["abc É".encode()]
    assert run(nd.strings.upper(["abc é"], encoding="utf-8")).tolist() == [
        "ABC É".encode()]


def test_reduce_join_empty_axis_list_joins_nothing():
    grid = [["a", "b"], ["c", "d"]]
    assert run(nd.reduce_join(grid, axis=[])).tolist() == [[b"a", b"b"], [b"c", b"d"]]
    unknown = nd.placeholder(nd.string)
    with nd.Session() as s:
        assert s.run(nd.reduce_join(unknown, separator=","), {unknown: grid}) == \
            b"a,b,c,d"
