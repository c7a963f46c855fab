"""``nd.gfile`` (TF1's ``tf.gfile``) and ``nd.io.gfile`` (TF2's ``tf.io.gfile``)
on the local file system, with TF's error classes."""

from __future__ import annotations

import os

import pytest

import nbdist as nd
from nbdist import errors

gfile = nd.gfile


def read_bytes(path) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def write_bytes(path, data: bytes):
    with open(path, "wb") as f:
        f.write(data)


def test_write_read_text_and_binary_modes(tmp_path):
    path = str(tmp_path / "f.txt")
    with gfile.GFile(path, "w") as f:
        f.write("ab\n")
        f.write(b"cd\n")
        assert f.tell() == 6
    assert read_bytes(path) == b"ab\ncd\n"
    with gfile.GFile(path, "r") as f:
        assert f.read() == "ab\ncd\n"
    with gfile.Open(path, "rb") as f:
        assert f.read() == b"ab\ncd\n"
    with gfile.GFile(path, "wb") as f:
        f.write(b"\x00\xff")
    assert gfile.GFile(path, "rb").read() == b"\x00\xff"


def test_append_mode_and_partial_reads(tmp_path):
    path = str(tmp_path / "f.txt")
    write_bytes(path, b"begin\n")
    with gfile.GFile(path, "a") as f:
        f.write("a1\n")
    with gfile.GFile(path, "a") as f:
        f.write("a2")
    f = gfile.GFile(path)
    assert f.read(3) == "beg"
    f.seek(6)
    assert f.read(2) == "a1" and f.tell() == 8
    f.close()
    assert gfile.GFile(path).read() == "begin\na1\na2"


def test_readline_readlines_and_iteration(tmp_path):
    path = str(tmp_path / "lines.txt")
    write_bytes(path, b"one\ntwo\nthree")
    f = gfile.GFile(path)
    assert f.readline() == "one\n"
    assert f.readlines() == ["two\n", "three"]
    assert f.readline() == ""
    assert list(gfile.GFile(path)) == ["one\n", "two\n", "three"]
    assert list(gfile.GFile(path, "rb")) == [b"one\n", b"two\n", b"three"]
    assert gfile.GFile(path).size() == 13


def test_missing_files_and_wrong_modes_are_tf_errors(tmp_path):
    missing = str(tmp_path / "nope")
    f = gfile.GFile(missing)  # files open on first use, as TF's
    with pytest.raises(errors.NotFoundError, match="nope"):
        f.read()
    with pytest.raises(errors.NotFoundError):
        gfile.Stat(missing)
    with pytest.raises(errors.NotFoundError):
        gfile.Remove(missing)
    with pytest.raises(errors.NotFoundError):
        gfile.ListDirectory(missing)
    with pytest.raises(errors.NotFoundError):
        gfile.DeleteRecursively(missing)
    with pytest.raises(errors.NotFoundError):
        gfile.Copy(missing, str(tmp_path / "x"))
    with pytest.raises(errors.NotFoundError):
        gfile.Rename(missing, str(tmp_path / "y"))
    with pytest.raises(errors.NotFoundError):
        gfile.MkDir(str(tmp_path / "a" / "b"))
    path = str(tmp_path / "w")
    with pytest.raises(errors.PermissionDeniedError):
        gfile.GFile(path, "w").read()
    write_bytes(path, b"x")
    with pytest.raises(errors.PermissionDeniedError):
        gfile.GFile(path, "r").write("y")
    with pytest.raises(errors.InvalidArgumentError):
        gfile.GFile(path, "x")
    assert list(gfile.Walk(missing)) == [] and gfile.Glob(missing + "/*") == []
    assert not gfile.Exists(missing) and not gfile.IsDirectory(missing)


