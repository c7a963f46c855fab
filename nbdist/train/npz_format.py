"""nbdist's own checkpoint format: ``<prefix>.npz``, the default ``Saver`` writes.

A zip archive of ``.npy`` members -- exactly what ``numpy.savez`` writes
(uncompressed, zip64 allowed) -- readable without nbdist:
``np.load(P + ".npz")["layer1/w"]``. Keys are the saved names: a variable's
op name (``v.op.name``, ``/`` kept) or the keys of a ``var_list`` dict. A
partitioned variable is saved whole, as one array under its full name (its
shards put together; restoring slices it again, so it may be restored into a
different partitioning). Numeric and bool variables are stored as arrays of
their own dtype, so loading never needs ``allow_pickle``.

String variables are stored pickle-free as two members: ``<name>``, a NumPy
fixed-width bytes array (dtype ``S<n>``, n = the longest element, at least 1)
of the variable's shape, and ``<name>:lengths``, an int64 array of the same
shape with each element's exact length in bytes. NumPy drops trailing NUL
bytes of ``S`` items; padding each item with NULs back to its length restores
it exactly. (``:`` never occurs in an op name, so these keys cannot collide
with a variable's.)
"""

from __future__ import annotations

import zipfile

import numpy as np

from nbdist import errors
from nbdist.framework import dtypes
from nbdist.train.file_io import atomic_write

__all__ = ["DATA_SUFFIX", "NpzReader", "write_npz_checkpoint"]

DATA_SUFFIX = ".npz"
_LENGTHS = ":lengths"


# -- file writing ---------------------------------------------------------------
def _write_npz(fileobj, arrays):
    """Writes ``arrays`` (a list of (key, ndarray)) as ``numpy.savez`` does.

    (``numpy.savez(file, **arrays)`` itself cannot take keys named ``file`` or
    ``allow_pickle``, hence this equivalent writer.)
    """
    with zipfile.ZipFile(fileobj, mode="w", compression=zipfile.ZIP_STORED,
                         allowZip64=True) as zf:
        for key, arr in arrays:
            with zf.open(key + ".npy", "w", force_zip64=True) as member:
                np.lib.format.write_array(member, np.asanyarray(arr),
                                          allow_pickle=False)


# -- array encoding -------------------------------------------------------------
def encode(name, value):
    arr = np.asarray(value)
    if arr.dtype == object or arr.dtype.kind in "SU":
        flat = [v.encode() if isinstance(v, str) else bytes(v) for v in arr.ravel()]
        width = max([len(b) for b in flat] + [1])
        data = np.array(flat, dtype=f"S{width}").reshape(arr.shape)
        lengths = np.array([len(b) for b in flat], dtype=np.int64).reshape(arr.shape)
        return [(name, data), (name + _LENGTHS, lengths)]
    return [(name, arr)]


def decode(npz, name):
    arr = npz[name]
    if arr.dtype.kind not in "SU":
        return arr
    lengths = None
    if name + _LENGTHS in npz.files:
        lengths = np.asarray(npz[name + _LENGTHS]).ravel()
    out = np.empty(arr.shape, dtype=object)
    flat = []
    for i, item in enumerate(arr.ravel()):
        b = item.encode() if isinstance(item, str) else bytes(item)
        if lengths is not None and len(b) < int(lengths[i]):
            b = b.ljust(int(lengths[i]), b"\x00")
        flat.append(b)
    out.ravel()[:] = flat
    return out


def write_npz_checkpoint(prefix: str, arrays) -> None:
    """Writes ``arrays`` (an iterable of (name, ndarray)) to ``prefix.npz``."""
    members = []
    for name, value in arrays:
        members.extend(encode(name, value))
    atomic_write(prefix + DATA_SUFFIX, lambda f: _write_npz(f, members))


class NpzReader:
    """The tensors of the ``.npz`` checkpoint ``prefix`` (read whole at once).

    Raises ``NotFoundError`` when it is missing, ``DataLossError`` when it is
    not a readable archive.
    """

    def __init__(self, prefix: str):
        self.prefix = prefix
        path = prefix + DATA_SUFFIX
        try:
            with np.load(path, allow_pickle=False) as npz:
                names = [n for n in npz.files if not n.endswith(_LENGTHS)]
                self._values = {n: decode(npz, n) for n in names}
        except FileNotFoundError:
            raise errors.NotFoundError(
                None, None, f"Failed to find any matching files for {prefix}"
            ) from None
        except (OSError, ValueError, zipfile.BadZipFile) as e:
            raise errors.DataLossError(
                None, None, f"Unable to read checkpoint {prefix}: {e}") from None

    @property
    def entries(self):
        return self._values

    def has_tensor(self, name: str) -> bool:
        return name in self._values

    def shape(self, name: str) -> list[int]:
        return list(self._values[name].shape)

    def dtype(self, name: str) -> dtypes.DType:
        return dtypes.as_dtype(self._values[name].dtype)

    def get_tensor(self, name: str) -> np.ndarray:
        if name not in self._values:
            raise errors.NotFoundError(
                None, None, f"Key {name} not found in checkpoint {self.prefix}")
        return self._values[name]

    def files(self) -> list[str]:
        return [self.prefix + DATA_SUFFIX]
