"""Kernel of ``Fingerprint`` (``nbdist.ops.fingerprint_ops``) on pyfarmhash,
the Farmhash ``Fingerprint64`` TensorFlow uses."""

from __future__ import annotations

import numpy as np

from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.kernel_util import op_error


def _fp(data: bytes) -> bytes:
    import farmhash

    return np.array([farmhash.fingerprint64(data)], dtype="<u8").tobytes()


def _as_bytes(s) -> bytes:
    return s if isinstance(s, bytes) else str(s).encode()


@register_kernel("Fingerprint")
def fingerprint_kernel(node):
    def compute(step, data, method):
        method = _as_bytes(np.asarray(method).item())
        if method != b"farmhash64":
            raise op_error(node, f"Unsupported fingerprint method: "
                                 f"{method.decode(errors='replace')}")
        x = np.asarray(data)
        if x.ndim == 0:
            raise op_error(node, "data must have rank >= 1")
        rows = x.reshape(x.shape[0], -1)
        if x.dtype == object:
            # One string is its own fingerprint; several, the fingerprint of
            # their fingerprints (TF's rule).
            out = [_fp(_as_bytes(r[0])) if r.size == 1 else
                   _fp(b"".join(_fp(_as_bytes(s)) for s in r)) for r in rows]
        else:
            rows = np.ascontiguousarray(rows)
            out = [_fp(r.tobytes()) for r in rows]
        return np.frombuffer(b"".join(out), dtype=np.uint8).reshape(len(rows), 8)

    return compute
