"""Kernels of the fractional pooling ops: random region boundaries per axis,
then a max or mean per region (and the gradients routed back to them)."""

from __future__ import annotations

import threading

import numpy as np

import nbdist.ops.nn_fractional_pool_ops  # noqa: F401  (registers the op definitions)
from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.random_kernels import _generator


def pooling_sequence(gen, n, out, pseudo_random):
    """out + 1 boundaries from 0 to n; region sizes n // out or one more."""
    if pseudo_random:
        # TF's pseudo-random form: ceil(alpha * (i + u)) - ceil(alpha * u).
        alpha = n / out
        u = gen.random() * alpha
        seq = np.ceil(alpha * (np.arange(out + 1) + u)) - np.ceil(alpha * u)
        seq[-1] = n
        return seq.astype(np.int64)
    diff = np.full(out, n // out, np.int64)
    diff[:n % out] += 1
    gen.shuffle(diff)
    return np.concatenate([[0], np.cumsum(diff)])


def _regions(seq, n, overlapping):
    ends = [min(int(b) + 1, n) if overlapping else int(b) for b in seq[1:]]
    return [slice(int(a), e) for a, e in zip(seq[:-1], ends)]


def _fractional_kernel(reduce):
    def factory(node):
        gen = _generator(node)
        lock = threading.Lock()
        a = node.attrs

        def compute(step, x):
            n, h, w, c = x.shape
            oh, ow = int(h / a["pooling_ratio"][1]), int(w / a["pooling_ratio"][2])
            with lock:
                rows = pooling_sequence(gen, h, oh, a["pseudo_random"])
                cols = pooling_sequence(gen, w, ow, a["pseudo_random"])
            out = np.empty((n, oh, ow, c), x.dtype)
            for i, rs in enumerate(_regions(rows, h, a["overlapping"])):
                for j, cs in enumerate(_regions(cols, w, a["overlapping"])):
                    out[:, i, j] = reduce(x[:, rs, cs], axis=(1, 2))
            return out, rows, cols

        return compute

    return factory


register_kernel("FractionalMaxPool")(_fractional_kernel(np.max))
register_kernel("FractionalAvgPool")(_fractional_kernel(np.mean))


@register_kernel("FractionalMaxPoolGrad")
def fractional_max_pool_grad_kernel(node):
    def compute(step, x, y, g, rows, cols):
        out = np.zeros_like(x)
        ov = node.attrs["overlapping"]
        batch = np.arange(x.shape[0])[:, None]
        chans = np.arange(x.shape[3])[None, :]
        for i, rs in enumerate(_regions(rows, x.shape[1], ov)):
            for j, cs in enumerate(_regions(cols, x.shape[2], ov)):
                win = x[:, rs, cs].reshape(x.shape[0], -1, x.shape[3])
                first = win.argmax(1)                       # the first maximum
                width = cs.stop - cs.start
                np.add.at(out, (batch, rs.start + first // width,
                                cs.start + first % width, chans), g[:, i, j])
        return out

    return compute


@register_kernel("FractionalAvgPoolGrad")
def fractional_avg_pool_grad_kernel(node):
    def compute(step, sizes, g, rows, cols):
        shape = [int(v) for v in np.ravel(sizes)]
        out = np.zeros(shape, g.dtype)
        ov = node.attrs["overlapping"]
        for i, rs in enumerate(_regions(rows, shape[1], ov)):
            for j, cs in enumerate(_regions(cols, shape[2], ov)):
                area = (rs.stop - rs.start) * (cs.stop - cs.start)
                out[:, rs, cs] += g[:, i:i + 1, j:j + 1] / area
        return out

    return compute
