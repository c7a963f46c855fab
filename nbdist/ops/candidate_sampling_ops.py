"""Candidate samplers (``tf.random.*_candidate_sampler``, ``tf.nn.*``) and
``compute_accidental_hits``, as TF 1.15 defines them.

Each sampler draws ``num_sampled`` class ids in ``[0, range_max)`` and returns
``(sampled_candidates, true_expected_count, sampled_expected_count)``: the
expected number of times each true class and each sampled class would be
drawn. With ``unique=False`` that is ``p * num_sampled``; with ``unique=True``
the sampler draws until it has ``num_sampled`` distinct ids, after ``n``
tries in all, and the count is ``1 - (1 - p)^n`` (TF's ``range_sampler.cc``).
The distributions: uniform ``p = 1 / range_max``; log-uniform (Zipfian)
``p(k) = log((k + 2) / (k + 1)) / log(range_max + 1)``; fixed unigram
``p ∝ unigrams[k] ** distortion`` (from a list or a vocab file, after
``num_reserved_ids`` zero-weight ids, for one shard of ``num_shards``); learned
unigram ``p ∝ 1 + (times k was a true class before this step)``, counted by the
op itself. The samplers have no gradient.

>>> import nbdist as nd
>>> s, t, e = nd.nn.uniform_candidate_sampler(
...     nd.constant([[1], [3]], nd.int64), 1, 4, True, 10, seed=1)
>>> with nd.Session() as sess:
...     ids, true_count = sess.run([s, t])
>>> len(set(ids.tolist())), true_count.shape
(4, (2, 1))
"""

from __future__ import annotations

from nbdist.framework import dtypes
from nbdist.framework.gradient_registry import NotDifferentiable
from nbdist.framework.op_def_registry import REQUIRED, register_op
from nbdist.framework.ops import convert_to_tensor, get_default_graph
from nbdist.framework.tensor_shape import TensorShape
from nbdist.ops.random_ops import _get_seeds


def _true_classes(c, num_true):
    if c.dtype(0) is not dtypes.int64:
        raise TypeError(f"true_classes must be int64, got {c.dtype(0).name}")
    s = c.shape(0)
    if s.rank is not None and s.rank != 2:
        raise ValueError(f"true_classes must be a matrix, got shape {s}")
    if s.rank == 2 and s.as_list()[1] not in (None, num_true):
        raise ValueError(f"true_classes must have num_true columns, expected: "
                         f"{s.as_list()[1]} was: {num_true}")
    return s.as_list()[0] if s.rank == 2 else None


def _sampler_infer(c):
    num_true, num_sampled = c.attr("num_true"), c.attr("num_sampled")
    if num_sampled < 1 or num_true < 1:
        raise ValueError(f"num_sampled and num_true must be positive, got "
                         f"{num_sampled} and {num_true}")
    if c.attrs.get("unique") and "range_max" in c.attrs and (
            num_sampled > c.attr("range_max")):
        raise ValueError(f"Sampler's range is too small: range_max "
                         f"{c.attr('range_max')} < num_sampled {num_sampled} with "
                         "unique=True")
    batch = _true_classes(c, num_true)
    return [(dtypes.int64, TensorShape([num_sampled])),
            (dtypes.float32, TensorShape([batch, num_true])),
            (dtypes.float32, TensorShape([num_sampled]))]


_COMMON = {"num_true": ("int", REQUIRED), "num_sampled": ("int", REQUIRED),
           "unique": ("bool", REQUIRED), "seed": ("int", 0), "seed2": ("int", 0)}
_RANGE = dict(_COMMON, range_max=("int", REQUIRED))
SAMPLER_OPS = ("UniformCandidateSampler", "LogUniformCandidateSampler",
               "LearnedUnigramCandidateSampler", "FixedUnigramCandidateSampler",
               "AllCandidateSampler")
for _t in SAMPLER_OPS[:3]:
    register_op(_t, _sampler_infer, attrs=_RANGE, num_inputs=1, stateful=True)
register_op("FixedUnigramCandidateSampler", _sampler_infer,
            attrs=dict(_RANGE, vocab_file=("string", ""), distortion=("float", 1.0),
                       num_reserved_ids=("int", 0), num_shards=("int", 1),
                       shard=("int", 0), unigrams=("list(float)", [])),
            num_inputs=1, stateful=True)
register_op("AllCandidateSampler", _sampler_infer, attrs=_COMMON, num_inputs=1,
            stateful=True)


def _accidental_infer(c):
    _true_classes(c, c.attr("num_true"))
    if c.dtype(1) is not dtypes.int64:
        raise TypeError(f"sampled_candidates must be int64, got {c.dtype(1).name}")
    if c.shape(1).rank not in (None, 1):
        raise ValueError(f"sampled_candidates must be a vector, got shape "
                         f"{c.shape(1)}")
    return [(dtypes.int32, TensorShape([None])), (dtypes.int64, TensorShape([None])),
            (dtypes.float32, TensorShape([None]))]


register_op("ComputeAccidentalHits", _accidental_infer,
            attrs={"num_true": ("int", REQUIRED), "seed": ("int", 0),
                   "seed2": ("int", 0)}, num_inputs=2)
