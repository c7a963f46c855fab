"""Re-exports of the op wrappers at top level (``nd.add``, ``nd.matmul`` ...).

Each op module lists its public wrappers in ``__all__``.
"""

from __future__ import annotations

import importlib

__all__: list[str] = []
for _m in (
    "nbdist.ops.math_ops",
    "nbdist.ops.array_ops",
    "nbdist.ops.random_ops",
    "nbdist.ops.clip_ops",
    "nbdist.ops.array_ops_scatter",
    "nbdist.ops.array_ops_partition",
    "nbdist.ops.array_ops_sequence",
    "nbdist.ops.array_ops_space",
    "nbdist.ops.einsum_ops",
    "nbdist.ops.linalg_ops_diag",
    "nbdist.ops.linalg_ops",
    "nbdist.ops.linalg_grad",
    "nbdist.ops.linalg_impl",
    "nbdist.ops.sparse_ops_transform",
    "nbdist.ops.sparse_ops_derived",
    "nbdist.ops.array_ops_shape_utils",
    "nbdist.ops.sparse_ops_serialize",
    "nbdist.ops.elementary_math_ops",
    "nbdist.ops.special_math_ops",
    "nbdist.ops.segment_ops",
    "nbdist.ops.cumulative_ops",
    "nbdist.ops.sort_ops",
    "nbdist.ops.statistics_ops",
):
    try:
        _mod = importlib.import_module(_m)
    except ModuleNotFoundError as _e:
        if _e.name != _m:
            raise
        continue
    for _n in getattr(_mod, "__all__", []):
        globals()[_n] = getattr(_mod, _n)
        __all__.append(_n)
