"""``nd.io.gfile``: TF2's ``tf.io.gfile``, the lower-case names of ``nd.gfile``.

>>> import tempfile
>>> import nbdist as nd
>>> d = tempfile.mkdtemp()
>>> nd.io.gfile.makedirs(d + "/a/b")
>>> nd.io.gfile.listdir(d), nd.io.gfile.isdir(d + "/a")
(['a'], True)
"""

from __future__ import annotations

import os

from nbdist import gfile as _v1
from nbdist.gfile import GFile

__all__ = ["GFile", "copy", "exists", "glob", "isdir", "join", "listdir", "makedirs",
           "mkdir", "remove", "rename", "rmtree", "stat", "walk"]

copy = _v1.Copy
exists = _v1.Exists
glob = _v1.Glob
isdir = _v1.IsDirectory
listdir = _v1.ListDirectory
makedirs = _v1.MakeDirs
remove = _v1.Remove
rename = _v1.Rename
rmtree = _v1.DeleteRecursively
stat = _v1.Stat
join = os.path.join


def mkdir(path):
    """Creates one directory; fine if it exists (TF2), NotFoundError if its
    parent does not."""
    if not os.path.isdir(path):
        _v1.MkDir(path)


def walk(top, topdown=True, onerror=None):
    """Yields ``(dirname, subdirs, files)`` under ``top`` (TF2's ``walk``)."""
    del onerror  # a missing top yields nothing, as TF's
    return _v1.Walk(top, in_order=topdown)