for _t in SAMPLER_OPS + ("ComputeAccidentalHits",):
    NotDifferentiable(_t)


def _sampler(op_type, default_name, true_classes, num_true, num_sampled, unique,
             seed, name, **attrs):
    g = get_default_graph()
    with g.name_scope(name or default_name) as scope:
        true_classes = convert_to_tensor(true_classes, dtype=dtypes.int64,
                                         name="true_classes")
        s1, s2 = _get_seeds(seed)
        op = g.create_op(op_type, [true_classes],
                         dict(attrs, num_true=int(num_true),
                              num_sampled=int(num_sampled), unique=bool(unique),
                              seed=s1, seed2=s2), name=scope)
    return tuple(op.outputs)


def uniform_candidate_sampler(true_classes, num_true, num_sampled, unique, range_max,
                              seed=None, name=None):
    """Samples ids uniformly from ``[0, range_max)`` (see the module doc)."""
    return _sampler("UniformCandidateSampler", "uniform_candidate_sampler",
                    true_classes, num_true, num_sampled, unique, seed, name,
                    range_max=int(range_max))


def log_uniform_candidate_sampler(true_classes, num_true, num_sampled, unique,
                                  range_max, seed=None, name=None):
    """Samples ids from the log-uniform (Zipfian) distribution
    ``p(k) = log((k + 2) / (k + 1)) / log(range_max + 1)``: small ids (frequent
    words, when a vocabulary is sorted by frequency) are drawn most."""
    return _sampler("LogUniformCandidateSampler", "log_uniform_candidate_sampler",
                    true_classes, num_true, num_sampled, unique, seed, name,
                    range_max=int(range_max))


def learned_unigram_candidate_sampler(true_classes, num_true, num_sampled, unique,
                                      range_max, seed=None, name=None):
    """Samples ids by how often each was a true class in this op's earlier runs
    (every id starts with weight 1)."""
    return _sampler("LearnedUnigramCandidateSampler",
                    "learned_unigram_candidate_sampler", true_classes, num_true,
                    num_sampled, unique, seed, name, range_max=int(range_max))


def fixed_unigram_candidate_sampler(true_classes, num_true, num_sampled, unique,
                                    range_max, vocab_file="", distortion=1.0,
                                    num_reserved_ids=0, num_shards=1, shard=0,
                                    unigrams=(), seed=None, name=None):
    """Samples ids with probability proportional to ``unigrams[k] **
    distortion`` (the counts from ``unigrams`` or the last comma-separated field
    of each line of ``vocab_file``)."""
    if bool(vocab_file) == bool(len(unigrams)):
        raise ValueError("fixed_unigram_candidate_sampler: exactly one of "
                         "vocab_file and unigrams must be given")
    if not 0 <= shard < num_shards:
        raise ValueError(f"fixed_unigram_candidate_sampler: shard {shard} must be "
                         f"in [0, num_shards={num_shards})")
    return _sampler("FixedUnigramCandidateSampler", "fixed_unigram_candidate_sampler",
                    true_classes, num_true, num_sampled, unique, seed, name,
                    range_max=int(range_max), vocab_file=str(vocab_file),
                    distortion=float(distortion),
                    num_reserved_ids=int(num_reserved_ids),
                    num_shards=int(num_shards), shard=int(shard),
                    unigrams=[float(u) for u in unigrams])


def all_candidate_sampler(true_classes, num_true, num_sampled, unique, seed=None,
                          name=None):
    """The ids ``0 .. num_sampled - 1``, each with expected count 1 (a sampler
    that samples everything, for testing)."""
    return _sampler("AllCandidateSampler", "all_candidate_sampler", true_classes,
                    num_true, num_sampled, unique, seed, name)


def compute_accidental_hits(true_classes, sampled_candidates, num_true, seed=None,
                            name=None):
    """Where a sampled id equals one of a row's true classes: ``(indices, ids,
    weights)`` with ``indices`` the row, ``ids`` the position in
    ``sampled_candidates`` and ``weights`` ``-FLT_MAX``, so adding them (as a
    sparse tensor) to the sampled logits removes those hits.

    >>> import nbdist as nd
    >>> i, j, w = nd.nn.compute_accidental_hits(
    ...     nd.constant([[1], [2]], nd.int64), nd.constant([2, 5, 1], nd.int64), 1)
    >>> with nd.Session() as s:
    ...     [v.tolist() for v in s.run([i, j])]
    [[0, 1], [2, 0]]
    """
    g = get_default_graph()
    with g.name_scope(name or "compute_accidental_hits") as scope:
        true_classes = convert_to_tensor(true_classes, dtype=dtypes.int64)
        sampled = convert_to_tensor(sampled_candidates, dtype=dtypes.int64)
        s1, s2 = _get_seeds(seed)
        op = g.create_op("ComputeAccidentalHits", [true_classes, sampled],
                         {"num_true": int(num_true), "seed": s1, "seed2": s2},
                         name=scope)
    return tuple(op.outputs)


__all__ = [
    "all_candidate_sampler",
    "compute_accidental_hits",
    "fixed_unigram_candidate_sampler",
    "learned_unigram_candidate_sampler",
    "log_uniform_candidate_sampler",
    "uniform_candidate_sampler",
]
