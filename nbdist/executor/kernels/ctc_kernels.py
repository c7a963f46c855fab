"""Kernels of the CTC ops: the forward-backward recursion in log space (loss and
gradient), greedy decoding and prefix beam search."""

from __future__ import annotations

import collections

import numpy as np

import nbdist.ops.ctc_ops  # noqa: F401  (registers the op definitions)
from nbdist import errors
from nbdist.executor.kernel import register_kernel


def _invalid(node, msg):
    return errors.InvalidArgumentError(None, node.name, msg)


def _log_softmax(x):
    m = x.max(-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))


def _labels_per_batch(node, indices, values, batch):
    rows = [[] for _ in range(batch)]
    for (b, _), v in zip(indices, values):
        if not 0 <= b < batch:
            raise _invalid(node, f"labels batch index {b} out of range")
        rows[b].append(int(v))
    return rows


def ctc_one(logp, label, merge_repeated=True):
    """(-log p(label), d loss / d logits) for one [T, C] log-softmax sequence."""
    t_len, blank = logp.shape[0], logp.shape[1] - 1
    ext = [blank]
    for c in label:
        ext += [c, blank]
    s_len = len(ext)
    ext = np.array(ext)
    skip = np.zeros(s_len, bool)
    skip[2:] = (ext[2:] != blank) & ((ext[2:] != ext[:-2]) | (not merge_repeated))
    neg = -np.inf
    alpha = np.full((t_len, s_len), neg)
    alpha[0, 0] = logp[0, blank]
    if s_len > 1:
        alpha[0, 1] = logp[0, ext[1]]
    for t in range(1, t_len):
        prev = alpha[t - 1]
        a = np.logaddexp(prev, np.concatenate([[neg], prev[:-1]]))
        a = np.where(skip, np.logaddexp(a, np.concatenate([[neg, neg], prev[:-2]])), a)
        alpha[t] = a + logp[t, ext]
    beta = np.full((t_len, s_len), neg)     # excludes step t's own emission
    beta[-1, -1] = 0.0
    if s_len > 1:
        beta[-1, -2] = 0.0
    for t in range(t_len - 2, -1, -1):
        nxt = beta[t + 1] + logp[t + 1, ext]
        b = np.logaddexp(nxt, np.concatenate([nxt[1:], [neg]]))
        skip_next = np.concatenate([skip[2:], [False, False]])
        b = np.where(skip_next, np.logaddexp(b, np.concatenate([nxt[2:],
                                                                [neg, neg]])), b)
        beta[t] = b
    tail = alpha[-1, -1] if s_len == 1 else np.logaddexp(alpha[-1, -1],
                                                          alpha[-1, -2])
    if not np.isfinite(tail):
        return np.inf, np.zeros_like(logp)
    gamma = np.exp(alpha + beta - tail)                       # [T, S]
    occupancy = np.zeros_like(logp)
    for s in range(s_len):
        occupancy[:, ext[s]] += gamma[:, s]
    return -tail, np.exp(logp) - occupancy


@register_kernel("CTCLoss")
def ctc_loss_kernel(node):
    a = node.attrs

    def compute(step, inputs, indices, values, seq_len):
        if inputs.ndim != 3:
            raise _invalid(node, "inputs is not a 3-Tensor")
        t_max, batch, classes = inputs.shape
        if seq_len.shape != (batch,):
            raise _invalid(node, "len(sequence_length) != batch_size.")
        loss = np.zeros(batch, inputs.dtype)
        grad = np.zeros_like(inputs)
        for b, label in enumerate(_labels_per_batch(node, indices, values, batch)):
            if a["preprocess_collapse_repeated"]:
                label = [c for i, c in enumerate(label) if i == 0 or c != label[i - 1]]
            if any(not 0 <= c < classes - 1 for c in label):
                raise _invalid(node, f"Labels must be in [0, {classes - 1}) (the "
                               f"blank is the last class), got {label}")
            n = int(seq_len[b])
            if n > t_max:
                raise _invalid(node, f"sequence_length({b}) <= {t_max}")
            repeats = sum(1 for i in range(1, len(label)) if label[i] == label[i - 1])
            needed = len(label) + (repeats if a["ctc_merge_repeated"] else 0)
            if needed > n:
                if a["ignore_longer_outputs_than_inputs"]:
                    continue
                raise _invalid(node, f"Not enough time for target transition "
                               f"sequence (required: {needed}, available: {n}), "
                               f"batch: {b}")
            if n == 0:
                continue
            logp = _log_softmax(inputs[:n, b].astype(np.float64))
            lb, g = ctc_one(logp, label, a["ctc_merge_repeated"])
            loss[b] = lb
            grad[:n, b] = g
        return loss, grad

    return compute


