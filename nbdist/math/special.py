"""``nd.math.special``: TF's ``tf.math.special`` (Bessel functions, Dawson's
integral, the exponential and Fresnel integrals, Spence's function).

>>> import nbdist as nd
>>> with nd.Session() as s:
...     round(float(s.run(nd.math.special.bessel_j0(0.0))), 4)
1.0
"""

from __future__ import annotations

from nbdist.ops.special_math_ops import (  # noqa: F401
    bessel_i0,
    bessel_i0e,
    bessel_i1,
    bessel_i1e,
    bessel_j0,
    bessel_j1,
    bessel_k0,
    bessel_k0e,
    bessel_k1,
    bessel_k1e,
    bessel_y0,
    bessel_y1,
    dawsn,
    expint,
    fresnel_cos,
    fresnel_sin,
    spence,
)

__all__ = [
    "bessel_i0", "bessel_i0e", "bessel_i1", "bessel_i1e", "bessel_j0", "bessel_j1",
    "bessel_k0", "bessel_k0e", "bessel_k1", "bessel_k1e", "bessel_y0", "bessel_y1",
    "dawsn", "expint", "fresnel_cos", "fresnel_sin", "spence",
]