def test_copy_and_rename_honour_overwrite(tmp_path):
    src, dst = str(tmp_path / "src"), str(tmp_path / "dst")
    write_bytes(src, b"new")
    write_bytes(dst, b"old")
    with pytest.raises(errors.AlreadyExistsError):
        gfile.Copy(src, dst)
    assert read_bytes(dst) == b"old"
    gfile.Copy(src, dst, overwrite=True)
    assert read_bytes(dst) == b"new" and gfile.Exists(src)
    write_bytes(dst, b"old")
    with pytest.raises(errors.AlreadyExistsError):
        gfile.Rename(src, dst)
    assert gfile.Exists(src)
    gfile.Rename(src, dst, overwrite=True)
    assert not gfile.Exists(src) and read_bytes(dst) == b"new"
    gfile.Rename(dst, src)
    assert gfile.Exists(src) and not gfile.Exists(dst)


def test_directories_glob_walk_stat_and_delete(tmp_path):
    root = str(tmp_path / "root")
    gfile.MakeDirs(os.path.join(root, "a", "b"))
    gfile.MakeDirs(os.path.join(root, "a", "b"))  # again: fine
    gfile.MkDir(os.path.join(root, "c"))
    with pytest.raises(errors.AlreadyExistsError):
        gfile.MkDir(os.path.join(root, "c"))
    write_bytes(os.path.join(root, "f1.txt"), b"12345")
    write_bytes(os.path.join(root, "a", "f2.txt"), b"")
    assert gfile.IsDirectory(root) and not gfile.IsDirectory(root + "/f1.txt")
    assert gfile.ListDirectory(root) == ["a", "c", "f1.txt"]
    assert gfile.Glob(os.path.join(root, "*.txt")) == [os.path.join(root, "f1.txt")]
    assert list(gfile.Walk(root)) == [
        (root, ["a", "c"], ["f1.txt"]),
        (os.path.join(root, "a"), ["b"], ["f2.txt"]),
        (os.path.join(root, "a", "b"), [], []),
        (os.path.join(root, "c"), [], []),
    ]
    post = [d for d, _, _ in gfile.Walk(root, in_order=False)]
    assert post.index(os.path.join(root, "a", "b")) < post.index(
        os.path.join(root, "a")) < post.index(root)
    st = gfile.Stat(os.path.join(root, "f1.txt"))
    assert st.length == 5 and not st.is_directory
    assert st.mtime_nsec == os.stat(os.path.join(root, "f1.txt")).st_mtime_ns
    assert gfile.Stat(root).is_directory
    gfile.Remove(os.path.join(root, "f1.txt"))
    assert not gfile.Exists(os.path.join(root, "f1.txt"))
    gfile.DeleteRecursively(os.path.join(root, "a"))
    assert gfile.ListDirectory(root) == ["c"]


def test_io_gfile_has_tf2_lower_case_names(tmp_path):
    g = nd.io.gfile
    assert g.GFile is nd.gfile.GFile
    d = str(tmp_path / "d")
    g.makedirs(d + "/sub")
    g.mkdir(d + "/sub")  # TF2: no error when it exists
    g.mkdir(d + "/other")
    with g.GFile(d + "/f", "w") as f:
        f.write("hello")
    assert g.exists(d + "/f") and g.isdir(d) and not g.isdir(d + "/f")
    assert g.listdir(d) == ["f", "other", "sub"]
    assert g.glob(d + "/f*") == [d + "/f"]
    assert g.stat(d + "/f").length == 5
    g.copy(d + "/f", d + "/g")
    with pytest.raises(errors.AlreadyExistsError):
        g.copy(d + "/f", d + "/g")
    g.rename(d + "/g", d + "/h")
    with pytest.raises(errors.AlreadyExistsError):
        g.rename(d + "/f", d + "/h")
    g.rename(d + "/f", d + "/h", overwrite=True)
    g.remove(d + "/h")
    assert [top for top, _, _ in g.walk(d)] == [d, d + "/other", d + "/sub"]
    assert g.join("a", "b") == os.path.join("a", "b")
    g.rmtree(d)
    assert not g.exists(d)