def _sparse(paths, batch):
    idx = [[b, i] for b, p in enumerate(paths) for i in range(len(p))]
    vals = [c for p in paths for c in p]
    longest = max((len(p) for p in paths), default=0)
    return (np.array(idx, np.int64).reshape(-1, 2), np.array(vals, np.int64),
            np.array([batch, longest], np.int64))


@register_kernel("CTCGreedyDecoder")
def ctc_greedy_decoder_kernel(node):
    merge = node.attrs["merge_repeated"]

    def compute(step, inputs, seq_len):
        _, batch, classes = inputs.shape
        blank = node.attrs["blank_index"] % classes
        paths, logp = [], np.zeros((batch, 1), inputs.dtype)
        for b in range(batch):
            n = int(seq_len[b])
            best = inputs[:n, b].argmax(-1)
            logp[b, 0] = -inputs[:n, b].max(-1).sum()
            path, prev = [], None
            for c in best:
                if c != blank and not (merge and c == prev):
                    path.append(int(c))
                prev = c
            paths.append(path)
        i, v, s = _sparse(paths, batch)
        return i, v, s, logp

    return compute


def beam_search(logp, beam_width, merge_repeated):
    """[(prefix, log prob)] best first, by CTC prefix beam search over [T, C]."""
    blank = logp.shape[1] - 1
    # prefix -> (log p ending in blank, log p ending in its last label)
    beams = {(): (0.0, -np.inf)}
    for t in range(logp.shape[0]):
        nxt = collections.defaultdict(lambda: [-np.inf, -np.inf])
        for prefix, (pb, pnb) in beams.items():
            total = np.logaddexp(pb, pnb)
            e = nxt[prefix]
            e[0] = np.logaddexp(e[0], total + logp[t, blank])
            for c in range(blank):
                p = logp[t, c]
                if prefix and prefix[-1] == c and merge_repeated:
                    e[1] = np.logaddexp(e[1], pnb + p)       # the same label held
                    ext = nxt[prefix + (c,)]
                    ext[1] = np.logaddexp(ext[1], pb + p)    # a new one after blank
                else:
                    ext = nxt[prefix + (c,)]
                    ext[1] = np.logaddexp(ext[1], total + p)
        ranked = sorted(nxt.items(), key=lambda kv: -np.logaddexp(*kv[1]))
        beams = {k: tuple(v) for k, v in ranked[:beam_width]}
    return sorted(((k, float(np.logaddexp(*v))) for k, v in beams.items()),
                  key=lambda kv: -kv[1])


@register_kernel("CTCBeamSearchDecoder")
def ctc_beam_search_kernel(node):
    a = node.attrs

    def compute(step, inputs, seq_len):
        _, batch, _ = inputs.shape
        top = a["top_paths"]
        per_path = [[] for _ in range(top)]
        logp = np.full((batch, top), -np.inf, inputs.dtype)
        for b in range(batch):
            n = int(seq_len[b])
            found = beam_search(_log_softmax(inputs[:n, b].astype(np.float64)),
                                a["beam_width"], a["merge_repeated"])
            for k in range(top):
                prefix, score = found[k] if k < len(found) else ((), -np.inf)
                per_path[k].append(list(prefix))
                logp[b, k] = score
        outs = [_sparse(p, batch) for p in per_path]
        return (*[o[0] for o in outs], *[o[1] for o in outs], *[o[2] for o in outs],
                logp)

    return compute
