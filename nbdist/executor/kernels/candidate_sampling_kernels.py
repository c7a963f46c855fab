"""Kernels of the candidate samplers and ``ComputeAccidentalHits`` (the
distributions and expected counts are described in
``nbdist.ops.candidate_sampling_ops``).

A sampler node owns a seeded generator (as the random ops' kernels) and, for
the learned unigram sampler, the counts of the true classes it has seen, kept
for the life of the registered graph as TF keeps them in the op's kernel.
"""

from __future__ import annotations

import threading

import numpy as np

import nbdist.ops.candidate_sampling_ops  # noqa: F401  (registers the op definitions)
from nbdist import errors
from nbdist.executor.kernel import register_kernel
from nbdist.executor.kernels.random_kernels import _generator

_FLT_MAX = float(np.finfo(np.float32).max)


def _check_true(node, true_classes, num_true):
    t = np.asarray(true_classes)
    if t.ndim != 2 or t.shape[1] != num_true:
        raise errors.InvalidArgumentError(
            None, node.name, f"true_classes must be a matrix with num_true="
            f"{num_true} columns, got shape {list(t.shape)}")
    return t


def _draw_unique(draw, num_sampled):
    """Draws until ``num_sampled`` distinct ids: (ids in order, tries made)."""
    seen: dict[int, None] = {}
    tries = 0
    while len(seen) < num_sampled:
        for v in draw(max(2 * num_sampled, 16)).tolist():
            tries += 1
            seen.setdefault(v)
            if len(seen) == num_sampled:
                break
    return np.fromiter(seen, np.int64, num_sampled), tries


def _expected(p, num_sampled, tries):
    p = np.asarray(p, np.float64)
    if tries == num_sampled:  # TF's shortcut, always taken when unique=False
        return (p * num_sampled).astype(np.float32)
    return (-np.expm1(tries * np.log1p(-p))).astype(np.float32)


def _sampler_kernel(make_distribution):
    """``make_distribution(node) -> (draw(gen, n), prob(ids), update(true))``."""

    def factory(node):
        gen = _generator(node)
        lock = threading.Lock()
        num_true = int(node.attrs["num_true"])
        num_sampled = int(node.attrs["num_sampled"])
        unique = bool(node.attrs["unique"])
        draw, prob, update, range_max = make_distribution(node)
        if unique and num_sampled > range_max:
            raise errors.InvalidArgumentError(
                None, node.name, f"Sampler's range is too small: {range_max} < "
                f"{num_sampled} with unique=True")

        def compute(step, true_classes):
            true = _check_true(node, true_classes, num_true)
            bad = true[(true < 0) | (true >= range_max)]
            if bad.size:
                raise errors.InvalidArgumentError(
                    None, node.name, f"`true_candidate` out of range [0, "
                    f"{range_max}), received {int(bad[0])}")
            with lock:
                if unique:
                    ids, tries = _draw_unique(lambda n: draw(gen, n), num_sampled)
                else:
                    ids, tries = draw(gen, num_sampled).astype(np.int64), num_sampled
                true_count = _expected(prob(true), num_sampled, tries)
                sampled_count = _expected(prob(ids), num_sampled, tries)
                update(true)
            return ids, true_count.reshape(true.shape), sampled_count

        return compute

    return factory


def _no_update(true):
    del true


def _uniform(node):
    n = int(node.attrs["range_max"])
    return (lambda gen, k: gen.integers(0, n, size=k),
            lambda ids: np.full(np.shape(ids), 1.0 / n), _no_update, n)


def _log_uniform(node):
    n = int(node.attrs["range_max"])
    log_range = np.log1p(n)

    def draw(gen, k):
        return (np.exp(gen.random(k) * log_range) - 1).astype(np.int64) % n

    def prob(ids):
        ids = np.asarray(ids, np.float64)
        return np.log((ids + 2.0) / (ids + 1.0)) / log_range

    return draw, prob, _no_update, n


def _weighted(weights, n, update=_no_update):
    def draw(gen, k):
        return gen.choice(n, size=k, p=weights / weights.sum())

    def prob(ids):
        return weights[np.asarray(ids, np.int64)] / weights.sum()

    return draw, prob, update, n


def _learned_unigram(node):
    n = int(node.attrs["range_max"])
    weights = np.ones(n, np.float64)

    def update(true):
        np.add.at(weights, true.reshape(-1), 1.0)

    return _weighted(weights, n, update)


def _vocab_counts(node, path):
    try:
        with open(path, encoding="utf-8") as f:
            lines = [ln.strip() for ln in f if ln.strip()]
        return [float(ln.split(",")[-1]) for ln in lines]
    except (OSError, ValueError) as e:
        raise errors.InvalidArgumentError(
            None, node.name, f"could not read unigram counts from vocab_file "
            f"{path!r}: {e}") from None


def _fixed_unigram(node):
    a = node.attrs
    n, shards, shard = int(a["range_max"]), int(a["num_shards"]), int(a["shard"])
    counts = (_vocab_counts(node, a["vocab_file"]) if a["vocab_file"]
              else list(a["unigrams"]))
    # As TF's FixedUnigramSampler: the reserved ids of this shard get weight 0,
    # then unigram i is numbered from the count of weights so far (not from
    # num_reserved_ids) and kept when its number falls in this shard.
    kept = [0.0 for wid in range(int(a["num_reserved_ids"])) if wid % shards == shard]
    first = len(kept)
    kept += [float(c) ** float(a["distortion"]) for i, c in enumerate(counts)
             if (first + i) % shards == shard]
    weights = np.array(kept, np.float64)
    if weights.size != n:
        raise errors.InvalidArgumentError(
            None, node.name, f"range_max {n} must equal the number of unigrams in "
            f"shard {shard} (reserved ids included): {weights.size}")
    return _weighted(weights, n)


register_kernel("UniformCandidateSampler")(_sampler_kernel(_uniform))
register_kernel("LogUniformCandidateSampler")(_sampler_kernel(_log_uniform))
register_kernel("LearnedUnigramCandidateSampler")(_sampler_kernel(_learned_unigram))
register_kernel("FixedUnigramCandidateSampler")(_sampler_kernel(_fixed_unigram))


@register_kernel("AllCandidateSampler")
def all_candidate_sampler_kernel(node):
    num_true, num_sampled = int(node.attrs["num_true"]), int(node.attrs["num_sampled"])

    def compute(step, true_classes):
        true = _check_true(node, true_classes, num_true)
        return (np.arange(num_sampled, dtype=np.int64),
                np.ones(true.shape, np.float32), np.ones(num_sampled, np.float32))

    return compute


@register_kernel("ComputeAccidentalHits")
def compute_accidental_hits_kernel(node):
    num_true = int(node.attrs["num_true"])

    def compute(step, true_classes, sampled):
        true = _check_true(node, true_classes, num_true)
        # As TF: a sampled id that occurs twice maps to its last position.
        pos = {int(v): j for j, v in enumerate(np.asarray(sampled).tolist())}
        hits = [(i, pos[v]) for i, row in enumerate(true.tolist()) for v in row
                if v in pos]
        rows = np.array([h[0] for h in hits], np.int32)
        ids = np.array([h[1] for h in hits], np.int64)
        return rows, ids, np.full(len(hits), -_FLT_MAX, np.float32)

    return compute
